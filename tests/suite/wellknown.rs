//! The well-known indexes installers read: the agentskills.io discovery index (0.2.0) with the
//! digest of exactly the bytes at each URL, the older index with its files, the skills both leave
//! out, how they follow changes, and the older file route's refusal of path tricks.
//!
//! The index format is that of agentskills.io's well-known URI page (docs/well-known-uri.mdx of
//! agentskills/agentskills): its JSON schema is named by `$schema` but not published, so the
//! field rules of that page are checked here one by one.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::support::files::{SECRET, assert_paths_stay_inside, digest, write};
use crate::support::http::raw_request;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

const DISCOVERY: &str = "/.well-known/agent-skills/index.json";
const LEGACY: &str = "/.well-known/skills/index.json";
const SCHEMA: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";
/// `alpha` (a folder: an archive), `beta` (its `SKILL.md` alone), `odd-paths` (a folder whose paths
/// the older index cannot list), `Not_Spec` (a name the agentskills.io rule refuses) and `big`
/// (over the bound on files).
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let alpha = dir.path().join("alpha");
    write_skill(&alpha, &skill_md("alpha", "The first skill", "Run scripts/run.sh."));
    write(&alpha.join("scripts/run.sh"), b"#!/bin/sh\necho alpha\n");
    write(&alpha.join("references/guide.md"), "# Guide\n\nCaf\u{e9}.\n".as_bytes());
    write(&alpha.join("assets/logo.png"), &[0x89, b'P', b'N', b'G', 0, 1, 2, 3]);
    write_skill(&dir.path().join("beta"), &skill_md("beta", "The second", "Beta."));
    let odd = dir.path().join("odd-paths");
    write_skill(&odd, &skill_md("odd-paths", "Paths that need encoding", "Odd."));
    write(&odd.join("100% done.txt"), b"odd\n");
    write_skill(&dir.path().join("Not_Spec"), &skill_md("Not_Spec", "Not an agentskills.io name", "N."));
    let big = dir.path().join("big");
    write_skill(&big, &skill_md("big", "Too many files", "Big."));
    for index in 0..skillcat_core::MAX_SKILL_FILES {
        write(&big.join(format!("data/{index:04}.txt")), b"x");
    }
    dir
}

async fn get_json(app: &TestApp, path: &str) -> (Value, reqwest::header::HeaderMap) {
    let response = app.get(path).send().await.expect("GET");
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(response.headers()["content-type"], "application/json", "{path}");
    let headers = response.headers().clone();
    (response.json().await.expect("JSON"), headers)
}

/// The discovery index's entries by name.
async fn discovery(app: &TestApp) -> BTreeMap<String, Value> {
    let (index, _) = get_json(app, DISCOVERY).await;
    entries(&index)
}

fn entries(index: &Value) -> BTreeMap<String, Value> {
    let skills = index["skills"].as_array().expect("skills");
    skills.iter().map(|entry| (entry["name"].as_str().expect("name").to_owned(), entry.clone())).collect()
}

/// The bytes at an entry's `url`, resolved against the index's URL as RFC 3986 says.
async fn artifact(app: &TestApp, entry: &Value) -> reqwest::Response {
    let base = reqwest::Url::parse(&app.url(DISCOVERY)).expect("the index's URL");
    let url = base.join(entry["url"].as_str().expect("url")).expect("a URL reference");
    let response = app.client.get(url).send().await.expect("GET the artifact");
    assert_eq!(response.status(), 200, "{entry}");
    response
}

fn is_spec_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[tokio::test]
async fn the_discovery_index_gives_each_skill_the_digest_of_the_bytes_at_its_url() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let (index, headers) = get_json(&app, DISCOVERY).await;
    assert!(headers.contains_key("etag"));
    // The page's rules, field by field: `$schema` and `skills` at the top, nothing else needed.
    assert_eq!(index["$schema"], SCHEMA);
    let skills = index["skills"].as_array().expect("skills");
    let names: Vec<&str> = skills.iter().map(|entry| entry["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta", "odd-paths"], "name order; Not_Spec and big are left out");
    let catalog: Value = app.skills().await.json().await.unwrap();
    let description = |name: &str| {
        let skills = catalog["skills"].as_array().unwrap();
        skills.iter().find(|skill| skill["name"] == name).unwrap()["description"].clone()
    };
    for entry in skills {
        let fields: Vec<&str> = entry.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, ["description", "digest", "name", "type", "url"], "{entry}");
        let name = entry["name"].as_str().unwrap();
        assert!(is_spec_name(name), "{name}");
        assert_eq!(entry["description"], description(name), "the catalog's description");
        let text = entry["digest"].as_str().unwrap();
        assert!(
            text.len() == 71
                && text.starts_with("sha256:")
                && text[7..].bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)),
            "{text}"
        );
        // Path-absolute: resolved against the index's URL, it stays on this server.
        assert!(entry["url"].as_str().unwrap().starts_with('/'), "{entry}");
        let response = artifact(&app, entry).await;
        let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
        let bytes = response.bytes().await.unwrap();
        assert_eq!(digest(&bytes), text, "the digest of exactly the bytes at {}", entry["url"]);
        match entry["type"].as_str().unwrap() {
            "skill-md" => {
                assert_eq!(entry["url"], format!("/skills/{name}/files/SKILL.md"));
                assert_eq!(content_type, "text/markdown; charset=utf-8");
                assert_eq!(bytes, std::fs::read(dir.path().join(name).join("SKILL.md")).unwrap());
            }
            "archive" => {
                assert_eq!(entry["url"], format!("/skills/{name}/archive"));
                assert_eq!(content_type, "application/zip");
                let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
                assert!(zip.by_name("SKILL.md").is_ok(), "SKILL.md at the archive's root");
            }
            other => panic!("type {other}"),
        }
    }
    let by_name = entries(&index);
    assert_eq!(by_name["alpha"]["type"], "archive", "a folder of several files");
    assert_eq!(by_name["beta"]["type"], "skill-md", "its SKILL.md alone");
    // GET and HEAD, and revalidation.
    let head = app.client.head(app.url(DISCOVERY)).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["etag"], headers["etag"]);
    let again = app.get(DISCOVERY).header("if-none-match", headers["etag"].clone()).send().await.unwrap();
    assert_eq!(again.status(), 304);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_older_index_lists_each_skills_files_served_beneath_it_as_the_files_route_serves_them() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let (index, _) = get_json(&app, LEGACY).await;
    assert_eq!(index.as_object().unwrap().keys().collect::<Vec<_>>(), ["skills"]);
    let skills = index["skills"].as_array().unwrap();
    let names: Vec<&str> = skills.iter().map(|entry| entry["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta"], "odd-paths has paths a client cannot append to a URL");
    for entry in skills {
        let name = entry["name"].as_str().unwrap();
        let fields: Vec<&str> = entry.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, ["description", "files", "name"]);
        let listing: Value = app.get(&format!("/skills/{name}/files")).send().await.unwrap().json().await.unwrap();
        let listed: Vec<&Value> = listing["files"].as_array().unwrap().iter().map(|file| &file["path"]).collect();
        assert_eq!(entry["files"].as_array().unwrap().iter().collect::<Vec<_>>(), listed, "{name}");
        for path in entry["files"].as_array().unwrap() {
            let path = path.as_str().unwrap();
            let legacy = app.get(&format!("/.well-known/skills/{name}/{path}")).send().await.unwrap();
            let files = app.get(&format!("/skills/{name}/files/{path}")).send().await.unwrap();
            assert_eq!(legacy.status(), 200, "{name}/{path}");
            for header in ["content-type", "etag", "cache-control", "x-content-type-options", "content-security-policy"]
            {
                assert_eq!(legacy.headers().get(header), files.headers().get(header), "{name}/{path}: {header}");
            }
            let bytes = legacy.bytes().await.unwrap();
            assert_eq!(bytes, std::fs::read(dir.path().join(name).join(path)).unwrap(), "{name}/{path}");
            assert_eq!(bytes, files.bytes().await.unwrap());
        }
    }
    // Ranges and conditions as on the files route.
    let url = "/.well-known/skills/alpha/references/guide.md";
    let bytes = std::fs::read(dir.path().join("alpha/references/guide.md")).unwrap();
    let part = app.get(url).header("range", "bytes=2-6").send().await.unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.bytes().await.unwrap(), bytes[2..=6]);
    let tag = format!("\"{}\"", digest(&bytes));
    assert_eq!(app.get(url).header("if-none-match", &tag).send().await.unwrap().status(), 304);
    assert_eq!(app.get(url).header("if-match", "\"sha256:00\"").send().await.unwrap().status(), 412);
    assert_eq!(app.client.head(app.url(url)).send().await.unwrap().status(), 200);
    // The odd paths are published by the discovery index, as an archive.
    assert_eq!(discovery(&app).await["odd-paths"]["type"], "archive");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn skills_the_rules_refuse_stay_in_the_catalog_and_are_not_found_beneath_the_indexes() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let catalog: Value = app.skills().await.json().await.unwrap();
    let names: Vec<&str> = catalog["skills"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Not_Spec", "alpha", "beta", "big", "odd-paths"], "nagents' catalog is unchanged");
    assert_eq!(catalog["diagnostics"], Value::Array(Vec::new()), "and says nothing of the indexes");
    let (legacy, _) = get_json(&app, LEGACY).await;
    let published = discovery(&app).await;
    for name in ["Not_Spec", "big"] {
        assert!(!published.contains_key(name), "{name}");
        assert!(!legacy["skills"].as_array().unwrap().iter().any(|entry| entry["name"] == name), "{name}");
    }
    // Beneath the older index: 404 for what it does not list, whatever the catalog holds.
    for (path, why) in [
        ("Not_Spec/SKILL.md", "not an agentskills.io name"),
        ("not_spec/SKILL.md", "no such skill"),
        ("big/SKILL.md", "over the bound on files"),
        ("odd-paths/SKILL.md", "a path the older index cannot list"),
        ("nobody/SKILL.md", "no such skill"),
        ("bad%20name/SKILL.md", "not even a skill name"),
    ] {
        let answer = raw_request(app.address, "GET", &format!("/.well-known/skills/{path}"), &[], b"").await;
        assert_eq!(answer.status, 404, "{path}: {why}");
        assert_eq!(answer.header("content-type"), Some("application/problem+json"), "{path}");
        assert_eq!(answer.json()["type"], "urn:skillcat:problem:skill-not-found", "{path}");
    }
    let answer = raw_request(app.address, "GET", "/.well-known/skills/big/SKILL.md", &[], b"").await;
    assert!(answer.json()["detail"].as_str().unwrap().contains("512"), "the detail says why");
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_a_file_changes_the_indexes() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let (before, headers) = get_json(&app, DISCOVERY).await;
    let before = entries(&before);
    let first = app.catalog_etag().await;
    write(&dir.path().join("alpha/scripts/run.sh"), b"#!/bin/sh\necho changed\n");
    app.wait_for_catalog(|catalog| catalog["etag"] != first.as_str()).await;
    let (after, after_headers) = get_json(&app, DISCOVERY).await;
    assert_ne!(after_headers["etag"], headers["etag"], "a new index for the new catalog version");
    let after = entries(&after);
    assert_ne!(after["alpha"]["digest"], before["alpha"]["digest"]);
    let bytes = artifact(&app, &after["alpha"]).await.bytes().await.unwrap();
    assert_eq!(digest(&bytes), after["alpha"]["digest"].as_str().unwrap(), "the new archive's digest");
    assert_eq!(after["beta"], before["beta"], "other skills keep their entries");
    // A second file makes a skill-md skill an archive, and a new skill appears.
    let second = app.catalog_etag().await;
    write(&dir.path().join("beta/notes.txt"), b"notes\n");
    write_skill(&dir.path().join("gamma"), &skill_md("gamma", "New", "G."));
    eventually("beta is an archive and gamma is published", || async {
        let published = discovery(&app).await;
        published["beta"]["type"] == "archive" && published.contains_key("gamma")
    })
    .await;
    assert_ne!(app.catalog_etag().await, second);
    let (legacy, _) = get_json(&app, LEGACY).await;
    let beta = legacy["skills"].as_array().unwrap().iter().find(|entry| entry["name"] == "beta").unwrap().clone();
    assert_eq!(beta["files"], serde_json::json!(["SKILL.md", "notes.txt"]));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_index_belongs_to_its_catalog_version_and_a_stale_archive_is_refused() {
    let dir = tree();
    // No watcher and no periodic rescan: the catalog changes only when the server notices.
    let app = TestApp::spawn_dir_with(dir.path(), |options| {
        options.live = skillcat::catalog::LiveOptions { rescan_interval: None, watch: false };
    })
    .await;
    let (first, headers) = get_json(&app, DISCOVERY).await;
    write(&dir.path().join("alpha/scripts/run.sh"), b"#!/bin/sh\necho unseen\n");
    let (again, again_headers) = get_json(&app, DISCOVERY).await;
    assert_eq!((&again, &again_headers["etag"]), (&first, &headers["etag"]), "made once per catalog version");
    // The archive made now would not have the indexed digest: refused, and a rescan asked for.
    let stale = app.get("/skills/alpha/archive").send().await.unwrap();
    assert_eq!(stale.status(), 409);
    eventually("the rescan publishes an index with the new digest", || async {
        let published = discovery(&app).await;
        published["alpha"]["digest"] != entries(&first)["alpha"]["digest"]
    })
    .await;
    let alpha = discovery(&app).await["alpha"].clone();
    let bytes = artifact(&app, &alpha).await.bytes().await.unwrap();
    assert_eq!(digest(&bytes), alpha["digest"].as_str().unwrap());
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_older_file_route_never_reads_outside_the_skill() {
    let dir = tree();
    write(&dir.path().join("secret.txt"), SECRET);
    write(&dir.path().join("alpha/.git/config"), b"[core]\n");
    let app = TestApp::spawn_dir(dir.path()).await;
    assert_paths_stay_inside(app.address, "/.well-known/skills/alpha").await;
    // Skill names with tricks of their own name nothing in the index.
    for name in ["..", "%2e%2e", "alpha%2F..", "ALPHA"] {
        let answer = raw_request(app.address, "GET", &format!("/.well-known/skills/{name}/SKILL.md"), &[], b"").await;
        assert_eq!(answer.status, 404, "{name}");
    }
    // A file swapped for a symlink to a secret after the listing: refused, never followed.
    let path = dir.path().join("alpha/scripts/run.sh");
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), &path).unwrap();
    let answer =
        tokio::time::timeout(Duration::from_secs(5), app.get("/.well-known/skills/alpha/scripts/run.sh").send())
            .await
            .expect("no hang")
            .unwrap();
    assert_ne!(answer.status(), 200);
    assert!(!answer.bytes().await.unwrap().windows(SECRET.len()).any(|window| window == SECRET));
    app.shutdown().await.unwrap();
}
