//! A skill's file as an HTTP answer, the way a static file server answers it: conditional on its
//! digest, in one byte range when asked, typed from its extension, and never run as a page of this
//! origin. The path is never joined onto a folder: it is looked up in the snapshot's listing, and
//! the catalog reads the file beneath the skill's folder and checks it against the listed digest.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use skillcat_core::{SkillFile, SkillFilePath};

use super::conditional::{not_modified, precondition_holds};
use super::error::HttpError;
use crate::catalog::{CatalogSkill, ETag, LiveCatalog, media_type};

/// The listed file of `skill` at `path` (as the router decoded it), conditional and ranged: the
/// answer of the files route and of the older well-known index's. The body is read from the file
/// as it is sent, and checked against the listed digest (see `crate::catalog::VerifiedFile`).
pub async fn serve_file(
    catalog: &LiveCatalog,
    skill: &CatalogSkill,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response, HttpError> {
    let file = skill.file(path)?;
    let etag = ETag::quoted(&file.digest.to_string());
    let etag_header = HeaderValue::from_str(etag.as_str()).expect("tags are visible ASCII");
    if !precondition_holds(headers, &etag_header) {
        return Err(HttpError::PreconditionFailed);
    }
    if not_modified(headers, &etag_header) {
        return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag_header)]).into_response());
    }
    let length = file.size;
    // A range applies only while the client's copy (If-Range) is this one.
    let range = match if_range_holds(headers, &etag) {
        true => requested_range(headers, length)?,
        false => None,
    };
    let opened = catalog.open(skill, file).await?;
    let mut response = file_headers(file, etag_header);
    let (status, range) = match range {
        Some((start, end)) => {
            let content_range = format!("bytes {start}-{end}/{length}");
            response.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&content_range).expect("a range is visible ASCII"),
            );
            (StatusCode::PARTIAL_CONTENT, start..end + 1)
        }
        None => (StatusCode::OK, 0..length),
    };
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(range.end - range.start));
    *response.body_mut() = Body::from_stream(opened.stream(range));
    Ok(response)
}

/// The headers of a file's answer.
fn file_headers(file: &SkillFile, etag: HeaderValue) -> Response {
    let content_type = HeaderValue::from_str(&served_type(&file.path)).expect("media types are visible ASCII");
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
    response
}

/// The type a file is served as: its own, but for scripts and style sheets, which go out as plain
/// text: with `nosniff`, a browser then refuses to run one as a script or apply it as a style of a
/// page of this origin (whose policy allows this origin's scripts), even if markup that names it
/// ever got onto a page.
fn served_type(path: &SkillFilePath) -> String {
    let media = media_type(path);
    let essence = media.split(';').next().unwrap_or_default().trim();
    let executable = matches!(
        essence,
        "text/javascript"
            | "application/javascript"
            | "application/x-javascript"
            | "text/ecmascript"
            | "application/ecmascript"
            | "text/css"
            | "application/wasm"
    );
    if executable { "text/plain; charset=utf-8".to_owned() } else { media }
}

/// `If-Range` (RFC 9110 13.1.5): absent, or exactly the file's strong tag. Anything else (a weak
/// tag, another tag, a date, which no file here carries a validator for, or a value that is no
/// validator at all) means the client's copy may not be this one: the whole file is sent.
fn if_range_holds(headers: &HeaderMap, etag: &ETag) -> bool {
    let mut values = headers.get_all(header::IF_RANGE).iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => value.as_bytes().trim_ascii() == etag.as_str().as_bytes(),
        (Some(_), Some(_)) => false,
    }
}

/// The one byte range a `Range` header asks of a file of `length` bytes, as inclusive bounds
/// (RFC 9110 14.1.2): `first-last` (`last` clipped to the file), `first-`, or `-suffix` (the last
/// bytes; a suffix longer than the file is the whole file). `None` to send the whole file: no
/// header, another unit, a header that does not parse, several ranges (RFC 9110 14.2 lets a server
/// ignore them), or an empty file. A range that starts at or past the end, or a zero suffix, is
/// unsatisfiable: 416.
fn requested_range(headers: &HeaderMap, length: u64) -> Result<Option<(u64, u64)>, HttpError> {
    let mut values = headers.get_all(header::RANGE).iter();
    let (Some(value), None) = (values.next(), values.next()) else { return Ok(None) };
    let Ok(value) = value.to_str() else { return Ok(None) };
    let Some((unit, set)) = value.split_once('=') else { return Ok(None) };
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') || length == 0 {
        return Ok(None);
    }
    let Some((first, last)) = set.trim().split_once('-') else { return Ok(None) };
    let number = |text: &str| {
        (!text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit())).then(|| text.parse::<u64>().ok()).flatten()
    };
    let (first, last) = (first.trim(), last.trim());
    let bounds = match (first.is_empty(), number(first), number(last)) {
        // `-suffix`
        (true, _, Some(0)) => return Err(HttpError::RangeNotSatisfiable(length)),
        (true, _, Some(suffix)) => (length.saturating_sub(suffix), length - 1),
        (false, Some(first), None) if last.is_empty() => (first, length - 1),
        (false, Some(first), Some(last)) if first <= last => (first, last.min(length - 1)),
        _ => return Ok(None),
    };
    if bounds.0 >= length {
        return Err(HttpError::RangeNotSatisfiable(length));
    }
    Ok(Some(bounds))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn range(value: &str, length: u64) -> Result<Option<(u64, u64)>, u64> {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_str(value).unwrap());
        requested_range(&headers, length).map_err(|error| match error {
            HttpError::RangeNotSatisfiable(length) => length,
            other => panic!("{other}"),
        })
    }

    #[test]
    fn byte_ranges_as_rfc_9110_reads_them() {
        assert_eq!(range("bytes=0-3", 10), Ok(Some((0, 3))));
        assert_eq!(range("bytes=2-", 10), Ok(Some((2, 9))));
        assert_eq!(range("bytes=4-400", 10), Ok(Some((4, 9))), "the last byte clipped to the file");
        assert_eq!(range("bytes=-3", 10), Ok(Some((7, 9))));
        assert_eq!(range("bytes=-100", 10), Ok(Some((0, 9))), "a suffix longer than the file is all of it");
        assert_eq!(range("Bytes = 1-1", 10), Ok(Some((1, 1))));
        assert_eq!(range("bytes=9-9", 10), Ok(Some((9, 9))));
        assert_eq!(range("bytes=10-", 10), Err(10));
        assert_eq!(range("bytes=10-20", 10), Err(10));
        assert_eq!(range("bytes=-0", 10), Err(10));
        // Sent whole: several ranges, another unit, what does not parse, an empty file.
        for whole in
            ["bytes=0-1,3-4", "items=0-1", "bytes=3-1", "bytes=a-b", "bytes=1", "bytes=--1", "bytes=+1-2", "bytes="]
        {
            assert_eq!(range(whole, 10), Ok(None), "{whole}");
        }
        assert_eq!(range("bytes=0-1", 0), Ok(None));
        assert_eq!(range("bytes=18446744073709551616-", 10), Ok(None), "a number too large for a position");
    }

    #[test]
    fn if_range_holds_only_for_the_file_s_own_tag() {
        let etag = ETag::quoted("sha256:ab");
        let check = |value: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(value) = value {
                headers.insert(header::IF_RANGE, HeaderValue::from_str(value).unwrap());
            }
            if_range_holds(&headers, &etag)
        };
        assert!(check(None));
        assert!(check(Some("\"sha256:ab\"")));
        for other in ["junk", "W/\"sha256:ab\"", "\"other\"", "Tue, 01 Dec 2026 00:00:00 GMT", ""] {
            assert!(!check(Some(other)), "{other}");
        }
    }

    #[test]
    fn scripts_and_styles_are_served_as_text() {
        let served = |path: &str| served_type(&SkillFilePath::parse(path).unwrap());
        for script in ["a.js", "m.mjs", "s.css", "x.wasm"] {
            assert_eq!(served(script), "text/plain; charset=utf-8", "{script}");
        }
        assert_eq!(served("SKILL.md"), "text/markdown; charset=utf-8");
        assert_eq!(served("logo.png"), "image/png");
    }
}
