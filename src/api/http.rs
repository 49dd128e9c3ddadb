//! Request parsing shared by the handlers: the skill name in the path, request bodies within
//! their bounds, conditional headers and content negotiation for prepared bodies.

use std::time::Duration;

use axum::body::{Bytes, HttpBody as _};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use skillcat_core::SkillName;

use super::error::ApiError;
use crate::catalog::PreparedBody;

/// The largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

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
    type Rejection = ApiError;

    async fn from_request(request: Request, _: &S) -> Result<Self, Self::Rejection> {
        let deadline =
            request.extensions().get::<BodyDeadline>().map_or(super::Limits::default().body_timeout, |d| d.0);
        let body = request.into_body();
        if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
            return Err(ApiError::PayloadTooLarge);
        }
        let read = tokio::time::timeout(deadline, http_body_util::Limited::new(body, MAX_BODY_BYTES).collect());
        match read.await {
            Err(_) => Err(ApiError::BodyTimeout),
            Ok(Ok(collected)) => Ok(BoundedBody(collected.to_bytes())),
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(ApiError::PayloadTooLarge),
            Ok(Err(_)) => Err(ApiError::MalformedJson("the body could not be read".into())),
        }
    }
}

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

/// A weight (`q=`) in thousandths, 0 to 1000.
type Weight = u16;

/// What an `Accept-Encoding` header (RFC 9110 12.5.3) says about the codings a prepared body has:
/// the weight it gives gzip (or its alias `x-gzip`), identity and `*`, where it names them.
#[derive(Debug, Default, PartialEq, Eq)]
struct AcceptEncoding {
    gzip: Option<Weight>,
    identity: Option<Weight>,
    any: Option<Weight>,
}

impl AcceptEncoding {
    /// Reads every `Accept-Encoding` line as one list. A coding named twice gets the lower
    /// weight, and a weight that cannot be read counts as 0: when in doubt, identity.
    fn parse(headers: &HeaderMap) -> Self {
        let mut accept = AcceptEncoding::default();
        // A line that is not visible ASCII names nothing.
        let lines = headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|value| value.to_str().ok());
        for element in lines.flat_map(|line| line.split(',')) {
            let mut parts = element.split(';').map(str::trim);
            let coding = parts.next().unwrap_or_default();
            let slot = if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                &mut accept.gzip
            } else if coding.eq_ignore_ascii_case("identity") {
                &mut accept.identity
            } else if coding == "*" {
                &mut accept.any
            } else {
                continue;
            };
            // Only `q` is defined for Accept-Encoding; other parameters are ignored.
            let weight = parts
                .filter(|parameter| {
                    let name = parameter.split('=').next().unwrap_or_default();
                    name.trim_end().eq_ignore_ascii_case("q")
                })
                .map(|parameter| parameter.split_once('=').and_then(|(_, value)| qvalue(value.trim())).unwrap_or(0))
                .min()
                .unwrap_or(1000);
            *slot = Some(slot.map_or(weight, |known| known.min(weight)));
        }
        accept
    }

    /// Whether to send gzip: the client gives it a weight above 0, by name or else through `*`
    /// (an explicit `gzip;q=0` excludes it whatever `*` says), and does not name identity with a
    /// higher weight.
    fn prefers_gzip(&self) -> bool {
        let gzip = self.gzip.or(self.any).unwrap_or(0);
        gzip > 0 && self.identity.is_none_or(|identity| identity <= gzip)
    }
}

/// A `qvalue` (RFC 9110 12.4.2): `0` or `1` with up to three decimals, at most 1.
pub(super) fn qvalue(text: &str) -> Option<Weight> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let thousandths = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |sum, digit| sum * 10 + Weight::from(digit - b'0'));
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
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
pub fn prepared(headers: &HeaderMap, body: &PreparedBody, content_type: &'static str) -> Result<Response, ApiError> {
    let identity = Representation { bytes: &body.bytes, etag_header: &body.etag_header, gzip: false };
    let gzip = body.gzip().filter(|_| AcceptEncoding::parse(headers).prefers_gzip()).map(|gzip| Representation {
        bytes: &gzip.bytes,
        etag_header: &gzip.etag_header,
        gzip: true,
    });
    let candidates = [gzip, Some(identity)];
    let mut allowed =
        candidates.iter().flatten().filter(|candidate| precondition_holds(headers, candidate.etag_header));
    let first = allowed.clone().next().ok_or(ApiError::NoMatchingRepresentation)?;
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

    #[test]
    fn gzip_negotiation() {
        // Each row: an Accept-Encoding value (`None`: no header) and whether gzip is sent.
        let table: &[(Option<&str>, bool)] = &[
            (None, false),
            (Some(""), false),
            (Some("gzip"), true),
            (Some("GZip"), true),
            (Some("x-gzip"), true),
            (Some("X-GZIP;q=0.2"), true),
            (Some("br, gzip;q=0.5"), true),
            (Some("br;q=1, GZIP;q=0.5"), true),
            (Some("gzip;q=0.001"), true),
            (Some("gzip;q=1.000"), true),
            (Some("gzip ; q=0.5"), true),
            (Some("gzip;level=9"), true),
            (Some("*"), true),
            (Some("br, *;q=0.1"), true),
            (Some(",, gzip ,"), true),
            // An explicit weight of 0 excludes gzip, in any case and spelling, whatever `*` says.
            (Some("gzip;q=0"), false),
            (Some("gzip;Q=0"), false),
            (Some("gzip; q=0.000"), false),
            (Some("gzip;q=0."), false),
            (Some("x-gzip;q=0"), false),
            (Some("gzip;q=0, *"), false),
            (Some("*, gzip;q=0"), false),
            (Some("*, x-gzip;q=0"), false),
            (Some("*;q=0"), false),
            (Some("*;q=0, br"), false),
            (Some("identity"), false),
            (Some("br, deflate"), false),
            // Named twice: the lower weight.
            (Some("gzip, gzip;q=0"), false),
            (Some("gzip, x-gzip;q=0"), false),
            // Identity named with a higher weight is preferred; an equal one is not.
            (Some("gzip;q=0.5, identity"), false),
            (Some("gzip;q=0.5, identity;q=0.5"), true),
            (Some("gzip, identity;q=0.5"), true),
            (Some("identity;q=0, gzip"), true),
            // A weight that cannot be read counts as 0.
            (Some("gzip;q=nonsense"), false),
            (Some("gzip;q=2"), false),
            (Some("gzip;q=1.5"), false),
            (Some("gzip;q=0.0001"), false),
            (Some("gzip;q=-1"), false),
            (Some("gzip;q=.5"), false),
            (Some("gzip;q="), false),
            (Some("gzip;q"), false),
            (Some("gzip;q=\"1\""), false),
            (Some("gzip;q=0.5;q=0"), false),
            (Some("*;q=nonsense"), false),
            (Some("gzip;q=nonsense, *"), false),
            // Not a coding we have.
            (Some("gzipx"), false),
            (Some("compress, gzip-like"), false),
        ];
        for &(value, expected) in table {
            let map = value.map_or_else(HeaderMap::new, |value| headers(header::ACCEPT_ENCODING, value));
            assert_eq!(AcceptEncoding::parse(&map).prefers_gzip(), expected, "Accept-Encoding: {value:?}");
        }
        // Several lines are one list.
        let mut lines = headers(header::ACCEPT_ENCODING, "*");
        lines.append(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip;q=0"));
        assert!(!AcceptEncoding::parse(&lines).prefers_gzip());
        // A line that is not visible ASCII names nothing; the others still count.
        let mut lines = headers(header::ACCEPT_ENCODING, "gzip");
        lines.append(header::ACCEPT_ENCODING, HeaderValue::from_bytes(b"gzip;q=0\xff").unwrap());
        assert!(AcceptEncoding::parse(&lines).prefers_gzip());
    }

    #[test]
    fn qvalues() {
        let table = [
            ("0", Some(0)),
            ("0.", Some(0)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.123", Some(123)),
            ("1", Some(1000)),
            ("1.", Some(1000)),
            ("1.000", Some(1000)),
            ("1.001", None),
            ("0.1234", None),
            ("2", None),
            ("", None),
            (".5", None),
            ("00.5", None),
            ("0,5", None),
            ("0.5e0", None),
            ("+0.5", None),
        ];
        for (text, expected) in table {
            assert_eq!(qvalue(text), expected, "q={text}");
        }
    }
}
