//! Hostile load: event streams are capped in all and per client, request heads are bounded.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use skillcat::limits::ConnectionLimits;
use tokio::net::{TcpSocket, TcpStream};

use crate::support::http::{read_answer, read_to_close, write_all};
use crate::support::process::ServeProcess;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

async fn app_with(limits: ConnectionLimits) -> (tempfile::TempDir, TestApp) {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "First.", "A"));
    let app = TestApp::spawn_dir_with(dir.path(), |options| options.connections = Some(limits)).await;
    (dir, app)
}

/// `GET /events` from the loopback address `client`: the status, and the connection (which
/// holds an accepted stream open).
async fn open_stream(app: &TestApp, client: [u8; 4]) -> (u16, TcpStream) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(IpAddr::from(client), 0)).expect("bind a loopback address");
    let stream = socket.connect(app.address).await.expect("connect");
    write_all(&stream, b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        stream.readable().await.expect("readable");
        let mut byte = [0u8; 1];
        match stream.try_read(&mut byte) {
            Ok(0) => panic!("closed before an answer: {}", String::from_utf8_lossy(&head)),
            Ok(_) => head.push(byte[0]),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => panic!("{error}"),
        }
    }
    let status = String::from_utf8_lossy(&head[9..12]).parse().expect("a status");
    (status, stream)
}

#[tokio::test]
async fn event_streams_are_capped_per_client_and_in_all() {
    let limits = ConnectionLimits { max_connections: 64, max_streams: 4, max_streams_per_client: 2 };
    let (_dir, app) = app_with(limits).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let (status, stream) = open_stream(&app, [127, 0, 0, 1]).await;
        assert_eq!(status, 200);
        held.push(stream);
    }
    // A third from the same client is refused, and says so.
    assert_eq!(open_stream(&app, [127, 0, 0, 1]).await.0, 429);
    for _ in 0..2 {
        let (status, stream) = open_stream(&app, [127, 0, 0, 2]).await;
        assert_eq!(status, 200);
        held.push(stream);
    }
    // Every slot is taken: another client is refused too.
    assert_eq!(open_stream(&app, [127, 0, 0, 3]).await.0, 503);
    assert_eq!(app.metric("skillcat_sse_clients").await, 4);
    // Requests and probes are not streams: they are answered.
    assert_eq!(app.skills().await.status(), 200);
    assert_eq!(app.get("/readyz").send().await.expect("readyz").status(), 200);

    // A stream that ends gives its slot back.
    drop(held.remove(0));
    eventually("the closed stream's slot is free", || async { app.metric("skillcat_sse_clients").await == 3 }).await;
    let (status, _stream) = open_stream(&app, [127, 0, 0, 3]).await;
    assert_eq!(status, 200);
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_request_head_over_the_bound_is_431() {
    let limits = ConnectionLimits::for_descriptors(4096);
    let (_dir, app) = app_with(limits).await;
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let filler = format!("X-Filler: {}\r\n", "a".repeat(1000));
    let mut head = String::from("GET /skills HTTP/1.1\r\nHost: x\r\n");
    while head.len() <= skillcat::server::MAX_HEADER_BYTES {
        head.push_str(&filler);
    }
    // Never finished: the bound holds whether or not the head ends.
    let _ = write_all(&stream, head.as_bytes()).await;
    let answer = read_to_close(&stream, Duration::from_secs(5)).await.expect("an answer, then the end");
    assert!(answer.starts_with(b"HTTP/1.1 431 "), "{}", String::from_utf8_lossy(&answer));
    // Just within the bound is fine.
    let head = format!("GET /skills HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\n\r\n", "a".repeat(30 * 1024));
    let stream = TcpStream::connect(app.address).await.expect("connect");
    write_all(&stream, head.as_bytes()).await.expect("write");
    assert_eq!(read_answer(&stream).await.status, 200);
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn the_caps_are_set_by_flags_and_logged() {
    let server = ServeProcess::start(
        &["serve", "--no-builtin", "--max-connections", "100", "--max-streams", "10", "--max-streams-per-client", "1"],
        &[("SKILLCAT_LISTEN", "127.0.0.1:0")],
        "info",
    );
    server.ready().await;
    let limits: Vec<serde_json::Value> = server
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["message"] == "connection limits")
        .collect();
    assert_eq!(limits.len(), 1, "{}", server.log());
    assert_eq!(
        (&limits[0]["connections"], &limits[0]["streams"], &limits[0]["streams_per_client"]),
        (&100.into(), &10.into(), &1.into())
    );
    let first = reqwest::get(server.url("/events")).await.expect("GET /events");
    assert_eq!(first.status(), 200);
    let second = reqwest::get(server.url("/events")).await.expect("GET /events");
    assert_eq!(second.status(), 429);
    drop(first);
    let (status, _) = server.terminate();
    assert!(status.success());
}
