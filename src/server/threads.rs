//! The serving threads: one single-threaded runtime per worker, each accepting connections from
//! the one listener and serving them itself, start to end.
//!
//! A connection is served where it was accepted, as nginx's workers (processes that each own
//! their connections) serve theirs: its requests never wait for another thread to steal them,
//! and waking its task never crosses threads, which took a fifth of Tokio's instructions (6 % of
//! all) out of a 304 (docs/BENCHMARKS.md). Every thread accepts from a duplicate of the same
//! listening socket rather than from a port of its own (`SO_REUSEPORT`), so a second server
//! started on the port fails with "address in use" instead of silently taking a share of the
//! connections. The next connection goes to a thread with the fewest open ([`Balance`]): from one
//! listener, the first thread to wake would otherwise take every connection waiting, and a burst
//! of keep-alive connections (a balancer's pool, a benchmark's) would all be served on one core.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot, watch};

use super::deadline::SendDeadline;
use super::idle::{Activity, Counted, UntilIdle};
use super::linger::Linger;
use crate::router::Front;

/// The longest pause between failed accepts (out of descriptors, say): they back off rather
/// than spin.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long a thread with more open connections than another leaves the next connection to it
/// before accepting it itself: the other may be busy with a long answer.
const STAND_ASIDE: Duration = Duration::from_millis(2);

/// What every serving thread serves its connections with.
#[derive(Clone)]
pub(super) struct Connections {
    pub(super) router: Front,
    pub(super) http: http1::Builder,
    /// One permit per open connection, shared by every thread: the cap is the server's.
    pub(super) slots: Arc<Semaphore>,
    pub(super) send_timeout: Duration,
    /// How long a connection may go without a request head or an answer ([`super::idle`]).
    pub(super) header_timeout: Duration,
    /// How long a thread's connections may take to finish once shutdown starts.
    pub(super) grace: Duration,
    /// One count per serving thread: its size is the number of threads [`Threads::start`] starts.
    pub(super) balance: Arc<Balance>,
}

/// The open connections of each serving thread, so that a thread accepts only while it has no
/// more than any other (or once the others have left a connection waiting for [`STAND_ASIDE`]).
pub(super) struct Balance {
    open: Box<[AtomicUsize]>,
    /// Notified whenever a thread opens or closes a connection.
    changed: Notify,
}

impl Balance {
    pub(super) fn new(threads: usize) -> Self {
        Balance { open: (0..threads).map(|_| AtomicUsize::new(0)).collect(), changed: Notify::new() }
    }

    /// How many serving threads it counts for.
    fn threads(&self) -> usize {
        self.open.len()
    }

    /// Thread `index`'s open connections.
    fn open(&self, index: usize) -> usize {
        self.open[index].load(Ordering::Relaxed)
    }

    /// Whether thread `index` has no more open connections than any other.
    fn is_least(&self, index: usize) -> bool {
        let mine = self.open(index);
        (0..self.threads()).all(|other| mine <= self.open(other))
    }

    /// Waits until thread `index` may accept: at once when it has the fewest open connections,
    /// else until it does or [`STAND_ASIDE`] has passed.
    async fn turn(&self, index: usize) {
        if self.is_least(index) {
            return;
        }
        let _ = tokio::time::timeout(STAND_ASIDE, async {
            loop {
                // Registered before the check: a change between the two still wakes this.
                let mut changed = std::pin::pin!(self.changed.notified());
                changed.as_mut().enable();
                if self.is_least(index) {
                    return;
                }
                changed.await;
            }
        })
        .await;
    }

    /// Counts a connection of thread `index` open until the guard is dropped.
    fn opened(self: &Arc<Self>, index: usize) -> Opened {
        self.open[index].fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
        Opened { balance: Arc::clone(self), index }
    }
}

/// A connection counted open in the [`Balance`] (see [`Balance::opened`]).
struct Opened {
    balance: Arc<Balance>,
    index: usize,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.balance.open[self.index].fetch_sub(1, Ordering::Relaxed);
        self.balance.changed.notify_waiters();
    }
}

/// The running serving threads. Dropping this (the server's future was dropped) ends them at
/// once, with their connections, as dropping a runtime ends its tasks.
pub(super) struct Threads {
    handles: Vec<JoinHandle<bool>>,
    /// Never sent: each thread ends as soon as its sender is dropped.
    abandon: Vec<oneshot::Sender<()>>,
}

impl Threads {
    /// Starts one thread for each that `connections.balance` counts, each accepting from
    /// `listener`; each stops accepting once `shutdown` flips, and ends when its connections have
    /// closed or the grace period is over.
    pub(super) fn start(
        listener: std::net::TcpListener,
        connections: &Connections,
        shutdown: &watch::Sender<bool>,
    ) -> anyhow::Result<Threads> {
        let count = connections.balance.threads();
        let mut threads = Threads { handles: Vec::with_capacity(count), abandon: Vec::with_capacity(count) };
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start a serving thread's runtime")?;
            let listener = listen_in(&runtime, listener.try_clone()?)?;
            let (abandon, abandoned) = oneshot::channel::<()>();
            let serving = serve(index, listener, connections.clone(), shutdown.subscribe());
            let handle = std::thread::Builder::new()
                .name(format!("skillcat-serve-{index}"))
                .spawn(move || {
                    let closed = runtime.block_on(async {
                        tokio::select! {
                            closed = serving => closed,
                            _ = abandoned => false,
                        }
                    });
                    // A blocking read still running has no connection left to answer.
                    runtime.shutdown_background();
                    closed
                })
                .context("cannot start a serving thread")?;
            threads.handles.push(handle);
            threads.abandon.push(abandon);
        }
        Ok(threads)
    }

    /// Waits for every thread to end; true if every connection closed within the grace period.
    pub(super) async fn join(self) -> anyhow::Result<bool> {
        let Threads { handles, abandon } = self;
        let joined = tokio::task::spawn_blocking(move || handles.into_iter().map(JoinHandle::join).collect::<Vec<_>>())
            .await
            .context("cannot wait for the serving threads")?;
        drop(abandon);
        joined.into_iter().try_fold(true, |all_closed, closed| match closed {
            Ok(closed) => Ok(all_closed && closed),
            Err(_) => Err(anyhow::anyhow!("a serving thread panicked")),
        })
    }
}

/// `listener` registered with `runtime`'s I/O driver, so that its thread accepts from it.
fn listen_in(runtime: &Runtime, listener: std::net::TcpListener) -> std::io::Result<TcpListener> {
    let _entered = runtime.enter();
    TcpListener::from_std(listener)
}

/// Thread `index`'s accept loop, until shutdown; then its connections' grace period. True if they
/// all closed within it.
async fn serve(
    index: usize,
    listener: TcpListener,
    connections: Connections,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let graceful = GracefulShutdown::new();
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            accepted = accept(&listener, &connections.slots, &connections.balance, index) => accepted,
            () = crate::shutdown::stopped(&mut shutdown) => break,
        };
        match accepted {
            (Ok((stream, peer)), slot) => {
                backoff = Duration::ZERO;
                let opened = connections.balance.opened(index);
                connections.serve(stream, peer, (slot, opened), &graceful);
            }
            (Err(error), _) => {
                // Out of descriptors, or a connection reset before accept: keep serving, and
                // wait longer after each failure in a row.
                backoff = (backoff * 2).clamp(Duration::from_millis(5), MAX_ACCEPT_BACKOFF);
                if backoff < MAX_ACCEPT_BACKOFF {
                    tracing::warn!(%error, ?backoff, "accept failed");
                } else {
                    tracing::debug!(%error, ?backoff, "accept failed");
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = crate::shutdown::stopped(&mut shutdown) => break,
                }
            }
        }
    }
    drop(listener);
    tokio::time::timeout(connections.grace, graceful.shutdown()).await.is_ok()
}

/// The next connection for thread `index`, once one is free under the cap (at the cap, accepting
/// pauses and new connections wait in the listen backlog, so the descriptors in reserve stay
/// free) and once it is this thread's turn.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    balance: &Balance,
    index: usize,
) -> (std::io::Result<(TcpStream, SocketAddr)>, OwnedSemaphorePermit) {
    let slot = Arc::clone(slots).acquire_owned().await.expect("never closed");
    balance.turn(index).await;
    (listener.accept().await, slot)
}

impl Connections {
    /// Serves `stream` on this thread until it closes, holding `held` (its slot under the cap, its
    /// count in the balance) meanwhile.
    fn serve(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        held: (OwnedSemaphorePermit, Opened),
        graceful: &GracefulShutdown,
    ) {
        // Streamed answers (event streams, MCP's answers) go out in several writes: without
        // this, each small write after the first waits for the client's delayed ACK (40 ms).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        // Each request knows its peer (event streams are capped per client, wrong tokens counted
        // per client).
        let service = self.router.for_peer(peer);
        let stream = SendDeadline::new(TokioIo::new(Linger::new(stream)), self.send_timeout);
        let activity = Arc::new(Activity::default());
        let service = Counted::new(service, Arc::clone(&activity));
        let connection = graceful.watch(self.http.serve_connection(stream, service));
        let connection = UntilIdle::new(connection, activity, self.header_timeout);
        tokio::spawn(async move {
            match connection.await {
                Some(Ok(())) => {}
                Some(Err(error)) => tracing::debug!(%peer, %error, "connection ended with an error"),
                None => tracing::debug!(%peer, "connection idle for the header timeout; closed"),
            }
            drop(held);
        });
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    /// A thread with more open connections waits for another to accept, and no longer than
    /// [`STAND_ASIDE`]; a thread with the fewest never waits.
    #[tokio::test(start_paused = true)]
    async fn a_thread_with_more_connections_stands_aside_for_a_while() {
        let balance = Arc::new(Balance::new(2));
        let first = balance.opened(0);
        let started = Instant::now();
        balance.turn(1).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "the thread with the fewest accepts at once");

        let waiting = tokio::spawn({
            let balance = Arc::clone(&balance);
            async move {
                let started = Instant::now();
                balance.turn(0).await;
                started.elapsed()
            }
        });
        tokio::time::sleep(Duration::from_millis(1)).await;
        let second = balance.opened(1);
        assert_eq!(waiting.await.expect("the waiting turn"), Duration::from_millis(1), "until the other accepts");

        let third = balance.opened(0);
        let started = Instant::now();
        balance.turn(0).await;
        assert_eq!(started.elapsed(), STAND_ASIDE, "no longer than the stand-aside when the other does not");
        drop(third);
        let started = Instant::now();
        balance.turn(0).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "a closed connection counts no more");
        drop((first, second));
    }

    /// Connections waiting when the serving threads start are shared between them, not all taken
    /// by the first thread to accept, even when it starts first.
    #[test]
    fn waiting_connections_are_shared_between_the_threads() {
        const CONNECTIONS: usize = 32;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let address = listener.local_addr().expect("address");
        let clients: Vec<_> =
            (0..CONNECTIONS).map(|_| std::net::TcpStream::connect(address).expect("connect")).collect();
        let slots = Arc::new(Semaphore::new(CONNECTIONS));
        let balance = Arc::new(Balance::new(2));
        let (done, _) = watch::channel(false);
        let done = Arc::new(done);
        // Each thread, once its runtime is built, waits for the word to start accepting.
        let thread = |index: usize| {
            let (listener, slots, balance, done) = (
                listener.try_clone().expect("a duplicate"),
                Arc::clone(&slots),
                Arc::clone(&balance),
                Arc::clone(&done),
            );
            let (start, started) = std::sync::mpsc::channel::<()>();
            let handle = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
                let listener = listen_in(&runtime, listener).expect("registered");
                started.recv().expect("the word to start");
                // The connections it accepted, still open.
                runtime.block_on(async {
                    let mut finished = done.subscribe();
                    let mut held = Vec::new();
                    loop {
                        tokio::select! {
                            (connection, slot) = accept(&listener, &slots, &balance, index) => {
                                // Held open, so the balance's counts are the connections accepted.
                                held.push((connection.expect("accepted"), slot, balance.opened(index)));
                                if (0..2).map(|thread| balance.open(thread)).sum::<usize>() == CONNECTIONS {
                                    done.send_replace(true);
                                }
                            }
                            _ = finished.wait_for(|done| *done) => break,
                        }
                    }
                    held
                })
            });
            (handle, start)
        };
        let ((first, start_first), (second, start_second)) = (thread(0), thread(1));
        // The first thread accepts alone for 5 ms, time enough to take every connection waiting
        // (it takes them all without the balance); then the second starts.
        start_first.send(()).expect("the first thread waits");
        while balance.open(0) == 0 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(5));
        start_second.send(()).expect("the second thread waits");
        let held = [first.join().expect("the first thread"), second.join().expect("the second thread")];
        let counts: Vec<usize> = (0..2).map(|thread| balance.open(thread)).collect();
        assert_eq!(counts, [held[0].len(), held[1].len()], "the balance counts what each thread holds");
        assert!(counts.iter().all(|&count| count >= CONNECTIONS / 4), "{counts:?}");
        drop((held, clients));
        assert_eq!((0..2).map(|thread| balance.open(thread)).sum::<usize>(), 0, "closed connections count no more");
    }
}
