//! Malformed requests: a table where each row is a request and the exact status and problem type
//! it must get, and arbitrary requests (proptest) that must never get a server error.

use proptest::prelude::{Just, Strategy, any, prop_assert, prop_assert_eq, prop_oneof};
use proptest::sample::select;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{assert_alive, assert_route_labels_are_templates, get, serve_two_skills};
use crate::support::http::{Answer, raw_request};
use crate::support::server::TestApp;

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
            return raw_request(app.address, self.method, &self.path, &self.headers, body).await;
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
    padded.resize(skillcat::http::MAX_BODY_BYTES, b' ');
    let mut over = b"{}".to_vec();
    over.resize(skillcat::http::MAX_BODY_BYTES + 1, b' ');
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
        fine("GET", "/"),
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
        // token_limit: an integer in 1..=100000, as JSON Schema's `integer` has it (so an integral
        // number written with a fraction or an exponent is one; see load.rs).
        load_json(r#"{"token_limit": 0}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 100001}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": -1}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 1.5}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 2.5}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 100001.0}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": 18446744073709551616}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": "5"}"#, 422, "invalid-body"),
        load_json(r#"{"token_limit": "2"}"#, 422, "invalid-body"),
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
        load_json(r#"{"token_limit": 2.0}"#, 200, "").ok(),
        load_json(r#"{"token_limit": 5.0}"#, 200, "").ok(),
        load_json(r#"{"token_limit": 1e3}"#, 200, "").ok(),
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
        // Long, but within the bound on request heads (431 beyond it: see bad_http.rs).
        bad("GET", "/nowhere", 404, "not-found").header("x-long", "y".repeat(skillcat::server::MAX_HEADER_BYTES / 2)),
        fine("GET", "/manifest").header("accept-encoding", "gzip;q=nonsense, *;q=-1, br;;;"),
        // The files of a skill: a path names a listed file or nothing.
        fine("GET", "/skills/alpha/files"),
        fine("GET", "/skills/alpha/files/SKILL.md"),
        fine("GET", "/skills/alpha/archive"),
        bad("GET", "/skills/gamma/files", 404, "skill-not-found"),
        bad("GET", "/skills/gamma/archive", 404, "skill-not-found"),
        bad("GET", "/skills/bad%20name/archive", 400, "invalid-name"),
        bad("GET", "/skills/alpha/files/nothing.md", 404, "file-not-found"),
        bad("GET", "/skills/alpha/files/%2e%2e/beta/SKILL.md", 404, "file-not-found"),
        bad("GET", "/skills/alpha/files/..%2Fbeta%2FSKILL.md", 404, "file-not-found"),
        bad("GET", "/skills/alpha/files/SKILL.md%00", 404, "file-not-found"),
        bad("GET", "/skills/alpha/files/%FF", 400, "bad-request"),
        bad("GET", "/skills/alpha/files/SKILL.md", 416, "range-not-satisfiable").header("range", "bytes=99999-"),
        bad("GET", "/skills/alpha/files/SKILL.md", 412, "precondition-failed").header("if-match", "\"sha256:00\""),
        bad("GET", "/skills/alpha/archive", 412, "precondition-failed").header("if-match", "\"other\""),
        bad("POST", "/skills/alpha/archive", 405, "method-not-allowed"),
        bad("DELETE", "/skills/alpha/files/SKILL.md", 405, "method-not-allowed"),
        // The well-known indexes and the older index's files.
        fine("GET", "/.well-known/agent-skills/index.json"),
        fine("GET", "/.well-known/skills/index.json"),
        fine("GET", "/.well-known/skills/alpha/SKILL.md"),
        bad("GET", "/.well-known/skills/alpha/%2e%2e/beta/SKILL.md", 404, "file-not-found"),
        bad("GET", "/.well-known/skills/alpha/nothing.md", 404, "file-not-found"),
        bad("GET", "/.well-known/skills/gamma/SKILL.md", 404, "skill-not-found"),
        bad("POST", "/.well-known/skills/index.json", 405, "method-not-allowed"),
        // Search: the query and the limit.
        fine("GET", "/search?q=alpha"),
        fine("GET", "/search?q=%C3%A9t%C3%A9&limit=100&x=1"),
        fine("GET", "/search?q=nothing+matches+this"),
        bad("GET", "/search", 400, "invalid-query"),
        bad("GET", "/search?limit=5", 400, "invalid-query"),
        fine("GET", "/search?q="),
        fine("GET", "/search?q=+%20-_"),
        bad("GET", format!("/search?q={}", "a".repeat(257)), 400, "invalid-query"),
        // A byte that is not UTF-8 reads as U+FFFD, which is no letter or digit: nothing matches.
        fine("GET", "/search?q=%FF"),
        bad("GET", "/search?q=a&q=b", 400, "invalid-query"),
        bad("GET", "/search?q=a&limit=0", 400, "invalid-query"),
        bad("GET", "/search?q=a&limit=101", 400, "invalid-query"),
        bad("GET", "/search?q=a&limit=2.5", 400, "invalid-query"),
        bad("GET", "/search?q=a&limit=-1", 400, "invalid-query"),
        bad("GET", "/search?q=a&limit=", 400, "invalid-query"),
        bad("GET", "/search?q=a&limit=99999999999999999999999", 400, "invalid-query"),
        bad("POST", "/search?q=a", 405, "method-not-allowed"),
        // The `skills` CLI's search: the same parameters.
        fine("GET", "/api/search?q=alpha&limit=10"),
        fine("GET", "/api/search?q=%FF"),
        bad("GET", "/api/search", 400, "invalid-query"),
        bad("GET", "/api/search?q=a&limit=0", 400, "invalid-query"),
        bad("GET", "/api/search?q=a&limit=101", 400, "invalid-query"),
        bad("GET", "/api/search?q=a&q=b", 400, "invalid-query"),
        bad("GET", format!("/api/search?q={}", "a".repeat(257)), 400, "invalid-query"),
        bad("POST", "/api/search?q=a", 405, "method-not-allowed"),
        // Pages: the catalog's page number, a skill's name; the login form.
        fine("GET", "/?page=1&x=y"),
        bad("GET", "/?page=0", 400, "invalid-query"),
        bad("GET", "/?page=2", 404, "page-not-found"),
        bad("GET", "/?page=x", 400, "invalid-query"),
        bad("GET", "/?page=1&page=1", 400, "invalid-query"),
        bad("GET", "/?page=%FF", 400, "invalid-query"),
        bad("POST", "/", 405, "method-not-allowed"),
        fine("GET", "/ui/skills/alpha"),
        bad("GET", "/ui/skills/gamma", 404, "skill-not-found"),
        bad("GET", "/ui/skills/a%20b", 400, "invalid-name"),
        bad("GET", "/ui/skills/%2e%2e", 400, "invalid-name"),
        bad("GET", "/ui/skills/alpha/x", 404, "not-found"),
        bad("DELETE", "/ui/skills/alpha", 405, "method-not-allowed"),
        fine("GET", "/ui/app.js"),
        fine("GET", "/ui/style.css"),
        bad("GET", "/ui/other.js", 404, "not-found"),
        fine("GET", "/ui/login?next=%FF"),
        bad("POST", "/ui/login", 415, "unsupported-media-type"),
        bad("POST", "/ui/login", 415, "unsupported-media-type").body("application/json", "{\"token\": \"t\"}"),
        bad("POST", "/ui/login", 400, "bad-request").body("application/x-www-form-urlencoded", "next=%2F"),
        bad("POST", "/ui/login", 400, "bad-request").body("application/x-www-form-urlencoded", "token=a&token=b"),
        bad("POST", "/ui/login", 403, "cross-site")
            .header("origin", "https://evil.example")
            .body("application/x-www-form-urlencoded", "token=t"),
        bad("POST", "/ui/logout", 403, "cross-site").header("sec-fetch-site", "cross-site"),
        bad("PUT", "/ui/logout", 405, "method-not-allowed"),
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
    let (_dir, app) = serve_two_skills().await;
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
        // No answer is ever sniffed into another type (a problem that echoes the path, say).
        if answer.header("x-content-type-options") != Some("nosniff") {
            failures.push(format!("{what}: no X-Content-Type-Options: nosniff"));
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
    let (_dir, app) = runtime.block_on(serve_two_skills());
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
