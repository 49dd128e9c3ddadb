//! The files of a skill: the listing, each file's bytes (answered as `crate::http::serve_file`
//! answers any file), and the archive of the folder.

use std::sync::Arc;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use skillcat_core::SkillName;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::target::{Target, VersionQuery};
use crate::app::App;
use crate::catalog::{CatalogError, FilesBody};
use crate::http::{Headers, HttpError, Problem, SkillPath, name_and_path, prepared, responses, serve_file};
use crate::observability::Surface;

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(list_files)).routes(routes!(get_file)).routes(routes!(get_archive))
}

/// The listing of a skill's files.
#[utoipa::path(get, path = "/skills/{name}/files", tag = "files",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("version" = Option<String>, Query, description = "Read the skill as it was at this version: a version digest (`sha256:<hex>`), a commit (7 to 40 hex digits) or a tag. The answer is immutable: tagged with the version, cacheable for a year. A version the skill does not have is 404 `version-not-found`", min_length = 1, max_length = 255, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"),
        ("If-None-Match" = Option<String>, Header, description = "Tags from earlier answers; 304 if one is current"),
    ),
    responses(
        (status = 200, description = "Every file beneath the skill's folder, with its digest", body = FilesBody,
            headers(("ETag" = String, description = "The skill's tag, which covers every file"))),
        (status = 304, description = "The client's copy is current"),
        responses::InvalidName,
        responses::UnknownSkill,
        responses::RepresentationPreconditionFailed,
        responses::FilesOverBound,
        responses::Unavailable,
    ))]
async fn list_files(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    Headers(headers): Headers,
    query: VersionQuery,
) -> Result<Response, HttpError> {
    let target = match Target::of(&app, &name, query, headers).await? {
        Ok(target) => target,
        Err(unmodified) => return Ok(unmodified),
    };
    let skill = &target.skill;
    let (files, _) = skill.files()?;
    let body = files.body(name.as_str(), &skill.entry.etag).expect("a skill with listed files has a listing body");
    target.answer(prepared(&target.headers, body, "application/json"))
}

/// The `{name}` and `{*path}` of a file route. The path is percent-decoded once (by the router);
/// one that is not UTF-8 then is a 400, and anything that does not name a listed file a 404.
struct FileRoute {
    name: SkillName,
    path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for FileRoute {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (name, path) = name_and_path(parts, state).await?;
        let name = SkillName::parse(name).map_err(|_| CatalogError::InvalidName)?;
        Ok(FileRoute { name, path })
    }
}

/// One file of a skill, exactly the bytes the listing's digest names.
#[utoipa::path(get, path = "/skills/{name}/files/{*path}", tag = "files",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("version" = Option<String>, Query, description = "Read the skill as it was at this version: a version digest (`sha256:<hex>`), a commit (7 to 40 hex digits) or a tag. The answer is immutable: tagged with the version, cacheable for a year. A version the skill does not have is 404 `version-not-found`", min_length = 1, max_length = 255, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"),
        ("path" = String, Path, description = "The file's path in the listing, relative to the skill's folder"),
        ("If-None-Match" = Option<String>, Header, description = "The file's digest as a tag; 304 if it is current"),
        ("Range" = Option<String>, Header, description = "One byte range (`bytes=0-99`); more than one is answered whole"),
    ),
    responses(
        (status = 200, description = "The file, typed from its extension (text as UTF-8; application/octet-stream when unknown)", body = Vec<u8>, content_type = "*/*",
            headers(("ETag" = String, description = "The file's digest, quoted: \"sha256:<hex>\""))),
        (status = 206, description = "The requested range", body = Vec<u8>, content_type = "*/*"),
        (status = 304, description = "The client's copy is current"),
        (status = 400, description = "Invalid skill name, or a path that is not valid UTF-8; with `version`, a malformed or ambiguous version", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill, no such version of it, or no such file in its listing", body = Problem, content_type = "application/problem+json"),
        responses::Changed,
        responses::PreconditionFailed,
        responses::RangeNotSatisfiable,
        responses::FilesOverBound,
        responses::Unavailable,
    ))]
async fn get_file(
    State(app): State<Arc<App>>,
    route: FileRoute,
    Headers(headers): Headers,
    query: VersionQuery,
) -> Result<Response, HttpError> {
    let target = match Target::of(&app, &route.name, query, headers).await? {
        Ok(target) => target,
        Err(unmodified) => return Ok(unmodified),
    };
    let answer = serve_file(&app.catalog, &target.skill, &route.path, &target.headers).await;
    if route.path == skillcat_core::SKILL_MD {
        // What an installer downloads for a skill of one file (the discovery index's `skill-md`).
        return target.loaded(&app, Surface::File, answer);
    }
    target.answer(answer)
}

/// The skill's folder as a zip: `SKILL.md` at the root, entries in path order, fixed timestamps
/// and modes (0644, 0755 when executable), so every replica gives the same bytes.
#[utoipa::path(get, path = "/skills/{name}/archive", tag = "files",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("version" = Option<String>, Query, description = "Read the skill as it was at this version: a version digest (`sha256:<hex>`), a commit (7 to 40 hex digits) or a tag. The answer is immutable: tagged with the version, cacheable for a year. A version the skill does not have is 404 `version-not-found`", min_length = 1, max_length = 255, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"),
        ("If-None-Match" = Option<String>, Header, description = "The archive's digest as a tag; 304 if it is current"),
    ),
    responses(
        (status = 200, description = "The zip of the skill's files", body = Vec<u8>, content_type = "application/zip",
            headers(("ETag" = String, description = "The archive's digest, quoted: \"sha256:<hex>\""))),
        (status = 304, description = "The client's copy is current"),
        responses::InvalidName,
        responses::UnknownSkill,
        responses::Changed,
        responses::RepresentationPreconditionFailed,
        responses::FilesOverBound,
        responses::Unavailable,
    ))]
async fn get_archive(
    State(app): State<Arc<App>>,
    SkillPath(name): SkillPath,
    Headers(headers): Headers,
    query: VersionQuery,
) -> Result<Response, HttpError> {
    let target = match Target::of(&app, &name, query, headers).await? {
        Ok(target) => target,
        Err(unmodified) => return Ok(unmodified),
    };
    let archive = app.catalog.archive(&target.skill).await?;
    let mut response = target.loaded(&app, Surface::Archive, prepared(&target.headers, &archive, "application/zip"))?;
    let disposition = format!("attachment; filename=\"{name}.zip\"");
    response
        .headers_mut()
        .insert(header::CONTENT_DISPOSITION, HeaderValue::from_str(&disposition).expect("skill names are ASCII"));
    Ok(response)
}
