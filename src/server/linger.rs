//! The lingering close: a connection the server ends is read to the client's end, for a while,
//! before it is closed.
//!
//! Closing a socket with bytes still unread makes the kernel answer with a reset, which can
//! destroy the answer still on its way: a client still sending a body the server refused (a 413
//! after the first 64 KiB) would see "connection reset" or "broken pipe" instead of the 413.
//! nginx does the same (`lingering_close`). A client that closed first costs nothing: its end is
//! read at once.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How long the server reads what a client still sends after the server ended the connection.
const LINGER: Duration = Duration::from_secs(2);

/// A connection's stream whose shutdown waits (at most [`LINGER`]) for the client's end.
pub(super) struct Linger<S> {
    inner: S,
    /// Armed when the client has not ended its side by the time the server ended its own.
    until: Option<Pin<Box<Sleep>>>,
}

impl<S> Linger<S> {
    pub(super) fn new(inner: S) -> Self {
        Linger { inner, until: None }
    }
}

impl<S: AsyncRead + Unpin> Linger<S> {
    /// Reads and drops what the client still sends, until its end, an error or [`LINGER`].
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut scratch = [0u8; 4096];
        loop {
            let mut unread = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut unread) {
                Poll::Ready(Ok(())) if !unread.filled().is_empty() => {}
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => {
                    let until = self.until.get_or_insert_with(|| Box::pin(tokio::time::sleep(LINGER)));
                    return until.as_mut().poll(cx);
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Linger<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Linger<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Sends the server's end after everything written, then waits for the client's.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(Pin::new(&mut self.inner).poll_shutdown(cx))?;
        ready!(self.poll_drain(cx));
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::time::Instant;

    use super::*;

    /// What the client sent after the server's answer is read, so the answer is not reset away.
    #[tokio::test]
    async fn a_shutdown_reads_to_the_clients_end() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut stream = Linger::new(ours);
        let client = tokio::spawn(async move {
            theirs.write_all(&[b' '; 1024]).await.expect("the server reads what is sent");
            let mut answer = Vec::new();
            theirs.read_to_end(&mut answer).await.expect("the answer");
            answer
        });
        stream.write_all(b"413").await.expect("write");
        stream.shutdown().await.expect("shutdown");
        assert_eq!(client.await.expect("client"), b"413");
    }

    /// A client that never ends its side holds the connection for [`LINGER`], not longer.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_never_ends_is_given_up_on() {
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut stream = Linger::new(ours);
        let started = Instant::now();
        stream.shutdown().await.expect("shutdown");
        assert_eq!(started.elapsed(), LINGER);
    }
}
