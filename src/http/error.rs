//! Every error an HTTP answer carries, as RFC 9457 problem details, mapped to a status in one
//! place: the catalog's errors ([`CatalogError`]) and what HTTP itself refuses (a bad head, a
//! missing token, a body too large, a server at capacity). The REST routes, the pages (whose
//! errors browsers get as pages, made from the same problem), the well-known routes and MCP's
//! transport all answer their errors through it.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::catalog::CatalogError;

/// An RFC 9457 problem: `application/problem+json`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// Identifies the kind of problem: `urn:skillcat:problem:<kind>`.
    #[serde(rename = "type")]
    #[schema(example = "urn:skillcat:problem:skill-not-found")]
    pub kind: String,
    pub title: &'static str,
    pub status: u16,
    pub detail: String,
}

/// The problem answers several operations share, declared once for the OpenAPI document.
pub mod responses {
    use super::Problem;

    macro_rules! problems {
        ($($name:ident = $status:literal, $description:literal;)*) => {$(
            #[derive(utoipa::IntoResponses)]
            #[response(status = $status, description = $description, content_type = "application/problem+json")]
            pub struct $name(pub Problem);
        )*};
    }

    problems! {
        InvalidName = 400, "Invalid skill name (`invalid-name`); with `version`, a malformed version (`invalid-version`) or a commit prefix of several commits (`ambiguous-version`)";
        UnknownSkill = 404, "No such skill (`skill-not-found`); with `version`, no such version of it (`version-not-found`: never the current version instead)";
        Changed = 409, "The skill changed or vanished; refresh discovery and retry";
        PreconditionFailed = 412, "An If-Match header does not name the skill's current tag";
        RepresentationPreconditionFailed = 412, "An If-Match header names no current representation's tag";
        RangeNotSatisfiable = 416, "The range is outside the file";
        FilesOverBound = 422, "The skill is over a bound on its files (512 files, 16 MiB); the detail says which";
        Unavailable = 503, "The catalog is unavailable: a source failed, or the first discovery is still running";
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// What the catalog could not give (its [`CatalogError::Read`]s become [`Internal`](Self::Internal)).
    #[error(transparent)]
    Catalog(CatalogError),
    /// A skill a well-known index does not publish: why.
    #[error("{0}")]
    SkillNotPublished(String),
    #[error("the range is outside the file of {0} bytes")]
    RangeNotSatisfiable(u64),
    #[error("no such route")]
    RouteNotFound,
    /// A `cursor` of a list that changed since it was given (or that was never given).
    #[error("the list changed since this cursor was given, or it was never given: list again without a cursor")]
    StaleCursor,
    /// A page of the catalog past its last: how many pages it has.
    #[error("the catalog has {0} pages of skills")]
    PageNotFound(usize),
    #[error("this route does not answer that method")]
    MethodNotAllowed,
    #[error("the skill's current etag does not match If-Match")]
    PreconditionFailed,
    #[error("If-Match names no current representation of this resource")]
    NoMatchingRepresentation,
    #[error("the request body is not valid JSON: {0}")]
    MalformedJson(String),
    #[error("{0}")]
    BadRequest(String),
    /// A search's query string: what is wrong with it.
    #[error("{0}")]
    InvalidQuery(String),
    #[error("the request body must be application/json")]
    UnsupportedMediaType,
    #[error("the request body is larger than 65536 bytes")]
    PayloadTooLarge,
    #[error("the request target is longer than {} bytes", super::MAX_URI_BYTES)]
    UriTooLong,
    #[error("the request body did not arrive in time")]
    BodyTimeout,
    /// RFC 9112 3.2: what is wrong with the request's `Host` header.
    #[error("{0}")]
    InvalidHost(&'static str),
    #[error("{0}")]
    InvalidBody(String),
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the server is at capacity; retry shortly")]
    Overloaded,
    #[error("every event stream slot is taken; retry shortly")]
    TooManyStreams,
    #[error("this client has as many event streams open as it may; close one first")]
    TooManyStreamsForClient,
    #[error("the request took too long")]
    Timeout,
    #[error("this route requires an Authorization: Bearer token")]
    MissingToken,
    #[error("the bearer token is not valid")]
    InvalidToken,
    /// A webhook without a valid signature, GitLab token or bearer secret.
    #[error("the webhook carries no valid signature (X-Hub-Signature-256), X-Gitlab-Token or bearer secret")]
    BadSignature,
    /// This client has too many answers to wrong tokens waiting: how many seconds to wait.
    #[error("too many wrong tokens from this client at once; retry in {0} s")]
    TooManyFailures(u64),
    /// A login or logout form that another site's page made a browser send.
    #[error("this form is accepted only from this server's own pages")]
    CrossSite,
    /// A request to `/mcp` the MCP transport refused before any JSON-RPC answer (a missing or
    /// unknown session, a foreign `Host`, what it cannot accept): its 4xx status and reason.
    #[error("{1}")]
    McpRefused(StatusCode, String),
    /// Logged where it happens; the client gets a generic text.
    #[error("internal error")]
    Internal,
}

impl HttpError {
    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        use HttpError::*;
        match self {
            Catalog(error) => catalog_parts(error),
            SkillNotPublished(_) => (StatusCode::NOT_FOUND, "skill-not-found", "Unknown skill"),
            RangeNotSatisfiable(_) => {
                (StatusCode::RANGE_NOT_SATISFIABLE, "range-not-satisfiable", "Range not satisfiable")
            }
            RouteNotFound => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            StaleCursor => (StatusCode::CONFLICT, "stale-cursor", "Stale cursor"),
            PageNotFound(_) => (StatusCode::NOT_FOUND, "page-not-found", "No such page"),
            MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed"),
            PreconditionFailed | NoMatchingRepresentation => {
                (StatusCode::PRECONDITION_FAILED, "precondition-failed", "Precondition failed")
            }
            MalformedJson(_) => (StatusCode::BAD_REQUEST, "malformed-json", "Malformed JSON"),
            BadRequest(_) => (StatusCode::BAD_REQUEST, "bad-request", "Bad request"),
            InvalidQuery(_) => (StatusCode::BAD_REQUEST, "invalid-query", "Invalid query"),
            UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type", "Unsupported media type")
            }
            PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", "Payload too large"),
            UriTooLong => (StatusCode::URI_TOO_LONG, "uri-too-long", "URI too long"),
            BodyTimeout => (StatusCode::REQUEST_TIMEOUT, "body-timeout", "Request body timeout"),
            InvalidHost(_) => (StatusCode::BAD_REQUEST, "invalid-host", "Invalid Host header"),
            InvalidBody(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid-body", "Invalid request body"),
            ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting-down", "Shutting down"),
            Overloaded => (StatusCode::SERVICE_UNAVAILABLE, "overloaded", "Overloaded"),
            TooManyStreams => (StatusCode::SERVICE_UNAVAILABLE, "too-many-streams", "Too many event streams"),
            TooManyStreamsForClient => {
                (StatusCode::TOO_MANY_REQUESTS, "too-many-streams-for-client", "Too many event streams for this client")
            }
            Timeout => (StatusCode::REQUEST_TIMEOUT, "timeout", "Request timeout"),
            MissingToken | InvalidToken => (StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized"),
            BadSignature => (StatusCode::UNAUTHORIZED, "bad-signature", "Bad webhook signature"),
            TooManyFailures(_) => (StatusCode::TOO_MANY_REQUESTS, "too-many-failures", "Too many wrong tokens"),
            CrossSite => (StatusCode::FORBIDDEN, "cross-site", "Cross-site request refused"),
            McpRefused(status, _) => (*status, "mcp-refused", "MCP request refused"),
            Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal error"),
        }
    }

    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    pub fn problem(&self) -> Problem {
        let (status, kind, title) = self.parts();
        Problem {
            kind: format!("urn:skillcat:problem:{kind}"),
            title,
            status: status.as_u16(),
            detail: self.to_string(),
        }
    }
}

/// The status, kind and title of each of the catalog's errors.
fn catalog_parts(error: &CatalogError) -> (StatusCode, &'static str, &'static str) {
    match error {
        CatalogError::InvalidName => (StatusCode::BAD_REQUEST, "invalid-name", "Invalid skill name"),
        CatalogError::UnknownSkill(_) => (StatusCode::NOT_FOUND, "skill-not-found", "Unknown skill"),
        CatalogError::UnknownFile { .. } => (StatusCode::NOT_FOUND, "file-not-found", "Unknown file"),
        CatalogError::FilesUnavailable { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, "files-unavailable", "The skill's files are not served")
        }
        CatalogError::Changed(_) => (StatusCode::CONFLICT, "skill-changed", "Skill changed"),
        CatalogError::InvalidVersion(_) => (StatusCode::BAD_REQUEST, "invalid-version", "Invalid version"),
        CatalogError::AmbiguousVersion { .. } => (StatusCode::BAD_REQUEST, "ambiguous-version", "Ambiguous version"),
        CatalogError::VersionNotFound { .. } => (StatusCode::NOT_FOUND, "version-not-found", "Version not found"),
        CatalogError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "catalog-unavailable", "Catalog unavailable"),
        CatalogError::NotReady => (StatusCode::SERVICE_UNAVAILABLE, "not-ready", "Not ready"),
        // Never answered as such: see `From<CatalogError>`.
        CatalogError::Read { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal error"),
    }
}

impl From<CatalogError> for HttpError {
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::Read { .. } => {
                tracing::error!(%error, "a source failed to read a skill");
                HttpError::Internal
            }
            error => HttpError::Catalog(error),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let body = serde_json::to_vec(&problem).expect("problems serialize");
        let mut response = (problem_status(&problem), body).into_response();
        // For `html_for_browsers`, which may answer it as a page.
        response.extensions_mut().insert(problem);
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        match self {
            HttpError::Catalog(CatalogError::NotReady | CatalogError::Unavailable(_))
            | HttpError::Overloaded
            | HttpError::TooManyStreams
            | HttpError::TooManyStreamsForClient
            | HttpError::ShuttingDown => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            // RFC 6750: the challenge, and why a presented token was refused.
            HttpError::MissingToken => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"skillcat\""));
            }
            HttpError::InvalidToken => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"skillcat\", error=\"invalid_token\""),
                );
            }
            // The connection is closed after these (RFC 9110 15.5.9 for 408): part of the body
            // may still be on its way, and the server stopped reading it.
            HttpError::Timeout | HttpError::BodyTimeout | HttpError::PayloadTooLarge => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            HttpError::TooManyFailures(seconds) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            HttpError::RangeNotSatisfiable(length) => {
                let range = HeaderValue::from_str(&format!("bytes */{length}")).expect("a length is visible ASCII");
                headers.insert(header::CONTENT_RANGE, range);
            }
            _ => {}
        }
        response
    }
}

/// Errors made by the framework rather than a handler (405, a rejected body) get the same
/// problem body as every other error.
pub fn problem_for_bare_errors(response: Response) -> Response {
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
        StatusCode::NOT_FOUND => HttpError::RouteNotFound,
        StatusCode::METHOD_NOT_ALLOWED => HttpError::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => HttpError::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => HttpError::UnsupportedMediaType,
        StatusCode::REQUEST_TIMEOUT => HttpError::Timeout,
        StatusCode::SERVICE_UNAVAILABLE => HttpError::Overloaded,
        status if status.is_client_error() => HttpError::BadRequest(format!("the request was refused ({status})")),
        _ => HttpError::Internal,
    };
    let mut problem = error.into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        problem.headers_mut().insert(header::ALLOW, allow.clone());
    }
    problem
}

fn problem_status(problem: &Problem) -> StatusCode {
    StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
