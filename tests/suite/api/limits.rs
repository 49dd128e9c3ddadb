//! Limits of the bounded routes: requests over the concurrency limit are shed, a request that takes
//! too long is cut, a body that arrives too slowly is cut sooner, and a body announced too large
//! is refused before the client sends it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::{ALPHA, LOAD_HEAD, assert_alive, get, post_load, serve_two_skills, serve_two_skills_with};
use crate::support::http::{parse_response, read_answer, read_continue, read_to_close, write_all};
use crate::support::server::TestApp;

/// A load whose body never finishes: it holds its place among the requests in progress. It asks
/// for `100 Continue`, which the server sends when the handler starts reading the body, so once
/// that arrives the request is past the limits and waiting in the handler.
async fn hold_a_load(app: &TestApp) -> TcpStream {
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let head = format!("{LOAD_HEAD}Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n");
    write_all(&stream, head.as_bytes()).await.expect("write the head");
    read_continue(&stream).await;
    write_all(&stream, b"1\r\n{\r\n").await.expect("write the start of the body");
    stream
}

#[tokio::test]
async fn requests_over_the_concurrency_limit_are_shed_with_503() {
    let (_dir, app) = serve_two_skills_with(|options| {
        options.limits.concurrency = 1;
        // The held load must outlast every check below, however slow the machine.
        options.limits.body_timeout = Duration::from_secs(60);
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
    let (_dir, app) = serve_two_skills_with(|options| {
        options.limits.request_timeout = Duration::from_millis(300);
    })
    .await;
    let held = hold_a_load(&app).await;
    let answer = read_answer(&held).await;
    answer.problem(408, "timeout");
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}

/// How a client sends a load's body too slowly.
enum Slow {
    /// Announces 10 bytes and sends one.
    Short,
    /// Sends the first chunk of a chunked body, and no more.
    Chunked,
    /// Asks for `100 Continue`, then sends nothing.
    Expecting,
    /// Sends a byte every 50 ms: the body keeps moving, but does not finish in time.
    Trickle,
}

/// A body that does not arrive within the body deadline is a 408 at that deadline, long before
/// the request timeout: its place among the requests in progress is free again (with a limit of
/// one, the next request would otherwise be shed), and the connection is closed.
#[tokio::test]
async fn a_body_that_arrives_too_slowly_is_408_at_the_body_deadline() {
    let (_dir, app) = serve_two_skills_with(|options| {
        options.limits.concurrency = 1;
        options.limits.body_timeout = Duration::from_millis(300);
        options.limits.request_timeout = Duration::from_secs(30);
    })
    .await;
    for slow in [Slow::Short, Slow::Chunked, Slow::Expecting, Slow::Trickle] {
        let stream = Arc::new(TcpStream::connect(app.address).await.expect("connect"));
        let started = Instant::now();
        let (what, head) = match slow {
            Slow::Short => ("Content-Length: 10, one byte", format!("{LOAD_HEAD}Content-Length: 10\r\n\r\n{{")),
            Slow::Chunked => ("one chunk", format!("{LOAD_HEAD}Transfer-Encoding: chunked\r\n\r\n1\r\n{{\r\n")),
            Slow::Expecting => {
                ("100 Continue, then nothing", format!("{LOAD_HEAD}Content-Length: 10\r\nExpect: 100-continue\r\n\r\n"))
            }
            Slow::Trickle => ("a byte every 50 ms", format!("{LOAD_HEAD}Content-Length: 1000\r\n\r\n")),
        };
        write_all(&stream, head.as_bytes()).await.expect("write");
        let trickle = match slow {
            Slow::Expecting => {
                read_continue(&stream).await;
                None
            }
            Slow::Trickle => {
                let writer = Arc::clone(&stream);
                Some(tokio::spawn(async move {
                    for _ in 0..200 {
                        if write_all(&writer, b" ").await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }))
            }
            Slow::Short | Slow::Chunked => None,
        };
        let answer = read_answer(&stream).await;
        let elapsed = started.elapsed();
        if let Some(trickle) = trickle {
            trickle.abort();
        }
        answer.problem(408, "body-timeout");
        assert_eq!(answer.header("connection"), Some("close"), "{what}");
        assert!(elapsed < Duration::from_secs(3), "{what}: answered after {elapsed:?}, not at the body deadline");
        assert!(read_to_close(&stream, Duration::from_secs(2)).await.is_some(), "{what}: the connection is closed");
        assert_eq!(get(&app, "/skills", &[]).await.status, 200, "{what}: the request's place is free again");
    }
    app.shutdown().await.unwrap();
}

/// A `Content-Length` over the bound on bodies is a 413 at once: before `100 Continue` for a
/// client that expects one (so it never sends the body), and without waiting for a body that is
/// never sent. A body within the bound still gets its `100 Continue`.
#[tokio::test]
async fn a_body_announced_too_large_is_413_before_100_continue() {
    let (_dir, app) = serve_two_skills().await;
    let max = skillcat::http::MAX_BODY_BYTES as u64;
    for (length, expect) in [(max + 1, true), (1 << 40, true), (max + 1, false)] {
        let what = format!("Content-Length: {length}, Expect: {expect}");
        let stream = TcpStream::connect(app.address).await.expect("connect");
        let expect = if expect { "Expect: 100-continue\r\n" } else { "" };
        let head = format!("{LOAD_HEAD}Content-Length: {length}\r\n{expect}\r\n");
        let started = Instant::now();
        write_all(&stream, head.as_bytes()).await.expect("write");
        // The 413 is the first thing the server sends (no `100 Continue` before it), and it
        // closes the connection after it.
        let received = read_to_close(&stream, Duration::from_secs(3)).await;
        let received = received.unwrap_or_else(|| panic!("{what}: no answer and no close within 3 s"));
        assert!(started.elapsed() < Duration::from_secs(1), "{what}: answered after {:?}", started.elapsed());
        let answer = parse_response(&received).unwrap_or_else(|| panic!("{what}: no answer"));
        answer.problem(413, "payload-too-large");
        assert_eq!(answer.header("connection"), Some("close"), "{what}");
    }
    // At the bound: 100 Continue, then the body is read.
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let head = format!("{LOAD_HEAD}Content-Length: {max}\r\nExpect: 100-continue\r\n\r\n");
    write_all(&stream, head.as_bytes()).await.expect("write");
    read_continue(&stream).await;
    let mut body = b"{}".to_vec();
    body.resize(skillcat::http::MAX_BODY_BYTES, b' ');
    write_all(&stream, &body).await.expect("write the body");
    let answer = read_answer(&stream).await;
    assert_eq!((answer.status, answer.json()["content"].as_str()), (200, Some(ALPHA)), "{answer:?}");
    app.shutdown().await.unwrap();
}
