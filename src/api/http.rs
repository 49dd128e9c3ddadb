//! Request parsing shared by the handlers: the skill name in the path, conditional headers and
//! content negotiation for prepared bodies.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use skillcat_core::SkillName;

use super::error::ApiError;
use crate::catalog::{Body, ETag};

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

/// The entity tags of an `If-Match` or `If-None-Match` header: `None` for `*`.
fn tags(value: &str) -> Option<Vec<(bool, &str)>> {
    if value.trim() == "*" {
        return None;
    }
    Some(
        value
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(|tag| match tag.strip_prefix("W/") {
                Some(opaque) => (true, opaque),
                None => (false, tag),
            })
            .collect(),
    )
}

fn header_values<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Vec<&'a str> {
    // A header that is not visible ASCII matches nothing rather than failing the request.
    headers.get_all(name).iter().filter_map(|value| value.to_str().ok()).collect()
}

/// `If-None-Match` with weak comparison: whether the client's copy is current.
pub fn not_modified(headers: &HeaderMap, etag: &ETag) -> bool {
    header_values(headers, &header::IF_NONE_MATCH).iter().any(|value| match tags(value) {
        None => true,
        Some(tags) => tags.iter().any(|(_, opaque)| *opaque == etag.as_str()),
    })
}

/// `If-Match` with strong comparison: whether the request may proceed.
pub fn precondition_holds(headers: &HeaderMap, etag: &ETag) -> bool {
    let values = header_values(headers, &header::IF_MATCH);
    if headers.get(header::IF_MATCH).is_none() {
        return true;
    }
    values.iter().any(|value| match tags(value) {
        None => true,
        Some(tags) => tags.iter().any(|(weak, opaque)| !weak && *opaque == etag.as_str()),
    })
}

/// Whether the client accepts gzip (`Accept-Encoding: gzip` without `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    header_values(headers, &header::ACCEPT_ENCODING).iter().flat_map(|value| value.split(',')).any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let zero = parts.any(|parameter| {
            parameter.strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !zero
    })
}

/// A prepared body, honouring `If-None-Match` (304) and `Accept-Encoding`.
pub fn prepared(headers: &HeaderMap, body: &Body, content_type: &'static str) -> Response {
    let common = [
        (header::ETAG, body.etag_header.clone()),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::VARY, HeaderValue::from_static("accept-encoding")),
    ];
    if not_modified(headers, &body.etag) {
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
        let etag = ETag::of(&[b"x"]);
        let tag = etag.as_str().to_owned();
        assert!(not_modified(&headers(header::IF_NONE_MATCH, &tag), &etag));
        assert!(not_modified(&headers(header::IF_NONE_MATCH, &format!("\"other\", W/{tag}")), &etag));
        assert!(not_modified(&headers(header::IF_NONE_MATCH, "*"), &etag));
        assert!(!not_modified(&headers(header::IF_NONE_MATCH, "\"other\""), &etag));
        assert!(precondition_holds(&HeaderMap::new(), &etag));
        assert!(precondition_holds(&headers(header::IF_MATCH, &tag), &etag));
        assert!(precondition_holds(&headers(header::IF_MATCH, "*"), &etag));
        assert!(!precondition_holds(&headers(header::IF_MATCH, &format!("W/{tag}")), &etag));
        assert!(!precondition_holds(&headers(header::IF_MATCH, "\"other\""), &etag));
    }

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip(&headers(header::ACCEPT_ENCODING, "br, gzip;q=0.5")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "gzip;q=0")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
