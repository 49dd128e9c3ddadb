//! What a client accepts: the gzip form of a prepared body (`Accept-Encoding`), and an HTML page
//! for an error (`Accept`: a browser's navigation).

use axum::http::{HeaderMap, header};

/// Whether to send the gzip representation: see [`AcceptEncoding::prefers_gzip`].
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    AcceptEncoding::parse(headers).prefers_gzip()
}

/// Where a browser's request went (its path and query), for an error page: `None` for
/// every other client. A browser is a request whose `Accept` prefers `text/html` to JSON.
pub fn browser_target<B>(request: &axum::http::Request<B>) -> Option<String> {
    prefers_html(request.headers())
        .then(|| request.uri().path_and_query().map_or("/", |target| target.as_str()).to_owned())
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
fn qvalue(text: &str) -> Option<Weight> {
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

/// Whether the `Accept` header (RFC 9110 12.5.1) weighs `text/html` above zero and at least as
/// much as JSON (a browser's navigation: `text/html,...,*/*;q=0.8`). Wildcards count for neither.
fn prefers_html(headers: &HeaderMap) -> bool {
    let (mut html, mut json) = (0, 0);
    let lines = headers.get_all(header::ACCEPT).iter().filter_map(|value| value.to_str().ok());
    for element in lines.flat_map(|line| line.split(',')) {
        let mut parts = element.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let weight = parts
            .find_map(|parameter| {
                let (name, value) = parameter.split_once('=')?;
                name.trim().eq_ignore_ascii_case("q").then(|| qvalue(value.trim()).unwrap_or(0))
            })
            .unwrap_or(1000);
        if media.eq_ignore_ascii_case("text/html") {
            html = html.max(weight);
        } else if media.eq_ignore_ascii_case("application/json")
            || media.eq_ignore_ascii_case("application/problem+json")
        {
            json = json.max(weight);
        }
    }
    html > 0 && html >= json
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_bytes(value.as_bytes()).unwrap());
        headers
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
