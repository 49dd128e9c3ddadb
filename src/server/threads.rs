//! The serving threads: one single-threaded runtime per worker, each accepting connections from
//! the one listener and serving them itself, start to end.
//!
//! A connection is served where it was accepted, as nginx's workers (processes that each own
//! their connections) serve theirs: its requests never wait for another thread to steal them,
//! and waking its task never crosses threads, which took a fifth of Tokio's instructions (6 % of
//! all) out of a 304 (docs/BENCHMARKS.md). Every thread accepts from a duplicate of the same
//! listening socket rather than from a port of its own (`SO_REUSEPORT`), so a second server
//! started on the port fails with "address in use" instead of silently taking a share of the
//! connections; whichever thread is idle takes the next connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};
use tower::ServiceExt as _;

use super::deadline::SendDeadline;
use super::linger::Linger;
use crate::router::Front;

/// The longest pause between failed accepts (out of descriptors, say): they back off rather
/// than spin.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// What every serving thread serves its connections with.
#[derive(Clone)]
pub(super) struct Connections {
    pub(super) router: Front,
    pub(super) http: http1::Builder,
    /// One permit per open connection, shared by every thread: the cap is the server's.
    pub(super) slots: Arc<Semaphore>,
    pub(super) send_timeout: Duration,
    /// How long a thread's connections may take to finish once shutdown starts.
    pub(super) grace: Duration,
}

/// The running serving threads. Dropping this (the server's future was dropped) ends them at
/// once, with their connections, as dropping a runtime ends its tasks.
pub(super) struct Threads {
    handles: Vec<JoinHandle<bool>>,
    /// Never sent: each thread ends as soon as its sender is dropped.
    abandon: Vec<oneshot::Sender<()>>,
}

impl Threads {
    /// Starts `count` threads accepting from `listener`; each stops accepting once `shutdown`
    /// flips, and ends when its connections have closed or the grace period is over.
    pub(super) fn start(
        listener: std::net::TcpListener,
        count: usize,
        connections: &Connections,
        shutdown: &watch::Sender<bool>,
    ) -> anyhow::Result<Threads> {
        let mut threads = Threads { handles: Vec::with_capacity(count), abandon: Vec::with_capacity(count) };
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start a serving thread's runtime")?;
            let listener = listen_in(&runtime, listener.try_clone()?)?;
            let (abandon, abandoned) = oneshot::channel::<()>();
            let serving = serve(listener, connections.clone(), shutdown.subscribe());
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

/// One thread's accept loop, until shutdown; then its connections' grace period. True if they
/// all closed within it.
async fn serve(listener: TcpListener, connections: Connections, mut shutdown: watch::Receiver<bool>) -> bool {
    let graceful = GracefulShutdown::new();
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            accepted = accept(&listener, &connections.slots) => accepted,
            () = crate::shutdown::stopped(&mut shutdown) => break,
        };
        match accepted {
            (Ok((stream, peer)), slot) => {
                backoff = Duration::ZERO;
                connections.serve(stream, peer, slot, &graceful);
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

/// The next connection, once one is free under the cap: at the cap, accepting pauses and new
/// connections wait in the listen backlog, so the descriptors in reserve stay free.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> (std::io::Result<(TcpStream, SocketAddr)>, OwnedSemaphorePermit) {
    let slot = Arc::clone(slots).acquire_owned().await.expect("never closed");
    (listener.accept().await, slot)
}

impl Connections {
    /// Serves `stream` on this thread until it closes, holding `slot` meanwhile.
    fn serve(&self, stream: TcpStream, peer: SocketAddr, slot: OwnedSemaphorePermit, graceful: &GracefulShutdown) {
        // Streamed answers (event streams, MCP's answers) go out in several writes: without
        // this, each small write after the first waits for the client's delayed ACK (40 ms).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
        }
        // Each request knows its peer (event streams are capped per client).
        let service = self.router.clone().map_request(move |mut request: axum::extract::Request<_>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        });
        let stream = SendDeadline::new(TokioIo::new(Linger::new(stream)), self.send_timeout);
        let connection = graceful.watch(self.http.serve_connection(stream, TowerToHyperService::new(service)));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop(slot);
        });
    }
}
