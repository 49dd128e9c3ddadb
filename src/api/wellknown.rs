//! The well-known indexes installers read: the agentskills.io discovery index (format 0.2.0) and
//! the older index that lists each skill's files, with those files beneath it.
//!
//! Both publish only the skills whose names follow the agentskills.io naming rule and whose
//! files are listed (`crate::catalog` says which and logs the others). The discovery index points
//! at the routes every client uses (`/skills/{name}/files/SKILL.md`, `/skills/{name}/archive`);
//! the older index's files are served here, by the files route's own code.

use std::sync::Arc;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use skillcat_core::SkillName;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem, responses};
use super::files::{name_and_path, serve_file};
use super::http::{Headers, prepared};
use crate::app::App;
use crate::catalog::{DiscoveryIndex, LegacyIndex, in_legacy_index};
use crate::spec::SpecName;

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(discovery_index)).routes(routes!(legacy_index)).routes(routes!(legacy_file))
}

/// The agentskills.io discovery index (format 0.2.0): each skill with the URL of its artifact,
/// its `SKILL.md` alone or the zip of its folder, and the digest of exactly those bytes.
#[utoipa::path(get, path = "/.well-known/agent-skills/index.json", tag = "installers",
    params(
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The index; made once per catalog version (the first one finds every archive's digest)", body = DiscoveryIndex,
            headers(("ETag" = String, description = "Strong tag of the index; the gzip representation has its own"))),
        (status = 304, description = "The client's copy is current"),
        responses::Changed,
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn discovery_index(State(app): State<Arc<App>>, Headers(headers): Headers) -> Result<Response, ApiError> {
    let index = app.catalog.discovery_index(app.catalog.snapshot()).await?;
    prepared(&headers, &index, "application/json")
}

/// The older well-known index: each skill with the paths of its files, which are served at
/// `/.well-known/skills/{name}/{path}`.
#[utoipa::path(get, path = "/.well-known/skills/index.json", tag = "installers",
    params(
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "The index", body = LegacyIndex,
            headers(("ETag" = String, description = "Strong tag of the index; the gzip representation has its own"))),
        (status = 304, description = "The client's copy is current"),
        responses::RepresentationPreconditionFailed,
        responses::Unavailable,
    ))]
async fn legacy_index(State(app): State<Arc<App>>, Headers(headers): Headers) -> Result<Response, ApiError> {
    let index = app.catalog.legacy_index(app.catalog.snapshot()).await?;
    prepared(&headers, &index, "application/json")
}

/// The `{name}` and `{*path}` of the older index's file route. A name that is not an
/// agentskills.io name cannot be in the index: 404, as for any skill it leaves out.
struct LegacyFileRoute {
    name: SkillName,
    path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for LegacyFileRoute {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (name, path) = name_and_path(parts, state).await?;
        let not_published = || ApiError::SkillNotPublished(format!("no skill named {name:?} in the well-known index"));
        let spec_name = SpecName::parse(&name).map_err(|_| not_published())?;
        let name = SkillName::parse(spec_name.as_str()).map_err(|_| not_published())?;
        Ok(LegacyFileRoute { name, path })
    }
}

/// A file of a skill of the older index: the same bytes, checks and headers as
/// `GET /skills/{name}/files/{path}`.
#[utoipa::path(get, path = "/.well-known/skills/{name}/{*path}", tag = "installers",
    params(
        ("name" = String, Path, description = "The skill's name, as the index lists it", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$"),
        ("path" = String, Path, description = "One of the paths the index lists for it"),
        ("If-None-Match" = Option<String>, Header, description = "The file's digest as a tag; 304 if it is current"),
        ("Range" = Option<String>, Header, description = "One byte range (`bytes=0-99`); more than one is answered whole"),
    ),
    responses(
        (status = 200, description = "The file, typed from its extension (text as UTF-8; application/octet-stream when unknown)", body = Vec<u8>, content_type = "*/*",
            headers(("ETag" = String, description = "The file's digest, quoted: \"sha256:<hex>\""))),
        (status = 206, description = "The requested range", body = Vec<u8>, content_type = "*/*"),
        (status = 304, description = "The client's copy is current"),
        (status = 400, description = "A path that is not valid UTF-8", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill in the index, or no such file in its listing", body = Problem, content_type = "application/problem+json"),
        responses::Changed,
        responses::PreconditionFailed,
        responses::RangeNotSatisfiable,
        responses::Unavailable,
    ))]
async fn legacy_file(
    State(app): State<Arc<App>>,
    route: LegacyFileRoute,
    Headers(headers): Headers,
) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let skill = snapshot.ready()?.skill(&route.name)?;
    in_legacy_index(skill).map_err(|why| {
        ApiError::SkillNotPublished(format!("skill '{}' is not in the well-known index: {why}", route.name))
    })?;
    serve_file(&app, skill, &route.path, &headers).await
}
