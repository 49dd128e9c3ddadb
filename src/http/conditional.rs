//! Conditional requests and content negotiation, shared by every HTTP surface: `If-Match` and
//! `If-None-Match` against strong tags, `Accept-Encoding` for the gzip form of a prepared body,
//! and `Accept` for the browsers that get their errors as pages.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::accept::accepts_gzip;
use super::error::HttpError;
use crate::catalog::PreparedBody;

/// `If-None-Match` (weak comparison): whether the client's copy, tagged `etag` (a strong tag,
/// quotes included), is current.
pub fn not_modified(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    names_tag(headers, &header::IF_NONE_MATCH, etag, Comparison::Weak).unwrap_or(false)
}

/// `If-Match` (strong comparison): whether the request may proceed. Tags that cannot be read
/// match nothing.
pub fn precondition_holds(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    names_tag(headers, &header::IF_MATCH, etag, Comparison::Strong).unwrap_or(true)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Strong,
    Weak,
}

/// Whether the conditional header `name` names `etag`; `None` without the header. Read as the
/// `headers` crate reads it, without copying the header: several lines are one list (joined
/// with ", "), `*` alone names every tag, the list is split at commas outside quotes, an item
/// that is not an entity tag names nothing, and a list that is not visible ASCII names nothing.
fn names_tag(
    headers: &HeaderMap,
    name: &header::HeaderName,
    etag: &HeaderValue,
    comparison: Comparison,
) -> Option<bool> {
    let mut lines = headers.get_all(name).iter();
    let first = lines.next()?;
    let joined;
    let list = match lines.next() {
        None => first.as_bytes(),
        Some(second) => {
            let lines: Vec<&[u8]> = [first, second].into_iter().chain(lines).map(HeaderValue::as_bytes).collect();
            joined = lines.join(&b", "[..]);
            &joined
        }
    };
    // `*`, and the usual case of a client sending back the one tag it holds.
    if list == b"*" || list == etag.as_bytes() {
        return Some(true);
    }
    if !list.iter().all(|&byte| byte == b'\t' || (0x20..0x7f).contains(&byte)) {
        return Some(false);
    }
    let etag = etag.as_bytes();
    let opaque = etag.strip_prefix(b"\"").and_then(|rest| rest.strip_suffix(b"\"")).unwrap_or(etag);
    let mut in_quotes = false;
    let mut items = list.split(|&byte| {
        match (in_quotes, byte) {
            (_, b'"') => in_quotes = !in_quotes,
            (false, b',') => return true,
            _ => {}
        }
        false
    });
    Some(items.any(|item| {
        let item = item.trim_ascii();
        let (weak, tag) = match item.strip_prefix(b"W/") {
            Some(tag) => (true, tag),
            None => (false, item),
        };
        let tag = tag.strip_prefix(b"\"").and_then(|rest| rest.strip_suffix(b"\""));
        tag == Some(opaque) && (comparison == Comparison::Weak || !weak)
    }))
}

/// One representation of a prepared body.
struct Representation<'a> {
    bytes: &'a Bytes,
    etag_header: &'a HeaderValue,
    gzip: bool,
}

/// A prepared body, negotiated and conditional.
///
/// The candidates are the gzip representation when the client prefers it and one exists, then
/// the identity (always acceptable: a server may send it when nothing else fits). `If-Match`
/// keeps the candidates it names (412 if none); a candidate `If-None-Match` names is answered 304
/// under its own tag, so a client holding either representation it accepts revalidates without
/// a body; otherwise the first candidate is sent.
pub fn prepared(headers: &HeaderMap, body: &PreparedBody, content_type: &'static str) -> Result<Response, HttpError> {
    let identity = Representation { bytes: &body.bytes, etag_header: &body.etag_header, gzip: false };
    let gzip = body.gzip().filter(|_| accepts_gzip(headers)).map(|gzip| Representation {
        bytes: &gzip.bytes,
        etag_header: &gzip.etag_header,
        gzip: true,
    });
    let candidates = [gzip, Some(identity)];
    let mut allowed =
        candidates.iter().flatten().filter(|candidate| precondition_holds(headers, candidate.etag_header));
    let first = allowed.clone().next().ok_or(HttpError::NoMatchingRepresentation)?;
    let common = |chosen: &Representation<'_>| {
        [
            (header::ETAG, chosen.etag_header.clone()),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::VARY, HeaderValue::from_static("accept-encoding")),
        ]
    };
    if let Some(held) = allowed.find(|candidate| not_modified(headers, candidate.etag_header)) {
        return Ok((StatusCode::NOT_MODIFIED, common(held)).into_response());
    }
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))];
    Ok(if first.gzip {
        let encoding = [(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"))];
        (common(first), content_type, encoding, first.bytes.clone()).into_response()
    } else {
        (common(first), content_type, first.bytes.clone()).into_response()
    })
}

#[cfg(test)]
mod tests {
    use headers::HeaderMapExt as _;

    use super::*;

    fn headers(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_bytes(value.as_bytes()).unwrap());
        headers
    }

    #[test]
    fn conditional_comparisons() {
        let etag = HeaderValue::from_static("\"3f2a\"");
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
        // Blanks around items; blanks inside the quotes are part of the tag.
        assert!(none_match(" \t\"x\" ,\t W/\"3f2a\"  "));
        assert!(matches("\"x\",\t\"3f2a\" "));
        assert!(!none_match("\" 3f2a\""));
        assert!(!none_match("W/ \"3f2a\""));
        // `*` names every tag only alone.
        assert!(!none_match("*, \"x\""));
        // A list that is not visible ASCII names nothing, even where it names the tag.
        assert!(!none_match("\"3f2a\", \"\u{e9}\""));
        assert!(!matches("\"3f2a\", \"\u{e9}\""));
        // Several header lines are one list.
        let mut lines = headers(header::IF_MATCH, "\"other\"");
        lines.append(header::IF_MATCH, HeaderValue::from_static("\"3f2a\""));
        assert!(precondition_holds(&lines, &etag));
    }

    proptest::proptest! {
        /// The comparisons read conditional headers exactly as the `headers` crate does (the
        /// reference they replace, which copies the header on every request): several lines, `*`,
        /// quotes around commas, weak tags, items that are not tags, bytes that are not visible
        /// ASCII. Without blanks inside quotes: that crate's debug build asserts there are none
        /// (its release build lets them through into tags, which then name nothing, as ours do).
        #[test]
        fn conditional_comparisons_agree_with_the_headers_crate(
            lines in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(
                    &[b'"', b'"', b',', b'W', b'/', b'*', b'3', b'f', b'2', b'a', 0xff][..]), 0..14),
                1..4),
            weak_form in proptest::bool::ANY,
        ) {
            // Lines are joined with ", ": a quote left open would put that blank inside quotes.
            let open_quote = |line: &Vec<u8>| line.iter().filter(|&&byte| byte == b'"').count() % 2 == 1;
            proptest::prop_assume!(!lines[..lines.len() - 1].iter().any(open_quote));
            let etag = HeaderValue::from_static("\"3f2a\"");
            let tag: headers::ETag = "\"3f2a\"".parse().unwrap();
            let mut map = HeaderMap::new();
            for line in &lines {
                let mut line = line.clone();
                // Now and then the whole tag, so that some lists name it.
                if weak_form && line.len() > 6 {
                    line.splice(0..0, b"W/\"3f2a\",".iter().copied());
                } else if line.len() > 6 {
                    line.splice(0..0, b"\"3f2a\" ,".iter().copied());
                }
                let Ok(value) = HeaderValue::from_bytes(&line) else { return Ok(()) };
                map.append(header::IF_MATCH, value.clone());
                map.append(header::IF_NONE_MATCH, value);
            }
            let reference_holds = map.typed_get::<headers::IfMatch>().is_none_or(|condition| condition.precondition_passes(&tag));
            let reference_current =
                map.typed_get::<headers::IfNoneMatch>().is_some_and(|condition| !condition.precondition_passes(&tag));
            proptest::prop_assert_eq!(precondition_holds(&map, &etag), reference_holds, "{:?}", map);
            proptest::prop_assert_eq!(not_modified(&map, &etag), reference_current, "{:?}", map);
        }
    }
}
