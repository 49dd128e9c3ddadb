//! Watch mode: a background task holds `GET /events` open and records which catalog version the
//! server last announced, so a discovery can tell from memory whether its copy is current.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource as _};
use futures_util::{Stream, StreamExt as _, stream};
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::config::RetryPolicy;
use crate::shared::Shared;

/// The longest line accepted; the server's lines are a few dozen bytes.
const MAX_LINE_BYTES: usize = 64 * 1024;

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
    let mut events = pin!(events(response.bytes_stream(), idle_timeout));
    let mut delivered = false;
    while let Some(Ok(event)) = events.next().await {
        if event.event != "catalog" {
            continue;
        }
        // Data that is not understood announces "unknown": the cache is not trusted.
        let etag = serde_json::from_str::<CatalogEvent>(&event.data).ok().and_then(|event| event.etag);
        let Some(shared) = shared.upgrade() else { return delivered };
        shared.announce(Some(etag));
        delivered = true;
    }
    delivered
}

/// The events of an event-stream body. The body is cut off when no bytes came for
/// `idle_timeout` (before the parser, so keep-alive comments, which make no event, hold a quiet
/// stream open) and at what no skillcat server sends: a line over [`MAX_LINE_BYTES`], which the
/// parser would buffer without bound, or bytes that are not UTF-8, after which it would silently
/// never dispatch again.
fn events<B, E>(
    body: impl Stream<Item = Result<B, E>> + Unpin,
    idle_timeout: Duration,
) -> impl Stream<Item = Result<Event, EventStreamError<Infallible>>>
where
    B: AsRef<[u8]>,
{
    let checked = stream::unfold((body, Check::default()), move |(mut body, mut check)| async move {
        let chunk = tokio::time::timeout(idle_timeout, body.next()).await.ok()??.ok()?;
        if !check.accept(chunk.as_ref()) {
            return None;
        }
        Some((Ok(chunk), (body, check)))
    });
    checked.eventsource()
}

/// What [`events`] has seen of a body so far.
#[derive(Default)]
struct Check {
    /// Bytes since the last line break.
    line: usize,
    /// The start of a character that the last chunk ended in the middle of.
    split: Vec<u8>,
}

impl Check {
    /// Whether the body may go on with `chunk`.
    fn accept(&mut self, chunk: &[u8]) -> bool {
        self.line = match chunk.iter().rposition(|byte| matches!(byte, b'\n' | b'\r')) {
            Some(end) => chunk.len() - end - 1,
            None => self.line.saturating_add(chunk.len()),
        };
        let mut bytes = std::mem::take(&mut self.split);
        bytes.extend_from_slice(chunk);
        match std::str::from_utf8(&bytes) {
            Ok(_) => {}
            Err(error) if error.error_len().is_none() => self.split = bytes[error.valid_up_to()..].to_vec(),
            Err(_) => return false,
        }
        self.line <= MAX_LINE_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, Infallible>> {
        chunks.iter().map(|chunk| Ok(chunk.to_vec())).collect()
    }

    /// Each event's name and data, once the stream has ended.
    async fn collect(events: impl Stream<Item = Result<Event, EventStreamError<Infallible>>>) -> Vec<(String, String)> {
        let events = tokio::time::timeout(Duration::from_secs(5), events.collect::<Vec<_>>()).await;
        let events = events.expect("the stream ends");
        events.into_iter().map(|event| event.map(|event| (event.event, event.data)).expect("an event")).collect()
    }

    #[tokio::test]
    async fn keep_alives_hold_a_quiet_stream_open_and_silence_ends_it() {
        let keep_alives = vec![b": keep-alive\n\n".as_slice(); 12];
        let body = stream::iter(chunks(&keep_alives))
            .chain(stream::iter(chunks(&[b"event: catalog\ndata: {\"etag\":\"\\\"c1\\\"\"}\n\n"])))
            .then(|chunk| async {
                tokio::time::sleep(Duration::from_millis(60)).await;
                chunk
            })
            .chain(stream::pending());
        let events = collect(events(Box::pin(body), Duration::from_millis(500))).await;
        assert_eq!(events, [("catalog".to_owned(), r#"{"etag":"\"c1\""}"#.to_owned())]);
    }

    #[tokio::test]
    async fn bytes_no_server_sends_end_the_stream() {
        let event = b"event: catalog\ndata: {}\n\n".as_slice();
        let long_line = vec![b'x'; MAX_LINE_BYTES / 2];
        let bodies: [&[&[u8]]; 2] =
            [&[event, b"data: \xff\n\n", event], &[event, b"data: ", &long_line, &long_line, b"\n\n", event]];
        for body in bodies {
            let body = stream::iter(chunks(body)).chain(stream::pending());
            let events = collect(events(body, Duration::from_secs(60))).await;
            assert_eq!(events, [("catalog".to_owned(), "{}".to_owned())]);
        }
    }

    #[test]
    fn lines_are_counted_and_characters_may_be_split_across_chunks() {
        let mut check = Check::default();
        let thumbs_up = "👍".as_bytes();
        assert!(check.accept(b"data: "));
        assert!(check.accept(&thumbs_up[..2]));
        assert!(check.accept(&thumbs_up[2..]));
        assert!(check.accept(&vec![b'x'; MAX_LINE_BYTES - 10]));
        assert!(check.accept(b"\r\n"));
        assert!(check.accept(&vec![b'x'; MAX_LINE_BYTES]));
        assert!(!check.accept(b"x"));

        let mut check = Check::default();
        assert!(!check.accept(&thumbs_up[1..]), "not the start of a character");
    }
}
