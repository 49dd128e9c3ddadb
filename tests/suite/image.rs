//! The container image's command, run as the image runs it: the binary with exactly the
//! Dockerfile's `ENTRYPOINT` + `CMD` arguments and its `ENV`, and the `HEALTHCHECK` command
//! against it. (No container engine is needed: the runtime stage adds nothing but the binary.)

use std::process::Command;

use serde_json::Value;

use crate::support::process::ServeProcess;

/// The runtime (last) stage of the Dockerfile: its instructions, continuation lines joined.
fn runtime_stage() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile");
    let text = std::fs::read_to_string(path).expect("read the Dockerfile");
    let mut instructions: Vec<(String, String)> = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(continued) = line.strip_suffix('\\') {
            pending.push_str(continued);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let (keyword, rest) = pending.split_once(' ').unwrap_or((&pending, ""));
        instructions.push((keyword.to_uppercase(), rest.trim().to_owned()));
        pending.clear();
    }
    let last_from = instructions.iter().rposition(|(keyword, _)| keyword == "FROM").expect("a FROM");
    instructions.split_off(last_from)
}

fn one<'a>(stage: &'a [(String, String)], keyword: &str) -> &'a str {
    let mut found = stage.iter().filter(|(k, _)| k == keyword);
    let (_, value) = found.next().unwrap_or_else(|| panic!("no {keyword} in the runtime stage"));
    assert!(found.next().is_none(), "more than one {keyword}");
    value
}

/// An exec-form (JSON array) argument list.
fn exec_form(value: &str) -> Vec<String> {
    let parsed: Value = serde_json::from_str(value).unwrap_or_else(|_| panic!("not in exec form: {value}"));
    parsed.as_array().expect("an array").iter().map(|arg| arg.as_str().expect("a string").to_owned()).collect()
}

#[tokio::test]
async fn the_image_command_serves_and_its_health_check_passes() {
    let stage = runtime_stage();
    let entrypoint = exec_form(one(&stage, "ENTRYPOINT"));
    let command = exec_form(one(&stage, "CMD"));
    let env: Vec<(String, String)> = stage
        .iter()
        .filter(|(keyword, _)| keyword == "ENV")
        .map(|(_, value)| value.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())).expect("ENV KEY=VALUE"))
        .collect();
    let healthcheck = one(&stage, "HEALTHCHECK");
    let health = exec_form(&healthcheck[healthcheck.find("CMD ").expect("HEALTHCHECK CMD") + 4..]);

    // The binary is where the entrypoint and the health check expect it, and runs as non-root.
    let binary = &entrypoint[0];
    assert!(one(&stage, "COPY").ends_with(&format!(" {binary}")), "the binary is copied to {binary}");
    assert_eq!(&health[0], binary);
    let user = one(&stage, "USER");
    assert!(user.split(':').all(|id| id.parse::<u32>().is_ok_and(|id| id != 0)), "USER {user}");
    let listen = env.iter().find(|(key, _)| key == "SKILLCAT_LISTEN").map(|(_, value)| value.as_str());
    assert_eq!(listen, Some("0.0.0.0:8080"));
    assert_eq!(one(&stage, "EXPOSE"), "8080");

    // Exactly those arguments and that environment, but on a free loopback port.
    let args: Vec<&str> = entrypoint[1..].iter().chain(&command).map(String::as_str).collect();
    assert_eq!(args, ["serve", "--dir", "/skills", "--no-builtin"]);
    let mut run_env: Vec<(&str, &str)> =
        env.iter().filter(|(key, _)| key != "SKILLCAT_LISTEN").map(|(k, v)| (k.as_str(), v.as_str())).collect();
    run_env.push(("SKILLCAT_LISTEN", "127.0.0.1:0"));
    let server = ServeProcess::start(&args, &run_env, "info");
    server.ready().await;
    let catalog: Value = reqwest::get(server.url("/skills")).await.expect("GET /skills").json().await.expect("JSON");
    // The skills at /skills and nothing else: the builtin skills (about skillcat itself) would
    // cost every agent's prompt their manifest entries.
    let sources: Vec<&str> =
        catalog["skills"].as_array().expect("skills").iter().filter_map(|s| s["source"].as_str()).collect();
    assert!(sources.iter().all(|source| *source == "/skills"), "{sources:?}");
    // Without a volume at /skills (as here), the directory source reports it, as nagents would,
    // and the log says so at startup.
    if !std::path::Path::new("/skills").exists() {
        let missing = serde_json::json!([{"source": "/skills",
            "message": "/skills: [Errno 2] No such file or directory: 'skills'"}]);
        assert_eq!(catalog["diagnostics"], missing);
        let log = server.log();
        let warned = log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).any(|entry| {
            entry["level"] == "WARN"
                && entry["root"] == "/skills"
                && entry["message"].as_str().is_some_and(|m| m.contains("does not exist"))
        });
        assert!(warned, "{log}");
    }

    let health_check = |address: &str| {
        Command::new(env!("CARGO_BIN_EXE_skillcat"))
            .args(&health[1..])
            .env_clear()
            .env("SKILLCAT_LISTEN", address)
            .output()
            .expect("run the health check")
    };
    let unspecified = format!("0.0.0.0:{}", server.address.port());
    let output = health_check(&unspecified);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (status, _) = server.terminate();
    assert!(status.success(), "{status}");
    let output = health_check(&unspecified);
    assert_eq!(output.status.code(), Some(1), "the health check fails once the server is gone");
    assert!(String::from_utf8_lossy(&output.stderr).contains("health check of 127.0.0.1:"));
}
