//! The checks of a request's head that every route's gate makes before anything else: one valid
//! `Host` (RFC 9112 3.2), and a request target of a bounded length.

use axum::http::{HeaderMap, Uri, Version, header};

use super::MAX_URI_BYTES;
use super::error::HttpError;

/// A 414 problem for a request target over [`MAX_URI_BYTES`].
pub fn check_uri_length(uri: &Uri) -> Result<(), HttpError> {
    let length = uri.authority().map_or(0, |authority| authority.as_str().len())
        + uri.path_and_query().map_or(0, |target| target.as_str().len());
    if length > MAX_URI_BYTES { Err(HttpError::UriTooLong) } else { Ok(()) }
}

/// RFC 9112 3.2: an HTTP/1.1 request without a `Host` header, any request with two, and a
/// `Host` that is not a host and optional port are refused with 400, before authentication.
pub fn check_host(version: Version, headers: &HeaderMap) -> Result<(), HttpError> {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        // HTTP/1.0 had no Host header.
        (None, _) if version <= Version::HTTP_10 => return Ok(()),
        (None, _) => return Err(HttpError::InvalidHost("an HTTP/1.1 request needs a Host header")),
        (Some(_), Some(_)) => return Err(HttpError::InvalidHost("a request may carry only one Host header")),
        (Some(host), None) => host.as_bytes(),
    };
    if is_host_and_port(host) {
        Ok(())
    } else {
        Err(HttpError::InvalidHost("the Host header is not a host and optional port"))
    }
}

/// `uri-host [ ":" port ]`: an authority without user information, whose port is digits. An
/// empty host cannot name an `http` target (RFC 9110 4.2.1).
fn is_host_and_port(value: &[u8]) -> bool {
    is_plain_host_and_port(value) || is_authority_host_and_port(value)
}

/// The usual `name[:port]`, an authority for certain: decided without making one (which copies
/// the value).
fn is_plain_host_and_port(value: &[u8]) -> bool {
    let (host, port) = match value.iter().rposition(|&byte| byte == b':') {
        Some(colon) => (&value[..colon], Some(&value[colon + 1..])),
        None => (value, None),
    };
    !host.is_empty()
        && host.iter().all(|&byte| byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-')
        && port.is_none_or(|port| !port.is_empty() && port.iter().all(u8::is_ascii_digit))
}

fn is_authority_host_and_port(value: &[u8]) -> bool {
    let Ok(authority) = axum::http::uri::Authority::try_from(value) else {
        return false;
    };
    let text = authority.as_str();
    // What follows the host: after an IPv6 literal's closing bracket, if there is one.
    let rest = text.rfind(']').map_or(text, |end| &text[end + 1..]);
    !authority.host().is_empty()
        && !text.contains('@')
        && rest.rsplit_once(':').is_none_or(|(_, port)| port.bytes().all(|byte| byte.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The shortcut for the usual `Host` never lets through what the full check refuses.
        #[test]
        fn plain_hosts_are_authorities(value in proptest::collection::vec(proptest::sample::select(
            &[b'a', b'Z', b'0', b'9', b'.', b'-', b':', b'@', b'[', b']', b'_', b' ', b'/', b'%', 0xff][..]), 0..12)) {
            if is_plain_host_and_port(&value) {
                proptest::prop_assert!(is_authority_host_and_port(&value), "{:?}", value);
            }
        }
    }

    #[test]
    fn hosts() {
        for host in ["x", "127.0.0.1:8080", "skills.example.com", "a-b.c:1", "x:", "[::1]:8080", "[::1]"] {
            assert!(is_host_and_port(host.as_bytes()), "{host}");
        }
        for host in ["", ":80", ":", "user@x", "x y", "x/skills", "x:port", "x:1:2", "[::1", "x:80a"] {
            assert!(!is_host_and_port(host.as_bytes()), "{host}");
        }
        assert!(is_plain_host_and_port(b"a-b.c:1"));
        assert!(!is_plain_host_and_port(b"x:"), "left to the full check");
    }
}
