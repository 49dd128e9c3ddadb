//! Limits of the bounded routes: requests over the concurrency limit are shed, a request that takes
//! too long is cut.

use std::time::Duration;

use skillcat::config::SourceConfig;
use tokio::net::TcpStream;

use super::{ALPHA, assert_alive, get, post_load, two_skills};
use crate::support::http::{read_answer, read_continue, write_all};
use crate::support::server::TestApp;

/// A load whose body never finishes: it holds its place among the requests in progress. It asks
/// for `100 Continue`, which the server sends when the handler starts reading the body, so once
/// that arrives the request is past the limits and waiting in the handler.
async fn hold_a_load(app: &TestApp) -> TcpStream {
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let head = "POST /skills/alpha/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n";
    write_all(&stream, head.as_bytes()).await.expect("write the head");
    read_continue(&stream).await;
    write_all(&stream, b"1\r\n{\r\n").await.expect("write the start of the body");
    stream
}

#[tokio::test]
async fn requests_over_the_concurrency_limit_are_shed_with_503() {
    let dir = two_skills();
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| {
        options.limits.concurrency = 1;
    })
    .await;
    let held = hold_a_load(&app).await;
    let answer = post_load(&app, "alpha", &[], None).await;
    assert_eq!(answer.header("retry-after"), Some("1"));
    answer.problem(503, "overloaded");
    // The limit is on requests in progress, whatever their route.
    get(&app, "/skills", &[]).await.problem(503, "overloaded");
    get(&app, "/manifest", &[]).await.problem(503, "overloaded");
    // Probes are never shed: a busy server is still alive and ready.
    assert_eq!(get(&app, "/healthz", &[]).await.status, 200);
    assert_eq!(get(&app, "/readyz", &[]).await.status, 200);
    // Event streams are not bounded requests.
    let events = app.get("/events").send().await.expect("GET /events");
    assert_eq!(events.status(), 200);
    drop(events);

    write_all(&held, b"1\r\n}\r\n0\r\n\r\n").await.expect("finish the body");
    let answer = read_answer(&held).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["content"], ALPHA);
    assert_eq!(get(&app, "/skills", &[]).await.status, 200, "the permit is released");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_request_that_takes_too_long_is_408() {
    let dir = two_skills();
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| {
        options.limits.request_timeout = Duration::from_millis(300);
    })
    .await;
    let held = hold_a_load(&app).await;
    let answer = read_answer(&held).await;
    answer.problem(408, "timeout");
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}
