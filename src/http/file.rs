//! A skill's file as an HTTP answer, the way a static file server answers it: conditional on its
//! digest, in one byte range when asked, typed from its extension, and never run as a page of this
//! origin. The path is never joined onto a folder: it is looked up in the snapshot's listing, and
//! the catalog reads the file beneath the skill's folder and checks it against the listed digest.

use std::ops::Bound;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use headers::HeaderMapExt as _;
use skillcat_core::{SkillFile, SkillFilePath};

use super::conditional::{not_modified, precondition_holds};
use super::error::HttpError;
use crate::catalog::{CatalogSkill, ETag, LiveCatalog, media_type};

/// The listed file of `skill` at `path` (as the router decoded it), conditional and ranged: the
/// answer of the files route and of the older well-known index's.
pub async fn serve_file(
    catalog: &LiveCatalog,
    skill: &CatalogSkill,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response, HttpError> {
    let file = skill.file(path)?;
    let etag = ETag::quoted(&file.digest.to_string());
    let tag: headers::ETag = etag.as_str().parse().expect("digests are valid tags");
    let etag_header = HeaderValue::from_str(etag.as_str()).expect("tags are visible ASCII");
    if !precondition_holds(headers, &etag_header) {
        return Err(HttpError::PreconditionFailed);
    }
    if not_modified(headers, &etag_header) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag_header)]).into_response());
    }
    let bytes = catalog.file(skill, file).await?;
    file_response(file, bytes, etag_header, headers, &tag)
}

/// The bytes of a file, whole or the one range asked for.
fn file_response(
    file: &SkillFile,
    bytes: Vec<u8>,
    etag: HeaderValue,
    headers: &HeaderMap,
    tag: &headers::ETag,
) -> Result<Response, HttpError> {
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
        [] => Err(HttpError::RangeNotSatisfiable(length)),
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
                return Err(HttpError::RangeNotSatisfiable(length));
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

/// Whether a browser would run a file of this type as a document with script of its own (HTML,
/// XHTML, SVG, XML with a stylesheet): such files are served as attachments.
fn is_active(path: &SkillFilePath) -> bool {
    let guess = mime_guess::from_path(path.as_str()).first_or_octet_stream();
    matches!(
        guess.essence_str(),
        "text/html" | "application/xhtml+xml" | "image/svg+xml" | "text/xml" | "application/xml" | "text/xsl"
    )
}
