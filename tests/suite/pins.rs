//! Pinned skills and locks against a real server on port 0: the client reads a pinned skill at
//! its version (checked against the version's digest) or says which skill and version the
//! server lacks, never the current one instead; `skillcat download --lock` writes the lock,
//! `--frozen` installs exactly it all or nothing (a missing version or a byte altered on the way
//! leaves the folder as it was), `verify` finds every change to an installed tree and
//! `outdated` every skill edited since it was locked.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::Output;

use skillcat_client::{ClientError, Lock, RemoteSkillDiscoverer, RetryPolicy, installed_version};
use skillcat_core::{Digest, Skill, SkillDiscoverer, SkillError, SkillName, TokenLimit, budget_skill_content};

use crate::support::files::write_file;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

/// Three skills: `alpha` with an executable script and a reference, `beta` alone, `gamma` with
/// a data file.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write_skill(&root.join("alpha"), &skill_md("alpha", "The first skill", &"Alpha ✓ body. ".repeat(40)));
    write_skill(&root.join("beta"), &skill_md("beta", "The second skill", "Beta body."));
    write_skill(&root.join("gamma"), &skill_md("gamma", "The third skill", "Gamma body."));
    let files: [(&str, &[u8], u32); 3] = [
        ("alpha/scripts/run.sh", b"#!/bin/sh\necho alpha\n", 0o755),
        ("alpha/references/guide.md", b"# Guide\n", 0o644),
        ("gamma/data.txt", b"1 2 3\n", 0o644),
    ];
    for (path, bytes, mode) in files {
        write_file(&root.join(path), bytes, mode);
    }
    for skill in ["alpha", "beta", "gamma"] {
        std::fs::set_permissions(root.join(skill).join("SKILL.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    dir
}

fn name(text: &str) -> SkillName {
    SkillName::parse(text).unwrap()
}

fn remote(app: &TestApp) -> skillcat_client::Builder {
    RemoteSkillDiscoverer::builder(app.url("")).retry_policy(RetryPolicy::none())
}

/// The version the server states for `name` now.
async fn version_of(app: &TestApp, name: &str) -> Digest {
    let entry: serde_json::Value = app.skill(name).await.json().await.unwrap();
    Digest::parse(entry["version"].as_str().expect("a version")).unwrap()
}

/// A version no server has.
fn absent_version() -> Digest {
    Digest::of(b"no skill has this version")
}

/// Rewrites `folder/SKILL.md` and waits until the server states another version for it.
async fn edit(app: &TestApp, root: &Path, skill: &str, body: &str) {
    let before = version_of(app, skill).await;
    write_skill(&root.join(skill), &skill_md(skill, "Edited", body));
    eventually("the edit is served", || async { version_of(app, skill).await != before }).await;
}

/// The `ClientError` inside a discoverer's error.
fn client_error(error: &SkillError) -> &ClientError {
    let SkillError::Source(source) = error else { panic!("a source error: {error:?}") };
    source.downcast_ref::<ClientError>().expect("the client's error")
}

fn assert_version_not_found(error: &ClientError, skill: &str, version: &str) {
    let ClientError::VersionNotFound { name, version: missing, problem } = error else {
        panic!("VersionNotFound, not {error:?}")
    };
    assert_eq!((name.as_str(), missing.as_str()), (skill, version));
    assert_eq!((problem.status, problem.skillcat_kind()), (404, Some("version-not-found")), "{problem}");
    let text = error.to_string();
    assert!(text.contains(&format!("'{skill}'")) && text.contains(version), "{text}");
}

/// What is beneath `root`: relative path => (mode, bytes) for files, (mode, None) for folders and
/// symlinks (never followed). Two trees are equal, byte for byte and modes included, exactly when
/// these are.
fn snapshot(root: &Path) -> BTreeMap<String, (u32, Option<Vec<u8>>)> {
    fn walk(folder: &Path, prefix: &str, out: &mut BTreeMap<String, (u32, Option<Vec<u8>>)>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let entry = entry.unwrap();
            let relative = format!("{prefix}{}", entry.file_name().into_string().unwrap());
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let mode = meta.mode() & 0o7777;
            if meta.is_dir() {
                out.insert(relative.clone(), (mode, None));
                walk(&entry.path(), &format!("{relative}/"), out);
            } else if meta.is_file() {
                out.insert(relative, (mode, Some(std::fs::read(entry.path()).unwrap())));
            } else {
                out.insert(relative, (u32::MAX, None));
            }
        }
    }
    let mut out = BTreeMap::new();
    if root.exists() {
        walk(root, "", &mut out);
    }
    out
}

/// Runs `skillcat` with `args` in `cwd`, off the runtime that serves the test's server.
async fn skillcat(args: &[&str], cwd: &Path) -> Output {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let cwd = cwd.to_owned();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_skillcat"))
            .args(&args)
            .current_dir(cwd)
            .env_remove("SKILLCAT_URL")
            .env_remove("SKILLCAT_CONFIG")
            .output()
            .expect("run skillcat")
    })
    .await
    .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn assert_exit(output: &Output, code: i32) {
    assert_eq!(output.status.code(), Some(code), "stdout: {}\nstderr: {}", stdout(output), stderr(output));
}

/// The names of what is in `folder`, sorted.
fn names_in(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(folder).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

// ---------------------------------------------------------------------------------------------
// The client

#[tokio::test]
async fn a_pinned_skill_is_discovered_loaded_and_downloaded_at_its_version() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let version = version_of(&app, "alpha").await;
    let pinned = remote(&app).pin(name("alpha"), version.to_string()).build().unwrap();
    assert_eq!(pinned.pin("alpha"), Some(version.to_string().as_str()));
    assert_eq!(pinned.pin("beta"), None);
    let skills = pinned.discover().await.unwrap();
    let names: Vec<&str> = skills.iter().map(|skill| skill.name().as_str()).collect();
    assert_eq!(names, ["alpha", "beta", "gamma"]);
    let alpha = &skills[0];
    assert_eq!(pinned.pinned_version(alpha).await.unwrap(), Some(version));
    assert_eq!(pinned.pinned_version(&skills[1]).await.unwrap(), None);
    assert_eq!(pinned.pinned_skills().await.unwrap(), std::slice::from_ref(alpha));

    // The content is the folder's SKILL.md; the budgeted load is the server's own, cut from it.
    let on_disk = std::fs::read_to_string(dir.path().join("alpha/SKILL.md")).unwrap();
    assert_eq!(pinned.load(alpha).await.unwrap(), on_disk);
    let unpinned = remote(&app).build().unwrap();
    let current = unpinned.discover().await.unwrap();
    assert_eq!(&current[0], alpha, "the current version is the pinned one");
    for limit in [1, 50, 10_000] {
        let limit = TokenLimit::new(limit).unwrap();
        let loaded = pinned.load_budgeted(alpha, limit).await.unwrap();
        assert_eq!(loaded, budget_skill_content(alpha, &on_disk, limit));
        assert_eq!(loaded, unpinned.load_budgeted(&current[0], limit).await.unwrap());
    }

    // Its files are the version's, and so is the folder downloaded.
    let listing = pinned.files(alpha).await.unwrap();
    assert_eq!((listing.version(), listing.listed_version()), (version, Some(version)));
    let into = tempfile::tempdir().unwrap();
    let done = pinned.download(alpha, into.path().join("alpha"), false).await.unwrap();
    assert_eq!((done.version, done.files), (version, 3));
    assert_eq!(installed_version(into.path().join("alpha")).unwrap(), version);
    assert_eq!(snapshot(&into.path().join("alpha")), snapshot(&dir.path().join("alpha")));

    // An unpinned skill of the same discoverer is read as before, current.
    assert_eq!(
        pinned.load(&skills[1]).await.unwrap(),
        std::fs::read_to_string(dir.path().join("beta/SKILL.md")).unwrap()
    );
    // The catalog's descriptor of a pinned name is not read at another version.
    let other = Skill::new("alpha", "Another description", alpha.location()).unwrap();
    assert!(matches!(pinned.content(&other).await, Err(ClientError::NotInCatalog { .. })));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_version_the_server_does_not_have_is_a_typed_error_naming_skill_and_version_never_the_current_one() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let absent = absent_version().to_string();
    let pinned = remote(&app).pin(name("beta"), absent.clone()).build().unwrap();
    let error = pinned.discover().await.unwrap_err();
    assert!(!error.is_stale(), "discovering again would not help: {error:?}");
    assert_version_not_found(client_error(&error), "beta", &absent);
    let error = pinned.pinned_skills().await.unwrap_err();
    assert_version_not_found(&error, "beta", &absent);

    // A skill pinned at its version, edited on the server: every read of it fails, with the
    // discoverer that resolved it and with a new one; the edited content is never answered.
    let version = version_of(&app, "alpha").await.to_string();
    let pinned = remote(&app).pin(name("alpha"), version.clone()).build().unwrap();
    let alpha = pinned.discover().await.unwrap().remove(0);
    let before = pinned.load(&alpha).await.unwrap();
    let listed = pinned.files(&alpha).await.unwrap();
    edit(&app, dir.path(), "alpha", "Edited body.").await;
    let error = pinned.content(&alpha).await.unwrap_err();
    assert_version_not_found(&error, "alpha", &version);
    let error = pinned.load_budgeted(&alpha, TokenLimit::DEFAULT).await.unwrap_err();
    assert_version_not_found(&error, "alpha", &version);
    let script = listed.files().iter().find(|file| file.path.as_str() == "scripts/run.sh").unwrap();
    assert_version_not_found(&pinned.read_file(&alpha, script).await.unwrap_err(), "alpha", &version);
    let into = tempfile::tempdir().unwrap();
    let error = pinned.download(&alpha, into.path().join("alpha"), false).await.unwrap_err();
    assert_version_not_found(&error, "alpha", &version);
    assert!(names_in(into.path()).is_empty());
    let fresh = remote(&app).pin(name("alpha"), version.clone()).build().unwrap();
    assert_version_not_found(client_error(&fresh.discover().await.unwrap_err()), "alpha", &version);
    assert!(before.contains("Alpha ✓ body."));

    // A pin that is no version at all is refused by the builder.
    for bad in ["", "sha256:12", "two words", "tab\tthere"] {
        let error = remote(&app).pin(name("alpha"), bad).build().unwrap_err();
        assert!(matches!(error, ClientError::Config(_)), "{bad:?}: {error:?}");
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_lock_file_pins_the_entries_of_this_server_only_and_a_pin_wins_over_it() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let alpha = version_of(&app, "alpha").await;
    let gamma = version_of(&app, "gamma").await;
    let lock_dir = tempfile::tempdir().unwrap();
    let path = lock_dir.path().join("skills.lock");
    // The same server written with a trailing slash, another server, and a version this server
    // lacks for a skill pinned explicitly too.
    let text = format!(
        r#"{{"lockfile_version": 1, "skills": {{
            "alpha": {{"source": "{}/", "version": "{alpha}"}},
            "beta": {{"source": "http://127.0.0.1:9/elsewhere", "version": "{}"}},
            "gamma": {{"source": "{}", "version": "{}"}}}}}}"#,
        app.url(""),
        absent_version(),
        app.url(""),
        absent_version()
    );
    std::fs::write(&path, text).unwrap();
    let pinned = remote(&app).lock_file(&path).pin(name("gamma"), gamma.to_string()).build().unwrap();
    assert_eq!(pinned.pin("alpha"), Some(alpha.to_string().as_str()));
    assert_eq!(pinned.pin("beta"), None, "another server's entry is ignored");
    assert_eq!(pinned.pin("gamma"), Some(gamma.to_string().as_str()));
    let skills = pinned.discover().await.unwrap();
    assert_eq!(skills.len(), 3);
    for skill in &skills {
        assert!(pinned.load(skill).await.is_ok(), "{}", skill.name());
    }
    let locked = remote(&app).lock_file(&path).build().unwrap();
    let absent = absent_version().to_string();
    assert_version_not_found(client_error(&locked.discover().await.unwrap_err()), "gamma", &absent);

    // A lock that cannot be read is the builder's error.
    std::fs::write(&path, r#"{"lockfile_version": 2, "skills": {}}"#).unwrap();
    assert!(matches!(remote(&app).lock_file(&path).build(), Err(ClientError::Lock(_))));
    assert!(matches!(remote(&app).lock_file(lock_dir.path().join("missing")).build(), Err(ClientError::Lock(_))));
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// The command line

#[tokio::test]
async fn download_with_a_lock_writes_it_and_frozen_installs_it_again_byte_for_byte() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    // The lock already holds a skill of another server: it is kept.
    let other = format!(
        "{{\"lockfile_version\": 1, \"skills\": {{\"zeta\": {{\"source\": \"http://127.0.0.1:9\", \"version\": \"{}\"}}}}}}",
        absent_version()
    );
    std::fs::write(cwd.join("skills.lock"), other).unwrap();
    let url = app.url("");
    let output =
        skillcat(&["download", "--from", &url, "gamma", "alpha", "--into", "skills", "--lock", "skills.lock"], cwd)
            .await;
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("locked 2 skills in skills.lock"), "{}", stdout(&output));
    assert_eq!(names_in(&cwd.join("skills")), ["alpha", "gamma"]);
    let (alpha, gamma) = (version_of(&app, "alpha").await, version_of(&app, "gamma").await);
    let expected = format!(
        "{{\n  \"lockfile_version\": 1,\n  \"skills\": {{\n    \"alpha\": {{\n      \"source\": \"{url}\",\n      \"version\": \"{alpha}\"\n    }},\n    \"gamma\": {{\n      \"source\": \"{url}\",\n      \"version\": \"{gamma}\"\n    }},\n    \"zeta\": {{\n      \"source\": \"http://127.0.0.1:9\",\n      \"version\": \"{}\"\n    }}\n  }}\n}}\n",
        absent_version()
    );
    assert_eq!(std::fs::read_to_string(cwd.join("skills.lock")).unwrap(), expected);
    for skill in ["alpha", "gamma"] {
        assert_eq!(snapshot(&cwd.join("skills").join(skill)), snapshot(&dir.path().join(skill)), "{skill}");
    }
    // One more skill, with the source's trailing slash: added, the bytes stable otherwise.
    let output =
        skillcat(&["download", "--from", &format!("{url}/"), "beta", "--into", "skills", "--lock", "skills.lock"], cwd)
            .await;
    assert_exit(&output, 0);
    let lock = Lock::read(cwd.join("skills.lock")).unwrap();
    assert_eq!(lock.get("beta").unwrap().source, url);
    assert_eq!(lock.get("beta").unwrap().version, version_of(&app, "beta").await);
    assert_eq!(lock.skills().len(), 4);
    std::fs::remove_file(cwd.join("skills.lock")).unwrap();

    // A frozen install of a lock of this server's three skills into a new folder, and over an
    // installed folder that was altered: exactly the locked trees, and nothing else touched.
    let output = skillcat(
        &["download", "--from", &url, "alpha", "beta", "gamma", "--into", "first", "--lock", "mine.lock"],
        cwd,
    )
    .await;
    assert_exit(&output, 0);
    assert_eq!(Lock::read(cwd.join("mine.lock")).unwrap().skills().len(), 3);
    let output = skillcat(&["download", "--frozen", "--lock", "mine.lock", "--into", "again"], cwd).await;
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("installed 3 locked skills from mine.lock"), "{}", stdout(&output));
    assert_eq!(snapshot(&cwd.join("again")), snapshot(&cwd.join("first")));
    std::fs::write(cwd.join("first/alpha/SKILL.md"), "altered").unwrap();
    std::fs::create_dir(cwd.join("first/local")).unwrap();
    std::fs::write(cwd.join("first/local/SKILL.md"), "mine").unwrap();
    let output = skillcat(&["download", "--frozen", "--lock", "mine.lock", "--into", "first"], cwd).await;
    assert_exit(&output, 0);
    assert_eq!(std::fs::read_to_string(cwd.join("first/local/SKILL.md")).unwrap(), "mine");
    std::fs::remove_dir_all(cwd.join("first/local")).unwrap();
    assert_eq!(snapshot(&cwd.join("first")), snapshot(&cwd.join("again")));
    assert_eq!(names_in(cwd), ["again", "first", "mine.lock", "skills"], "no staging folder is left");
    let output = skillcat(&["verify", "--lock", "mine.lock", "first"], cwd).await;
    assert_exit(&output, 0);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_frozen_install_with_a_missing_version_leaves_the_folder_as_it_was() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let url = app.url("");
    let output = skillcat(
        &["download", "--from", &url, "alpha", "beta", "gamma", "--into", "skills", "--lock", "skills.lock"],
        cwd,
    )
    .await;
    assert_exit(&output, 0);
    // The installed tree drifts locally (so a frozen install has work to do), and beta is
    // edited on the server: its locked version is gone.
    std::fs::write(cwd.join("skills/alpha/SKILL.md"), "drifted").unwrap();
    std::fs::remove_dir_all(cwd.join("skills/gamma")).unwrap();
    let before = snapshot(&cwd.join("skills"));
    let locked_beta = Lock::read(cwd.join("skills.lock")).unwrap().get("beta").unwrap().version;
    edit(&app, dir.path(), "beta", "Beta, edited.").await;
    let output = skillcat(&["download", "--frozen", "--lock", "skills.lock", "--into", "skills"], cwd).await;
    assert_exit(&output, 1);
    let error = stderr(&output);
    assert!(error.contains("'beta'") && error.contains(&locked_beta.to_string()), "{error}");
    assert_eq!(snapshot(&cwd.join("skills")), before, "the folder is as it was");
    assert_eq!(names_in(cwd), ["skills", "skills.lock"], "no staging folder is left");

    // Pinning a version the server lacks with --version: refused, nothing written, no lock.
    let absent = absent_version().to_string();
    let output = skillcat(
        &["download", "--from", &url, "gamma", "--version", &absent, "--into", "other", "--lock", "new.lock"],
        cwd,
    )
    .await;
    assert_exit(&output, 1);
    let error = stderr(&output);
    assert!(error.contains("'gamma'") && error.contains(&absent), "{error}");
    assert!(names_in(&cwd.join("other")).is_empty());
    assert!(!cwd.join("new.lock").exists());
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn download_version_pins_what_it_installs_and_the_lock_records_the_digest() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let url = app.url("");
    let gamma = version_of(&app, "gamma").await.to_string();
    let output = skillcat(
        &["download", "--from", &url, "gamma", "--version", &gamma, "--into", "skills", "--lock", "skills.lock"],
        cwd,
    )
    .await;
    assert_exit(&output, 0);
    assert_eq!(snapshot(&cwd.join("skills/gamma")), snapshot(&dir.path().join("gamma")));
    assert_eq!(Lock::read(cwd.join("skills.lock")).unwrap().get("gamma").unwrap().version.to_string(), gamma);
    // The single-name download without a lock is as before: refused over an existing folder.
    let output = skillcat(&["download", "--from", &url, "gamma", "--into", "skills"], cwd).await;
    assert_exit(&output, 1);
    assert!(stderr(&output).contains("--replace"), "{}", stderr(&output));
    app.shutdown().await.unwrap();
}

/// A proxy in front of `upstream` that answers what it answers, but with the last byte of the
/// body of `altered` (a path) changed.
async fn altering_proxy(upstream: SocketAddr, altered: &'static str) -> SocketAddr {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::response::Response;
    let client = reqwest::Client::new();
    let handler = move |request: Request| {
        let client = client.clone();
        async move {
            let target = request.uri().path_and_query().map(ToString::to_string).unwrap_or_default();
            let mut headers = request.headers().clone();
            headers.remove("host");
            let answer = client
                .request(request.method().clone(), format!("http://{upstream}{target}"))
                .headers(headers)
                .send()
                .await
                .expect("upstream");
            let status = answer.status();
            let headers = answer.headers().clone();
            let mut body = answer.bytes().await.expect("upstream body").to_vec();
            if let Some(last) = body.last_mut().filter(|_| request.uri().path() == altered) {
                *last ^= 1;
            }
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = status;
            for (name, value) in &headers {
                if name != "content-length" && name != "transfer-encoding" {
                    response.headers_mut().insert(name, value.clone());
                }
            }
            response
        }
    };
    let router = axum::Router::new().fallback(handler);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

#[tokio::test]
async fn a_frozen_install_from_a_server_that_alters_a_byte_leaves_the_folder_as_it_was() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let output = skillcat(
        &["download", "--from", &app.url(""), "alpha", "beta", "--into", "skills", "--lock", "skills.lock"],
        cwd,
    )
    .await;
    assert_exit(&output, 0);
    let before = snapshot(&cwd.join("skills"));
    // The same lock, but from a proxy that alters one byte of alpha's script on the way.
    let proxy = altering_proxy(app.address, "/skills/alpha/files/scripts/run.sh").await;
    let lock = std::fs::read_to_string(cwd.join("skills.lock")).unwrap();
    std::fs::write(cwd.join("proxied.lock"), lock.replace(&app.url(""), &format!("http://{proxy}"))).unwrap();
    // Through the proxy, the client refuses it too.
    let pinned = RemoteSkillDiscoverer::builder(format!("http://{proxy}"))
        .retry_policy(RetryPolicy::none())
        .lock_file(cwd.join("proxied.lock"))
        .build()
        .unwrap();
    let alpha = pinned.pinned_skills().await.unwrap().remove(0);
    let error = pinned.download(&alpha, cwd.join("elsewhere"), false).await.unwrap_err();
    assert!(matches!(&error, ClientError::Corrupt { name, .. } if name.as_str() == "alpha"), "{error:?}");

    std::fs::remove_dir_all(cwd.join("skills/beta")).unwrap();
    let before_frozen = snapshot(&cwd.join("skills"));
    let output = skillcat(&["download", "--frozen", "--lock", "proxied.lock", "--into", "skills"], cwd).await;
    assert_exit(&output, 1);
    assert!(stderr(&output).contains("'alpha'"), "{}", stderr(&output));
    assert_eq!(snapshot(&cwd.join("skills")), before_frozen, "the folder is as it was");
    assert_eq!(names_in(cwd), ["proxied.lock", "skills", "skills.lock"], "no staging folder is left");
    // From the server itself the same lock installs.
    let output = skillcat(&["download", "--frozen", "--lock", "skills.lock", "--into", "skills"], cwd).await;
    assert_exit(&output, 0);
    assert_eq!(snapshot(&cwd.join("skills")), before);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn verify_names_each_skill_with_a_changed_byte_an_added_file_a_new_executable_bit_or_no_folder() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    // A fourth skill, so that one stays untouched.
    write_skill(&dir.path().join("delta"), &skill_md("delta", "The fourth skill", "Delta body."));
    app.wait_for_catalog(|catalog| catalog["skills"].as_array().is_some_and(|skills| skills.len() == 4)).await;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let all = ["alpha", "beta", "gamma", "delta"];
    let mut args = vec!["download", "--into", "skills", "--lock", "skills.lock"];
    let url = app.url("");
    args.extend(["--from", &url]);
    args.extend(all);
    assert_exit(&skillcat(&args, cwd).await, 0);
    assert_exit(&skillcat(&["verify", "--lock", "skills.lock", "skills"], cwd).await, 0);

    let skills = cwd.join("skills");
    // A byte, a file added, an executable bit; delta's folder removed.
    let mut guide = std::fs::read(skills.join("alpha/references/guide.md")).unwrap();
    guide[0] ^= 0x20;
    std::fs::write(skills.join("alpha/references/guide.md"), guide).unwrap();
    std::fs::write(skills.join("beta/notes.txt"), "").unwrap();
    std::fs::set_permissions(skills.join("gamma/data.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let untouched = snapshot(&skills.join("delta"));
    std::fs::remove_dir_all(skills.join("delta")).unwrap();
    let output = skillcat(&["verify", "--lock", "skills.lock", "skills"], cwd).await;
    assert_exit(&output, 1);
    let (out, error) = (stdout(&output), stderr(&output));
    for skill in all {
        assert!(out.contains(&format!("DIFFERS  {skill}")), "{skill}: {out}");
        assert!(error.contains(&format!("'{skill}'")), "{skill}: {error}");
    }
    assert!(error.contains("4 of 4"), "{error}");
    // Put back one by one: only what still differs is named.
    std::fs::create_dir(skills.join("delta")).unwrap();
    for (path, entry) in untouched {
        if let (mode, Some(bytes)) = entry {
            write_file(&skills.join("delta").join(&path), &bytes, mode);
        }
    }
    std::fs::remove_file(skills.join("beta/notes.txt")).unwrap();
    std::fs::set_permissions(skills.join("gamma/data.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = skillcat(&["verify", "--lock", "skills.lock", "skills"], cwd).await;
    assert_exit(&output, 1);
    assert!(
        stdout(&output).contains("ok       beta") && stdout(&output).contains("ok       delta"),
        "{}",
        stdout(&output)
    );
    assert!(stderr(&output).contains("1 of 4") && stderr(&output).contains("'alpha'"), "{}", stderr(&output));
    // A hidden file is not part of a version (servers never list one); a symlink is a difference.
    std::fs::write(skills.join("beta/.DS_Store"), "x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", skills.join("gamma/passwd")).unwrap();
    let output = skillcat(&["verify", "--lock", "skills.lock", "skills"], cwd).await;
    assert!(stdout(&output).contains("ok       beta"), "{}", stdout(&output));
    assert!(stderr(&output).contains("'gamma'"), "{}", stderr(&output));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn outdated_lists_the_skills_edited_since_they_were_locked() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let url = app.url("");
    let output =
        skillcat(&["download", "--from", &url, "alpha", "beta", "--into", "skills", "--lock", "skills.lock"], cwd)
            .await;
    assert_exit(&output, 0);
    let output = skillcat(&["outdated", "--lock", "skills.lock"], cwd).await;
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("every locked skill is current"), "{}", stdout(&output));

    let locked = Lock::read(cwd.join("skills.lock")).unwrap().get("alpha").unwrap().version;
    edit(&app, dir.path(), "alpha", "Alpha, edited.").await;
    let current = version_of(&app, "alpha").await;
    let output = skillcat(&["outdated", "--lock", "skills.lock"], cwd).await;
    assert_exit(&output, 1);
    assert_eq!(stdout(&output), format!("alpha: {locked} -> {current} ({url})\n"));
    // A skill deleted on its source is outdated too.
    std::fs::remove_dir_all(dir.path().join("beta")).unwrap();
    app.wait_for_catalog(|catalog| catalog["skills"].as_array().is_some_and(|skills| skills.len() == 2)).await;
    let output = skillcat(&["outdated", "--lock", "skills.lock"], cwd).await;
    assert_exit(&output, 1);
    assert!(
        stdout(&output).contains("beta: ") && stdout(&output).contains("not in the catalog"),
        "{}",
        stdout(&output)
    );
    // A source that cannot be asked is neither answer.
    app.shutdown().await.unwrap();
    let output = skillcat(&["outdated", "--lock", "skills.lock"], cwd).await;
    assert_exit(&output, 2);
}

// ---------------------------------------------------------------------------------------------
// A git source's history

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_skill_is_pinned_to_an_older_commit_by_tag_and_by_digest_also_after_its_delete() {
    use crate::support::git::Repo;
    let dir = tempfile::tempdir().unwrap();
    let mut repo = Repo::create(&dir.path().join("work"), &dir.path().join("served"), "skills.git");
    write_skill(&repo.work.join("alpha"), &skill_md("alpha", "Alpha, first", "Alpha one."));
    write_skill(&repo.work.join("beta"), &skill_md("beta", "Beta", "Beta, deleted later."));
    let first = repo.commit_and_push("alpha one, beta");
    repo.tag("v1", &first);
    write_skill(&repo.work.join("alpha"), &skill_md("alpha", "Alpha, second", "Alpha two."));
    std::fs::remove_dir_all(repo.work.join("beta")).unwrap();
    let second = repo.commit_and_push("alpha two, no beta");
    let old = repo.checkout(&first);
    let (alpha_v1, beta_v1) =
        (installed_version(old.path().join("alpha")).unwrap(), installed_version(old.path().join("beta")).unwrap());

    let spec: skillcat::config::GitSpec = format!("file://{}", repo.bare.display()).parse().unwrap();
    let source = skillcat::config::SourceConfig::git(&spec).unwrap();
    let state = dir.path().join("state");
    let app = TestApp::spawn_with(vec![source], |options| options.state_dir = state).await;
    app.wait_for_catalog(|catalog| {
        catalog["sources"].as_array().is_some_and(|sources| sources.iter().any(|source| source["commit"] == second))
    })
    .await;
    assert_ne!(version_of(&app, "alpha").await, alpha_v1, "the current alpha is the second");

    let pinned = remote(&app).pin(name("alpha"), "v1").pin(name("beta"), beta_v1.to_string()).build().unwrap();
    let skills = pinned.discover().await.unwrap();
    assert_eq!(skills.iter().map(|skill| skill.name().as_str()).collect::<Vec<_>>(), ["alpha", "beta"]);
    assert_eq!(skills[0].description(), "Alpha, first");
    assert_eq!(pinned.pinned_version(&skills[0]).await.unwrap(), Some(alpha_v1));
    assert_eq!(
        pinned.load(&skills[0]).await.unwrap(),
        std::fs::read_to_string(old.path().join("alpha/SKILL.md")).unwrap()
    );
    let into = tempfile::tempdir().unwrap();
    let done = pinned.download(&skills[1], into.path().join("beta"), false).await.unwrap();
    assert_eq!(done.version, beta_v1);
    // Every path, byte and executable bit of the old folder (its other mode bits are the
    // checkout's umask).
    assert_eq!(installed_version(into.path().join("beta")).unwrap(), beta_v1);

    // The command line pins by tag and locks the digest; a frozen install gives the old tree.
    let project = tempfile::tempdir().unwrap();
    let cwd = project.path();
    let url = app.url("");
    let output = skillcat(
        &["download", "--from", &url, "alpha", "--version", "v1", "--into", "skills", "--lock", "skills.lock"],
        cwd,
    )
    .await;
    assert_exit(&output, 0);
    assert_eq!(Lock::read(cwd.join("skills.lock")).unwrap().get("alpha").unwrap().version, alpha_v1);
    std::fs::remove_dir_all(cwd.join("skills/alpha")).unwrap();
    let output = skillcat(&["download", "--frozen", "--lock", "skills.lock", "--into", "skills"], cwd).await;
    assert_exit(&output, 0);
    assert_eq!(installed_version(cwd.join("skills/alpha")).unwrap(), alpha_v1);
    assert_eq!(
        std::fs::read(cwd.join("skills/alpha/SKILL.md")).unwrap(),
        std::fs::read(old.path().join("alpha/SKILL.md")).unwrap()
    );
    let output = skillcat(&["outdated", "--lock", "skills.lock"], cwd).await;
    assert_exit(&output, 1);
    app.shutdown().await.unwrap();
}
