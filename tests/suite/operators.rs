//! What an operator meets first: the server's log at startup and while it runs, the addresses it
//! takes, how it refuses what it cannot use, and the answers hyper would otherwise give bare.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::http::raw_request;
use crate::support::process::ServeProcess;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

/// The JSON log lines of `log` at `level` whose message contains `text`.
fn log_lines(log: &str, level: &str, text: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["level"] == level && entry["message"].as_str().is_some_and(|m| m.contains(text)))
        .collect()
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

async fn skill_names(server: &ServeProcess) -> Vec<String> {
    let catalog: Value = reqwest::get(server.url("/skills")).await.expect("GET /skills").json().await.expect("JSON");
    catalog["skills"].as_array().expect("skills").iter().map(|s| s["name"].as_str().expect("name").to_owned()).collect()
}

#[tokio::test]
async fn a_root_that_is_missing_or_no_folder_is_warned_about_at_startup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (good, typo, file) = (dir.path().join("skills"), dir.path().join("skils"), dir.path().join("notes.txt"));
    write_skill(&good.join("alpha"), &skill_md(None, "Alpha.", ""));
    std::fs::write(&file, "not a folder").expect("write");
    let args = ["serve", "--no-builtin", "--dir", path_str(&good), "--dir", path_str(&typo), "--dir", path_str(&file)];
    let server = ServeProcess::start(&args, &[("SKILLCAT_LISTEN", "127.0.0.1:0")], "info");
    server.ready().await;
    let log = server.log();

    let missing = log_lines(&log, "WARN", "does not exist");
    assert_eq!(missing.len(), 1, "{log}");
    assert_eq!(missing[0]["root"], path_str(&typo));
    let not_folder = log_lines(&log, "WARN", "not a folder");
    assert_eq!(not_folder.len(), 1, "{log}");
    assert_eq!(not_folder[0]["root"], path_str(&file));
    assert!(!log.contains(&format!("\"root\":\"{}\"", path_str(&good))), "no warning for a folder: {log}");

    // A warning, not an error: the root is watched, and served once it appears.
    assert_eq!(skill_names(&server).await, ["alpha"]);
    write_skill(&typo.join("beta"), &skill_md(None, "Beta.", ""));
    eventually("the created root's skill", || async { skill_names(&server).await == ["alpha", "beta"] }).await;
    let (status, _) = server.terminate();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn deleting_a_watched_folder_logs_nothing_from_the_watcher() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("kept"), &skill_md(None, "Kept.", ""));
    // RUST_LOG=info as in the Kubernetes manifests: the kernel dropping the folder's watches is
    // expected, and nothing to tell an operator.
    let server = ServeProcess::start(
        &["serve", "--no-builtin", "--dir", path_str(dir.path())],
        &[("SKILLCAT_LISTEN", "127.0.0.1:0")],
        "info",
    );
    server.ready().await;
    let gone = dir.path().join("gone");
    write_skill(&gone.join("nested"), &skill_md(None, "Nested.", ""));
    eventually("the new skill", || async { skill_names(&server).await == ["kept", "nested"] }).await;
    std::fs::remove_dir_all(&gone).expect("remove the folder");
    eventually("the skill's removal", || async { skill_names(&server).await == ["kept"] }).await;
    let (status, log) = server.terminate();
    assert!(status.success(), "{status}");
    assert!(!log_lines(&log, "INFO", "published a new catalog version").is_empty(), "the log was read: {log}");
    assert!(!log.contains("watch descriptor"), "{log}");
    assert!(!log.contains("\"target\":\"skillcat::watch"), "{log}");
    assert!(!log.contains("file watcher error"), "{log}");
}

/// Runs `skillcat serve` with text logs on a pipe until it logs that it serves; returns its log.
fn text_log_until_serving(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args(args)
        .env_clear()
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skillcat serve");
    let (sender, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = String::new();
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        log.push_str(&line);
        log.push('\n');
        if line.contains("serving") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(log.contains("serving"), "no 'serving' line in 20 s:\n{log}");
    log
}

#[test]
fn text_logs_on_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    let log =
        text_log_until_serving(&["serve", "--no-builtin", "--dir", path_str(&missing), "--listen", "127.0.0.1:0"]);
    assert!(!log.contains('\u{1b}'), "escape codes in {log:?}");
    assert!(log.contains(" WARN ") && log.contains(" INFO "), "{log}");
}

#[test]
fn the_startup_line_names_the_public_url_from_the_flag_the_environment_or_the_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("skillcat.toml");
    std::fs::write(&config, "public_url = \"https://from-config.example\"\n").unwrap();
    let serve = ["serve", "--no-builtin", "--listen", "127.0.0.1:0"];
    let url = |log: &str| {
        let line = log.lines().find(|line| line.contains("serving")).expect("the serving line").to_owned();
        line.split(" url=").nth(1).expect("a url").split(' ').next().unwrap().to_owned()
    };
    let log = text_log_until_serving(&serve);
    assert!(url(&log).starts_with("http://127.0.0.1:") && url(&log).ends_with('/'), "{log}");
    let log = text_log_until_serving(&[&serve[..], &["--public-url", "https://skills.example.com"]].concat());
    assert_eq!(url(&log), "https://skills.example.com/", "{log}");
    let log = text_log_until_serving(&[&serve[..], &["--config", path_str(&config)]].concat());
    assert_eq!(url(&log), "https://from-config.example/", "{log}");
    // The flag wins over the file.
    let log = text_log_until_serving(
        &[&serve[..], &["--config", path_str(&config), "--public-url", "http://flag.example:8080/"]].concat(),
    );
    assert_eq!(url(&log), "http://flag.example:8080/", "{log}");
    // Not a URL: refused at once, saying what one looks like.
    let refused = Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args([&serve[..], &["--public-url", "skills.example.com"]].concat())
        .env_clear()
        .output()
        .expect("run skillcat");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("https://HOST"), "{refused:?}");
}

/// `scripts/test` checks what its tier needs before it runs anything, and names each missing
/// tool with the line that installs it. (Run with a PATH holding nothing but bash and dirname, so
/// that no step can start.)
#[test]
fn the_test_script_names_what_its_tier_needs_at_once() {
    let bin = tempfile::tempdir().expect("tempdir");
    for tool in ["bash", "dirname"] {
        std::os::unix::fs::symlink(which(tool), bin.path().join(tool)).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/test");
    let run = |args: &[&str]| {
        let started = Instant::now();
        let output = Command::new(which("bash"))
            .arg(&script)
            .args(args)
            .env_clear()
            .env("PATH", bin.path())
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/test");
        assert!(started.elapsed() < Duration::from_secs(10), "it stops at once");
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let quick = run(&[]);
    for line in ["the quick tier needs", "npm (any Node.js", "apt-get install npm", "rustup component add clippy"] {
        assert!(quick.contains(line), "{line}\nin {quick}");
    }
    assert!(!quick.contains("chromedriver"), "{quick}");
    let full = run(&["--full"]);
    assert!(
        full.contains("the full tier needs") && full.contains("chromedriver: apt-get install chromium-driver"),
        "{full}"
    );
}

fn which(tool: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|folder| folder.join(tool))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no {tool} on PATH"))
}

#[test]
fn a_token_file_that_cannot_be_read_is_reported_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file", "absent-tokens"])
        .current_dir(dir.path())
        .env_clear()
        .output()
        .expect("run skillcat serve");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|line| line.starts_with("skillcat: ")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].starts_with("skillcat: cannot read the token file absent-tokens: "), "{stderr}");
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
}

/// `skillcat health` against `listen`, as a container's health check runs it.
fn health(listen: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args(["health", "--listen", listen])
        .env_clear()
        .output()
        .expect("run skillcat health")
}

#[tokio::test]
async fn listen_takes_a_host_name_and_a_bare_port() {
    // A name is resolved at start; localhost is its IPv4 address.
    let server = ServeProcess::start(&["serve", "--no-builtin"], &[("SKILLCAT_LISTEN", "localhost:0")], "info");
    assert_eq!(server.address.ip(), std::net::Ipv4Addr::LOCALHOST, "{}", server.log());
    server.ready().await;
    let port = server.address.port();
    for listen in [format!("localhost:{port}"), format!(":{port}"), format!("127.0.0.1:{port}")] {
        let output = health(&listen);
        assert!(output.status.success(), "{listen}: {}", String::from_utf8_lossy(&output.stderr));
    }
    drop(server);

    // A bare port is every IPv4 interface.
    let server = ServeProcess::start(&["serve", "--no-builtin", "--listen", ":0"], &[], "info");
    assert_eq!(server.address.ip(), std::net::Ipv4Addr::UNSPECIFIED, "{}", server.log());
    server.ready().await;
    let output = health(&format!(":{}", server.address.port()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    drop(server);

    // The config file takes the same forms.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("skillcat.toml");
    std::fs::write(&config, "listen = \"localhost:0\"\n").expect("write");
    let server = ServeProcess::start(&["serve", "--no-builtin", "--config", path_str(&config)], &[], "info");
    assert_eq!(server.address.ip(), std::net::Ipv4Addr::LOCALHOST);
    drop(server);

    for listen in ["localhost", "8080", "::1:8080", "http://localhost:8080"] {
        let output = Command::new(env!("CARGO_BIN_EXE_skillcat"))
            .args(["serve", "--listen", listen])
            .env_clear()
            .output()
            .expect("run skillcat serve");
        assert_eq!(output.status.code(), Some(2), "{listen}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("expected IP:PORT, [IPv6]:PORT, HOST:PORT or :PORT"), "{listen}: {stderr}");
    }
}

#[tokio::test]
async fn a_request_target_over_the_limit_is_a_414_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md(None, "Alpha.", ""));
    let app = TestApp::spawn_dir(dir.path()).await;
    let limit = skillcat::http::MAX_URI_BYTES;
    let padded = |prefix: &str, length: usize| format!("{prefix}{}", "a".repeat(length - prefix.len()));

    // At the limit: routed as usual (no such skill route, so a 404).
    let answer = raw_request(app.address, "GET", &padded("/skills/alpha/", limit), &[], b"").await;
    answer.problem(404, "not-found");
    let head_bound = skillcat::server::MAX_HEADER_BYTES;
    for target in
        [padded("/skills/alpha/", limit + 1), padded("/skills?q=", 20_000), padded("/healthz?", head_bound - 100)]
    {
        let answer = raw_request(app.address, "GET", &target, &[], b"").await;
        let problem = answer.problem(414, "uri-too-long");
        assert_eq!(problem["detail"], format!("the request target is longer than {limit} bytes"));
    }
    // A request head over the server's bound is refused by hyper before the router sees it: a
    // 431 without a body. (hyper's own 414, for targets over 65534 bytes, lies beyond that bound.)
    let answer = raw_request(app.address, "GET", &padded("/skills/", head_bound + 1), &[], b"").await;
    assert_eq!(answer.status, 431, "{answer:?}");
    app.shutdown().await.expect("shutdown");
}

/// A token file others may read is warned about at start (as ssh warns of a private key); one
/// only its owner reads is not. The line of each catalog version names its first diagnostics.
#[tokio::test]
async fn a_token_file_others_may_read_is_warned_about_and_skipped_skills_are_named() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let skills = dir.path().join("skills");
    write_skill(&skills.join("alpha"), &skill_md(None, "Alpha.", ""));
    write_skill(&skills.join("broken"), "---\nname: broken\ndescription: \"unclosed\n---\n");
    let tokens = dir.path().join("tokens");
    for (mode, warned) in [(0o644, true), (0o600, false)] {
        std::fs::write(&tokens, "a-token\n").expect("write");
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let args = ["serve", "--no-builtin", "--dir", path_str(&skills), "--token-file", path_str(&tokens)];
        let server = ServeProcess::start(&args, &[("SKILLCAT_LISTEN", "127.0.0.1:0")], "info");
        server.ready().await;
        let log = server.log();
        let warnings = log_lines(&log, "WARN", "readable by others");
        assert_eq!(warnings.len(), usize::from(warned), "mode {mode:o}: {log}");
        if warned {
            assert_eq!(warnings[0]["mode"], "644");
        }
        let published = log_lines(&log, "INFO", "published a new catalog version");
        let first = published[0]["first_diagnostics"].as_str().expect("named diagnostics");
        assert!(first.contains("broken/SKILL.md: unclosed description quote"), "{first}");
        let (status, _) = server.terminate();
        assert!(status.success(), "{status}");
    }
}
