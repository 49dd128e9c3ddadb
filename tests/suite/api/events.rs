//! `GET /events`: a `catalog` event at connect and on every change; the stream ends at shutdown.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{serve_two_skills, serve_two_skills_with};
use crate::support::events::Events;
use crate::support::skills::write_skill;
use crate::support::wait::DEADLINE;

#[tokio::test]
async fn events_announce_the_catalog_at_connect_and_on_change() {
    let (dir, app) = serve_two_skills().await;
    let tag = app.catalog_etag().await;
    let mut events = Events::open(&app).await;
    assert_eq!(events.next(DEADLINE).await, Some(json!({"etag": tag})), "the first event");

    write_skill(&dir.path().join("gamma"), "---\nname: gamma\ndescription: new\n---\n");
    let second = events.next(DEADLINE).await.expect("an event on change");
    let announced = second["etag"].as_str().expect("a tag").to_owned();
    assert_ne!(announced, tag);
    let body = app.wait_for_catalog(|body| body["etag"] == announced.as_str()).await;
    assert_eq!(body["skills"].as_array().expect("skills").len(), 3);
    drop(events);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_open_event_streams() {
    let (_dir, app) = serve_two_skills_with(|options| {
        // Longer than the test waits: only streams that really end let shutdown finish in time.
        options.shutdown_grace = Duration::from_secs(60);
    })
    .await;
    let mut events = Events::open(&app).await;
    events.next(DEADLINE).await.expect("a first event");
    let started = Instant::now();
    let shutdown = tokio::spawn(app.shutdown());
    assert!(events.ends_within(Duration::from_secs(10)).await, "the event stream did not end within 10 s of shutdown");
    let result = tokio::time::timeout(Duration::from_secs(10), shutdown).await;
    result.expect("shutdown returns within 10 s").expect("the shutdown task").expect("a clean shutdown");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// The header timeout closes connections with nothing to do, never one with an answer still on
/// its way: an event stream stays open however long it is quiet.
#[tokio::test]
async fn an_event_stream_outlives_the_header_timeout() {
    let (dir, app) = serve_two_skills_with(|options| {
        options.header_timeout = Duration::from_millis(200);
    })
    .await;
    let mut events = Events::open(&app).await;
    events.next(DEADLINE).await.expect("a first event");
    // Five header timeouts without a byte on the stream.
    tokio::time::sleep(Duration::from_secs(1)).await;
    write_skill(&dir.path().join("gamma"), "---\nname: gamma\ndescription: new\n---\n");
    assert!(events.next(DEADLINE).await.is_some(), "the stream was closed while quiet");
    drop(events);
    app.shutdown().await.unwrap();
}
