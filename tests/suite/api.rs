//! The HTTP API, tested against a real server on port 0: every route and status of DESIGN.md,
//! a table of malformed requests, malformed HTTP on a raw socket, gzip, bodies equal to nagents'
//! recorded results, tags that agree across replicas, shutdown with an open event stream, load
//! shedding and timeouts.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::{Just, Strategy, any, prop_assert, prop_assert_eq, prop_oneof};
use proptest::sample::select;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};
use skillcat::config::SourceConfig;
use tokio::net::TcpStream;

use crate::support::server::TestApp;
use crate::support::{self, CaseRoot};

// ---------------------------------------------------------------------------------------------
// Fixtures and helpers

const ALPHA: &str = "---\nname: alpha\ndescription: The first skill\n---\n# Alpha\n\nDo the alpha thing.\n";
const BETA: &str = "---\nname: beta\ndescription: The second skill, with <markup> & more\n---\nBeta body.\n";

fn write_skill(root: &Path, folder: &str, text: &str) {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).expect("create the skill folder");
    std::fs::write(dir.join("SKILL.md"), text).expect("write SKILL.md");
}

/// A directory source with `alpha` and `beta`.
fn two_skills() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(dir.path(), "alpha", ALPHA);
    write_skill(dir.path(), "beta", BETA);
    dir
}

/// A directory source with `count` skills whose listing is well over 1 KiB.
fn many_skills(count: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for index in 0..count {
        let name = format!("skill-{index:03}");
        let text = format!(
            "---\nname: {name}\ndescription: Skill number {index}, which explains how to do task {index} well\n---\nBody of {name}.\n"
        );
        write_skill(dir.path(), &name, &text);
    }
    dir
}

fn root_of(dir: &tempfile::TempDir) -> String {
    dir.path().to_str().expect("UTF-8 temporary directory").to_owned()
}

/// An answer, from reqwest or from a raw socket, in one shape.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = String::from_utf8_lossy(&self.body);
        let body =
            if body.len() > 500 { format!("{}…", &body[..body.floor_char_boundary(500)]) } else { body.into() };
        write!(formatter, "{} {:?} {body:?}", self.status, self.headers)
    }
}

impl Answer {
    async fn from(response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        let body = response.bytes().await.expect("read the body").to_vec();
        Answer { status, headers, body }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 body")
    }

    /// Checks that this is an RFC 9457 problem of `status` and `kind`; returns it.
    fn problem(&self, status: u16, kind: &str) -> Value {
        assert_eq!(self.status, status, "status of {self:?}");
        assert_eq!(self.header("content-type"), Some("application/problem+json"), "{self:?}");
        let problem = self.json();
        assert_eq!(problem["type"], format!("urn:skillcat:problem:{kind}"), "{problem}");
        assert_eq!(problem["status"], status, "{problem}");
        assert!(problem["title"].as_str().is_some_and(|title| !title.is_empty()), "{problem}");
        assert!(problem["detail"].is_string(), "{problem}");
        problem
    }
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = app.get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Answer::from(request.send().await.unwrap_or_else(|error| panic!("GET {path}: {error}"))).await
}

async fn post_load(app: &TestApp, name: &str, headers: &[(&str, &str)], body: Option<Value>) -> Answer {
    let mut request = app.client.post(app.url(&format!("/skills/{name}/load")));
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    Answer::from(request.send().await.expect("POST load")).await
}

fn assert_strong_etag(tag: &str) {
    assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() > 2, "not a strong entity tag: {tag}");
}

/// The conditional forms that must all mean "the client's copy is current".
fn matching_forms(tag: &str) -> Vec<String> {
    vec![tag.to_owned(), format!("\"other\", {tag}"), format!("W/{tag}"), format!("\"a\",W/{tag} , \"b\""), "*".into()]
}

/// Checks 304 for every matching `If-None-Match` form and 200 for a tag that does not match.
async fn assert_conditional_get(app: &TestApp, path: &str, tag: &str) {
    for form in matching_forms(tag) {
        let answer = get(app, path, &[("if-none-match", &form)]).await;
        assert_eq!(answer.status, 304, "GET {path} with If-None-Match: {form}");
        assert!(answer.body.is_empty(), "a 304 has no body");
        assert_eq!(answer.header("etag"), Some(tag), "a 304 repeats the tag");
    }
    for other in ["\"other\"", "W/\"other\"", "garbage", ""] {
        let answer = get(app, path, &[("if-none-match", other)]).await;
        assert_eq!(answer.status, 200, "GET {path} with If-None-Match: {other}");
    }
}

/// The entry of `name` in `GET /skills`.
async fn listed(app: &TestApp, name: &str) -> Value {
    let listing = get(app, "/skills", &[]).await.json();
    listing["skills"].as_array().expect("skills").iter().find(|skill| skill["name"] == name).expect("listed").clone()
}

/// Reads the next Server-Sent Event (skipping keep-alive comments) within 5 s; `None` at the end.
async fn next_event(response: &mut reqwest::Response, buffer: &mut String) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if event.lines().all(|line| line.starts_with(':') || line.is_empty()) {
                continue;
            }
            return Some(event);
        }
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .expect("an event within 5 s")
            .expect("read the event stream")?;
        buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8 events"));
    }
}

/// The `data` of a `catalog` event.
fn catalog_event(event: &str) -> Value {
    let mut lines = event.lines().filter(|line| !line.starts_with(':'));
    assert_eq!(lines.next(), Some("event: catalog"), "{event:?}");
    let data = lines.next().and_then(|line| line.strip_prefix("data: ")).expect("a data line");
    serde_json::from_str(data).expect("JSON data")
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP over a socket

// tokio's `io-util` is not enabled for this package, so sockets are driven with `try_read` and
// `try_write`.

async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

async fn read_some(stream: &TcpStream, buffer: &mut [u8]) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buffer) {
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            result => return result,
        }
    }
}

/// Writes `request` on a fresh connection and reads until the server closes it (at most 5 s).
/// Write errors are ignored: a server may close before reading everything, which is its right.
async fn raw_exchange(app: &TestApp, request: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let _ = write_all(&stream, request).await;
    read_to_close(&stream, Duration::from_secs(5)).await.expect("the server closes the connection within 5 s")
}

/// Reads until EOF or a reset; `None` if the connection is still open after `limit`.
async fn read_to_close(stream: &TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, read_some(stream, &mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(received),
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    }
}

/// Parses the first response in `bytes` (`None` if the server answered nothing).
fn parse_response(bytes: &[u8]) -> Option<Answer> {
    let end = bytes.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..end]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status = status_line.split(' ').nth(1)?.parse().expect("a status code");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let length: Option<usize> =
        headers.iter().find(|(name, _)| name == "content-length").map(|(_, value)| value.parse().unwrap());
    let chunked = headers.iter().any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = match (length, chunked) {
        (Some(length), _) => rest[..length.min(rest.len())].to_vec(),
        (None, true) => dechunk(rest),
        (None, false) => rest.to_vec(),
    };
    Some(Answer { status, headers, body })
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|window| window == b"\r\n").expect("a chunk size line");
        let size_text = std::str::from_utf8(&rest[..line_end]).expect("ASCII");
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).expect("hex size");
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
        rest = &rest[line_end + 2 + size + 2..];
    }
}

/// A request written byte for byte, for what a URL library would normalize away (dot segments).
async fn raw_request(app: &TestApp, method: &str, path: &str, headers: &[(String, Vec<u8>)], body: &[u8]) -> Answer {
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", app.address).into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() {
        request.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body);
    let bytes = raw_exchange(app, &request).await;
    parse_response(&bytes).unwrap_or_else(|| panic!("no answer to {method} {path}"))
}

/// Checks that the server still answers normally.
async fn assert_alive(app: &TestApp) {
    let answer = get(app, "/healthz", &[]).await;
    assert_eq!(answer.status, 200, "the server survives");
    assert_eq!(get(app, "/skills", &[]).await.status, 200, "the server survives");
}

// ---------------------------------------------------------------------------------------------
// Every route and status

#[tokio::test]
async fn the_catalog_has_a_strong_etag_that_its_body_repeats() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let answer = Answer::from(app.skills().await).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("cache-control"), Some("no-cache"));
    let tag = answer.header("etag").expect("an ETag").to_owned();
    assert_strong_etag(&tag);
    let body = answer.json();
    assert_eq!(body["etag"], tag, "the body's etag is the header's");
    let root = root_of(&dir);
    assert_eq!(body["shadowed"], json!([]));
    assert_eq!(body["diagnostics"], json!([]));
    let skills = body["skills"].as_array().expect("skills");
    let names: Vec<&str> = skills.iter().map(|skill| skill["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["alpha", "beta"], "name order");
    assert_eq!(skills[1]["description"], "The second skill, with <markup> & more");
    assert_eq!(skills[0]["location"], format!("{root}/alpha/SKILL.md"));
    assert_eq!(skills[0]["source"], root, "a directory source is labelled with its root");
    for skill in skills {
        let fields: Vec<&String> = skill.as_object().expect("object").keys().collect();
        assert_eq!(fields.len(), 5, "{skill}");
        assert_strong_etag(skill["etag"].as_str().expect("etag"));
    }
    assert_ne!(skills[0]["etag"], skills[1]["etag"]);
    assert_conditional_get(&app, "/skills", &tag).await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn one_skill_is_its_entry_of_the_catalog() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let entry = listed(&app, "beta").await;
    let answer = Answer::from(app.skill("beta").await).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("cache-control"), Some("no-cache"));
    assert_eq!(answer.json(), entry);
    let tag = entry["etag"].as_str().expect("etag");
    assert_eq!(answer.header("etag"), Some(tag));
    assert_conditional_get(&app, "/skills/beta", tag).await;
    get(&app, "/skills/not%20valid", &[]).await.problem(400, "invalid-name");
    let missing = get(&app, "/skills/gamma", &[]).await.problem(404, "skill-not-found");
    assert_eq!(missing["detail"], "no skill named 'gamma' in the catalog");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn content_is_the_whole_file_guarded_by_the_skill_etag() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let tag = listed(&app, "alpha").await["etag"].as_str().expect("etag").to_owned();
    let answer = Answer::from(app.content("alpha").await).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("text/markdown; charset=utf-8"));
    assert_eq!(answer.header("etag"), Some(tag.as_str()));
    assert_eq!(answer.text(), ALPHA);
    for form in matching_forms(&tag) {
        let answer = get(&app, "/skills/alpha/content", &[("if-none-match", &form)]).await;
        assert_eq!(answer.status, 304, "If-None-Match: {form}");
        assert!(answer.body.is_empty());
        assert_eq!(answer.header("etag"), Some(tag.as_str()));
    }
    let passing = [tag.clone(), "*".to_owned(), format!("\"other\", {tag}")];
    for form in &passing {
        let answer = get(&app, "/skills/alpha/content", &[("if-match", form)]).await;
        assert_eq!(answer.status, 200, "If-Match: {form}");
        assert_eq!(answer.text(), ALPHA);
    }
    let beta = listed(&app, "beta").await["etag"].as_str().expect("etag").to_owned();
    // If-Match compares strongly: a weak tag never matches, even the current one.
    for form in [beta.as_str(), "\"other\"", &format!("W/{tag}"), "garbage"] {
        let problem =
            get(&app, "/skills/alpha/content", &[("if-match", form)]).await.problem(412, "precondition-failed");
        assert_eq!(problem["detail"], "the skill's current etag does not match If-Match");
    }
    get(&app, "/skills/gamma/content", &[]).await.problem(404, "skill-not-found");
    get(&app, "/skills/a.b/content", &[]).await.problem(400, "invalid-name");
    app.shutdown().await.unwrap();
}

fn load_result(root: &str, name: &str, content: &str, truncated: bool, limit: u64) -> Value {
    json!({
        "name": name,
        "location": format!("{root}/{name}/SKILL.md"),
        "content": content,
        "truncated": truncated,
        "estimated_tokens": content.len().div_ceil(4),
        "token_limit": limit,
    })
}

#[tokio::test]
async fn loads_are_budgeted_as_nagents_does() {
    let dir = two_skills();
    let root = root_of(&dir);
    let app = TestApp::spawn_dir(dir.path()).await;
    let full = load_result(&root, "alpha", ALPHA, false, 10_000);
    let empty = app.load("alpha", None).await;
    assert_eq!(empty.status(), 200);
    assert_eq!(empty.headers()["content-type"], "application/json");
    assert_eq!(empty.json::<Value>().await.unwrap(), full, "an empty body takes the default limit");
    assert_eq!(post_load(&app, "alpha", &[], Some(json!({}))).await.json(), full);
    assert_eq!(
        post_load(&app, "alpha", &[], Some(json!({"token_limit": 3}))).await.json(),
        load_result(&root, "alpha", &ALPHA[..12], true, 3)
    );
    assert_eq!(
        post_load(&app, "alpha", &[], Some(json!({"token_limit": 100_000}))).await.json(),
        load_result(&root, "alpha", ALPHA, false, 100_000)
    );
    let tag = listed(&app, "alpha").await["etag"].as_str().expect("etag").to_owned();
    assert_eq!(post_load(&app, "alpha", &[("if-match", &tag)], None).await.json(), full);
    assert_eq!(post_load(&app, "alpha", &[("if-match", "*")], None).await.json(), full);
    for form in ["\"other\"", &format!("W/{tag}")] {
        post_load(&app, "alpha", &[("if-match", form)], None).await.problem(412, "precondition-failed");
    }
    post_load(&app, "gamma", &[], None).await.problem(404, "skill-not-found");
    post_load(&app, "bad!", &[], None).await.problem(400, "invalid-name");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_manifest_is_plain_text_with_an_etag() {
    let dir = two_skills();
    let root = root_of(&dir);
    let app = TestApp::spawn_dir(dir.path()).await;
    let answer = Answer::from(app.manifest().await).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(answer.header("cache-control"), Some("no-cache"));
    let tag = answer.header("etag").expect("ETag").to_owned();
    assert_strong_etag(&tag);
    assert_ne!(Some(tag.as_str()), get(&app, "/skills", &[]).await.header("etag"));
    let manifest = answer.text();
    assert!(manifest.starts_with("Available skills: use skill(name)"), "{manifest}");
    assert!(
        manifest.contains(&format!(
            "<skill name=\"beta\" location=\"{root}/beta/SKILL.md\">The second skill, with &lt;markup&gt; &amp; more</skill>"
        )),
        "{manifest}"
    );
    assert!(manifest.ends_with("</available_skills>"), "{manifest}");
    assert_conditional_get(&app, "/manifest", &tag).await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn events_announce_the_catalog_at_connect_and_on_change() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let tag = app.catalog_etag().await;
    let mut events = app.get("/events").send().await.expect("GET /events");
    assert_eq!(events.status(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    let first = next_event(&mut events, &mut buffer).await.expect("a first event");
    assert_eq!(catalog_event(&first), json!({"etag": tag}));

    write_skill(dir.path(), "gamma", "---\nname: gamma\ndescription: new\n---\n");
    let second = next_event(&mut events, &mut buffer).await.expect("an event on change");
    let announced = catalog_event(&second)["etag"].as_str().expect("a tag").to_owned();
    assert_ne!(announced, tag);
    let body = app.wait_for_catalog(|body| body["etag"] == announced.as_str()).await;
    assert_eq!(body["skills"].as_array().expect("skills").len(), 3);
    drop(events);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn operations_routes_answer() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let health = get(&app, "/healthz", &[]).await;
    assert_eq!((health.status, health.json()), (200, json!({"status": "ok"})));
    let ready = get(&app, "/readyz", &[]).await;
    assert_eq!((ready.status, ready.json()), (200, json!({"status": "ready"})));

    let openapi = get(&app, "/openapi.json", &[]).await;
    assert_eq!(openapi.status, 200);
    assert_eq!(openapi.header("content-type"), Some("application/json"));
    let document = openapi.json();
    assert!(document["openapi"].as_str().is_some_and(|version| version.starts_with("3.1")), "{}", document["openapi"]);

    // Requests that the metrics must count under their route template.
    assert_eq!(get(&app, "/skills/alpha", &[]).await.status, 200);
    assert_eq!(get(&app, "/skills/nobody", &[]).await.status, 404);
    assert_eq!(get(&app, "/skills/alpha/content", &[]).await.status, 200);
    assert_eq!(get(&app, "/no/such/route", &[]).await.status, 404);
    let mut events = app.get("/events").send().await.expect("GET /events");
    next_event(&mut events, &mut String::new()).await.expect("a first event");

    let metrics = get(&app, "/metrics", &[]).await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.header("content-type").is_some_and(|value| value.starts_with("text/plain")), "{metrics:?}");
    let text = metrics.text();
    for line in [
        "skillcat_http_requests_total{route=\"/skills/{name}\",status=\"200\"} 1",
        "skillcat_http_requests_total{route=\"/skills/{name}\",status=\"404\"} 1",
        "skillcat_http_requests_total{route=\"/skills/{name}/content\",status=\"200\"} 1",
        "skillcat_http_requests_total{route=\"/healthz\",status=\"200\"} 1",
        "skillcat_catalog_skills 2",
        "skillcat_sse_clients 1",
    ] {
        assert!(text.lines().any(|metric| metric == line), "missing {line:?} in\n{text}");
    }
    assert_route_labels_are_templates(text);
    drop(events);
    app.shutdown().await.unwrap();
}

/// Every `route` label is a route template (or `unmatched`), never a raw path.
fn assert_route_labels_are_templates(metrics: &str) {
    // The documented paths are the routes' templates.
    let document: Value = serde_json::from_str(&skillcat::api::openapi_document()).expect("OpenAPI JSON");
    let templates: Vec<&String> = document["paths"].as_object().expect("paths").keys().collect();
    let mut labels = 0;
    for line in metrics.lines().filter(|line| !line.starts_with('#')) {
        if let Some(start) = line.find("route=\"") {
            let rest = &line[start + 7..];
            let label = &rest[..rest.find('"').expect("closing quote")];
            assert!(
                templates.iter().any(|template| *template == label) || label == "unmatched",
                "raw path as a route label: {line}"
            );
            labels += 1;
        }
    }
    assert!(labels > 0, "no route labels in\n{metrics}");
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow_and_unknown_routes_404() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let cases = [
        (Method::PUT, "/skills", "GET"),
        (Method::DELETE, "/skills/alpha", "GET"),
        (Method::POST, "/skills/alpha/content", "GET"),
        (Method::GET, "/skills/alpha/load", "POST"),
        (Method::POST, "/manifest", "GET"),
        (Method::POST, "/events", "GET"),
        (Method::DELETE, "/metrics", "GET"),
    ];
    for (method, path, allowed) in cases {
        let answer = Answer::from(app.client.request(method.clone(), app.url(path)).send().await.expect("send")).await;
        answer.problem(405, "method-not-allowed");
        let allow = answer.header("allow").unwrap_or_else(|| panic!("{method} {path}: no Allow header"));
        let methods: Vec<&str> = allow.split(',').map(str::trim).collect();
        assert!(methods.contains(&allowed), "{method} {path}: Allow: {allow}");
        assert!(!methods.contains(&method.as_str()), "{method} {path}: Allow: {allow}");
    }
    let problem = get(&app, "/nothing-here", &[]).await.problem(404, "not-found");
    assert_eq!(problem["detail"], "no such route");
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// A failed source

#[tokio::test]
async fn a_failed_source_answers_503_with_nagents_message() {
    let (root, case) = support::case_tree("dup-same-source");
    let message = support::recorded("dup-same-source")["composite"]["error"]
        .as_str()
        .expect("nagents' error")
        .replace("$T", root.path_str());
    assert!(message.starts_with("Duplicate skill name 'x' at "), "{message}");
    let app = TestApp::spawn(case_sources(&root, &case)).await;
    for path in ["/skills", "/skills/x", "/skills/c", "/skills/x/content", "/manifest"] {
        let answer = get(&app, path, &[]).await;
        let problem = answer.problem(503, "catalog-unavailable");
        assert_eq!(problem["detail"], message.as_str(), "{path}");
        assert_eq!(answer.header("retry-after"), Some("1"), "{path}");
    }
    for body in [None, Some(json!({"token_limit": 5}))] {
        let problem = post_load(&app, "x", &[], body).await.problem(503, "catalog-unavailable");
        assert_eq!(problem["detail"], message.as_str());
    }
    // Requests that are wrong in themselves are still refused for that reason first.
    get(&app, "/skills/bad%20name", &[]).await.problem(400, "invalid-name");
    post_load(&app, "x", &[], Some(json!({"token_limit": 0}))).await.problem(422, "invalid-body");
    // The server is up and ready: it answers, with problems that say why.
    assert_eq!(get(&app, "/healthz", &[]).await.status, 200);
    let ready = get(&app, "/readyz", &[]).await;
    assert_eq!((ready.status, ready.json()), (200, json!({"status": "ready"})));
    let mut events = app.get("/events").send().await.expect("GET /events");
    assert_eq!(events.status(), 200);
    let first = next_event(&mut events, &mut String::new()).await.expect("a first event");
    assert_eq!(catalog_event(&first), json!({"etag": null}));
    drop(events);
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Malformed requests

enum Payload {
    None,
    /// A body with a `Content-Length`.
    Bytes(Vec<u8>),
    /// A body sent in chunks, without a `Content-Length`.
    Chunked(Vec<u8>),
}

struct Bad {
    method: &'static str,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    payload: Payload,
    status: u16,
    /// The problem type, or `None` for a request that must succeed.
    kind: Option<&'static str>,
}

fn bad(method: &'static str, path: impl Into<String>, status: u16, kind: &'static str) -> Bad {
    Bad { method, path: path.into(), headers: Vec::new(), payload: Payload::None, status, kind: Some(kind) }
}

fn fine(method: &'static str, path: impl Into<String>) -> Bad {
    Bad { method, path: path.into(), headers: Vec::new(), payload: Payload::None, status: 200, kind: None }
}

/// A load of `alpha` with a JSON body.
fn load_json(body: &str, status: u16, kind: &'static str) -> Bad {
    bad("POST", "/skills/alpha/load", status, kind).body("application/json", body.as_bytes())
}

impl Bad {
    fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    fn body(self, content_type: &str, body: impl AsRef<[u8]>) -> Self {
        let mut row = if content_type.is_empty() { self } else { self.header("content-type", content_type) };
        row.payload = Payload::Bytes(body.as_ref().to_vec());
        row
    }

    fn chunked(mut self, content_type: &str, body: Vec<u8>) -> Self {
        self = self.header("content-type", content_type);
        self.payload = Payload::Chunked(body);
        self
    }

    fn describe(&self) -> String {
        let body = match &self.payload {
            Payload::None => String::new(),
            Payload::Bytes(bytes) | Payload::Chunked(bytes) if bytes.len() > 80 => format!(" <{} bytes>", bytes.len()),
            Payload::Bytes(bytes) | Payload::Chunked(bytes) => format!(" {}", String::from_utf8_lossy(bytes)),
        };
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value);
                let value = if value.len() > 40 { format!("<{} bytes>", value.len()) } else { value.into_owned() };
                format!("{name}: {value}")
            })
            .collect();
        let path = if self.path.len() > 80 { format!("{}…", &self.path[..80]) } else { self.path.clone() };
        format!("{} {path} {headers:?}{body}", self.method)
    }

    /// Dot segments must reach the server as written; a URL library would resolve them.
    fn needs_raw_socket(&self) -> bool {
        self.path.split(['/', '?']).any(|segment| {
            let segment = segment.to_ascii_lowercase().replace("%2e", ".");
            segment == "." || segment == ".."
        })
    }

    async fn send(&self, app: &TestApp) -> Answer {
        if self.needs_raw_socket() {
            let body = match &self.payload {
                Payload::None => &[][..],
                Payload::Bytes(bytes) => bytes,
                Payload::Chunked(_) => unreachable!("raw rows send plain bodies"),
            };
            return raw_request(app, self.method, &self.path, &self.headers, body).await;
        }
        let method = Method::from_bytes(self.method.as_bytes()).expect("method");
        let mut request = app.client.request(method, app.url(&self.path));
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).expect("header name");
            request = request.header(name, HeaderValue::from_bytes(value).expect("header value"));
        }
        request = match &self.payload {
            Payload::None => request,
            Payload::Bytes(bytes) => request.body(bytes.clone()),
            Payload::Chunked(bytes) => {
                let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                    bytes.chunks(8192).map(|chunk| Ok(chunk.to_vec())).collect();
                request.body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)))
            }
        };
        Answer::from(request.send().await.unwrap_or_else(|error| panic!("{}: {error}", self.describe()))).await
    }
}

fn malformed_requests() -> Vec<Bad> {
    let long_name = "a".repeat(65);
    let longest_name = "a".repeat(64);
    let mut padded = b"{}".to_vec();
    padded.resize(skillcat::api::MAX_BODY_BYTES, b' ');
    let mut over = b"{}".to_vec();
    over.resize(skillcat::api::MAX_BODY_BYTES + 1, b' ');
    vec![
        // Skill names in the path.
        bad("GET", "/skills/a%20b", 400, "invalid-name"),
        bad("GET", format!("/skills/{long_name}"), 400, "invalid-name"),
        bad("GET", format!("/skills/{longest_name}"), 404, "skill-not-found"),
        bad("GET", format!("/skills/{}", "x".repeat(10_000)), 400, "invalid-name"),
        bad("GET", "/skills/..", 400, "invalid-name"),
        bad("GET", "/skills/.", 400, "invalid-name"),
        bad("GET", "/skills/%2e%2E", 400, "invalid-name"),
        bad("GET", "/skills/%2E%2E/content", 400, "invalid-name"),
        bad("GET", "/skills/../skills", 404, "not-found"),
        bad("GET", "/skills/a.b", 400, "invalid-name"),
        bad("GET", "/skills/a%2Fb", 400, "invalid-name"),
        bad("GET", "/skills/..%2F..%2Fetc%2Fpasswd/content", 400, "invalid-name"),
        bad("GET", "/skills/%FF", 400, "invalid-name"),
        bad("GET", "/skills/%C3%A9t%C3%A9", 400, "invalid-name"),
        bad("GET", "/skills/a%00b", 400, "invalid-name"),
        bad("GET", "/skills/%", 400, "invalid-name"),
        bad("POST", "/skills/a%20b/load", 400, "invalid-name"),
        bad("GET", "/skills/Alpha", 404, "skill-not-found"),
        // Unknown routes.
        bad("GET", "/skills/alpha/y", 404, "not-found"),
        bad("GET", "/skills/x/y/z", 404, "not-found"),
        bad("GET", "//skills", 404, "not-found"),
        bad("GET", "/skills/", 404, "not-found"),
        bad("GET", "/skills//content", 400, "invalid-name"),
        bad("GET", "/SKILLS", 404, "not-found"),
        bad("GET", "/", 404, "not-found"),
        bad("POST", "/nowhere", 404, "not-found"),
        bad("GET", "/skills/alpha/content/", 404, "not-found"),
        // Query strings are ignored.
        fine("GET", "/skills?x=1&y"),
        fine("GET", "/skills/alpha?%FF"),
        fine("POST", "/skills/alpha/load?token_limit=0"),
        // Wrong methods on every route.
        bad("PUT", "/skills", 405, "method-not-allowed"),
        bad("DELETE", "/skills", 405, "method-not-allowed"),
        bad("PATCH", "/skills", 405, "method-not-allowed"),
        bad("POST", "/skills", 405, "method-not-allowed"),
        bad("PUT", "/skills/alpha", 405, "method-not-allowed"),
        bad("DELETE", "/skills/alpha", 405, "method-not-allowed"),
        bad("PATCH", "/skills/bad%20name", 405, "method-not-allowed"),
        bad("POST", "/skills/alpha/content", 405, "method-not-allowed"),
        bad("PUT", "/skills/alpha/content", 405, "method-not-allowed"),
        bad("GET", "/skills/alpha/load", 405, "method-not-allowed"),
        bad("PUT", "/skills/alpha/load", 405, "method-not-allowed"),
        bad("DELETE", "/skills/alpha/load", 405, "method-not-allowed"),
        bad("POST", "/manifest", 405, "method-not-allowed"),
        bad("DELETE", "/events", 405, "method-not-allowed"),
        bad("PATCH", "/healthz", 405, "method-not-allowed"),
        bad("PUT", "/readyz", 405, "method-not-allowed"),
        bad("POST", "/metrics", 405, "method-not-allowed"),
        bad("DELETE", "/openapi.json", 405, "method-not-allowed"),
        bad("OPTIONS", "/skills", 405, "method-not-allowed"),
        bad("FROBNICATE", "/skills", 405, "method-not-allowed"),
        // HEAD is answered as GET without a body where GET is allowed.
        fine("HEAD", "/skills"),
        fine("HEAD", "/skills/alpha/content"),
        bad("HEAD", "/skills/alpha/load", 405, "method-not-allowed"),
        bad("HEAD", "/skills/gamma", 404, "skill-not-found"),
        bad("HEAD", "/nowhere", 404, "not-found"),
        // token_limit.
        load_json(r#"{"token_limit": 0}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 100001}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": -1}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 1.5}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 5.0}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 1e3}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 18446744073709551616}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": "5"}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": true}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": []}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": {}}"#, 422, "invalid-body"),
        // Other fields and shapes.
        load_json(r#"{"token_limit": 5, "extra": 1}"#, 422, "invalid-body"),
        load_json(r#"{"tokenLimit": 5}"#, 422, "invalid-body"),
        load_json("[]", 422, "invalid-body"),
        load_json(r#"[{"token_limit": 5}]"#, 422, "invalid-body"),
        load_json(r#""token_limit""#, 422, "invalid-body"),
        load_json("42", 422, "invalid-body"),
        load_json("null", 422, "invalid-body"),
        // Not JSON.
        load_json(r#"{"token_limit": "#, 400, "malformed-json"),
        load_json("{'token_limit': 5}", 400, "malformed-json"),
        load_json(r#"{"token_limit": 5}}"#, 400, "malformed-json"),
        load_json(r#"{"token_limit": 5, "token_limit": 6"#, 400, "malformed-json"),
        load_json("   ", 400, "malformed-json"),
        bad("POST", "/skills/alpha/load", 400, "malformed-json").body("application/json", b"{\"a\xff\": 1}"),
        // Valid bodies at the edges.
        load_json("{}", 200, "").ok(),
        load_json(r#"{"token_limit": 1}"#, 200, "").ok(),
        load_json(r#"{"token_limit": null}"#, 200, "").ok(),
        load_json(r#" {"token_limit" : 100000} "#, 200, "").ok(),
        fine("POST", "/skills/alpha/load").body("application/json; charset=utf-8", "{}"),
        fine("POST", "/skills/alpha/load").body("Application/JSON", "{}"),
        fine("POST", "/skills/alpha/load").header("content-type", "text/plain"),
        fine("POST", "/skills/alpha/load").body("application/json", padded),
        // Content types.
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type").body("text/plain", "{}"),
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type")
            .body("application/x-www-form-urlencoded", "token_limit=5"),
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type").body("", "{}"),
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type").body("application/jsonx", "{}"),
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type").body("application/problem+json", "{}"),
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type").body("multipart/form-data; boundary=x", "{}"),
        bad("POST", "/skills/alpha/load", 415, "unsupported-media-type").body("\u{e9}/json", "{}"),
        // Sizes.
        bad("POST", "/skills/alpha/load", 413, "payload-too-large").body("application/json", over.clone()),
        bad("POST", "/skills/alpha/load", 413, "payload-too-large").chunked("application/json", over),
        bad("POST", "/skills/alpha/load", 413, "payload-too-large").chunked("application/json", vec![b' '; 1 << 20]),
        // Conditional headers.
        bad("POST", "/skills/alpha/load", 412, "precondition-failed").header("if-match", "garbage"),
        bad("POST", "/skills/alpha/load", 412, "precondition-failed").header("if-match", ""),
        bad("POST", "/skills/alpha/load", 412, "precondition-failed").header("if-match", b"\"\xff\xfe\""),
        bad("POST", "/skills/alpha/load", 412, "precondition-failed").header("if-match", "\"x\"".repeat(5_000)),
        bad("GET", "/skills/alpha/content", 412, "precondition-failed").header("if-match", "W/*"),
        fine("GET", "/skills/alpha").header("if-none-match", b"\"\xff\""),
        fine("GET", "/skills").header("if-none-match", ",,, ,"),
        bad("GET", "/skills/gamma", 404, "skill-not-found").header("if-none-match", "x".repeat(30_000)),
        bad("GET", "/nowhere", 404, "not-found").header("x-long", "y".repeat(60_000)),
        fine("GET", "/manifest").header("accept-encoding", "gzip;q=nonsense, *;q=-1, br;;;"),
    ]
}

impl std::fmt::Debug for Bad {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.describe())
    }
}

impl Bad {
    /// Turns a `load_json` row into one that must succeed.
    fn ok(mut self) -> Self {
        self.kind = None;
        self
    }
}

#[tokio::test]
async fn malformed_requests_get_the_right_problem_and_never_a_server_error() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let table = malformed_requests();
    assert!(table.len() >= 30);
    let mut failures = Vec::new();
    for row in &table {
        let answer = row.send(&app).await;
        let what = row.describe();
        if answer.status >= 500 {
            failures.push(format!("{what}: server error {}", answer.status));
            continue;
        }
        if answer.status != row.status {
            failures.push(format!("{what}: status {} instead of {}: {}", answer.status, row.status, answer.text()));
            continue;
        }
        let Some(kind) = row.kind else { continue };
        if answer.header("content-type") != Some("application/problem+json") {
            failures.push(format!("{what}: content type {:?}", answer.header("content-type")));
            continue;
        }
        if row.method == "HEAD" {
            assert!(answer.body.is_empty(), "{what}: a HEAD answer has no body");
            continue;
        }
        let problem = answer.json();
        if problem["type"] != format!("urn:skillcat:problem:{kind}") || problem["status"] != row.status {
            failures.push(format!("{what}: problem {problem}"));
        }
        if row.status == 405 && answer.header("allow").is_none() {
            failures.push(format!("{what}: 405 without Allow"));
        }
    }
    assert!(failures.is_empty(), "{} of {} rows failed:\n{}", failures.len(), table.len(), failures.join("\n"));
    assert_route_labels_are_templates(get(&app, "/metrics", &[]).await.text());
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}

/// Percent-encodes every byte but ASCII letters, digits, `-`, `_` and `.`.
fn encode_segment(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn arbitrary_request() -> impl Strategy<Value = Bad> {
    let segment = prop_oneof![
        4 => Just("alpha".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just(String::new()),
        2 => "[A-Za-z0-9_.-]{1,70}",
        2 => proptest::collection::vec(any::<u8>(), 0..80).prop_map(|bytes| encode_segment(&bytes)),
    ];
    let prefix = prop_oneof![6 => Just("/skills/"), 1 => select(vec!["/", "/manifest/", "//", "/skills/alpha/"])];
    // Mostly the method the route answers, sometimes another.
    let mostly = |method: &'static str| prop_oneof![6 => Just(method), 1 => select(vec!["GET", "POST", "HEAD", "PUT"])];
    let route = prop_oneof![
        2 => (Just(""), mostly("GET")),
        2 => (Just("/content"), mostly("GET")),
        4 => (Just("/load"), mostly("POST")),
        1 => (select(vec!["/", "?token_limit=%FF", "/load/x"]), mostly("DELETE")),
    ];
    let token_limit = prop_oneof![
        (0u64..200_000).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "[0-9]{0,6}".prop_map(Value::from),
        Just(Value::Null),
    ];
    let body = prop_oneof![
        1 => Just(None),
        3 => r#"\{"token_limit": ?[-+0-9.eE"a-z\[\]{}]{0,24}\}"#.prop_map(|text| Some(text.into_bytes())),
        3 => token_limit.prop_map(|limit| Some(json!({"token_limit": limit}).to_string().into_bytes())),
        1 => proptest::collection::vec(any::<u8>(), 0..300).prop_map(Some),
    ];
    let content_type = prop_oneof![
        4 => Just("application/json"),
        1 => select(vec!["", "text/plain", "application/json; charset=utf-8"]),
    ];
    let if_match = select(vec!["", "*", "garbage", "W/\"x\"", "\"x\", \"y\""]);
    (prefix, segment, route, body, content_type, if_match).prop_map(
        |(prefix, segment, (suffix, method), body, content_type, if_match)| {
            let mut row = fine(method, format!("{prefix}{segment}{suffix}"));
            if !if_match.is_empty() {
                row = row.header("if-match", if_match);
            }
            match body {
                Some(body) if method != "HEAD" => row.body(content_type, body),
                _ => row,
            }
        },
    )
}

/// Whatever comes in, the answer is not a server error, and an error is a problem that agrees
/// with its status.
#[test]
fn arbitrary_requests_never_get_a_server_error() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let dir = two_skills();
    let app = runtime.block_on(TestApp::spawn_dir(dir.path()));
    let config = ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() };
    let result = TestRunner::new(config).run(&arbitrary_request(), |row| {
        let answer = runtime.block_on(row.send(&app));
        prop_assert!(answer.status < 500, "{}: {answer:?}", row.describe());
        if answer.status >= 400 {
            prop_assert_eq!(answer.header("content-type"), Some("application/problem+json"), "{}", row.describe());
            if row.method != "HEAD" {
                let problem = answer.json();
                prop_assert_eq!(&problem["status"], &json!(answer.status), "{}", row.describe());
                let kind = problem["type"].as_str().unwrap_or_default();
                prop_assert!(kind.starts_with("urn:skillcat:problem:"), "{}: {problem}", row.describe());
            }
        }
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    runtime.block_on(assert_alive(&app));
    runtime.block_on(app.shutdown()).expect("shutdown");
}

// ---------------------------------------------------------------------------------------------
// Malformed HTTP

#[tokio::test]
async fn malformed_http_is_refused_and_the_server_survives() {
    let dir = two_skills();
    let app = TestApp::spawn_dir(dir.path()).await;
    let huge = |size: usize| {
        format!("GET /skills HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n", "a".repeat(size))
            .into_bytes()
    };
    let load = |head: &str, body: &str| {
        format!("POST /skills/alpha/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{head}\r\n{body}")
            .into_bytes()
    };
    // What is expected: the status of hyper's (or the API's) answer, `None` for a connection
    // closed without one.
    let cases: Vec<(&str, Vec<u8>, Option<u16>)> = vec![
        ("garbage request line", b"GARBAGE\r\n\r\n".to_vec(), Some(400)),
        ("binary garbage", vec![0, 255, 13, 10, 13, 10, 7, 7], Some(400)),
        ("header without a colon", b"GET /skills HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n".to_vec(), Some(400)),
        ("space before the colon", b"GET /skills HTTP/1.1\r\nHost : x\r\n\r\n".to_vec(), Some(400)),
        ("NUL in a header", b"GET /skills HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n".to_vec(), Some(400)),
        ("unsupported version", b"GET /skills HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(), Some(400)),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), None),
        ("invalid Content-Length", load("Content-Length: abc\r\n", "{}"), Some(400)),
        ("negative Content-Length", load("Content-Length: -1\r\n", "{}"), Some(400)),
        ("conflicting Content-Lengths", load("Content-Length: 2\r\nContent-Length: 3\r\n", "{}"), Some(400)),
        ("unknown transfer coding", load("Transfer-Encoding: gzip\r\n", "{}"), Some(400)),
        ("bad chunk size", load("Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n"), Some(400)),
        // hyper reads headers into a buffer of about 400 KiB; beyond it the answer is 431.
        ("100 KiB header", huge(100 * 1024), Some(200)),
        ("1 MiB header", huge(1 << 20), Some(431)),
    ];
    for (what, request, expected) in cases {
        let bytes = raw_exchange(&app, &request).await;
        let answer = parse_response(&bytes);
        assert_eq!(answer.as_ref().map(|answer| answer.status), expected, "{what}: {answer:?}");
        assert_alive(&app).await;
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_that_stops_sending_headers_is_disconnected() {
    let dir = two_skills();
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| {
        options.header_timeout = Duration::from_millis(300);
    })
    .await;
    // Headers cut off, a request line cut off, nothing at all.
    for partial in [&b"GET /skills HTTP/1.1\r\nHost: x\r\n"[..], b"GET /ski", b""] {
        let stream = TcpStream::connect(app.address).await.expect("connect");
        write_all(&stream, partial).await.expect("write");
        let started = Instant::now();
        let received = read_to_close(&stream, Duration::from_secs(3)).await;
        let received = received.unwrap_or_else(|| panic!("{partial:?}: the connection is still open after 3 s"));
        assert!(started.elapsed() < Duration::from_millis(1500), "{partial:?}: closed after {:?}", started.elapsed());
        if let Some(answer) = parse_response(&received) {
            assert!(answer.status < 500, "{answer:?}");
        }
    }
    // A kept-alive connection that goes quiet after a request is closed the same way.
    let stream = TcpStream::connect(app.address).await.expect("connect");
    write_all(&stream, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    assert_eq!(read_answer(&stream).await.status, 200);
    let started = Instant::now();
    let rest = read_to_close(&stream, Duration::from_secs(3)).await.expect("the idle connection is closed");
    assert!(started.elapsed() < Duration::from_millis(1500), "closed after {:?}", started.elapsed());
    assert!(parse_response(&rest).is_none_or(|answer| answer.status < 500), "{rest:?}");
    assert_alive(&app).await;
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Compression

#[tokio::test]
async fn gzip_bodies_decompress_to_the_identity_bodies() {
    let dir = many_skills(30);
    let app = TestApp::spawn_dir(dir.path()).await;
    for path in ["/skills", "/manifest"] {
        let identity = get(&app, path, &[]).await;
        assert_eq!(identity.status, 200);
        assert!(identity.body.len() > 1024, "{path}: {} bytes", identity.body.len());
        assert_eq!(identity.header("content-encoding"), None);
        assert_eq!(identity.header("vary"), Some("accept-encoding"));

        let compressed = get(&app, path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(compressed.status, 200);
        assert_eq!(compressed.header("content-encoding"), Some("gzip"), "{path}");
        assert_eq!(compressed.header("vary"), Some("accept-encoding"));
        assert_eq!(compressed.header("etag"), identity.header("etag"), "one representation, one tag");
        assert_eq!(compressed.header("content-type"), identity.header("content-type"));
        assert!(compressed.body.len() < identity.body.len());
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&compressed.body[..]), &mut decoded)
            .expect("valid gzip");
        assert_eq!(decoded, identity.body, "{path}");

        for refused in ["gzip;q=0", "identity", "br", "gzip;q=0.0, identity"] {
            let answer = get(&app, path, &[("accept-encoding", refused)]).await;
            assert_eq!(answer.header("content-encoding"), None, "{path} with Accept-Encoding: {refused}");
            assert_eq!(answer.body, identity.body);
        }
        let answer = get(&app, path, &[("accept-encoding", "br;q=1, GZIP;q=0.5")]).await;
        assert_eq!(answer.header("content-encoding"), Some("gzip"));

        // A client that decodes gzip itself sees the identity body.
        let decoding = reqwest::Client::builder().gzip(true).build().expect("client");
        let response = decoding.get(app.url(path)).send().await.expect("GET");
        assert_eq!(response.bytes().await.expect("body").as_ref(), &identity.body[..]);
    }
    // A small body is not worth compressing.
    let small = get(&app, "/skills/skill-001", &[("accept-encoding", "gzip")]).await;
    assert_eq!(small.status, 200);
    assert_eq!(small.header("content-encoding"), None);
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Bodies equal to nagents' recorded results

/// The case's sources, in order, as the server's configuration.
fn case_sources(root: &CaseRoot, case: &Value) -> Vec<SourceConfig> {
    case["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|source| SourceConfig::Directory {
            name: None,
            roots: source["roots"]
                .as_array()
                .expect("roots")
                .iter()
                .map(|relative| root.root_path(relative.as_str().expect("root")).into())
                .collect(),
            max_entries: std::num::NonZeroUsize::new(source["max_entries"].as_u64().unwrap_or(10_000) as usize)
                .expect("positive"),
            max_depth: source["max_depth"].as_u64().unwrap_or(16) as usize,
        })
        .collect()
}

#[tokio::test]
async fn bodies_are_nagents_recorded_results() {
    for name in ["budget-multibyte-cuts", "manifest-html-escaping", "dup-across-sources", "non-utf8-content"] {
        let (root, case) = support::case_tree(name);
        let expected = support::recorded(name);
        let sources = case_sources(&root, &case);
        let labels: Vec<String> = sources
            .iter()
            .map(|source| match source {
                SourceConfig::Directory { roots, .. } => {
                    roots.iter().map(|root| root.display().to_string()).collect::<Vec<_>>().join(", ")
                }
                SourceConfig::Builtin { .. } => unreachable!(),
            })
            .collect();
        let app = TestApp::spawn(sources).await;

        let listing = root.relative(get(&app, "/skills", &[]).await.json());
        let skills: Vec<Value> = listing["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .map(|skill| json!([skill["name"], skill["description"], skill["location"]]))
            .collect();
        assert_eq!(json!(skills), expected["composite"]["skills"], "{name}: skills");
        let shadowed: Vec<Value> = listing["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|s| json!([s["name"], s["location"], s["source"]]))
            .collect();
        let wanted: Vec<Value> = expected["composite"]["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|s| {
                let label = &labels[s[2].as_u64().expect("source index") as usize];
                root.relative(json!([s[0], s[1], label]))
            })
            .collect();
        assert_eq!(shadowed, wanted, "{name}: shadowed");
        let diagnostics: Vec<Value> = listing["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| json!([d["source"], d["message"]]))
            .collect();
        let wanted: Vec<Value> = expected["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .zip(&labels)
            .flat_map(|(source, label)| {
                let messages = source["diagnostics"].as_array().expect("diagnostics").clone();
                messages.into_iter().map(move |message| json!([label, message]))
            })
            .map(|diagnostic| root.relative(diagnostic))
            .collect();
        assert_eq!(diagnostics, wanted, "{name}: diagnostics");

        let manifest = Answer::from(app.manifest().await).await;
        assert_eq!(manifest.status, 200);
        assert_eq!(root.relative(json!(manifest.text())), expected["manifest"], "{name}: manifest");

        let loads = expected["loads"].as_array().expect("loads");
        assert!(!loads.is_empty());
        for load in loads {
            let skill = load["name"].as_str().expect("name");
            let body = json!({"token_limit": load["token_limit"]});
            let answer = post_load(&app, skill, &[], Some(body)).await;
            assert_eq!(answer.status, 200, "{name}: load {skill}");
            assert_eq!(root.relative(answer.json()), load["result"], "{name}: load {skill} {}", load["token_limit"]);
        }
        app.shutdown().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Replicas, changes, shutdown, limits

/// Every tag a server answers for the `two_skills` catalog.
async fn all_tags(app: &TestApp) -> Vec<String> {
    let mut tags = Vec::new();
    for path in ["/skills", "/manifest", "/skills/alpha", "/skills/beta", "/skills/alpha/content"] {
        let answer = get(app, path, &[]).await;
        assert_eq!(answer.status, 200);
        tags.push(answer.header("etag").expect("ETag").to_owned());
    }
    let listing = get(app, "/skills", &[]).await.json();
    tags.extend(listing["skills"].as_array().expect("skills").iter().map(|s| s["etag"].to_string()));
    tags
}

#[tokio::test]
async fn two_servers_on_the_same_files_give_the_same_tags() {
    let dir = two_skills();
    let first = TestApp::spawn_dir(dir.path()).await;
    let second = TestApp::spawn_dir(dir.path()).await;
    let (a, b) = (all_tags(&first).await, all_tags(&second).await);
    assert_eq!(a, b);
    assert_eq!(a[2], a[4], "the content's tag is the skill's");
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_that_changed_since_the_snapshot_is_409() {
    let dir = two_skills();
    // Without the watcher the server only learns of a change when a request meets it.
    let app =
        TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| options.live.watch = false).await;
    let old = listed(&app, "alpha").await["etag"].as_str().expect("etag").to_owned();
    let edited = ALPHA.replace("Do the alpha thing.", "Do the alpha thing differently.");
    write_skill(dir.path(), "alpha", &edited);
    let problem = get(&app, "/skills/alpha/content", &[]).await.problem(409, "skill-changed");
    assert_eq!(problem["detail"], "Skill 'alpha' changed; refresh discovery and retry");
    // The conflict asked for a rescan; the catalog then lists the new version.
    let body = app.wait_for_catalog(|body| body["skills"][0]["etag"] != old.as_str()).await;
    let new = body["skills"][0]["etag"].as_str().expect("etag").to_owned();
    let answer = get(&app, "/skills/alpha/content", &[("if-match", &new)]).await;
    assert_eq!((answer.status, answer.text()), (200, edited.as_str()));
    get(&app, "/skills/alpha/content", &[("if-match", &old)]).await.problem(412, "precondition-failed");

    std::fs::remove_dir_all(dir.path().join("beta")).expect("remove beta");
    post_load(&app, "beta", &[], None).await.problem(409, "skill-changed");
    app.wait_for_catalog(|body| body["skills"].as_array().is_some_and(|skills| skills.len() == 1)).await;
    post_load(&app, "beta", &[], None).await.problem(404, "skill-not-found");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_open_event_streams() {
    let dir = two_skills();
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| {
        // Longer than the test waits: only streams that really end let shutdown finish in time.
        options.shutdown_grace = Duration::from_secs(60);
    })
    .await;
    let mut events = app.get("/events").send().await.expect("GET /events");
    let mut buffer = String::new();
    next_event(&mut events, &mut buffer).await.expect("a first event");
    let started = Instant::now();
    let shutdown = tokio::spawn(app.shutdown());
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        while events.chunk().await.expect("a clean end of the stream").is_some() {}
    })
    .await;
    assert!(end.is_ok(), "the event stream did not end within 10 s of shutdown");
    let result = tokio::time::timeout(Duration::from_secs(10), shutdown).await;
    result.expect("shutdown returns within 10 s").expect("the shutdown task").expect("a clean shutdown");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Reads one whole answer from `stream` (at most 5 s), whether or not the server then closes.
async fn read_answer(stream: &TcpStream) -> Answer {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let complete = parse_response(&received).filter(|answer| {
            answer.header("content-length").is_some_and(|length| answer.body.len() >= length.parse().unwrap())
        });
        if let Some(answer) = complete {
            return answer;
        }
        let read = tokio::time::timeout(Duration::from_secs(5), read_some(stream, &mut buffer))
            .await
            .expect("an answer within 5 s")
            .expect("read");
        assert!(read > 0, "the connection closed without an answer: {:?}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buffer[..read]);
    }
}

/// A load whose body never finishes: it holds its place among the requests in progress.
async fn hold_a_load(app: &TestApp) -> TcpStream {
    let stream = TcpStream::connect(app.address).await.expect("connect");
    let head = "POST /skills/alpha/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n";
    write_all(&stream, head.as_bytes()).await.expect("write");
    // Give the server time to route the request into the handler, which then waits for the body.
    tokio::time::sleep(Duration::from_millis(200)).await;
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
