//! Request parsing shared by the handlers: the skill name in the path, request bodies within
//! their bounds, conditional headers and content negotiation for prepared bodies.

use std::time::Duration;

use axum::body::{Bytes, HttpBody as _};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use headers::{HeaderMapExt as _, IfMatch, IfNoneMatch};
use http_body_util::BodyExt as _;
use skillcat_core::SkillName;

use super::error::ApiError;
use crate::catalog::PreparedBody;

/// The largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The `{name}` of a skill route, valid by construction.
#[derive(Debug)]
pub struct SkillPath(pub SkillName);

impl<S: Send + Sync> FromRequestParts<S> for SkillPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(name) = Path::<String>::from_request_parts(parts, state).await.map_err(|_| ApiError::InvalidName)?;
        SkillName::parse(name).map(SkillPath).map_err(|_| ApiError::InvalidName)
    }
}

/// How long a request body may take to arrive once a handler starts reading it, set on the
/// requests by the router ([`super::Limits::body_timeout`]).
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Duration);

/// A request body of at most [`MAX_BODY_BYTES`], read within the [`BodyDeadline`].
///
/// A body announced larger (`Content-Length`) is refused before it is read: hyper sends
/// `100 Continue` to a client that expects it only when the body is first read, so such a client
/// gets its 413 at once and never sends the body. A body that does not arrive in time is a 408,
/// which frees the request's place among those in progress long before the request timeout.
#[derive(Debug)]
pub struct BoundedBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for BoundedBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, Self::Rejection> {
        let deadline =
            request.extensions().get::<BodyDeadline>().map_or(super::Limits::default().body_timeout, |d| d.0);
        let body = request.into_body();
        if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
            return Err(ApiError::PayloadTooLarge);
        }
        let read = tokio::time::timeout(deadline, http_body_util::Limited::new(body, MAX_BODY_BYTES).collect());
        match read.await {
            Err(_) => Err(ApiError::BodyTimeout),
            Ok(Ok(collected)) => Ok(BoundedBody(collected.to_bytes())),
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(ApiError::PayloadTooLarge),
            Ok(Err(_)) => Err(ApiError::MalformedJson("the body could not be read".into())),
        }
    }
}

/// `If-None-Match` (weak comparison): whether the client's copy is current.
pub fn not_modified(headers: &HeaderMap, etag: &headers::ETag) -> bool {
    headers.typed_get::<IfNoneMatch>().is_some_and(|condition| !condition.precondition_passes(etag))
}

/// `If-Match` (strong comparison): whether the request may proceed. Tags that cannot be read
/// match nothing.
pub fn precondition_holds(headers: &HeaderMap, etag: &headers::ETag) -> bool {
    headers.typed_get::<IfMatch>().is_none_or(|condition| condition.precondition_passes(etag))
}

fn header_values<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> impl Iterator<Item = &'a str> {
    // A header that is not visible ASCII matches nothing rather than failing the request.
    headers.get_all(name).iter().filter_map(|value| value.to_str().ok())
}

/// Whether the client accepts gzip (`Accept-Encoding: gzip` without `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    header_values(headers, &header::ACCEPT_ENCODING).flat_map(|value| value.split(',')).any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let zero = parts.any(|parameter| {
            parameter.strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !zero
    })
}

/// A prepared body, honouring `If-None-Match` (304) and `Accept-Encoding`.
pub fn prepared(headers: &HeaderMap, body: &PreparedBody, content_type: &'static str) -> Response {
    let common = [
        (header::ETAG, body.etag_header.clone()),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::VARY, HeaderValue::from_static("accept-encoding")),
    ];
    if not_modified(headers, &body.tag) {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))];
    match body.gzip() {
        Some(gzip) if accepts_gzip(headers) => {
            let encoding = [(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"))];
            (common, content_type, encoding, gzip.clone()).into_response()
        }
        _ => (common, content_type, body.bytes.clone()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn conditional_comparisons() {
        let etag: headers::ETag = "\"3f2a\"".parse().unwrap();
        let none_match = |value: &str| not_modified(&headers(header::IF_NONE_MATCH, value), &etag);
        let matches = |value: &str| precondition_holds(&headers(header::IF_MATCH, value), &etag);
        assert!(none_match("\"3f2a\""));
        assert!(none_match("\"other\", W/\"3f2a\""));
        assert!(none_match("*"));
        assert!(!none_match("\"other\""));
        assert!(!none_match("3f2a"), "an unquoted tag is no tag");
        // An opaque tag may hold a comma.
        assert!(none_match("\"a,b\", \"3f2a\""));
        assert!(!none_match("\"a,\"3f2a\"\""));
        assert!(precondition_holds(&HeaderMap::new(), &etag));
        assert!(matches("\"3f2a\""));
        assert!(matches("*"));
        assert!(matches("\"x,y\", \"3f2a\""));
        assert!(!matches("\"a,b\""));
        assert!(!matches("W/\"3f2a\""), "If-Match compares strongly");
        assert!(!matches("\"other\""));
        assert!(!matches("not a tag"));
        // Several header lines are one list.
        let mut lines = headers(header::IF_MATCH, "\"other\"");
        lines.append(header::IF_MATCH, HeaderValue::from_static("\"3f2a\""));
        assert!(precondition_holds(&lines, &etag));
    }

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip(&headers(header::ACCEPT_ENCODING, "br, gzip;q=0.5")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "gzip;q=0")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
