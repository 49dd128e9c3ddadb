//! The send deadline: a connection whose client stops reading is closed once a write has waited
//! that long without the client taking a byte. Otherwise a reader that stalls holds its
//! connection, and what is queued for it, for as long as it likes.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use tokio::time::{Instant, Sleep};

/// A connection's stream, whose writes fail with `TimedOut` after waiting `deadline` for the
/// client.
pub(super) struct SendDeadline<I> {
    inner: I,
    deadline: Duration,
    /// Armed when a write starts waiting; made once per connection that ever waits.
    stall: Option<Pin<Box<Sleep>>>,
    /// Whether `stall` counts the current wait (false once a write went through).
    waiting: bool,
}

impl<I> SendDeadline<I> {
    pub(super) fn new(inner: I, deadline: Duration) -> Self {
        SendDeadline { inner, deadline, stall: None, waiting: false }
    }

    /// The outcome of a write the stream answered `written`: the deadline starts at the first wait
    /// and ends the connection when it passes; a write that goes through clears it.
    fn watch<T>(&mut self, cx: &mut Context<'_>, written: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if written.is_ready() {
            self.waiting = false;
            return written;
        }
        if !self.waiting {
            self.waiting = true;
            let until = Instant::now() + self.deadline;
            match &mut self.stall {
                Some(stall) => stall.as_mut().reset(until),
                None => self.stall = Some(Box::pin(tokio::time::sleep_until(until))),
            }
        }
        let stall = self.stall.as_mut().expect("armed while waiting");
        ready!(stall.as_mut().poll(cx));
        Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the client stopped reading")))
    }
}

impl<I: Read + Unpin> Read for SendDeadline<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: Write + Unpin> Write for SendDeadline<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let shut = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, shut)
    }
}

#[cfg(test)]
mod tests {
    use hyper_util::rt::TokioIo;

    use super::*;

    /// A write into a pipe nobody reads fails once the deadline passes, not before. (Time is
    /// paused: it advances only while every task waits, so a busy machine cannot stall a task
    /// past a deadline.)
    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_takes_fails_at_the_deadline() {
        let (ours, _theirs) = tokio::io::duplex(16);
        let mut stream = SendDeadline::new(TokioIo::new(ours), Duration::from_millis(200));
        let chunk = [0u8; 64];
        let started = Instant::now();
        let error = loop {
            match std::future::poll_fn(|cx| Pin::new(&mut stream).poll_write(cx, &chunk)).await {
                Ok(_) => continue,
                Err(error) => break error,
            }
        };
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
    }

    /// A slow reader that keeps taking bytes is no stalled one.
    #[tokio::test(start_paused = true)]
    async fn a_reader_that_keeps_reading_is_never_cut() {
        use tokio::io::AsyncReadExt as _;
        let (ours, mut theirs) = tokio::io::duplex(16);
        tokio::spawn(async move {
            let mut buffer = [0u8; 8];
            while theirs.read(&mut buffer).await.is_ok_and(|read| read > 0) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let mut stream = SendDeadline::new(TokioIo::new(ours), Duration::from_millis(200));
        for _ in 0..16 {
            std::future::poll_fn(|cx| Pin::new(&mut stream).poll_write(cx, &[1u8; 8])).await.expect("taken in time");
        }
    }
}
