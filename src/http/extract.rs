//! What handlers take from a request: the skill name and file path of the route, the headers
//! (moved, not copied), and a body within its bounds and deadline.

use std::time::Duration;

use axum::body::{Bytes, HttpBody as _};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use http_body_util::BodyExt as _;
use skillcat_core::SkillName;

use super::MAX_BODY_BYTES;
use super::error::HttpError;
use crate::catalog::CatalogError;

/// The `{name}` of a skill route, valid by construction.
#[derive(Debug)]
pub struct SkillPath(pub SkillName);

impl<S: Send + Sync> FromRequestParts<S> for SkillPath {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(name) = Path::<String>::from_request_parts(parts, state).await.map_err(|_| invalid_name())?;
        SkillPath::of(name)
    }
}

impl SkillPath {
    /// The route's `{name}`, percent-decoded: a skill name, or 400 `invalid-name`.
    pub fn of(name: String) -> Result<Self, HttpError> {
        SkillName::parse(name).map(SkillPath).map_err(|_| invalid_name())
    }
}

fn invalid_name() -> HttpError {
    HttpError::Catalog(CatalogError::InvalidName)
}

/// The request's headers, moved out of the request: axum's `HeaderMap` extractor copies the
/// whole map for every request. A handler takes it after every other extractor that reads
/// headers (none of ours does; `BoundedBody` reads the body and its length only).
#[derive(Debug)]
pub struct Headers(pub HeaderMap);

impl<S: Send + Sync> FromRequestParts<S> for Headers {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Headers(std::mem::take(&mut parts.headers)))
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
    type Rejection = HttpError;

    async fn from_request(request: Request, _: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        bounded_body(&parts.extensions, body).await.map(BoundedBody)
    }
}

/// The request body `body` of at most [`MAX_BODY_BYTES`], read within the request's
/// [`BodyDeadline`] (in `extensions`), as [`BoundedBody`] reads it.
pub async fn bounded_body(extensions: &axum::http::Extensions, body: axum::body::Body) -> Result<Bytes, HttpError> {
    let deadline = extensions.get::<BodyDeadline>().map_or(super::Limits::default().body_timeout, |d| d.0);
    if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
        return Err(HttpError::PayloadTooLarge);
    }
    let read = tokio::time::timeout(deadline, http_body_util::Limited::new(body, MAX_BODY_BYTES).collect());
    match read.await {
        Err(_) => Err(HttpError::BodyTimeout),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(HttpError::PayloadTooLarge),
        Ok(Err(_)) => Err(HttpError::MalformedJson("the body could not be read".into())),
    }
}

/// The `{name}` and `{*path}` of a route to a file, percent-decoded once (by the router); a path
/// that is not UTF-8 then is a 400.
pub async fn name_and_path<S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<(String, String), HttpError> {
    let Path(pair) = Path::<(String, String)>::from_request_parts(parts, state)
        .await
        .map_err(|_| HttpError::BadRequest("the file path is not valid percent-encoded UTF-8".into()))?;
    Ok(pair)
}
