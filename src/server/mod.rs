//! `skillcat serve`: binds, serves the API over the live catalog, and shuts down gracefully.

mod deadline;
mod idle;
mod linger;
mod memory;
mod threads;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::app::App;
use crate::auth::{TokenStore, WebhookSecret};
use crate::catalog::{LiveCatalog, LiveOptions};
use crate::config::{PublicUrl, SourceConfig};
use crate::http::Limits;
use crate::limits::{AnswerBytes, ConnectionLimits, StreamSlots, answer_budget, memory_limit, raise_descriptor_limit};
use crate::observability::Metrics;
use crate::sources::Sources;
use threads::{Balance, Connections, Threads};

/// Everything `serve` needs, resolved from flags, environment and the config file.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub sources: Vec<SourceConfig>,
    pub live: LiveOptions,
    pub limits: Limits,
    /// The bearer-token file; with it, every route but the probes needs a token.
    pub token_file: Option<PathBuf>,
    /// Where git sources keep their mirrors.
    pub state_dir: PathBuf,
    /// The secret of `POST /hooks/git`; without it the route answers 404.
    pub webhook_secret_file: Option<PathBuf>,
    /// The URL clients reach the server at, written in every absolute URL the server gives;
    /// without it, the URL each request reached it at.
    pub public_url: Option<PublicUrl>,
    /// How often the token file is re-read even without a change event.
    pub token_recheck: Duration,
    /// How long a client may take to send a request's headers, and how long a connection may
    /// sit idle between requests: a connection that does neither for between one and two of
    /// these, with no answer in flight, is closed (`idle`).
    pub header_timeout: Duration,
    /// The largest request head (request line and headers) read; 431 beyond.
    pub max_header_bytes: usize,
    /// The caps on connections and event streams; by default sized to the descriptor limit.
    pub connections: Option<ConnectionLimits>,
    /// How long in-flight requests may take to finish once shutdown starts.
    pub shutdown_grace: Duration,
    /// How long a write may wait for a client that stopped reading before its connection closes.
    pub send_timeout: Duration,
}

impl ServeOptions {
    pub fn new(listen: SocketAddr, sources: Vec<SourceConfig>) -> Self {
        ServeOptions {
            listen,
            sources,
            live: LiveOptions::default(),
            limits: Limits::default(),
            token_file: None,
            state_dir: PathBuf::new(),
            webhook_secret_file: None,
            public_url: None,
            token_recheck: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            max_header_bytes: MAX_HEADER_BYTES,
            connections: None,
            shutdown_grace: Duration::from_secs(8),
            send_timeout: DEFAULT_SEND_TIMEOUT,
        }
    }
}

/// The default bound on a request head: every request of the API fits in a few hundred bytes,
/// and a long bearer token in a few more.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// How long a write waits for a client that stopped reading, by default: longer than any pause a
/// working client makes, short enough that stalled readers do not pile up.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// A warning for each configured root that is not a folder now. Roots are watched, so one that
/// appears later is served then, which makes this no error; but a mistyped `--dir` would
/// otherwise give a healthy-looking server without the skills it was meant to serve, and the
/// only trace would be a diagnostic in `GET /skills`.
fn warn_about_unusable_roots(sources: &Sources) {
    for source in sources.iter() {
        for root in source.folders() {
            let root_text = root.display();
            match std::fs::metadata(root) {
                Ok(metadata) if metadata.is_dir() => {}
                Ok(_) => tracing::warn!(
                    root = %root_text,
                    source = source.label(),
                    "a configured root is not a folder: no skills are served from it until it becomes one"
                ),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => tracing::warn!(
                    root = %root_text,
                    source = source.label(),
                    "a configured root does not exist: no skills are served from it until it is created"
                ),
                Err(error) => tracing::warn!(
                    root = %root_text,
                    source = source.label(),
                    %error,
                    "a configured root cannot be examined: its skills may not be served"
                ),
            }
        }
    }
}

/// The URL a browser on this host opens the server at: an unspecified address (every interface)
/// is reached through loopback.
fn browsable(address: SocketAddr) -> String {
    let mut address = address;
    if address.ip().is_unspecified() {
        address.set_ip(match address.ip() {
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{address}/")
}

/// A bound server, not yet serving. Binding is separate so callers learn the real port.
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
    options: ServeOptions,
    limits: ConnectionLimits,
    shutdown: watch::Sender<bool>,
}

impl Server {
    /// Reads the token file, builds the sources, starts the live catalog and binds the listener.
    pub async fn bind(options: ServeOptions) -> anyhow::Result<Self> {
        let memory = memory_limit();
        let limits =
            options.connections.unwrap_or_else(|| ConnectionLimits::for_machine(raise_descriptor_limit(), memory));
        let answers = AnswerBytes::new(answer_budget(memory));
        tracing::info!(
            memory_limit = memory,
            connections = limits.max_connections,
            streams = limits.max_streams,
            streams_per_client = limits.max_streams_per_client,
            "connection limits"
        );
        let (shutdown, stopping) = watch::channel(false);
        let tokens = match &options.token_file {
            Some(path) => Some(TokenStore::watch_file(path.clone(), options.token_recheck, stopping.clone())?),
            None => None,
        };
        let metrics = Arc::new(Metrics::default());
        let sources =
            Sources::build(&options.sources, &options.state_dir, &metrics).context("cannot set up the sources")?;
        warn_about_unusable_roots(&sources);
        let listener = TcpListener::bind(options.listen).await.map_err(|error| listen_error(options.listen, error))?;
        let catalog = LiveCatalog::start(sources, options.live.clone(), Arc::clone(&metrics), stopping.clone());
        let streams = StreamSlots::new(&limits);
        let webhook_secret = options.webhook_secret_file.as_deref().map(WebhookSecret::read).transpose()?;
        let public_url = options.public_url.clone();
        let app = Arc::new(App {
            catalog,
            metrics,
            tokens,
            shutdown: stopping,
            streams,
            answers,
            webhook_secret,
            public_url,
        });
        Ok(Server { listener, app, options, limits, shutdown })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Serves until `signal` completes, then shuts down: readiness fails and event streams end at
    /// once, no new connection is accepted, and in-flight requests get `shutdown_grace` to finish.
    ///
    /// Connections are served on threads of their own, one per worker of the runtime this runs
    /// on (`TOKIO_WORKER_THREADS`, else one per core), each with a single-threaded runtime; what
    /// the server does besides (the catalog, the watchers) stays on this one. At most
    /// `max_connections` connections are open at once, across every thread.
    pub async fn run(self, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
        let Server { listener, app, options, limits, shutdown } = self;
        let address = listener.local_addr()?;
        let mut http = hyper::server::conn::http1::Builder::new();
        // The header timeout is the connections' own (`idle`), not hyper's.
        http.header_read_timeout(None)
            .max_header_size(options.max_header_bytes)
            .max_buf_size(crate::limits::CONNECTION_BUFFER.max(options.max_header_bytes))
            .keep_alive(true);
        let count = tokio::runtime::Handle::current().metrics().num_workers();
        let connections = Connections {
            router: crate::router::router(Arc::clone(&app), &options.limits),
            http,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            send_timeout: options.send_timeout,
            header_timeout: options.header_timeout,
            grace: options.shutdown_grace,
            balance: Arc::new(Balance::new(count)),
        };
        let threads = Threads::start(listener.into_std()?, &connections, &shutdown)?;
        tokio::spawn(memory::trim_after_bursts(connections.slots, limits.max_connections, shutdown.subscribe()));
        let url = match &app.public_url {
            Some(public) => format!("{public}/"),
            None => browsable(address),
        };
        tracing::info!(%address, %url, threads = count, "serving");
        signal.await;
        tracing::info!("shutting down");
        let _ = shutdown.send(true);
        if threads.join().await? {
            tracing::info!("all connections closed");
        } else {
            tracing::warn!("shutdown grace period over; closing");
        }
        Ok(())
    }
}

/// Why the server cannot listen on `address`, with the usual way out of a port below 1024.
fn listen_error(address: std::net::SocketAddr, error: std::io::Error) -> anyhow::Error {
    let hint = match error.kind() {
        std::io::ErrorKind::PermissionDenied if address.port() < 1024 => {
            "; ports below 1024 need root or the CAP_NET_BIND_SERVICE capability: listen on a port of 1024 or more (such as 8080) and put a proxy or a port mapping in front"
        }
        std::io::ErrorKind::AddrInUse => "; another process listens there: stop it or choose another port",
        _ => "",
    };
    anyhow::Error::new(error).context(format!("cannot listen on {address}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_url_opens_in_a_browser_on_this_host() {
        let url = |address: &str| browsable(address.parse().unwrap());
        assert_eq!(url("127.0.0.1:8080"), "http://127.0.0.1:8080/");
        assert_eq!(url("0.0.0.0:80"), "http://127.0.0.1:80/");
        assert_eq!(url("[::]:8080"), "http://[::1]:8080/");
        assert_eq!(url("[2001:db8::1]:8080"), "http://[2001:db8::1]:8080/");
    }

    #[test]
    fn a_refused_low_port_says_how_to_get_past_it() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let message = format!("{:#}", listen_error("0.0.0.0:80".parse().unwrap(), denied));
        assert!(message.starts_with("cannot listen on 0.0.0.0:80; ports below 1024 need root"), "{message}");
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let high = format!("{:#}", listen_error("0.0.0.0:8080".parse().unwrap(), denied));
        assert!(!high.contains("below 1024"), "{high}");
        let taken = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        assert!(format!("{:#}", listen_error("127.0.0.1:8080".parse().unwrap(), taken)).contains("another process"));
    }
}
