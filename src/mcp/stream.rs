//! `GET /mcp`: the event stream of a 2025-11-25 host, which that revision lets a host open without
//! a session. It carries `notifications/resources/list_changed` at every new catalog version, from
//! the replica that holds it, until the host goes, its token is revoked or shutdown starts. Hosts
//! of 2026-07-28 use `subscriptions/listen` instead, and are told 405.

use std::convert::Infallible;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse as _, Response};
use rmcp::model::ProtocolVersion;

use super::{KEEP_ALIVE, LOOPBACK_HOSTS};
use crate::app::App;
use crate::http::HttpError;

/// The notification, as the one message of an event.
const LIST_CHANGED: &str = r#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#;

/// Opens the stream, after the checks the transport makes of every request: the `Host` and
/// `Origin` of a server without a token file (DNS rebinding), an `Accept` of event streams, a
/// revision that has such streams. Its place among the capped streams is taken by the layer
/// around `/mcp`.
pub(super) fn open(app: &App, headers: &HeaderMap) -> Response {
    if app.tokens.is_none()
        && let Err(reason) = loopback_only(headers)
    {
        return HttpError::McpRefused(StatusCode::FORBIDDEN, reason.to_owned()).into_response();
    }
    let accepts = headers.get_all(header::ACCEPT).iter().filter_map(|value| value.to_str().ok()).any(|value| {
        value
            .split(',')
            .any(|media| media.split(';').next().is_some_and(|essence| essence.trim() == "text/event-stream"))
    });
    if !accepts {
        let reason = "Not Acceptable: Client must accept text/event-stream".to_owned();
        return HttpError::McpRefused(StatusCode::NOT_ACCEPTABLE, reason).into_response();
    }
    let revision = headers.get("mcp-protocol-version").and_then(|value| value.to_str().ok()).unwrap_or("2025-03-26");
    if revision >= ProtocolVersion::V_2026_07_28.as_str() {
        let mut refused = HttpError::McpRefused(
            StatusCode::METHOD_NOT_ALLOWED,
            "revision 2026-07-28 has no stream of its own: use subscriptions/listen".to_owned(),
        )
        .into_response();
        refused.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return refused;
    }
    let mut snapshots = app.catalog.subscribe();
    snapshots.mark_unchanged();
    let shutdown = app.shutdown.clone();
    let stream = futures_util::stream::unfold((snapshots, shutdown), |(mut snapshots, mut shutdown)| async move {
        tokio::select! {
            changed = snapshots.changed() => changed.ok()?,
            () = crate::shutdown::stopped(&mut shutdown) => return None,
        }
        let event: Result<Event, Infallible> = Ok(Event::default().data(LIST_CHANGED));
        Some((event, (snapshots, shutdown)))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// Whether `Host` is a loopback name and `Origin`, if any, a loopback origin (any port), as the
/// transport requires of a server without a token file; the reason when not.
fn loopback_only(headers: &HeaderMap) -> Result<(), &'static str> {
    let host = headers.get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or_default();
    if !LOOPBACK_HOSTS.contains(&host_name(host)) {
        return Err("Forbidden: Host header is not allowed");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| "Forbidden: Invalid Origin header encoding")?;
        let name = origin.strip_prefix("http://").map(host_name);
        if !name.is_some_and(|name| LOOPBACK_HOSTS.contains(&name)) {
            return Err("Forbidden: Invalid Origin header");
        }
    }
    Ok(())
}

/// The name of a `host[:port]` authority, an IPv6 address without its brackets.
fn host_name(authority: &str) -> &str {
    if let Some(bracketed) = authority.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or_default();
    }
    authority.rsplit_once(':').map_or(authority, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_and_origins_pass() {
        for (host, origin, passes) in [
            ("localhost:8080", None, true),
            ("127.0.0.1", None, true),
            ("[::1]:80", None, true),
            ("localhost:1", Some("http://localhost:3000"), true),
            ("127.0.0.1:1", Some("http://[::1]:9"), true),
            ("attacker.example", None, false),
            ("localhost.attacker.example:80", None, false),
            ("localhost", Some("http://attacker.example"), false),
            ("localhost", Some("https://localhost"), false),
            ("localhost", Some("null"), false),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().expect("a header"));
            if let Some(origin) = origin {
                headers.insert(header::ORIGIN, origin.parse().expect("a header"));
            }
            assert_eq!(loopback_only(&headers).is_ok(), passes, "{host} {origin:?}");
        }
    }
}
