//! The files of a skill: the listing, each file's bytes, and the archive of the folder.
//!
//! A path is never joined onto a folder: it is looked up in the listing of the current snapshot,
//! and the file is then opened beneath the skill's folder the guarded way and checked against
//! the listed digest.

use std::ops::Bound;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use headers::HeaderMapExt as _;
use skillcat_core::{SkillFile, SkillFilePath, SkillName};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, Problem, responses};
use super::http::{Headers, SkillPath, not_modified, precondition_holds, prepared};
use crate::app::App;
use crate::catalog::{CatalogSkill, ETag, FilesBody, media_type};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(list_files)).routes(routes!(get_file)).routes(routes!(get_archive))
}

/// The listing of a skill's files.
#[utoipa::path(get, path = "/skills/{name}/files", tag = "files",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
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
) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let skill = snapshot.ready()?.skill(&name)?;
    let (files, _) = skill.files()?;
    let body = files.body(name.as_str(), &skill.entry.etag).expect("a skill with listed files has a listing body");
    prepared(&headers, body, "application/json")
}

/// The `{name}` and `{*path}` of a file route. The path is percent-decoded once (by the router);
/// one that is not UTF-8 then is a 400, and anything that does not name a listed file a 404.
struct FileRoute {
    name: SkillName,
    path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for FileRoute {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (name, path) = name_and_path(parts, state).await?;
        let name = SkillName::parse(name).map_err(|_| ApiError::InvalidName)?;
        Ok(FileRoute { name, path })
    }
}

/// The `{name}` and `{*path}` of a route to a file, percent-decoded once.
pub(super) async fn name_and_path<S: Send + Sync>(parts: &mut Parts, state: &S) -> Result<(String, String), ApiError> {
    let Path(pair) = Path::<(String, String)>::from_request_parts(parts, state)
        .await
        .map_err(|_| ApiError::BadRequest("the file path is not valid percent-encoded UTF-8".into()))?;
    Ok(pair)
}

/// One file of a skill, exactly the bytes the listing's digest names.
#[utoipa::path(get, path = "/skills/{name}/files/{*path}", tag = "files",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("path" = String, Path, description = "The file's path in the listing, relative to the skill's folder"),
        ("If-None-Match" = Option<String>, Header, description = "The file's digest as a tag; 304 if it is current"),
        ("Range" = Option<String>, Header, description = "One byte range (`bytes=0-99`); more than one is answered whole"),
    ),
    responses(
        (status = 200, description = "The file, typed from its extension (text as UTF-8; application/octet-stream when unknown)", body = Vec<u8>, content_type = "*/*",
            headers(("ETag" = String, description = "The file's digest, quoted: \"sha256:<hex>\""))),
        (status = 206, description = "The requested range", body = Vec<u8>, content_type = "*/*"),
        (status = 304, description = "The client's copy is current"),
        (status = 400, description = "Invalid skill name, or a path that is not valid UTF-8", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such skill, or no such file in its listing", body = Problem, content_type = "application/problem+json"),
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
) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let skill = snapshot.ready()?.skill(&route.name)?;
    serve_file(&app, skill, &route.path, &headers).await
}

/// The listed file of `skill` at `path` (as the router decoded it), conditional and ranged; also
/// the answer of the older well-known index's file route.
pub(super) async fn serve_file(
    app: &App,
    skill: &CatalogSkill,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let file = skill.file(path)?;
    let etag = ETag::quoted(&file.digest.to_string());
    let tag: headers::ETag = etag.as_str().parse().expect("digests are valid tags");
    let etag_header = HeaderValue::from_str(etag.as_str()).expect("tags are visible ASCII");
    if !precondition_holds(headers, &etag_header) {
        return Err(ApiError::PreconditionFailed);
    }
    if not_modified(headers, &etag_header) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag_header)]).into_response());
    }
    let bytes = app.catalog.file(skill, file).await?;
    file_response(file, bytes, etag_header, headers, &tag)
}

/// The bytes of a file, whole or the one range asked for.
fn file_response(
    file: &SkillFile,
    bytes: Vec<u8>,
    etag: HeaderValue,
    headers: &HeaderMap,
    tag: &headers::ETag,
) -> Result<Response, ApiError> {
    let content_type = HeaderValue::from_str(&media_type(&file.path)).expect("media types are visible ASCII");
    let mut response = (
        [
            (header::CONTENT_TYPE, content_type),
            (header::ETAG, etag),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::ACCEPT_RANGES, HeaderValue::from_static("bytes")),
            // Skill files are untrusted: never sniffed into something active, never run as a
            // page of this origin.
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'")),
        ],
        (),
    )
        .into_response();
    if is_active(&file.path) {
        // A page or an image that can hold script: downloaded, never shown in a browser's tab.
        response.headers_mut().insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
    }
    let length = bytes.len() as u64;
    // A range applies only while the client's copy (If-Range) is this one.
    let if_range_holds =
        headers.typed_get::<headers::IfRange>().is_none_or(|condition| !condition.is_modified(Some(tag), None));
    let range = headers.typed_get::<headers::Range>().filter(|_| if_range_holds);
    let Some(range) = range else {
        *response.body_mut() = bytes.into();
        return Ok(response);
    };
    let ranges: Vec<(Bound<u64>, Bound<u64>)> = range.satisfiable_ranges(length).collect();
    match ranges.as_slice() {
        [] => Err(ApiError::RangeNotSatisfiable(length)),
        [(start, end)] => {
            let start = match *start {
                Bound::Included(start) => start,
                Bound::Excluded(start) => start + 1,
                Bound::Unbounded => 0,
            };
            let end = match *end {
                Bound::Included(end) => end.min(length - 1),
                Bound::Excluded(end) => end.min(length) - 1,
                Bound::Unbounded => length - 1,
            };
            if start > end || start >= length {
                return Err(ApiError::RangeNotSatisfiable(length));
            }
            *response.status_mut() = StatusCode::PARTIAL_CONTENT;
            let content_range = format!("bytes {start}-{end}/{length}");
            response.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&content_range).expect("a range is visible ASCII"),
            );
            *response.body_mut() = bytes[start as usize..=end as usize].to_vec().into();
            Ok(response)
        }
        // Several ranges: the whole file (RFC 9110 14.2 lets a server ignore Range).
        _ => {
            *response.body_mut() = bytes.into();
            Ok(response)
        }
    }
}

/// The skill's folder as a zip: `SKILL.md` at the root, entries in path order, fixed timestamps
/// and modes (0644, 0755 when executable), so every replica gives the same bytes.
#[utoipa::path(get, path = "/skills/{name}/archive", tag = "files",
    params(
        ("name" = String, Path, description = "The skill's name", pattern = "^[A-Za-z0-9_-]{1,64}$"),
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
) -> Result<Response, ApiError> {
    let snapshot = app.catalog.snapshot();
    let skill = snapshot.ready()?.skill(&name)?;
    let archive = app.catalog.archive(skill).await?;
    let mut response = prepared(&headers, &archive, "application/zip")?;
    let disposition = format!("attachment; filename=\"{name}.zip\"");
    response
        .headers_mut()
        .insert(header::CONTENT_DISPOSITION, HeaderValue::from_str(&disposition).expect("skill names are ASCII"));
    Ok(response)
}

/// Whether a browser would run a file of this type as a document with script of its own (HTML,
/// XHTML, SVG, XML with a stylesheet): such files are served as attachments.
fn is_active(path: &SkillFilePath) -> bool {
    let guess = mime_guess::from_path(path.as_str()).first_or_octet_stream();
    matches!(
        guess.essence_str(),
        "text/html" | "application/xhtml+xml" | "image/svg+xml" | "text/xml" | "application/xml" | "text/xsl"
    )
}
