//! The HTTP API: one router with every route and layer, used by the server and by the tests.

mod auth;
mod error;
mod events;
mod files;
mod gate;
mod http;
mod manifest;
mod ops;
mod pages;
mod search;
mod skills;
mod wellknown;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, Uri, Version, header};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub(crate) use auth::Authenticated;
pub use error::{ApiError, Problem};
pub use http::MAX_BODY_BYTES;
pub(crate) use search::{
    DEFAULT_LIMIT as DEFAULT_SEARCH_LIMIT, MAX_LIMIT as MAX_SEARCH_LIMIT, answer as search_answer,
};

use crate::app::App;

/// The longest request target (path and query) answered. Every route's target is far shorter (a
/// skill name has at most 64 characters); a longer one gets a 414 problem. A request head over the
/// server's bound (`server::MAX_HEADER_BYTES`) is refused by hyper before it reaches the router, a
/// 431 without a body; hyper's own 414 (targets over 65534 bytes) lies beyond that bound.
pub const MAX_URI_BYTES: usize = 16 * 1024;

/// Limits of the bounded (non-streaming) routes.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests in progress at once; more are refused with 503 rather than queued.
    pub concurrency: usize,
    /// The longest a request may take.
    pub request_timeout: Duration,
    /// The longest a request body (at most 64 KiB) may take to arrive once the handler reads it:
    /// a client that sends it slowly would hold its place among the requests in progress.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { concurrency: 1024, request_timeout: Duration::from_secs(10), body_timeout: Duration::from_secs(3) }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "skillcat", description = "A skill catalog for LLM agents: catalog snapshots with ETags, a bounded prompt manifest, token-budgeted loads and change events. Errors are RFC 9457 problem details."),
    tags(
        (name = "skills", description = "The catalog and its skills"),
        (name = "files", description = "The files of a skill's folder, and its archive"),
        (name = "installers", description = "The well-known indexes installers read, of the skills whose names follow the agentskills.io rules"),
        (name = "catalog", description = "The manifest and change events"),
        (name = "operations", description = "Health, readiness, metrics and this document"),
        (name = "pages", description = "HTML pages for people: the catalog, a page per skill, the login; errors are HTML pages for browsers"),
    ),
    components(schemas(Problem))
)]
struct ApiDoc;

/// The routes answered within the limits, and those that are not: event streams (long-lived by
/// design) and the operations routes (a probe must not fail because the server is busy).
fn routers() -> (OpenApiRouter<Arc<App>>, OpenApiRouter<Arc<App>>) {
    let bounded = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(skills::router())
        .merge(search::router())
        .merge(files::router())
        .merge(wellknown::router())
        .merge(manifest::router())
        .merge(pages::router());
    (bounded, events::router().merge(ops::router()))
}

/// The OpenAPI document, as served at `/openapi.json` and checked in as `openapi/openapi.json`.
pub fn openapi_document() -> String {
    let (bounded, unbounded) = routers();
    let mut document = bounded.into_openapi();
    document.merge(unbounded.into_openapi());
    // axum's catch-all segment (`{*path}`, which may hold slashes) is a plain parameter in
    // OpenAPI, where a path parameter's value may hold anything percent-encoded.
    let paths = std::mem::take(&mut document.paths.paths);
    document.paths.paths = paths.into_iter().map(|(path, item)| (path.replace("{*", "{"), item)).collect();
    // A load's body is optional (an empty body takes the default), which the path macro cannot
    // say without also allowing a JSON `null` body.
    let load = document.paths.paths.get_mut("/skills/{name}/load").and_then(|item| item.post.as_mut());
    if let Some(body) = load.and_then(|operation| operation.request_body.as_mut()) {
        body.required = Some(utoipa::openapi::Required::False);
    }
    declare_bearer_auth(&mut document);
    declare_host_requirement(&mut document);
    document.to_pretty_json().expect("the document serializes") + "\n"
}

/// Bearer authentication: the scheme and its 401 answer on every operation but the probes. It is
/// optional (`{}` or bearer), since only a server with a token file requires it.
fn declare_bearer_auth(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder, header::Header};

    let scheme = SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer));
    document.components.get_or_insert_with(Default::default).add_security_scheme("bearer", scheme);
    document.security =
        Some(vec![SecurityRequirement::default(), SecurityRequirement::new("bearer", Vec::<String>::new())]);
    let unauthorized = ResponseBuilder::new()
        .description("Missing or invalid bearer token (only when the server runs with --token-file)")
        .header(
            "WWW-Authenticate",
            Header::new(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String)),
        )
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    for (path, item) in &mut document.paths.paths {
        let open = auth::OPEN_ROUTES.contains(&path.as_str());
        for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
            if open {
                operation.security = Some(Vec::new());
            } else {
                operation.responses.responses.insert("401".to_owned(), unauthorized.clone().into());
            }
        }
    }
}

/// The 400 every operation gives a request whose `Host` header is missing, repeated or invalid
/// (`require_one_host`); an operation that documents a 400 already says so in its description.
fn declare_host_requirement(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

    const WHY: &str = "a missing, repeated or invalid Host header";
    let bad_host = ResponseBuilder::new()
        .description(format!("Bad request: {WHY}"))
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build();
    for item in document.paths.paths.values_mut() {
        for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
            match operation.responses.responses.get_mut("400") {
                Some(RefOr::T(response)) => response.description = format!("{}, or {WHY}", response.description),
                Some(RefOr::Ref(_)) => {}
                None => {
                    operation.responses.responses.insert("400".to_owned(), bad_host.clone().into());
                }
            }
        }
    }
}

/// The whole application: every route with its layers (see [`gate`]): the gate around every
/// route, the limits around the bounded ones.
pub fn router(app: Arc<App>, limits: &Limits) -> Router {
    let (bounded, unbounded) = routers();
    Router::new()
        // MCP (`/mcp`) answers within the same limits: a stream it opens is the body of an
        // answer already given, which the limits do not hold on to.
        .merge(Router::from(bounded).merge(crate::mcp::router(&app)).layer(gate::LimitLayer::new(limits)))
        .merge(Router::from(unbounded))
        .fallback(|| async { ApiError::RouteNotFound })
        .layer(gate::GateLayer::new(Arc::clone(&app)))
        .with_state(app)
}

/// A 414 problem for a request target over [`MAX_URI_BYTES`].
fn check_uri_length(uri: &Uri) -> Result<(), ApiError> {
    let length = uri.authority().map_or(0, |authority| authority.as_str().len())
        + uri.path_and_query().map_or(0, |target| target.as_str().len());
    if length > MAX_URI_BYTES { Err(ApiError::UriTooLong) } else { Ok(()) }
}

/// RFC 9112 3.2: an HTTP/1.1 request without a `Host` header, any request with two, and a
/// `Host` that is not a host and optional port are refused with 400, before authentication.
fn check_host(version: Version, headers: &HeaderMap) -> Result<(), ApiError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        // HTTP/1.0 had no Host header.
        (None, _) if version <= Version::HTTP_10 => return Ok(()),
        (None, _) => return Err(ApiError::InvalidHost("an HTTP/1.1 request needs a Host header")),
        (Some(_), Some(_)) => return Err(ApiError::InvalidHost("a request may carry only one Host header")),
        (Some(host), None) => host.as_bytes(),
    };
    if is_host_and_port(host) {
        Ok(())
    } else {
        Err(ApiError::InvalidHost("the Host header is not a host and optional port"))
    }
}

/// `uri-host [ ":" port ]`: an authority without user information, whose port is digits. An
/// empty host cannot name an `http` target (RFC 9110 4.2.1).
fn is_host_and_port(value: &[u8]) -> bool {
    is_plain_host_and_port(value) || is_authority_host_and_port(value)
}

/// The usual `name[:port]`, an authority for certain: decided without making one (which copies
/// the value).
fn is_plain_host_and_port(value: &[u8]) -> bool {
    let (host, port) = match value.iter().rposition(|&byte| byte == b':') {
        Some(colon) => (&value[..colon], Some(&value[colon + 1..])),
        None => (value, None),
    };
    !host.is_empty()
        && host.iter().all(|&byte| byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-')
        && port.is_none_or(|port| !port.is_empty() && port.iter().all(u8::is_ascii_digit))
}

fn is_authority_host_and_port(value: &[u8]) -> bool {
    let Ok(authority) = axum::http::uri::Authority::try_from(value) else {
        return false;
    };
    let text = authority.as_str();
    // What follows the host: after an IPv6 literal's closing bracket, if there is one.
    let rest = text.rfind(']').map_or(text, |end| &text[end + 1..]);
    !authority.host().is_empty()
        && !text.contains('@')
        && rest.rsplit_once(':').is_none_or(|(_, port)| port.bytes().all(|byte| byte.is_ascii_digit()))
}

/// Errors made by the framework rather than a handler (405, a rejected body) get the same
/// problem body as every other error.
fn problem_for_bare_errors(response: Response) -> Response {
    let status = response.status();
    // A page's own error (the login form again after a wrong token) is an answer already, and a
    // JSON-RPC error (from `/mcp`) is an answer in its protocol's own shape.
    let is_answer = response.headers().get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.starts_with(b"application/problem+json")
            || value.starts_with(b"text/html")
            || value.starts_with(b"application/json")
    });
    if !(status.is_client_error() || status.is_server_error()) || is_answer {
        return response;
    }
    let error = match status {
        StatusCode::NOT_FOUND => ApiError::RouteNotFound,
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType,
        StatusCode::REQUEST_TIMEOUT => ApiError::Timeout,
        StatusCode::SERVICE_UNAVAILABLE => ApiError::Overloaded,
        status if status.is_client_error() => ApiError::BadRequest(format!("the request was refused ({status})")),
        _ => ApiError::Internal,
    };
    let mut problem = error.into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        problem.headers_mut().insert(header::ALLOW, allow.clone());
    }
    problem
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The shortcut for the usual `Host` never lets through what the full check refuses.
        #[test]
        fn plain_hosts_are_authorities(value in proptest::collection::vec(proptest::sample::select(
            &[b'a', b'Z', b'0', b'9', b'.', b'-', b':', b'@', b'[', b']', b'_', b' ', b'/', b'%', 0xff][..]), 0..12)) {
            if is_plain_host_and_port(&value) {
                proptest::prop_assert!(is_authority_host_and_port(&value), "{:?}", value);
            }
        }
    }

    #[test]
    fn hosts() {
        for host in ["x", "127.0.0.1:8080", "skills.example.com", "a-b.c:1", "x:", "[::1]:8080", "[::1]"] {
            assert!(is_host_and_port(host.as_bytes()), "{host}");
        }
        for host in ["", ":80", ":", "user@x", "x y", "x/skills", "x:port", "x:1:2", "[::1", "x:80a"] {
            assert!(!is_host_and_port(host.as_bytes()), "{host}");
        }
        assert!(is_plain_host_and_port(b"a-b.c:1"));
        assert!(!is_plain_host_and_port(b"x:"), "left to the full check");
    }
}
