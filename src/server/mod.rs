//! `skillcat serve`: binds, serves the API over the live catalog, and shuts down gracefully.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{self, Limits};
use crate::app::App;
use crate::auth::TokenStore;
use crate::catalog::{LiveCatalog, LiveOptions};
use crate::config::SourceConfig;
use crate::observability::Metrics;
use crate::sources::Sources;

/// Everything `serve` needs, resolved from flags, environment and the config file.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub sources: Vec<SourceConfig>,
    pub live: LiveOptions,
    pub limits: Limits,
    /// The bearer-token file; with it, every route but the probes needs a token.
    pub token_file: Option<PathBuf>,
    /// How often the token file is re-read even without a change event.
    pub token_recheck: Duration,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// How long in-flight requests may take to finish once shutdown starts.
    pub shutdown_grace: Duration,
}

impl ServeOptions {
    pub fn new(listen: SocketAddr, sources: Vec<SourceConfig>) -> Self {
        ServeOptions {
            listen,
            sources,
            live: LiveOptions::default(),
            limits: Limits::default(),
            token_file: None,
            token_recheck: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(8),
        }
    }
}

/// A bound server, not yet serving. Binding is separate so callers learn the real port.
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
    options: ServeOptions,
    shutdown: watch::Sender<bool>,
}

impl Server {
    /// Reads the token file, builds the sources, starts the live catalog and binds the listener.
    pub async fn bind(options: ServeOptions) -> anyhow::Result<Self> {
        let (shutdown, stopping) = watch::channel(false);
        let tokens = match &options.token_file {
            Some(path) => Some(TokenStore::watch_file(path.clone(), options.token_recheck, stopping.clone())?),
            None => None,
        };
        let sources = Sources::build(&options.sources).context("cannot set up the sources")?;
        let listener =
            TcpListener::bind(options.listen).await.with_context(|| format!("cannot listen on {}", options.listen))?;
        let metrics = Arc::new(Metrics::default());
        let catalog = LiveCatalog::start(sources, options.live.clone(), Arc::clone(&metrics), stopping.clone());
        let app = Arc::new(App { catalog, metrics, tokens, shutdown: stopping });
        Ok(Server { listener, app, options, shutdown })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Serves until `signal` completes, then shuts down: readiness fails and event streams end at
    /// once, no new connection is accepted, and in-flight requests get `shutdown_grace` to finish.
    pub async fn run(self, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
        let Server { listener, app, options, shutdown } = self;
        let router = api::router(Arc::clone(&app), &options.limits);
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(options.header_timeout).keep_alive(true);
        let graceful = GracefulShutdown::new();
        tracing::info!(address = %listener.local_addr()?, "serving");
        tokio::pin!(signal);
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err(error) => {
                            // Out of descriptors, or a connection reset before accept: keep serving.
                            tracing::warn!(%error, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let service = TowerToHyperService::new(router.clone());
                    let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!(%peer, %error, "connection ended with an error");
                        }
                    });
                }
                () = &mut signal => break,
            }
        }
        tracing::info!("shutting down");
        let _ = shutdown.send(true);
        drop(listener);
        tokio::select! {
            () = graceful.shutdown() => tracing::info!("all connections closed"),
            () = tokio::time::sleep(options.shutdown_grace) => tracing::warn!("shutdown grace period over; closing"),
        }
        Ok(())
    }
}
