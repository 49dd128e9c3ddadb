//! Every error the API answers, as RFC 9457 problem details, mapped to a status in one place.

use crate::catalog::CatalogError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

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
#[expect(dead_code, reason = "the types describe responses for the document; none is built")]
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
        InvalidName = 400, "Invalid skill name";
        UnknownSkill = 404, "No such skill";
        Changed = 409, "The skill changed or vanished; refresh discovery and retry";
        PreconditionFailed = 412, "An If-Match header does not name the skill's current tag";
        RepresentationPreconditionFailed = 412, "An If-Match header names no current representation's tag";
        RangeNotSatisfiable = 416, "The range is outside the file";
        FilesOverBound = 422, "The skill is over a bound on its files (512 files, 16 MiB); the detail says which";
        Unavailable = 503, "The catalog is unavailable: a source failed, or the first discovery is still running";
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("skill names are 1 to 64 ASCII letters, digits, underscores or hyphens")]
    InvalidName,
    #[error("no skill named '{0}' in the catalog")]
    SkillNotFound(String),
    /// A skill a well-known index does not publish: why.
    #[error("{0}")]
    SkillNotPublished(String),
    #[error("{0}")]
    FileNotFound(String),
    #[error("the range is outside the file of {0} bytes")]
    RangeNotSatisfiable(u64),
    /// The skill is over a bound on its files: its message names the bound.
    #[error("{0}")]
    FilesUnavailable(String),
    #[error("no such route")]
    RouteNotFound,
    /// A page of the catalog past its last: how many pages it has.
    #[error("the catalog has {0} pages of skills")]
    PageNotFound(usize),
    #[error("this route does not answer that method")]
    MethodNotAllowed,
    #[error("Skill '{0}' changed; refresh discovery and retry")]
    Changed(String),
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
    /// A source failed (for example a duplicate name inside one source): its message.
    #[error("{0}")]
    CatalogUnavailable(String),
    #[error("the catalog is not ready yet")]
    NotReady,
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

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        use ApiError::*;
        match self {
            InvalidName => (StatusCode::BAD_REQUEST, "invalid-name", "Invalid skill name"),
            SkillNotFound(_) | SkillNotPublished(_) => (StatusCode::NOT_FOUND, "skill-not-found", "Unknown skill"),
            FileNotFound(_) => (StatusCode::NOT_FOUND, "file-not-found", "Unknown file"),
            RangeNotSatisfiable(_) => {
                (StatusCode::RANGE_NOT_SATISFIABLE, "range-not-satisfiable", "Range not satisfiable")
            }
            FilesUnavailable(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "files-unavailable", "The skill's files are not served")
            }
            RouteNotFound => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            PageNotFound(_) => (StatusCode::NOT_FOUND, "page-not-found", "No such page"),
            MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed"),
            Changed(_) => (StatusCode::CONFLICT, "skill-changed", "Skill changed"),
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
            CatalogUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "catalog-unavailable", "Catalog unavailable"),
            NotReady => (StatusCode::SERVICE_UNAVAILABLE, "not-ready", "Not ready"),
            ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting-down", "Shutting down"),
            Overloaded => (StatusCode::SERVICE_UNAVAILABLE, "overloaded", "Overloaded"),
            TooManyStreams => (StatusCode::SERVICE_UNAVAILABLE, "too-many-streams", "Too many event streams"),
            TooManyStreamsForClient => {
                (StatusCode::TOO_MANY_REQUESTS, "too-many-streams-for-client", "Too many event streams for this client")
            }
            Timeout => (StatusCode::REQUEST_TIMEOUT, "timeout", "Request timeout"),
            MissingToken | InvalidToken => (StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized"),
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

impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::NotReady => ApiError::NotReady,
            CatalogError::Unavailable(message) => ApiError::CatalogUnavailable(message),
            CatalogError::UnknownSkill(name) => ApiError::SkillNotFound(name.to_string()),
            CatalogError::UnknownFile { .. } => ApiError::FileNotFound(error.to_string()),
            CatalogError::FilesUnavailable { .. } => ApiError::FilesUnavailable(error.to_string()),
            CatalogError::Changed(name) => ApiError::Changed(name.to_string()),
            CatalogError::Read { .. } => {
                tracing::error!(%error, "a source failed to read a skill");
                ApiError::Internal
            }
        }
    }
}

impl IntoResponse for ApiError {
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
            ApiError::NotReady
            | ApiError::Overloaded
            | ApiError::TooManyStreams
            | ApiError::TooManyStreamsForClient
            | ApiError::ShuttingDown
            | ApiError::CatalogUnavailable(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            // RFC 6750: the challenge, and why a presented token was refused.
            ApiError::MissingToken => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"skillcat\""));
            }
            ApiError::InvalidToken => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"skillcat\", error=\"invalid_token\""),
                );
            }
            // The connection is closed after these (RFC 9110 15.5.9 for 408): part of the body
            // may still be on its way, and the server stopped reading it.
            ApiError::Timeout | ApiError::BodyTimeout | ApiError::PayloadTooLarge => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            ApiError::RangeNotSatisfiable(length) => {
                let range = HeaderValue::from_str(&format!("bytes */{length}")).expect("a length is visible ASCII");
                headers.insert(header::CONTENT_RANGE, range);
            }
            _ => {}
        }
        response
    }
}

/// Where a browser's request went (its path and query), for [`html_for_browsers`]: `None` for
/// every other client. A browser is a request whose `Accept` prefers `text/html` to JSON.
pub(super) fn browser_target(request: &axum::extract::Request) -> Option<String> {
    prefers_html(request.headers())
        .then(|| request.uri().path_and_query().map_or("/", |target| target.as_str()).to_owned())
}

/// The error answer for browsers, in the gate of every route: a browser (see [`browser_target`])
/// gets every problem as an HTML page, with the same status and headers; every other client keeps
/// the problem document.
pub(super) fn html_for_browsers(target: Option<&str>, response: Response) -> Response {
    let (Some(path), Some(problem)) = (target, response.extensions().get::<Problem>()) else {
        return response;
    };
    let page = super::pages::error_page(problem, path);
    let (mut parts, _) = response.into_parts();
    let mut html = super::pages::html(page);
    parts.headers.remove(header::CONTENT_LENGTH);
    for (name, value) in html.headers_mut().drain().filter_map(|(name, value)| Some((name?, value))) {
        parts.headers.insert(name, value);
    }
    // An error page is never kept.
    parts.headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Response::from_parts(parts, html.into_body())
}

/// Whether the `Accept` header (RFC 9110 12.5.1) weighs `text/html` above zero and at least as
/// much as JSON (a browser's navigation: `text/html,...,*/*;q=0.8`). Wildcards count for neither.
fn prefers_html(headers: &axum::http::HeaderMap) -> bool {
    let (mut html, mut json) = (0, 0);
    let lines = headers.get_all(header::ACCEPT).iter().filter_map(|value| value.to_str().ok());
    for element in lines.flat_map(|line| line.split(',')) {
        let mut parts = element.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let weight = parts
            .find_map(|parameter| {
                let (name, value) = parameter.split_once('=')?;
                name.trim().eq_ignore_ascii_case("q").then(|| super::http::qvalue(value.trim()).unwrap_or(0))
            })
            .unwrap_or(1000);
        if media.eq_ignore_ascii_case("text/html") {
            html = html.max(weight);
        } else if media.eq_ignore_ascii_case("application/json")
            || media.eq_ignore_ascii_case("application/problem+json")
        {
            json = json.max(weight);
        }
    }
    html > 0 && html >= json
}

fn problem_status(problem: &Problem) -> StatusCode {
    StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
