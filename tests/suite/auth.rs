//! Bearer-token authentication against a real server: every route but the probes refuses a
//! request without a valid token (the event stream and the metrics included), tokens rotate by
//! editing the file (also the way Kubernetes updates a Secret volume), revoked tokens end open
//! event streams, bad token files stop the server from starting, and no token ever reaches a log.
//! The file holds up to hostile handling: rewritten in place, swapped for a FIFO, or reached
//! through a symlink whose target changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use skillcat::config::SourceConfig;
use skillcat_client::{BearerToken, ClientError, RemoteSkillDiscoverer};
use skillcat_core::{SkillDiscoverer, SkillError};

use crate::support::events::Events;
use crate::support::process::ServeProcess;
use crate::support::server::TestApp;
use crate::support::skills::write_skill;
use crate::support::wait::{DEADLINE, eventually};

const SKILL: &str = "---\nname: alpha\ndescription: The first skill\n---\n# Alpha\n";

fn skills() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), SKILL);
    dir
}

/// A folder holding `tokens` with the given text.
fn token_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tokens");
    std::fs::write(&path, text).expect("write the token file");
    (dir, path)
}

/// Replaces the file's content atomically, as a deployment tool would.
fn replace(path: &Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).expect("write");
    std::fs::rename(&next, path).expect("rename");
}

async fn serve(skills: &Path, tokens: &Path) -> TestApp {
    let tokens = tokens.to_path_buf();
    TestApp::spawn_with(vec![SourceConfig::directory(skills)], move |options| options.token_file = Some(tokens)).await
}

/// A server whose periodic re-read of the token file never comes during a test: only what the
/// watch sees (and the re-reads it schedules itself) changes the tokens.
async fn serve_without_recheck(skills: &Path, tokens: &Path) -> TestApp {
    let tokens = tokens.to_path_buf();
    TestApp::spawn_with(vec![SourceConfig::directory(skills)], move |options| {
        options.token_file = Some(tokens);
        options.token_recheck = Duration::from_secs(3600);
    })
    .await
}

fn mkfifo(path: &Path) {
    use rustix::fs::{FileType, Mode};
    rustix::fs::mknodat(rustix::fs::CWD, path, FileType::Fifo, Mode::from_raw_mode(0o600), 0).expect("mkfifo");
}

/// Puts a FIFO where the token file was, in one rename.
fn swap_for_fifo(path: &Path) {
    let fifo = path.with_extension("fifo");
    mkfifo(&fifo);
    std::fs::rename(&fifo, path).expect("rename");
}

async fn send(app: &TestApp, method: Method, path: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = app.client.request(method, app.url(path));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.expect("request")
}

async fn status(app: &TestApp, path: &str, token: &str) -> u16 {
    send(app, Method::GET, path, Some(&format!("Bearer {token}"))).await.status().as_u16()
}

/// Asserts a 401 problem with the Bearer challenge.
async fn assert_unauthorized(response: reqwest::Response, invalid_token: bool, what: &str) {
    assert_eq!(response.status(), 401, "{what}");
    let challenge = response.headers()["www-authenticate"].to_str().expect("ASCII").to_owned();
    assert!(challenge.starts_with("Bearer "), "{what}: {challenge}");
    assert_eq!(challenge.contains("error=\"invalid_token\""), invalid_token, "{what}: {challenge}");
    assert_eq!(response.headers()["content-type"], "application/problem+json", "{what}");
    let problem: Value = response.json().await.expect("problem JSON");
    assert_eq!(problem["type"], "urn:skillcat:problem:unauthorized", "{what}");
    assert_eq!(problem["status"], 401, "{what}");
}

/// Every operation of the OpenAPI document, as (method, concrete path).
fn operations() -> Vec<(Method, String, bool)> {
    let document: Value = serde_json::from_str(&skillcat::router::openapi_document()).expect("the document");
    let mut operations = Vec::new();
    for (template, item) in document["paths"].as_object().expect("paths") {
        let mut path = template.replace("{name}", "alpha").replace("{path}", "SKILL.md");
        if path == "/search" || path == "/api/search" {
            // Its one required parameter.
            path.push_str("?q=alpha");
        }
        for (method, operation) in item.as_object().expect("path item") {
            let open = operation.get("security").is_some_and(|security| security == &Value::Array(Vec::new()));
            operations.push((method.to_uppercase().parse().expect("method"), path.clone(), open));
        }
    }
    operations
}

#[tokio::test]
async fn every_route_but_the_probes_requires_a_valid_bearer_token() {
    let dir = skills();
    let (_tokens, path) = token_file("# tokens\nfirst-token\nsecond.token~+/==\n");
    let app = serve(dir.path(), &path).await;
    let operations = operations();
    assert_eq!(operations.len(), 28, "{operations:?}");
    let open: Vec<&str> = operations.iter().filter(|(_, _, open)| *open).map(|(_, path, _)| path.as_str()).collect();
    // The probes, the git webhook (its own secret authenticates it), and the login form with its
    // script and style sheet.
    assert_eq!(
        open,
        ["/healthz", "/hooks/git", "/readyz", "/ui/app.js", "/ui/login", "/ui/login", "/ui/logout", "/ui/style.css"]
    );
    let not_following = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();

    for (method, path, open) in &operations {
        let what = format!("{method} {path}");
        if *open {
            for authorization in [None, Some("Bearer wrong"), Some("Basic Zm9vOmJhcg==")] {
                let mut request = not_following.request(method.clone(), app.url(path));
                if let Some(value) = authorization {
                    request = request.header("authorization", value);
                }
                let status = request.send().await.expect("request").status();
                // A form posted without a body is refused for that, not for credentials.
                let expected = match (method.as_str(), path.as_str()) {
                    ("POST", "/ui/login") => 415,
                    ("POST", "/ui/logout") => 303,
                    // Webhooks are not enabled on this server (no --webhook-secret-file).
                    ("POST", "/hooks/git") => 404,
                    _ => 200,
                };
                assert_eq!(status, expected, "{what} with {authorization:?}");
            }
            continue;
        }
        assert_unauthorized(send(&app, method.clone(), path, None).await, false, &what).await;
        assert_unauthorized(send(&app, method.clone(), path, Some("Basic Zm9vOmJhcg==")).await, false, &what).await;
        for wrong in ["Bearer wrong", "Bearer first-toke", "Bearer first-token2", "Bearer FIRST-TOKEN", "Bearer"] {
            assert_unauthorized(send(&app, method.clone(), path, Some(wrong)).await, true, &what).await;
        }
        for token in ["first-token", "second.token~+/=="] {
            for scheme in ["Bearer", "bearer"] {
                let response = send(&app, method.clone(), path, Some(&format!("{scheme} {token}"))).await;
                assert_eq!(response.status(), 200, "{what} with a valid token");
            }
        }
    }

    // Routes that do not exist are not revealed without a token, and the 405 of a real route too.
    assert_unauthorized(send(&app, Method::GET, "/nowhere", None).await, false, "GET /nowhere").await;
    assert_eq!(send(&app, Method::GET, "/nowhere", Some("Bearer first-token")).await.status(), 404);
    assert_unauthorized(send(&app, Method::DELETE, "/skills", None).await, false, "DELETE /skills").await;
    assert_eq!(send(&app, Method::DELETE, "/skills", Some("Bearer first-token")).await.status(), 405);
    assert_eq!(send(&app, Method::POST, "/healthz", None).await.status(), 405);

    // Two Authorization headers are refused even if one is valid.
    let response = app
        .get("/skills")
        .header("authorization", "Bearer first-token")
        .header("authorization", "Bearer wrong")
        .send()
        .await
        .expect("request");
    assert_unauthorized(response, true, "two credentials").await;

    // Refusals are counted like every other answer.
    let metrics = send(&app, Method::GET, "/metrics", Some("Bearer first-token")).await.text().await.expect("text");
    assert!(metrics.contains(r#"route="/skills",status="401""#), "{metrics}");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_event_stream_requires_a_token_and_ends_when_it_is_revoked() {
    let dir = skills();
    let (_tokens, path) = token_file("keep\nrevoke-me\n");
    let app = serve(dir.path(), &path).await;
    assert_unauthorized(send(&app, Method::GET, "/events", None).await, false, "GET /events").await;
    assert_unauthorized(send(&app, Method::GET, "/events", Some("Bearer nope")).await, true, "GET /events").await;

    let mut revoked = Events::of(send(&app, Method::GET, "/events", Some("Bearer revoke-me")).await);
    let mut kept = Events::of(send(&app, Method::GET, "/events", Some("Bearer keep")).await);
    revoked.next(DEADLINE).await.expect("the first event");
    let first = kept.next(DEADLINE).await.expect("the first event");
    replace(&path, "keep\n");
    // The revoked stream ends (the body completes).
    assert!(revoked.ends_within(DEADLINE).await, "the stream of a revoked token stays open");
    // The other one stays open: it still carries the next change (had the revocation ended it,
    // it would end before that event instead).
    write_skill(&dir.path().join("beta"), "---\nname: beta\ndescription: Added after the revocation\n---\n");
    let next = kept.next(DEADLINE).await.expect("the kept token's stream carries the next change");
    assert_ne!(next["etag"], first["etag"]);
    app.shutdown().await.unwrap();
}

/// Waits until `GET /skills` with `token` answers `expected`.
async fn eventually_status(app: &TestApp, token: &str, expected: u16) {
    let what = format!("token {token} gets {expected}");
    eventually(&what, || async { status(app, "/skills", token).await == expected }).await;
}

#[tokio::test]
async fn tokens_rotate_when_the_file_changes() {
    let dir = skills();
    let (_tokens, path) = token_file("old\n");
    let app = serve(dir.path(), &path).await;
    assert_eq!(status(&app, "/skills", "old").await, 200);
    assert_eq!(status(&app, "/skills", "new").await, 401);

    // Overlap: both valid while clients move over.
    replace(&path, "old\nnew\n");
    eventually_status(&app, "new", 200).await;
    assert_eq!(status(&app, "/skills", "old").await, 200);
    // Then the old one goes.
    replace(&path, "new\n");
    eventually_status(&app, "old", 401).await;
    assert_eq!(status(&app, "/skills", "new").await, 200);

    // Written in place rather than replaced.
    std::fs::write(&path, "newer\n").expect("write");
    eventually_status(&app, "newer", 200).await;
    assert_eq!(status(&app, "/skills", "new").await, 401);

    // A file that cannot be used (gone for a moment, a line that is no token) keeps the last
    // tokens; one that reads but lists none refuses everything. Keeping the tokens changes
    // nothing a request sees, so the checks wait until the server has re-read the file and
    // found it unusable: the file was fine before, so such a re-read saw the new state.
    let before = app.token_reloads();
    std::fs::remove_file(&path).expect("remove");
    eventually("a re-read finds the file gone", || async { app.token_reloads().unreadable > before.unreadable }).await;
    assert_eq!(status(&app, "/skills", "newer").await, 200);
    let before = app.token_reloads();
    replace(&path, "newer\nnot a token\n");
    eventually("a re-read finds the bad line", || async { app.token_reloads().invalid > before.invalid }).await;
    assert_eq!(status(&app, "/skills", "newer").await, 200);
    replace(&path, "# all revoked\n");
    eventually_status(&app, "newer", 401).await;
    assert_eq!(send(&app, Method::GET, "/healthz", None).await.status(), 200);
    replace(&path, "back\n");
    eventually_status(&app, "back", 200).await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_kubernetes_secret_volume_update_rotates_the_tokens() {
    // The kubelet's layout: `tokens -> ..data/tokens`, `..data -> ..<timestamp>`; an update
    // writes a new timestamped folder and renames a new `..data` link over the old one.
    let dir = skills();
    let volume = tempfile::tempdir().expect("tempdir");
    let root = volume.path();
    let publish = |generation: &str, text: &str| {
        let folder = root.join(format!("..2026_11_30_{generation}"));
        std::fs::create_dir(&folder).expect("mkdir");
        std::fs::write(folder.join("tokens"), text).expect("write");
        let link = root.join("..data_tmp");
        std::os::unix::fs::symlink(folder.file_name().unwrap(), &link).expect("symlink");
        std::fs::rename(&link, root.join("..data")).expect("flip");
    };
    publish("01", "first\n");
    std::os::unix::fs::symlink("..data/tokens", root.join("tokens")).expect("symlink");
    let app = serve(dir.path(), &root.join("tokens")).await;
    assert_eq!(status(&app, "/skills", "first").await, 200);
    publish("02", "second\n");
    eventually_status(&app, "second", 200).await;
    assert_eq!(status(&app, "/skills", "first").await, 401);
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewriting_the_file_in_place_with_the_same_tokens_refuses_nobody_and_ends_no_stream() {
    const TOKENS: &str = "keep\nother.token\n";
    const ROUNDS: usize = 20;
    let dir = skills();
    let (_tokens, path) = token_file(TOKENS);
    let app = serve_without_recheck(dir.path(), &path).await;
    let mut stream = Events::of(send(&app, Method::GET, "/events", Some("Bearer keep")).await);
    let first = stream.next(DEADLINE).await.expect("the first event");

    // A client asks with a valid token all along.
    let stop = Arc::new(AtomicBool::new(false));
    let asking = tokio::spawn({
        let (client, url, stop) = (app.client.clone(), app.url("/skills"), Arc::clone(&stop));
        async move {
            let mut statuses = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                statuses.push(client.get(&url).bearer_auth("keep").send().await.expect("request").status().as_u16());
            }
            statuses
        }
    });

    for round in 0..ROUNDS {
        // `vault ... > tokens`: the shell truncates the file, the command writes it once it has
        // the secret. Here the file stays empty until the server has read it so.
        let before = app.token_reloads();
        let mut file = std::fs::File::create(&path).expect("truncate");
        eventually("a re-read of the emptied file", || async { app.token_reloads().total() > before.total() }).await;
        assert_eq!(status(&app, "/skills", "keep").await, 200, "round {round}: a valid token refused");
        let before = app.token_reloads();
        std::io::Write::write_all(&mut file, TOKENS.as_bytes()).expect("write");
        drop(file);
        eventually("a re-read of the written file", || async { app.token_reloads().read > before.read }).await;
        // And when the command is quick: truncated and written at once, again and again.
        for _ in 0..5 {
            std::fs::write(&path, TOKENS).expect("write");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let statuses = asking.await.expect("the asking client");
    let refused = statuses.iter().filter(|&&status| status != 200).count();
    assert!(statuses.len() >= ROUNDS, "only {} requests", statuses.len());
    assert_eq!(refused, 0, "{refused} of {} requests with a valid token refused", statuses.len());
    assert!(app.token_reloads().transient > 0, "the server never read the emptied file");

    // The stream is still open: it carries the next change.
    write_skill(&dir.path().join("beta"), "---\nname: beta\ndescription: Added after the rewrites\n---\n");
    let next = stream.next(DEADLINE).await.expect("the stream carries the next change");
    assert_ne!(next["etag"], first["etag"]);

    // A file of comments, written in place, still refuses everyone.
    std::fs::write(&path, "# every token revoked\n").expect("write");
    eventually_status(&app, "keep", 401).await;
    assert!(stream.ends_within(DEADLINE).await, "the stream of a revoked token stays open");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_emptied_token_file_keeps_the_tokens_and_is_read_again_until_it_is_written() {
    let dir = skills();
    let (_tokens, path) = token_file("keep\n");
    // Another name for the same file, in a folder nobody watches: a write through it is seen
    // only by reading the file.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let alias = elsewhere.path().join("tokens");
    std::fs::hard_link(&path, &alias).expect("hard link");
    let app = serve_without_recheck(dir.path(), &path).await;

    let before = app.token_reloads();
    std::fs::File::create(&path).expect("truncate");
    // Nothing changes after the truncation and the periodic re-read is an hour away: these
    // re-reads are the ones the server schedules itself while the file is empty.
    eventually("three re-reads of the empty file", || async { app.token_reloads().transient >= before.transient + 3 })
        .await;
    assert_eq!(status(&app, "/skills", "keep").await, 200);
    std::fs::write(&alias, "keep\nnew\n").expect("write");
    eventually_status(&app, "new", 200).await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_fifo_at_the_token_path_keeps_the_tokens_without_hanging_the_reloads_or_the_shutdown() {
    // The server runs as a process: a reload stuck on the FIFO would otherwise keep this test's
    // runtime from ever finishing.
    const REFUSED: &str = "is a FIFO, not a regular file";
    let dir = skills();
    let (_tokens, path) = token_file("keep\nrevoke-me\n");
    let skills_dir = dir.path().to_str().unwrap();
    let server = ServeProcess::start(
        &["serve", "--listen", "127.0.0.1:0", "--no-builtin", "--dir", skills_dir],
        &[("SKILLCAT_TOKEN_FILE", path.to_str().unwrap())],
        "info",
    );
    server.ready().await;
    let client = reqwest::Client::new();
    let status = |token: &'static str| {
        let request = client.get(server.url("/skills")).bearer_auth(token);
        async move { request.send().await.expect("request").status().as_u16() }
    };
    let refusals = || server.log().matches(REFUSED).count();

    swap_for_fifo(&path);
    eventually("the FIFO is refused", || async { refusals() >= 1 }).await;
    assert_eq!(status("keep").await, 200);
    assert_eq!(status("revoke-me").await, 200);
    // The reloads go on: a revocation is seen.
    replace(&path, "keep\n");
    eventually("the revoked token is refused", || async { status("revoke-me").await == 401 }).await;
    assert_eq!(status("keep").await, 200);

    // A FIFO again, and SIGTERM: the server exits within the 10 s it promises.
    swap_for_fifo(&path);
    eventually("the FIFO is refused again", || async { refusals() >= 2 }).await;
    assert_eq!(status("keep").await, 200);
    let signalled = Instant::now();
    let (exit, log) = server.terminate();
    let took = signalled.elapsed();
    assert!(exit.success(), "{exit}: {log}");
    assert!(took < Duration::from_secs(10), "exit {took:?} after SIGTERM");
}

#[tokio::test]
async fn a_token_file_behind_a_symlink_sees_its_target_replaced() {
    let dir = skills();
    let base = tempfile::tempdir().expect("tempdir");
    let [config, secrets, moved] = ["config", "secrets", "moved"].map(|name| base.path().join(name));
    for folder in [&config, &secrets, &moved] {
        std::fs::create_dir(folder).expect("mkdir");
    }
    let target = secrets.join("tokens");
    std::fs::write(&target, "first\nsecond\n").expect("write");
    let link = config.join("tokens");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    // Only the watch can show a change in time: the periodic re-read is an hour away.
    let app = serve_without_recheck(dir.path(), &link).await;
    assert_eq!(status(&app, "/skills", "first").await, 200);

    // The target replaced where it lives, then written in place.
    replace(&target, "second\n");
    eventually_status(&app, "first", 401).await;
    std::fs::write(&target, "second\nthird\n").expect("write");
    eventually_status(&app, "third", 200).await;

    // The link flipped to a file elsewhere (relative this time); that folder is watched from then on.
    std::fs::write(moved.join("x"), "fourth\n").expect("write");
    let next_link = config.join("tokens.next");
    std::os::unix::fs::symlink("../moved/x", &next_link).expect("symlink");
    std::fs::rename(&next_link, &link).expect("flip");
    eventually_status(&app, "fourth", 200).await;
    assert_eq!(status(&app, "/skills", "third").await, 401);
    replace(&moved.join("x"), "fifth\n");
    eventually_status(&app, "fifth", 200).await;
    assert_eq!(status(&app, "/skills", "fourth").await, 401);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_client_authenticates_with_its_token() {
    let dir = skills();
    let (_tokens, path) = token_file("client-token\n");
    let app = serve(dir.path(), &path).await;
    let with = |token: &str| {
        RemoteSkillDiscoverer::builder(app.url(""))
            .bearer_token(BearerToken::new(token).unwrap())
            .watch(true)
            .build()
            .unwrap()
    };
    let remote = with("client-token");
    let skills = remote.discover().await.unwrap();
    assert_eq!(skills.len(), 1);
    assert_eq!(remote.load(&skills[0]).await.unwrap(), SKILL);

    for remote in [with("wrong-token"), RemoteSkillDiscoverer::new(app.url("")).unwrap()] {
        let error = remote.discover().await.unwrap_err();
        let SkillError::Source(source) = &error else { panic!("{error:?}") };
        let client = source.downcast_ref::<ClientError>().expect("a client error");
        assert!(matches!(client, ClientError::Unauthorized(problem) if problem.status == 401), "{client:?}");
    }
    app.shutdown().await.unwrap();
}

/// Runs `skillcat serve` on a token file that must stop it; returns its exit code and stderr.
/// A server that does not exit within 10 s is killed and fails the test.
fn serve_refused(token_file: &Path) -> (Option<i32>, String) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args(["serve", "--listen", "127.0.0.1:0", "--no-builtin", "--token-file"])
        .arg(token_file)
        .env_remove("SKILLCAT_TOKEN_FILE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run skillcat");
    let pid = rustix::process::Pid::from_child(&child);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(Duration::from_secs(10)) {
        Ok(output) => {
            let output = output.expect("wait");
            (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
        }
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("skillcat serve --token-file {} neither served nor exited in 10 s", token_file.display());
        }
    }
}

#[tokio::test]
async fn a_token_file_that_cannot_be_used_stops_the_server_from_starting() {
    let dir = skills();
    let missing = dir.path().join("no-such-file");
    let (_empty, empty) = token_file("# nothing yet\n\n");
    let (_blank, blank) = token_file("");
    let (_bad, bad) = token_file("good-token\nsecret with spaces\n");
    let (_binary, binary) = token_file("");
    std::fs::write(&binary, b"tok\xffen\n").unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    for (path, expected) in [
        (&missing, "cannot read the token file"),
        (&empty, "holds no token"),
        (&blank, "holds no token"),
        (&bad, "line 2 of the token file"),
        (&binary, "not valid UTF-8"),
        (&dir.path().to_path_buf(), "is a directory, not a regular file"),
        (&fifo, "is a FIFO, not a regular file"),
    ] {
        let (code, stderr) = serve_refused(path);
        assert_eq!(code, Some(1), "{}: {stderr}", path.display());
        assert!(stderr.contains(expected), "{}: {stderr}", path.display());
        assert!(!stderr.contains("secret") && !stderr.contains("good-token"), "{stderr}");
    }
}

#[tokio::test]
async fn tokens_never_reach_the_log_even_at_trace_level() {
    const VALID: &str = "Valid-Secret-7f3a9c";
    const ROTATED: &str = "Rotated-Secret-51d2e8";
    const WRONG: &str = "Wrong-Secret-c0ffee";
    let dir = skills();
    let (_tokens, path) = token_file(&format!("{VALID}\n"));
    let skills_dir = dir.path().to_str().unwrap();
    let token_path = path.to_str().unwrap();
    let server = ServeProcess::start(
        &["serve", "--listen", "127.0.0.1:0", "--no-builtin", "--dir", skills_dir],
        &[("SKILLCAT_TOKEN_FILE", token_path)],
        "trace",
    );
    server.ready().await;
    let client = reqwest::Client::new();
    for token in [VALID, WRONG] {
        for path in ["/skills", "/skills/alpha/content", "/manifest", "/metrics", "/nowhere", "/healthz"] {
            let response = client.get(server.url(path)).bearer_auth(token).send().await.expect("request").bytes().await;
            assert!(response.is_ok());
        }
        let load = client.post(server.url("/skills/alpha/load")).bearer_auth(token).json(&serde_json::json!({}));
        assert!(load.send().await.is_ok());
        // The first chunk is the first event, or the 401 problem: either way the server has
        // handled the request with the token in it.
        let mut events = client.get(server.url("/events")).bearer_auth(token).send().await.expect("events");
        let first = tokio::time::timeout(DEADLINE, events.chunk()).await.expect("an answer").expect("a chunk");
        assert!(first.is_some(), "GET /events with {token} answered nothing");
    }
    replace(&path, &format!("{ROTATED}\n"));
    eventually("the rotated token is accepted", || async {
        client.get(server.url("/skills")).bearer_auth(ROTATED).send().await.expect("request").status() == 200
    })
    .await;
    let (status, log) = server.terminate();
    assert!(status.success(), "{status}");
    // The log is the real thing (trace level, requests seen), and holds none of the tokens.
    assert!(log.contains("\"level\":\"TRACE\"") && log.contains("/skills/{name}/content"), "{log}");
    assert!(log.contains("bearer tokens reloaded"), "{log}");
    for secret in [VALID, ROTATED, WRONG] {
        assert!(!log.contains(secret), "the log shows {secret}");
        assert!(!log.to_lowercase().contains(&secret.to_lowercase()), "the log shows {secret}");
    }
}

/// Wrong tokens from one client: a burst is answered at once; beyond it each wrong token waits a
/// second for its 401, and a client with too many of those waiting gets 429 at once; a valid token
/// from the same client is never held up (clients behind one proxy share an address).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_beyond_a_burst_are_answered_slowly() {
    use skillcat::auth::throttle::{BURST, MAX_PENALIZED, PENALTY, REFILL};
    let dir = skills();
    let (_tokens, path) = token_file("t0ken\n");
    let app = Arc::new(serve(dir.path(), &path).await);
    let started = Instant::now();
    for _ in 0..BURST as usize {
        assert_unauthorized(send(&app, Method::GET, "/skills", Some("Bearer wrong")).await, true, "in the burst").await;
    }
    assert!(started.elapsed() < PENALTY * 4, "the burst is answered at full speed: {:?}", started.elapsed());
    // The client earned a try every REFILL while the burst was sent (slowly, on a busy machine):
    // once those are spent too, a wrong token waits.
    let earned = (started.elapsed().as_millis() / REFILL.as_millis()) as usize + 2;
    let mut waited = None;
    for _ in 0..earned {
        let late = Instant::now();
        assert_unauthorized(send(&app, Method::GET, "/skills", Some("Bearer wrong")).await, true, "past the burst")
            .await;
        if late.elapsed() >= PENALTY {
            waited = Some(late.elapsed());
            break;
        }
    }
    assert!(waited.is_some(), "past the burst and what it earned since, a wrong token waits");
    let late = Instant::now();
    let valid = Instant::now();
    assert_eq!(send(&app, Method::GET, "/skills", Some("Bearer t0ken")).await.status(), 200);
    assert!(valid.elapsed() < PENALTY / 2, "a valid token is not held up: {:?}", valid.elapsed());
    // Many at once: those beyond the waiting ones are refused at once, with Retry-After. Since the
    // burst the client earned a try every REFILL (and may earn more while these are sent).
    let earned = (late.elapsed() + PENALTY).as_millis() / REFILL.as_millis();
    let attempts: Vec<_> = (0..MAX_PENALIZED + 16 + earned as usize)
        .map(|_| {
            let app = Arc::clone(&app);
            tokio::spawn(async move { send(&app, Method::GET, "/skills", Some("Bearer wrong")).await })
        })
        .collect();
    let mut refused = 0;
    for attempt in attempts {
        let response = attempt.await.expect("a request");
        if response.status() == 429 {
            assert!(response.headers().contains_key("retry-after"));
            let problem: Value = response.json().await.expect("a problem");
            assert_eq!(problem["type"], "urn:skillcat:problem:too-many-failures");
            refused += 1;
        } else {
            assert_eq!(response.status(), 401);
        }
    }
    assert!(refused >= 8, "{refused} refused at once");
}

/// Wrong tokens count against the address they came from, on the routes taken before the router
/// (`GET /skills`) as on the router's: once one address waits for its 401s, on either kind of
/// route, another address is answered at once on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_count_against_their_own_address_on_every_route() {
    use skillcat::auth::throttle::{BURST, PENALTY};
    let dir = skills();
    let (_tokens, path) = token_file("t0ken\n");
    let app = serve(dir.path(), &path).await;
    let from = |address: [u8; 4]| {
        reqwest::Client::builder().local_address(std::net::IpAddr::from(address)).build().expect("a client")
    };
    let (first, second) = (from([127, 0, 0, 1]), from([127, 0, 0, 2]));
    let wrong = |client: &reqwest::Client, path: &str| {
        let request = client.get(app.url(path)).header("authorization", "Bearer wrong");
        async move {
            let sent = Instant::now();
            let status = request.send().await.expect("request").status();
            (status.as_u16(), sent.elapsed())
        }
    };
    // The first address spends its burst and what it earns meanwhile on a route of the router.
    let started = Instant::now();
    let mut waited = false;
    while !waited {
        assert!(started.elapsed() < Duration::from_secs(60), "wrong tokens never made the first address wait");
        let (status, took) = wrong(&first, "/skills/alpha").await;
        assert!(status == 401 || status == 429, "{status}");
        waited = took >= PENALTY || status == 429;
    }
    // On the fast route the same address has only what it earned since its last wait (a try every
    // REFILL), far from the burst a new address starts with.
    let mut at_once = 0;
    loop {
        let (status, took) = wrong(&first, "/skills").await;
        if took >= PENALTY || status == 429 {
            break;
        }
        at_once += 1;
        assert!(at_once < BURST as usize / 2, "the fast route counts the same address: {at_once} answered at once");
    }
    for path in ["/skills", "/skills/alpha"] {
        let (status, took) = wrong(&second, path).await;
        assert_eq!(status, 401, "{path}");
        assert!(took < PENALTY / 2, "another address is answered at once on {path}: {took:?}");
    }
    app.shutdown().await.unwrap();
}
