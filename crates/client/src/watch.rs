//! Watch mode: a background task holds `GET /events` open and records which catalog version the
//! server last announced, so a discovery can tell from memory whether its copy is current.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt as _;
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::config::RetryPolicy;
use crate::shared::Shared;
use crate::sse::EventParser;

/// The data of a `catalog` event.
#[derive(Deserialize)]
struct CatalogEvent {
    etag: Option<String>,
}

/// Starts the task on the current Tokio runtime; `None` outside one (discoveries then always ask
/// the server).
pub(crate) fn spawn(shared: &Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(run(Arc::downgrade(shared))))
}

/// Marks the stream down when the task ends for any reason: aborted when the discoverer is
/// dropped, or dropped with its runtime. Memory is then never trusted without a stream.
struct StreamDown(Weak<Shared>);

impl Drop for StreamDown {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            shared.announce(None);
        }
    }
}

async fn run(shared: Weak<Shared>) {
    let _down = StreamDown(shared.clone());
    // Reconnections are spread like retries, from 100 ms up to 5 s, for as long as the
    // discoverer lives.
    let reconnect = RetryPolicy::new(u32::MAX, Duration::from_millis(100), Duration::from_secs(5));
    let mut failures: u32 = 0;
    loop {
        let Some(strong) = shared.upgrade() else { return };
        let opened = open(&strong).await;
        let idle_timeout = strong.settings.watch_idle_timeout;
        drop(strong);
        if let Some(response) = opened
            && follow(&shared, response, idle_timeout).await
        {
            failures = 0;
        }
        // The stream is down: whatever it said no longer vouches for the cached catalog.
        let Some(strong) = shared.upgrade() else { return };
        strong.announce(None);
        drop(strong);
        tokio::time::sleep(reconnect.backoff(failures)).await;
        failures = failures.saturating_add(1);
    }
}

/// Opens the event stream; `None` if the server did not answer with one in time.
async fn open(shared: &Shared) -> Option<reqwest::Response> {
    let settings = &shared.settings;
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
async fn follow(shared: &Weak<Shared>, response: reqwest::Response, idle_timeout: Duration) -> bool {
    let mut stream = response.bytes_stream();
    let mut parser = EventParser::default();
    let mut delivered = false;
    while let Ok(Some(Ok(bytes))) = tokio::time::timeout(idle_timeout, stream.next()).await {
        let Ok(events) = parser.feed(&bytes) else { break };
        for event in events.into_iter().filter(|event| event.kind == "catalog") {
            // Data that is not understood announces "unknown": the cache is not trusted.
            let etag = serde_json::from_str::<CatalogEvent>(&event.data).ok().and_then(|event| event.etag);
            let Some(shared) = shared.upgrade() else { return delivered };
            shared.announce(Some(etag));
            delivered = true;
        }
    }
    delivered
}
