//! MCP at `/mcp`: Streamable HTTP with the official SDK (rmcp), serving the catalog through the
//! Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) and as tools.
//!
//! The service is a route of the one router, so it is behind the same layers as the REST API:
//! authentication, the concurrency limit and timeout, request ids, tracing and metrics. Without a
//! token file, `Host` and `Origin` must be loopback names (DNS rebinding); with one, the token is
//! the protection.
//!
//! The server holds no session: every request carries what its answer needs (the protocol
//! version in its header or `_meta`), so any replica of a deployment answers any request, and
//! nothing a client leaves behind outlives its request. Clients of 2025-11-25 still `initialize`
//! (answered without a session id, which that revision allows); clients of 2026-07-28 need no
//! handshake. What lasts is an event stream of change notifications (`GET /mcp` for 2025-11-25,
//! `subscriptions/listen` for 2026-07-28), held by one replica; each takes a place among the capped
//! event streams and ends when shutdown starts.

mod error;
mod server;
mod stream;
mod tools;
mod view;

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use axum::http::{Method, header};
use axum::response::{IntoResponse as _, Response};
use rmcp::RoleServer;
use rmcp::model::{ErrorData, JsonRpcError, ProtocolVersion, RequestId, ServerJsonRpcMessage};
use rmcp::service::RequestContext;
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use server::SkillServer;

use crate::app::App;
use crate::http::{Authenticated, HttpError};
use crate::limits::{StreamRefusal, StreamSlot};

/// The route.
pub const PATH: &str = "/mcp";

/// The `Host` names a server without a token file answers MCP on.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The browser origins a server without a token file lets call MCP (any port).
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// How often an idle event stream carries a keep-alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// rmcp's transport, stateless.
type Transport = StreamableHttpService<SkillServer, NeverSessionManager>;

/// `/mcp`, to merge into the application's router within its layers.
pub fn router(app: &Arc<App>) -> Router<Arc<App>> {
    // Stateless for every revision: no session to look up, so no replica affinity and no state per
    // client (rmcp serves 2026-07-28 this way whatever the setting; this applies it to 2025-11-25).
    // An answer is one JSON document (which the transport allows a server to choose), an event
    // stream only when the handler sends something before it (a subscription's acknowledgment).
    let mut config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(KEEP_ALIVE))
        .with_legacy_session_mode(false)
        .with_json_response(true);
    config.max_request_body_bytes = crate::http::MAX_BODY_BYTES;
    config = if app.tokens.is_some() {
        config.disable_allowed_hosts().disable_allowed_origins()
    } else {
        config.with_allowed_hosts(LOOPBACK_HOSTS).with_allowed_origins(LOOPBACK_ORIGINS).enforce_origin_validation()
    };
    // Open streams (subscriptions) end when shutdown starts.
    let sessions_end = config.cancellation_token.clone();
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let mut shutdown = app.shutdown.clone();
        runtime.spawn(async move {
            crate::shutdown::stopped(&mut shutdown).await;
            sessions_end.cancel();
        });
    }
    let handler = SkillServer::new(Arc::clone(app));
    let transport =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(NeverSessionManager::default()), config);
    Router::new().route_service(PATH, Mcp { app: Arc::clone(app), transport: Arc::new(transport) })
}

/// The service of `/mcp`: the event stream of `GET`, and everything else through rmcp's transport,
/// with what this server adds around it (see [`answer`]).
///
/// One service rather than axum's route and middleware layers, for the reason the router's gate is
/// one: each layer boxed and cloned per request, and the transport's own service clones its whole
/// configuration for every request, where [`StreamableHttpService::handle`] borrows it.
#[derive(Clone)]
struct Mcp {
    app: Arc<App>,
    transport: Arc<Transport>,
}

impl tower::Service<Request> for Mcp {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let Mcp { app, transport } = self.clone();
        Box::pin(async move { Ok(answer(app, &transport, request).await) })
    }
}

/// An event stream (a 2025-11-25 host's `GET /mcp`, a 2026-07-28 host's `subscriptions/listen`)
/// takes a place among the capped event streams, as `GET /events` does, and ends when the token it
/// was opened with is revoked; an answer that holds a file whole keeps the room it reserved until
/// it is sent ([`Held`]); the transport's refusals in plain text become problems ([`problems`]).
async fn answer(app: Arc<App>, transport: &Transport, request: Request) -> Response {
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |ConnectInfo(peer)| peer.ip());
    let authenticated = request.extensions().get::<Authenticated>().copied();
    match *request.method() {
        Method::GET => match open_stream(&app, client) {
            Ok(slot) => guard(&app, stream::open(&app, request.headers()), authenticated, Some(slot), None),
            Err(refused) => refused.into_response(),
        },
        // As axum answers it for a `GET` route: the same head, no stream (so no place taken).
        Method::HEAD => stream::open(&app, request.headers()),
        Method::POST => {
            let (mut parts, body, listens) = match mark_bad_cursor(request).await {
                Ok(read) => read,
                Err(error) => return error.into_response(),
            };
            if let Some(refusal) = unsupported_version(&parts.headers, &body) {
                return refusal;
            }
            let slot = match listens.then(|| open_stream(&app, client)).transpose() {
                Ok(slot) => slot,
                Err(refused) => return refused.into_response(),
            };
            let held = Held::default();
            parts.extensions.insert(held.clone());
            let request = http::Request::from_parts(parts, http_body_util::Full::new(body));
            let response = problems(transport.handle(request).await.map(Body::new)).await;
            guard(&app, response, authenticated, slot, Some(held))
        }
        // The transport's refusal (405).
        _ => problems(transport.handle(request).await.map(Body::new)).await,
    }
}

/// A place among the capped event streams for `client`, or the refusal.
fn open_stream(app: &App, client: IpAddr) -> Result<StreamSlot, HttpError> {
    app.streams.open(client).map_err(|refusal| match refusal {
        StreamRefusal::Full => HttpError::TooManyStreams,
        StreamRefusal::ClientFull => HttpError::TooManyStreamsForClient,
    })
}

/// The answer's body, kept as it is when it is a whole document that holds nothing; otherwise
/// [`Guarded`]: an event stream ends when its token is revoked and holds its place while it
/// lives, and an answer keeps the room it reserved until it is sent.
fn guard(
    app: &App,
    response: Response,
    authenticated: Option<Authenticated>,
    slot: Option<StreamSlot>,
    held: Option<Held>,
) -> Response {
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
    let held = held.filter(Held::holds);
    if !streams && slot.is_none() && held.is_none() {
        return response;
    }
    let revoked =
        streams.then(|| app.tokens.as_ref().zip(authenticated)).flatten().map(|(store, Authenticated(digest))| {
            let mut tokens = store.subscribe();
            let revoked: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
                if tokens.wait_for(|tokens| !tokens.contains(&digest)).await.is_err() {
                    // The tokens can no longer change.
                    std::future::pending::<()>().await;
                }
            });
            revoked
        });
    response.map(|inner| Body::new(Guarded { inner, revoked, _slot: slot, _held: held }))
}

/// A request whose `params.cursor` is there but is neither a string nor null: what it is.
///
/// rmcp reads a listing's params as a flattened `Option`, so params that do not fit read as none
/// and the first page would be the answer. The transport hands a request's HTTP extensions to the
/// handler, which answers a request marked so -32602.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BadCursor(pub(crate) &'static str);

/// Reads a POST's body (bounded, as every body is) to mark it [`BadCursor`] if it is one, and says
/// whether it opens a subscription (`subscriptions/listen`, a stream). Only a body that says
/// `"cursor"` or the method's name is parsed here. The body read is what the transport is given.
async fn mark_bad_cursor(request: Request) -> Result<(http::request::Parts, Bytes, bool), HttpError> {
    let (mut parts, body) = request.into_parts();
    let bytes = crate::http::bounded_body(&parts.extensions, body).await?;
    if let Some(kind) = bad_cursor(&bytes) {
        parts.extensions.insert(BadCursor(kind));
    }
    let listens = listens(&bytes);
    Ok((parts, bytes, listens))
}

/// Where a request of revision 2026-07-28 names its protocol version in `_meta`.
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The answer to a POST whose `MCP-Protocol-Version` header names a version this server does not
/// speak and whose body names none: 400 with the JSON-RPC `UnsupportedProtocolVersionError`
/// (-32022) listing the versions it does, as revision 2026-07-28 requires. (The transport refuses
/// such a header in plain text, which a client that probes with it would take for a server of an
/// older revision. When the body's `_meta` names a version, the transport answers: -32022 for one
/// it does not speak, `HeaderMismatch` for one unlike the header's.)
fn unsupported_version(headers: &http::HeaderMap, body: &[u8]) -> Option<Response> {
    let requested = headers.get(HEADER_MCP_PROTOCOL_VERSION)?.to_str().ok()?;
    if ProtocolVersion::KNOWN_VERSIONS.iter().any(|known| known.as_str() == requested) {
        return None;
    }
    let message = serde_json::from_slice::<serde_json::Value>(body).ok();
    if message.as_ref().and_then(|message| message.get("params")?.get("_meta")?.get(META_PROTOCOL_VERSION)).is_some() {
        // A request of revision 2026-07-28 or later: the transport compares the two versions.
        return None;
    }
    let id = message.and_then(|message| serde_json::from_value::<RequestId>(message.get("id")?.clone()).ok());
    let requested: String = requested.chars().take(64).collect();
    let requested = serde_json::from_value::<ProtocolVersion>(requested.into()).ok()?;
    let error = ErrorData::unsupported_protocol_version(requested, ProtocolVersion::KNOWN_VERSIONS);
    let message = ServerJsonRpcMessage::Error(JsonRpcError::new(id, error));
    Some((http::StatusCode::BAD_REQUEST, axum::Json(message)).into_response())
}

/// Whether a JSON-RPC `body` is a `subscriptions/listen` request.
fn listens(body: &[u8]) -> bool {
    const LISTEN: &[u8] = b"subscriptions/listen";
    if !body.windows(LISTEN.len()).any(|window| window == LISTEN) {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(body)
        .is_ok_and(|message| message.get("method").and_then(serde_json::Value::as_str) == Some("subscriptions/listen"))
}

/// What the cursor of a JSON-RPC request `body` is when it is there but not a string (or null).
fn bad_cursor(body: &[u8]) -> Option<&'static str> {
    const CURSOR: &[u8] = b"\"cursor\"";
    if !body.windows(CURSOR.len()).any(|window| window == CURSOR) {
        return None;
    }
    let message: serde_json::Value = serde_json::from_slice(body).ok()?;
    match message.get("params")?.get("cursor")? {
        serde_json::Value::String(_) | serde_json::Value::Null => None,
        serde_json::Value::Bool(_) => Some("a boolean"),
        serde_json::Value::Number(_) => Some("a number"),
        serde_json::Value::Array(_) => Some("an array"),
        serde_json::Value::Object(_) => Some("an object"),
    }
}

/// Answers at most this large need no room reserved: the cap on requests in progress bounds them.
const RESERVE_FROM: u64 = 64 * 1024;

/// Reserves room for an answer that holds a file of `size` bytes whole until it is sent (its bytes
/// and their JSON encoding), kept with the request's answer ([`Held`]). No room within a
/// moment is [`error::ToolError::Busy`]: retry.
pub(crate) async fn reserve(app: &App, context: &RequestContext<RoleServer>, size: u64) -> Result<(), error::Busy> {
    if size <= RESERVE_FROM {
        return Ok(());
    }
    let held = context.extensions.get::<http::request::Parts>().and_then(|parts| parts.extensions.get::<Held>());
    let Some(held) = held else { return Ok(()) };
    match app.answers.reserve(size.saturating_mul(2)).await {
        Some(permit) => {
            held.keep(permit);
            Ok(())
        }
        None => Err(error::Busy),
    }
}

/// The room an answer reserved for what it holds whole in memory (`crate::limits::AnswerBytes`),
/// kept until its body is sent or dropped. The transport hands a request's HTTP extensions to the
/// handler, which adds its reservation here.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<std::sync::Mutex<Vec<tokio::sync::OwnedSemaphorePermit>>>);

impl Held {
    /// Whether it keeps any room.
    fn holds(&self) -> bool {
        !self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_empty()
    }

    /// Keeps `permit` until the answer is sent.
    pub(crate) fn keep(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(permit);
    }
}

/// An answer's body that ends when its token is revoked, holding its stream's place and its
/// reserved room while it lives.
struct Guarded {
    inner: Body,
    revoked: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    _slot: Option<StreamSlot>,
    _held: Option<Held>,
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        if let Some(revoked) = self.revoked.as_mut()
            && revoked.as_mut().poll(context).is_ready()
        {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(context)
    }
}

/// The longest reason of a refusal kept (the transport's are a line).
const MAX_REASON_BYTES: usize = 1024;

/// The transport's refusals in plain text become problems with the same status (its JSON-RPC
/// errors and event streams pass as they are); a 5xx never shows its text.
async fn problems(response: Response) -> Response {
    let status = response.status();
    let typed = response.headers().get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.starts_with(b"application/json") || value.starts_with(b"text/event-stream")
    });
    if typed || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    if status.is_server_error() {
        let text = axum::body::to_bytes(body, MAX_REASON_BYTES).await.unwrap_or_default();
        tracing::error!(%status, reason = %String::from_utf8_lossy(&text), "the MCP transport failed");
        return HttpError::Internal.into_response();
    }
    let reason = match axum::body::to_bytes(body, MAX_REASON_BYTES).await {
        Ok(text) if !text.is_empty() => String::from_utf8_lossy(&text).into_owned(),
        _ => status.canonical_reason().unwrap_or("refused").to_owned(),
    };
    let mut problem = HttpError::McpRefused(status, reason).into_response();
    for name in [header::ALLOW, header::WWW_AUTHENTICATE] {
        if let Some(value) = parts.headers.get(&name) {
            problem.headers_mut().insert(name, value.clone());
        }
    }
    problem
}
