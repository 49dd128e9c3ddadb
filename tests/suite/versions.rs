//! Versions against a real history: a public collection of `tests/data` committed over several
//! commits and tags (edits, a new executable file, a folder renamed keeping its name, a skill
//! deleted and added again, a mode change, a skill deleted for good), served by `git daemon` on
//! loopback to two replicas. What each version is, is worked out here from git itself (`git
//! ls-tree`, `git cat-file`), never from the service: every version listed, its commit and tags,
//! every byte of every file (REST and the archive), the Rust client's pinned load, and
//! `skillcat download --lock`, `--frozen` and `verify`. Then a force-push drops commits, and the
//! versions only they had are gone (404), never replaced by the current one.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use skillcat_core::{SkillDiscoverer as _, SkillName};

use crate::support::git::{GitDaemon, Repo, copy_tree, get_json, git, hook_all, serve, wait_commits, write_file};

const SECRET: &str = "hook-secret";

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_gzip().timeout(Duration::from_secs(60)).build().expect("client")
}

/// One skill's folder at one commit, read from git: its path in the repository and its files
/// (path in the folder, executable, bytes), as the archive holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Folder {
    path: String,
    files: BTreeMap<String, (bool, Vec<u8>)>,
}

impl Folder {
    /// `sha256:` of the lines `<mode> <sha256 hex> <path>\n`, in code-point path order.
    fn version(&self) -> String {
        let mut text = String::new();
        for (path, (executable, bytes)) in &self.files {
            let mode = if *executable { "755" } else { "644" };
            text.push_str(&format!("{mode} {} {path}\n", hex(&Sha256::digest(bytes))));
        }
        format!("sha256:{}", hex(&Sha256::digest(text.as_bytes())))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The catalog of `commit`, from git: each `SKILL.md`'s folder by the `name:` of its frontmatter.
fn catalog_at(repo: &Repo, commit: &str) -> BTreeMap<String, Folder> {
    let mut catalog = BTreeMap::new();
    let blobs = repo.blobs(commit);
    for (path, _, bytes) in blobs.iter().filter(|(path, _, _)| path.ends_with("/SKILL.md")) {
        let folder = path.strip_suffix("/SKILL.md").expect("a SKILL.md").to_owned();
        let text = String::from_utf8_lossy(bytes);
        let name = text.lines().find_map(|line| line.strip_prefix("name:")).expect("a name").trim().to_owned();
        let files = blobs
            .iter()
            .filter(|(_, mode, _)| mode != "120000")
            .filter_map(|(other, mode, bytes)| {
                let inner = other.strip_prefix(&format!("{folder}/"))?;
                Some((inner.to_owned(), (mode == "100755", bytes.clone())))
            })
            .collect();
        catalog.insert(name, Folder { path: folder, files });
    }
    catalog
}

/// What `/versions` must list for `name`, worked out from the commits (oldest first) and tags:
/// the distinct versions, newest first, each with its newest commit and the tags of commits
/// that have it; current when the head has it.
fn expected_versions(
    catalogs: &[(String, BTreeMap<String, Folder>)],
    tags: &BTreeMap<String, String>,
    name: &str,
) -> Vec<Value> {
    let mut versions: Vec<(String, String, BTreeSet<String>)> = Vec::new();
    for (commit, catalog) in catalogs.iter().rev() {
        let Some(folder) = catalog.get(name) else { continue };
        let version = folder.version();
        let tagged = tags.iter().filter(|(_, at)| *at == commit).map(|(tag, _)| tag.clone());
        match versions.iter_mut().find(|(known, _, _)| *known == version) {
            Some((_, _, known)) => known.extend(tagged),
            None => versions.push((version, commit.clone(), tagged.collect())),
        }
    }
    let head = catalogs.last().expect("a head").1.get(name).map(Folder::version);
    versions
        .into_iter()
        .map(|(version, commit, tags)| {
            serde_json::json!({
                "version": version, "commit": commit, "tags": tags, "current": head.as_ref() == Some(&version),
            })
        })
        .collect()
}

/// `/versions` of `name`, without the commit times (checked apart), all pages of `limit`.
async fn listed_versions(
    client: &reqwest::Client,
    server: &crate::support::process::ServeProcess,
    name: &str,
    limit: usize,
) -> Vec<Value> {
    let mut listed = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, body) = get_json(client, server, &format!("/skills/{name}/versions?limit={limit}{cursor}")).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["name"], name);
        let page = body["versions"].as_array().expect("versions");
        assert!(page.len() <= limit, "{body}");
        for entry in page {
            let at = entry["committed_at"].as_str().expect("a time");
            assert!(at.starts_with("2023-11-14T22:") && at.ends_with('Z'), "{entry}");
            let mut entry = entry.clone();
            entry.as_object_mut().expect("an object").remove("committed_at");
            listed.push(entry);
        }
        match body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return listed,
        }
    }
}

async fn bytes(client: &reqwest::Client, url: String) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let response = client.get(&url).send().await.expect("GET");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.bytes().await.expect("body").to_vec())
}

/// Every file of `name` at `version` through `/files`, `/files/{path}` and `/archive` equals
/// `folder`, byte for byte and mode for mode; every answer is immutable, tagged with the version.
async fn assert_served(
    client: &reqwest::Client,
    server: &crate::support::process::ServeProcess,
    name: &str,
    version: &str,
    folder: &Folder,
) {
    let pinned = |path: &str| server.url(&format!("/skills/{name}{path}?version={version}"));
    let (status, headers, body) = bytes(client, pinned("/files")).await;
    assert_eq!(status, 200, "{name} at {version}: {}", String::from_utf8_lossy(&body));
    assert_eq!(headers["etag"], format!("\"{version}\""));
    assert_eq!(headers["cache-control"], "public, max-age=31536000, immutable");
    let listing: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(listing["version"], version);
    let listed: BTreeMap<String, bool> = listing["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|file| (file["path"].as_str().expect("path").to_owned(), file["executable"].as_bool().expect("bool")))
        .collect();
    let expected: BTreeMap<String, bool> =
        folder.files.iter().map(|(path, (executable, _))| (path.clone(), *executable)).collect();
    assert_eq!(listed, expected, "{name} at {version}");
    for (path, (_, expected)) in &folder.files {
        let (status, headers, body) = bytes(client, pinned(&format!("/files/{path}"))).await;
        assert_eq!((status, &body), (200, expected), "{name}/{path} at {version}");
        assert_eq!(headers["cache-control"], "public, max-age=31536000, immutable");
    }
    let (status, _, zip) = bytes(client, pinned("/archive")).await;
    assert_eq!(status, 200);
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).expect("a zip");
    let mut unpacked = BTreeMap::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).expect("an entry");
        let executable = entry.unix_mode().expect("a mode") & 0o111 != 0;
        let mut content = Vec::new();
        entry.read_to_end(&mut content).expect("read");
        unpacked.insert(entry.name().expect("a UTF-8 name").into_owned(), (executable, content));
    }
    assert_eq!(unpacked, folder.files, "the archive of {name} at {version}");
    let (status, _, content) = bytes(client, pinned("/content")).await;
    assert_eq!((status, &content), (200, &folder.files["SKILL.md"].1));
}

fn skillcat(args: &[&str]) -> (bool, String) {
    let output =
        Command::new(env!("CARGO_BIN_EXE_skillcat")).args(args).env_remove("SKILLCAT_CONFIG").output().expect("run");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Every file beneath `dir`: path, executable, bytes.
fn installed(dir: &Path) -> BTreeMap<String, (bool, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("read") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("inside").to_str().expect("UTF-8").to_owned();
                let executable = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o100 != 0;
                files.insert(relative, (executable, std::fs::read(&path).expect("read")));
            }
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_is_its_folder_at_its_commit_and_a_force_push_drops_versions() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "science.git");
    let collection =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/collections/K-Dense-AI-claude-scientific-skills");
    copy_tree(&collection, &repo.work);
    let skills = repo.work.join("scientific-skills");
    let mut commits = vec![repo.commit("the collection, as kept in tests/data")];
    repo.tag("v1", "HEAD");
    let mut edited = std::fs::read(skills.join("peer-review/SKILL.md")).expect("read");
    edited.extend_from_slice(b"\nRevised after review.\n");
    std::fs::write(skills.join("peer-review/SKILL.md"), &edited).expect("write");
    write_file(&skills.join("adaptyv/scripts/run.sh"), b"#!/bin/sh\necho adaptyv\n", 0o755);
    commits.push(repo.commit("peer-review revised; adaptyv gets a script"));
    git(&repo.work, &["mv", "scientific-skills/parallel-web", "scientific-skills/web-parallel"]);
    commits.push(repo.commit("parallel-web's folder renamed, its name kept"));
    repo.tag("v2", "HEAD");
    let lookup = std::fs::read(skills.join("database-lookup/SKILL.md")).expect("read");
    std::fs::remove_dir_all(skills.join("database-lookup")).expect("remove");
    commits.push(repo.commit("database-lookup deleted"));
    write_file(&skills.join("database-lookup/SKILL.md"), &lookup, 0o644);
    commits.push(repo.commit("database-lookup back as it was"));
    write_file(&skills.join("adaptyv/scripts/run.sh"), b"#!/bin/sh\necho adaptyv\n", 0o644);
    commits.push(repo.commit("adaptyv's script no longer executable"));
    std::fs::remove_dir_all(skills.join("markdown-mermaid-writing")).expect("remove");
    commits.push(repo.commit("markdown-mermaid-writing deleted"));
    repo.push("main");
    let head = commits.last().expect("a head").clone();
    let tags: BTreeMap<String, String> =
        [("v1", &commits[0]), ("v2", &commits[2])].into_iter().map(|(tag, at)| (tag.to_owned(), at.clone())).collect();
    let catalogs: Vec<(String, BTreeMap<String, Folder>)> =
        commits.iter().map(|commit| (commit.clone(), catalog_at(&repo, commit))).collect();
    let names: BTreeSet<String> = catalogs.iter().flat_map(|(_, catalog)| catalog.keys().cloned()).collect();
    assert_eq!(names.len(), 5);

    let daemon = GitDaemon::start(&base);
    let url = daemon.url("science.git");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("secret");
    let replica = |state: &str| {
        let state = dir.path().join(state);
        serve(&[
            "--no-builtin".into(),
            "--git".into(),
            url.clone(),
            "--state-dir".into(),
            state.to_str().expect("UTF-8").into(),
            "--webhook-secret-file".into(),
            secret.to_str().expect("UTF-8").into(),
        ])
    };
    let (first, second) = (replica("state-a"), replica("state-b"));
    let client = client();
    for server in [&first, &second] {
        server.ready().await;
        wait_commits(&client, server, &[(0, &head)]).await;
    }

    // Every name's versions, as git has them; the two replicas list the same, a page at a time
    // or all at once.
    for name in &names {
        let expected = expected_versions(&catalogs, &tags, name);
        assert!(!expected.is_empty());
        assert_eq!(listed_versions(&client, &first, name, 1000).await, expected, "{name}");
        assert_eq!(listed_versions(&client, &second, name, 1).await, expected, "{name}, one at a time");
        let (_, a) = get_json(&client, &first, &format!("/skills/{name}/versions")).await;
        let (_, b) = get_json(&client, &second, &format!("/skills/{name}/versions")).await;
        assert_eq!(a, b, "replicas agree on {name}");
    }
    // The history's shape: an edit and a mode change are versions; a rename keeping the files
    // and a re-add of the same files are not; a deleted skill keeps its history, none current.
    let count = |name: &str| expected_versions(&catalogs, &tags, name).len();
    assert_eq!((count("peer-review"), count("adaptyv"), count("parallel-web"), count("database-lookup")), (2, 3, 1, 1));
    let gone = expected_versions(&catalogs, &tags, "markdown-mermaid-writing");
    assert!(gone.iter().all(|entry| entry["current"] == false), "{gone:?}");

    // Every version, every byte, from the newest commit that has it, by digest, commit and tag.
    for name in &names {
        for entry in expected_versions(&catalogs, &tags, name) {
            let (version, commit) = (entry["version"].as_str().expect("v"), entry["commit"].as_str().expect("c"));
            let folder = &catalogs.iter().find(|(at, _)| at == commit).expect("a commit").1[name];
            assert_served(&client, &first, name, version, folder).await;
            for by in [&commit[..7], commit] {
                let (status, body) = get_json(&client, &second, &format!("/skills/{name}?version={by}")).await;
                assert_eq!((status, &body["version"]), (200, &entry["version"]), "{name} at {by}: {body}");
            }
        }
    }
    for (tag, at) in &tags {
        for (name, folder) in &catalogs.iter().find(|(commit, _)| commit == at).expect("tagged").1 {
            let (status, body) = get_json(&client, &first, &format!("/skills/{name}?version={tag}")).await;
            assert_eq!((status, body["version"].as_str()), (200, Some(folder.version().as_str())), "{name} at {tag}");
            let location = format!("{url}#{}/SKILL.md", folder.path);
            assert_eq!(body["location"], location, "the descriptor as it was at {tag}");
        }
    }
    // A commit or tag where the skill does not exist names it.
    let (status, body) = get_json(&client, &first, &format!("/skills/database-lookup?version={}", commits[3])).await;
    assert_eq!(status, 404, "{body}");
    assert!(body["type"].as_str().is_some_and(|kind| kind.ends_with(":version-not-found")), "{body}");
    assert!(body["detail"].as_str().is_some_and(|detail| detail.contains(&commits[3])), "{body}");

    // The Rust client: a pin to v1's peer-review loads v1's bytes, also after the catalog moved on.
    let old = catalogs[0].1["peer-review"].clone();
    let remote = skillcat_client::RemoteSkillDiscoverer::builder(first.url(""))
        .pin(SkillName::parse("peer-review").expect("a name"), old.version())
        .pin(SkillName::parse("markdown-mermaid-writing").expect("a name"), "v2")
        .build()
        .expect("a client");
    let discovery = remote.scan().await.expect("discovery");
    for (name, at) in [("peer-review", 0), ("markdown-mermaid-writing", 2)] {
        let skill = discovery.skills.iter().find(|skill| skill.name().as_str() == name).expect("pinned skill listed");
        let expected = String::from_utf8(catalogs[at].1[name].files["SKILL.md"].1.clone()).expect("UTF-8");
        assert_eq!(remote.load(skill).await.expect("pinned load"), expected, "{name}");
    }

    // The lock: download v1 of two skills, verify, then a frozen install elsewhere; a byte
    // changed afterwards fails `verify`, naming the skill.
    let installs = dir.path().join("installs");
    let lock = dir.path().join("skills-lock.json");
    let (into, lock_path) = (installs.to_str().expect("UTF-8"), lock.to_str().expect("UTF-8"));
    let (ok, output) = skillcat(&[
        "download",
        "--from",
        &first.url(""),
        "peer-review",
        "adaptyv",
        "--version",
        "v1",
        "--into",
        into,
        "--lock",
        lock_path,
    ]);
    assert!(ok, "{output}");
    for name in ["peer-review", "adaptyv"] {
        assert_eq!(installed(&installs.join(name)), catalogs[0].1[name].files, "{name} installed at v1");
    }
    let written: Value = serde_json::from_slice(&std::fs::read(&lock).expect("the lock")).expect("JSON");
    assert_eq!(written["skills"]["adaptyv"]["version"], catalogs[0].1["adaptyv"].version());
    let (ok, output) = skillcat(&["verify", "--lock", lock_path, into]);
    assert!(ok, "{output}");
    let frozen = dir.path().join("frozen");
    let (ok, output) =
        skillcat(&["download", "--frozen", "--lock", lock_path, "--into", frozen.to_str().expect("UTF-8")]);
    assert!(ok, "{output}");
    assert_eq!(installed(&frozen.join("peer-review")), catalogs[0].1["peer-review"].files);
    std::fs::write(installs.join("adaptyv/SKILL.md"), b"tampered").expect("write");
    let (ok, output) = skillcat(&["verify", "--lock", lock_path, into]);
    assert!(!ok && output.contains("DIFFERS  adaptyv") && !output.contains("DIFFERS  peer-review"), "{output}");

    // A force-push back to v2: the versions only later commits had are gone, on both replicas;
    // the ones v2 has stay.
    git(&repo.work, &["reset", "-q", "--hard", &commits[2]]);
    repo.push("main");
    for server in [&first, &second] {
        hook_all(&client, server, SECRET).await;
        wait_commits(&client, server, &[(0, &commits[2])]).await;
    }
    let kept = &catalogs[..3];
    let dropped = catalogs[5].1["adaptyv"].version();
    for server in [&first, &second] {
        let (status, body) = get_json(&client, server, &format!("/skills/adaptyv/files?version={dropped}")).await;
        assert_eq!(status, 404, "{body}");
        assert!(body["type"].as_str().is_some_and(|kind| kind.ends_with(":version-not-found")), "{body}");
        let (status, _) = get_json(&client, server, &format!("/skills/adaptyv?version={}", &commits[5][..10])).await;
        assert_eq!(status, 404);
        for name in &names {
            assert_eq!(
                listed_versions(&client, server, name, 100).await,
                expected_versions(kept, &tags, name),
                "{name}"
            );
        }
    }
    // The client pinned to a version that is gone says so, naming the skill and the version.
    let pinned = skillcat_client::RemoteSkillDiscoverer::builder(first.url(""))
        .pin(SkillName::parse("adaptyv").expect("a name"), dropped.clone())
        .build()
        .expect("a client");
    let error = pinned.scan().await.expect_err("a version that is gone").to_string();
    assert!(error.contains("adaptyv") && error.contains(&dropped), "{error}");
}

/// Bad versions, limits and cursors are refused with a 4xx and say why; none is a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_limits_and_cursors_are_client_errors() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "one.git");
    write_file(&repo.work.join("alpha/SKILL.md"), b"---\nname: alpha\ndescription: A.\n---\nOne.\n", 0o644);
    repo.commit("alpha");
    repo.tag("v1", "HEAD");
    write_file(&repo.work.join("alpha/SKILL.md"), b"---\nname: alpha\ndescription: A.\n---\nTwo.\n", 0o644);
    let head = repo.commit_and_push("alpha, again");
    let daemon = GitDaemon::start(&base);
    let state = dir.path().join("state");
    let server = serve(&[
        "--no-builtin".into(),
        "--git".into(),
        daemon.url("one.git"),
        "--state-dir".into(),
        state.to_str().expect("UTF-8").into(),
    ]);
    server.ready().await;
    let client = client();
    wait_commits(&client, &server, &[(0, &head)]).await;
    let huge = "9".repeat(400);
    let cases: Vec<(String, u16, &str)> = vec![
        ("/skills/alpha?version=".into(), 400, "invalid-version"),
        ("/skills/alpha/files?version=%00".into(), 400, "invalid-version"),
        ("/skills/alpha/files?version=a%09b".into(), 400, "invalid-version"),
        (format!("/skills/alpha/archive?version={huge}"), 400, "invalid-version"),
        ("/skills/alpha/files/SKILL.md?version=v1&version=v1".into(), 400, "invalid-query"),
        // Anything else names a version the skill has or not.
        ("/skills/alpha?version=sha256:zz".into(), 404, "version-not-found"),
        ("/skills/alpha/content?version=a..b".into(), 404, "version-not-found"),
        (format!("/skills/alpha?version=sha256:{}", "0".repeat(64)), 404, "version-not-found"),
        ("/skills/alpha?version=v9".into(), 404, "version-not-found"),
        ("/skills/alpha?version=0000000".into(), 404, "version-not-found"),
        ("/skills/nobody?version=v1".into(), 404, "skill-not-found"),
        ("/skills/nobody/versions".into(), 404, "skill-not-found"),
        ("/skills/alpha/versions?limit=0".into(), 400, "invalid-query"),
        ("/skills/alpha/versions?limit=1001".into(), 400, "invalid-query"),
        (format!("/skills/alpha/versions?limit={huge}"), 400, "invalid-query"),
        ("/skills/alpha/versions?limit=-1".into(), 400, "invalid-query"),
        ("/skills/alpha/versions?cursor=zz".into(), 400, "invalid-query"),
        ("/skills/alpha/versions?cursor=".into(), 400, "invalid-query"),
        (format!("/skills/alpha/versions?cursor={}", "AB".repeat(32)), 400, "invalid-query"),
        // A cursor of the right form that names no version listed: the list changed, or it was
        // never given.
        (format!("/skills/alpha/versions?cursor={}", "ab".repeat(32)), 409, "stale-cursor"),
    ];
    for (path, status, kind) in cases {
        let (got, body) = get_json(&client, &server, &path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(body["type"].as_str().is_some_and(|found| found.ends_with(&format!(":{kind}"))), "{path}: {body}");
    }
    let load = client.post(server.url("/skills/alpha/load?version=nope..")).send().await.expect("POST");
    assert_eq!(load.status(), 404);
    let (status, body) = get_json(&client, &server, "/skills/alpha?version=a..b").await;
    assert_eq!(status, 404);
    assert!(body["detail"].as_str().is_some_and(|detail| detail.contains("is not a version digest")), "{body}");
    // A pinned load: the version's content, tagged with it; If-None-Match does not apply to it.
    let (_, body) = get_json(&client, &server, "/skills/alpha?version=v1").await;
    let version = body["version"].as_str().expect("a version").to_owned();
    let load = client
        .post(server.url("/skills/alpha/load?version=v1"))
        .header("if-none-match", format!("\"{version}\""))
        .send()
        .await
        .expect("POST");
    assert_eq!(load.status(), 200);
    assert_eq!(load.headers()["etag"], format!("\"{version}\""));
    let loaded: Value = load.json().await.expect("JSON");
    assert!(loaded["content"].as_str().is_some_and(|content| content.contains("One.")), "{loaded}");
    // A pinned GET revalidates against the version.
    let held = client
        .get(server.url(&format!("/skills/alpha/content?version={version}")))
        .header("if-none-match", format!("\"{version}\""))
        .send()
        .await
        .expect("GET");
    assert_eq!(held.status(), 304);
    // The page of versions links each version's archive.
    let page = client
        .get(server.url("/ui/skills/alpha/versions"))
        .header("accept", "text/html")
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("text");
    assert!(page.contains(&format!("/skills/alpha/archive?version={version}")), "{page}");
}
