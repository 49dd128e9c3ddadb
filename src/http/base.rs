//! The server's base URL as a client names it, for the absolute URLs an answer writes.

use std::borrow::Cow;

use axum::http::{HeaderMap, header};

use crate::app::App;

/// The URL clients reach the server at, without a trailing `/`: the configured public URL
/// (`--public-url`), else the request's own: the scheme a proxy in front says it used
/// (`X-Forwarded-Proto: https`), else http, and the `Host` header (checked by the router as a
/// host and optional port), else the loopback default. Nothing is kept per base: an answer that
/// names it is made for the request (or spliced into a page kept without it).
pub fn base_url<'a>(app: &'a App, headers: &HeaderMap) -> Cow<'a, str> {
    match &app.public_url {
        Some(public) => Cow::Borrowed(public.as_str()),
        None => Cow::Owned(request_base(headers)),
    }
}

fn request_base(headers: &HeaderMap) -> String {
    let https = headers.get("x-forwarded-proto").is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"https"));
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).unwrap_or("127.0.0.1:8080");
    format!("{}://{host}", if https { "https" } else { "http" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_s_base_follows_its_host_and_forwarded_scheme() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            pairs.iter().map(|(name, value)| (name.parse().unwrap(), value.parse().unwrap())).collect::<HeaderMap>()
        };
        assert_eq!(request_base(&headers(&[("host", "catalog:8080")])), "http://catalog:8080");
        assert_eq!(
            request_base(&headers(&[("host", "skills.example.com"), ("x-forwarded-proto", "HTTPS")])),
            "https://skills.example.com"
        );
        assert_eq!(request_base(&HeaderMap::new()), "http://127.0.0.1:8080");
    }
}
