//! Watch mode: a background task holds `GET /events` open and records which catalog version the
//! server last announced, so a discovery can tell from memory whether its copy is current.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt as _;
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::discoverer::Inner;
use crate::sse::EventParser;

/// Reconnection waits grow from this...
const RECONNECT_INITIAL: Duration = Duration::from_millis(100);
/// ...up to this, for as long as the discoverer lives.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The data of a `catalog` event.
#[derive(Deserialize)]
struct CatalogEvent {
    etag: Option<String>,
}

/// Starts the task on the current Tokio runtime; `None` outside one (discoveries then always ask
/// the server).
pub(crate) fn spawn(inner: &Arc<Inner>) -> Option<tokio::task::JoinHandle<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(run(Arc::downgrade(inner))))
}

/// Marks the stream down when the task ends for any reason: aborted when the discoverer is
/// dropped, or dropped with its runtime. Memory is then never trusted without a stream.
struct StreamDown(Weak<Inner>);

impl Drop for StreamDown {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.announce(None);
        }
    }
}

async fn run(inner: Weak<Inner>) {
    let _down = StreamDown(inner.clone());
    let mut failures: u32 = 0;
    loop {
        let Some(strong) = inner.upgrade() else { return };
        let opened = open(&strong).await;
        let idle_timeout = strong.settings.watch_idle_timeout;
        drop(strong);
        if let Some(response) = opened
            && follow(&inner, response, idle_timeout).await
        {
            failures = 0;
        }
        // The stream is down: whatever it said no longer vouches for the cached catalog.
        let Some(strong) = inner.upgrade() else { return };
        strong.announce(None);
        drop(strong);
        let ceiling = RECONNECT_INITIAL.saturating_mul(1 << failures.min(10)).min(RECONNECT_MAX);
        tokio::time::sleep(ceiling / 2 + crate::retry::jitter(ceiling / 2)).await;
        failures = failures.saturating_add(1);
    }
}

/// Opens the event stream; `None` if the server did not answer with one in time.
async fn open(inner: &Inner) -> Option<reqwest::Response> {
    let settings = &inner.settings;
    let request = settings
        .request(Method::GET, settings.endpoints.events.clone())
        .header(ACCEPT, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache");
    let response = tokio::time::timeout(settings.request_timeout, request.send()).await.ok()?.ok()?;
    let is_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("text/event-stream"));
    (response.status() == StatusCode::OK && is_stream).then_some(response)
}

/// Reads events until the stream ends, breaks, or stays silent longer than `idle_timeout`;
/// returns whether it delivered any `catalog` event.
async fn follow(inner: &Weak<Inner>, response: reqwest::Response, idle_timeout: Duration) -> bool {
    let mut stream = response.bytes_stream();
    let mut parser = EventParser::default();
    let mut delivered = false;
    while let Ok(Some(Ok(bytes))) = tokio::time::timeout(idle_timeout, stream.next()).await {
        let Ok(events) = parser.feed(&bytes) else { break };
        for event in events.into_iter().filter(|event| event.kind == "catalog") {
            // Data that is not understood announces "unknown": the cache is not trusted.
            let etag = serde_json::from_str::<CatalogEvent>(&event.data).ok().and_then(|event| event.etag);
            let Some(inner) = inner.upgrade() else { return delivered };
            inner.announce(Some(etag));
            delivered = true;
        }
    }
    delivered
}
