//! A client of `GET /events`: the `catalog` events of one stream.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};
use serde_json::Value;

use super::server::TestApp;

pub struct Events {
    stream: Pin<Box<dyn Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>,
    buffer: Vec<u8>,
}

impl Events {
    /// Opens the stream (without credentials).
    pub async fn open(app: &TestApp) -> Events {
        Events::of(app.get("/events").send().await.expect("GET /events"))
    }

    /// The stream of an answer to `GET /events`, which must be one.
    pub fn of(response: reqwest::Response) -> Events {
        assert_eq!(response.status(), 200, "GET /events");
        let content_type = response.headers().get("content-type").and_then(|value| value.to_str().ok());
        assert_eq!(content_type, Some("text/event-stream"));
        Events { stream: Box::pin(response.bytes_stream()), buffer: Vec::new() }
    }

    /// The data of the next `catalog` event, or `None` if none comes within `wait`. The stream
    /// ending instead fails the test.
    pub async fn next(&mut self, wait: Duration) -> Option<Value> {
        tokio::time::timeout(wait, self.next_event()).await.ok()
    }

    /// Whether the stream ends cleanly (its body completes) within `wait`; events before the end
    /// are passed over.
    pub async fn ends_within(&mut self, wait: Duration) -> bool {
        let end = async {
            while let Some(chunk) = self.stream.next().await {
                chunk.expect("a clean end of the stream");
            }
        };
        tokio::time::timeout(wait, end).await.is_ok()
    }

    /// Cancel safe: a chunk is kept in the buffer as soon as it is received.
    async fn next_event(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8(block).expect("UTF-8 events");
                let mut kind = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        kind = Some(value.trim().to_owned());
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                match kind.as_deref() {
                    Some("catalog") => return serde_json::from_str(&data).expect("JSON event data"),
                    None if data.is_empty() => continue, // a keep-alive comment
                    _ => panic!("unexpected event: {block:?}"),
                }
            }
            let chunk = self.stream.next().await.expect("the event stream stays open").expect("a chunk");
            self.buffer.extend_from_slice(&chunk);
        }
    }
}
