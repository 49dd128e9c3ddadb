//! The well-known indexes installers read: the agentskills.io discovery index (format 0.2.0,
//! `/.well-known/agent-skills/index.json`) and the older index that lists each skill's files
//! (`/.well-known/skills/index.json`), with those files beneath it.
//!
//! Both publish what the catalog's publication rule publishes (`crate::catalog::publish`, which
//! also logs what it leaves out); the older index also leaves out a skill whose paths its clients
//! cannot append to a URL. The discovery index points at the routes every client uses
//! (`/skills/{name}/files/SKILL.md`, `/skills/{name}/archive`); the older index's files are
//! answered as every file is (`crate::http::serve_file`). Each index body is made once per catalog
//! version and kept in its views.

use std::sync::Arc;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::Serialize;
use skillcat_core::{Digest, SkillName, SpecName};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::catalog::{
    CatalogError, CatalogSkill, ETag, LiveCatalog, PreparedBody, Published, Snapshot, blocking, made_in_task,
};
use crate::http::{Headers, HttpError, Problem, name_and_path, prepared, responses, serve_file};
use crate::observability::Surface;

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
async fn discovery_index(State(app): State<Arc<App>>, Headers(headers): Headers) -> Result<Response, HttpError> {
    let index = discovery_body(&app.catalog, &app.catalog.snapshot()).await?;
    prepared(&headers, &index.0, "application/json")
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
async fn legacy_index(State(app): State<Arc<App>>, Headers(headers): Headers) -> Result<Response, HttpError> {
    let index = legacy_body(&app.catalog, &app.catalog.snapshot()).await?;
    prepared(&headers, &index.0, "application/json")
}

/// The `{name}` and `{*path}` of the older index's file route. A name that is not an
/// agentskills.io name cannot be in the index: 404, as for any skill it leaves out.
struct LegacyFileRoute {
    name: SkillName,
    path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for LegacyFileRoute {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (name, path) = name_and_path(parts, state).await?;
        let not_published = || HttpError::SkillNotPublished(format!("no skill named {name:?} in the well-known index"));
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
) -> Result<Response, HttpError> {
    let snapshot = app.catalog.snapshot();
    let skill = snapshot.ready()?.skill(&route.name)?;
    let not_published =
        |why: &dyn std::fmt::Display| format!("skill '{}' is not in the well-known index: {why}", route.name);
    match app.catalog.publication(skill).await {
        Ok(published) => {
            published.legacy.as_ref().map_err(|why| HttpError::SkillNotPublished(not_published(why)))?;
        }
        Err(why) => return Err(HttpError::SkillNotPublished(not_published(&why))),
    }
    let response = serve_file(&app.catalog, skill, &route.path, &headers).await?;
    // One download of `SKILL.md` per install through this index.
    if route.path == skillcat_core::SKILL_MD && response.status() == axum::http::StatusCode::OK {
        app.metrics.skill_loaded(skill.skill.name().as_str(), Surface::WellKnown);
    }
    Ok(response)
}

/// The `$schema` of the discovery index: the format 0.2.0 of agentskills.io's well-known URI
/// page, which clients match exactly.
pub const DISCOVERY_SCHEMA: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";

/// What the `url` of a discovery index entry gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactType {
    /// The skill's `SKILL.md`, which is all its folder holds.
    SkillMd,
    /// The zip of the skill's folder, `SKILL.md` at its root.
    Archive,
}

/// One entry of the discovery index.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DiscoveryEntry {
    #[schema(example = "pdf-processing", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$", max_length = 64)]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ArtifactType,
    pub description: String,
    /// Path-absolute, resolved against the index's URL: the files route for a `skill-md`
    /// entry, the archive route for an `archive` one.
    #[schema(example = "/skills/pdf-processing/archive")]
    pub url: String,
    /// The SHA-256 of exactly the bytes at `url`.
    #[schema(
        value_type = String,
        pattern = "^sha256:[0-9a-f]{64}$",
        example = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    )]
    pub digest: Digest,
}

impl DiscoveryEntry {
    fn of(skill: &CatalogSkill, published: &Published, archive: Option<Digest>) -> Self {
        let (kind, url, digest) = match archive {
            None => (
                ArtifactType::SkillMd,
                format!("/skills/{}/files/{}", published.name, skillcat_core::SKILL_MD),
                published.skill_md.digest,
            ),
            Some(digest) => (ArtifactType::Archive, format!("/skills/{}/archive", published.name), digest),
        };
        DiscoveryEntry {
            name: published.name.to_string(),
            kind,
            description: skill.skill.description().to_owned(),
            url,
            digest,
        }
    }
}

/// The body of `GET /.well-known/agent-skills/index.json`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DiscoveryIndex {
    /// Always `https://schemas.agentskills.io/discovery/0.2.0/schema.json`, which clients match.
    #[serde(rename = "$schema")]
    #[schema(example = "https://schemas.agentskills.io/discovery/0.2.0/schema.json")]
    pub schema: &'static str,
    /// In name order.
    pub skills: Vec<DiscoveryEntry>,
}

/// One entry of the older index.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LegacyEntry<'a> {
    #[schema(value_type = String, example = "pdf-processing", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$", max_length = 64)]
    pub name: &'a str,
    #[schema(value_type = String)]
    pub description: &'a str,
    /// Every listed file, `SKILL.md` included, in code-point order; each is served at
    /// `/.well-known/skills/{name}/{path}`.
    #[schema(value_type = Vec<String>, example = json!(["SKILL.md", "scripts/extract.py"]))]
    pub files: Vec<&'a str>,
}

/// The body of `GET /.well-known/skills/index.json`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LegacyIndex<'a> {
    /// In name order.
    #[schema(value_type = Vec<LegacyEntry>)]
    pub skills: Vec<LegacyEntry<'a>>,
}

/// The discovery index of a catalog version, as kept in its views.
struct DiscoveryBody(PreparedBody);

/// The older index of a catalog version, as kept in its views.
struct LegacyBody(PreparedBody);

/// The discovery index of `snapshot`, made once per catalog version. Making it finds the archive
/// digest of every published skill that has more than its `SKILL.md` (each once per skill
/// version, so a new catalog version costs only its changed skills).
async fn discovery_body(live: &LiveCatalog, snapshot: &Arc<Snapshot>) -> Result<Arc<DiscoveryBody>, CatalogError> {
    let cell = snapshot.ready()?.views.of::<DiscoveryBody>();
    let (live, snapshot) = (live.clone(), Arc::clone(snapshot));
    made_in_task(cell, async move {
        let published = live.published(&snapshot).await?;
        // Archives are made on the blocking pool, compressing: one per core at a time.
        let parallel = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let entries: Vec<Option<DiscoveryEntry>> = futures_util::stream::iter(published.skills.iter().cloned())
            .map(|(skill, published)| {
                let live = live.clone();
                async move { discovery_entry(&live, &skill, &published).await }
            })
            .buffered(parallel)
            .try_collect()
            .await?;
        let skills = entries.into_iter().flatten().collect();
        blocking(move || DiscoveryBody(prepare(&DiscoveryIndex { schema: DISCOVERY_SCHEMA, skills }))).await
    })
    .await
}

/// The discovery index's entry for a published skill. A skill whose archive cannot be read (an
/// I/O error) is left out of this catalog version's index, and logged; one that changed fails the
/// index, which the next request makes again after the rescan this asked for.
async fn discovery_entry(
    live: &LiveCatalog,
    skill: &CatalogSkill,
    published: &Published,
) -> Result<Option<DiscoveryEntry>, CatalogError> {
    let (_, files) = skill.files()?;
    if files.len() == 1 {
        return Ok(Some(DiscoveryEntry::of(skill, published, None)));
    }
    match live.archive_digest(skill).await {
        Ok(digest) => Ok(Some(DiscoveryEntry::of(skill, published, Some(digest)))),
        Err(error @ CatalogError::Read { .. }) => {
            tracing::warn!(skill = %published.name, %error, "a skill is left out of the discovery index: its archive could not be read");
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// The older index of `snapshot`, made once per catalog version.
async fn legacy_body(live: &LiveCatalog, snapshot: &Arc<Snapshot>) -> Result<Arc<LegacyBody>, CatalogError> {
    let cell = snapshot.ready()?.views.of::<LegacyBody>();
    let (live, snapshot) = (live.clone(), Arc::clone(snapshot));
    made_in_task(cell, async move {
        let published = live.published(&snapshot).await?;
        blocking(move || {
            let skills = (published.skills.iter())
                .filter(|(_, published)| published.legacy.is_ok())
                .filter_map(|(skill, published)| {
                    let (_, files) = skill.files().ok()?;
                    Some(LegacyEntry {
                        name: published.name.as_str(),
                        description: skill.skill.description(),
                        files: files.iter().map(|file| file.path.as_str()).collect(),
                    })
                })
                .collect();
            LegacyBody(prepare(&LegacyIndex { skills }))
        })
        .await
    })
    .await
}

/// An index as a prepared body, compressed if worth it.
fn prepare(index: &impl Serialize) -> PreparedBody {
    let bytes = serde_json::to_vec(index).expect("indexes serialize");
    let etag = ETag::of(&[&bytes]);
    let body = PreparedBody::new(bytes, etag);
    body.compress();
    body
}
