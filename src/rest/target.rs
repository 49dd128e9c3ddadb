//! The skill a request of `/skills/{name}/…` reads: the current one, or with `?version=V` the
//! skill as it was at that version. A pinned answer never changes, so it is tagged with the
//! version (`"sha256:…"`; the gzip form `"sha256:…-gzip"`) and may be cached for a year; its
//! conditions (`If-Match`, `If-None-Match`, `If-Range`) are answered against that tag.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use skillcat_core::{Digest, SkillName};

use crate::app::App;
use crate::catalog::{CatalogError, CatalogSkill};
use crate::http::{HttpError, not_modified, precondition_holds};
use crate::observability::Surface;

/// Pinned answers are fresh this long (a year, the most RFC 9111 caches are asked to keep).
const IMMUTABLE: &str = "max-age=31536000, immutable";

/// `?version=`: absent, or the version asked for.
#[derive(Debug, Deserialize)]
pub struct VersionQuery {
    pub version: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for VersionQuery {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Query(query) = Query::<VersionQuery>::try_from_uri(&parts.uri)
            .map_err(|rejection| HttpError::InvalidQuery(rejection.body_text()))?;
        Ok(query)
    }
}

/// The skill a request reads, the headers its read answers (a pinned read's conditions taken
/// out: they were answered against the version), and the version when pinned.
pub struct Target {
    pub skill: Arc<CatalogSkill>,
    pub headers: HeaderMap,
    pin: Option<Pin>,
}

struct Pin {
    tag: HeaderValue,
    gzip_tag: HeaderValue,
    cache_control: HeaderValue,
}

impl Target {
    /// The skill `name` of the current catalog, or at `query`'s version; `Err(304)` when the
    /// client's copy of that version is current.
    pub async fn of(
        app: &App,
        name: &SkillName,
        query: VersionQuery,
        headers: HeaderMap,
    ) -> Result<Result<Self, Response>, HttpError> {
        let Some(version) = query.version else {
            let snapshot = app.catalog.snapshot();
            let skill = snapshot.ready()?.get(name).ok_or_else(|| CatalogError::UnknownSkill(name.clone()))?;
            let skill = Arc::clone(skill);
            return Ok(Ok(Target { skill, headers, pin: None }));
        };
        let skill = app.catalog.pinned(name, &version).await?;
        let version = skill.entry.version.expect("a pinned skill has a version");
        let pin = Pin::new(&version, app.tokens.is_some());
        if let Err(unmodified) = pin.conditions(&headers)? {
            return Ok(Err(unmodified));
        }
        let mut headers = headers;
        for condition in [header::IF_MATCH, header::IF_NONE_MATCH] {
            headers.remove(condition);
        }
        if headers.get(header::IF_RANGE).is_some_and(|value| *value == pin.tag) {
            headers.remove(header::IF_RANGE);
        }
        Ok(Ok(Target { skill, headers, pin: Some(pin) }))
    }

    /// [`Target::answer`], counting a load of the skill through `surface` when the answer carries
    /// its bytes (200, or 206 for a range).
    pub fn loaded(
        &self,
        app: &App,
        surface: Surface,
        response: Result<Response, HttpError>,
    ) -> Result<Response, HttpError> {
        let response = self.answer(response)?;
        if matches!(response.status(), StatusCode::OK | StatusCode::PARTIAL_CONTENT) {
            app.metrics.skill_loaded(self.skill.skill.name().as_str(), surface);
        }
        Ok(response)
    }

    /// The read's answer, tagged and made cacheable when pinned.
    pub fn answer(&self, response: Result<Response, HttpError>) -> Result<Response, HttpError> {
        let mut response = response?;
        if let Some(pin) = &self.pin
            && response.status().is_success()
        {
            let gzip = response.headers().get(header::CONTENT_ENCODING).is_some_and(|coding| coding == "gzip");
            let headers = response.headers_mut();
            headers.insert(header::ETAG, if gzip { pin.gzip_tag.clone() } else { pin.tag.clone() });
            headers.insert(header::CACHE_CONTROL, pin.cache_control.clone());
        }
        Ok(response)
    }
}

impl Pin {
    fn new(version: &Digest, private: bool) -> Self {
        let tag = |suffix: &str| HeaderValue::from_str(&format!("\"{version}{suffix}\"")).expect("digests are ASCII");
        let scope = if private { "private" } else { "public" };
        Pin {
            tag: tag(""),
            gzip_tag: tag("-gzip"),
            cache_control: HeaderValue::from_str(&format!("{scope}, {IMMUTABLE}")).expect("ASCII"),
        }
    }

    /// `If-Match` naming neither form of the version is 412; `If-None-Match` naming one is 304.
    fn conditions(&self, headers: &HeaderMap) -> Result<Result<(), Response>, HttpError> {
        let tags = [&self.tag, &self.gzip_tag];
        if headers.contains_key(header::IF_MATCH) && !tags.iter().any(|tag| precondition_holds(headers, tag)) {
            return Err(HttpError::PreconditionFailed);
        }
        if let Some(held) = tags.into_iter().find(|tag| not_modified(headers, tag)) {
            let headers = [(header::ETAG, held.clone()), (header::CACHE_CONTROL, self.cache_control.clone())];
            return Ok(Err((StatusCode::NOT_MODIFIED, headers).into_response()));
        }
        Ok(Ok(()))
    }
}
