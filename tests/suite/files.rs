//! The files of a skill over HTTP: the listing, each file (conditional, ranges), the archive, and
//! the paths and swaps that must never reach outside the skill.

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use serde_json::Value;

use crate::support::events::Events;
use crate::support::files::{SECRET, assert_paths_stay_inside, digest, write};
use crate::support::http::raw_request;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

/// `alpha` with a script, a reference, a hidden folder and a nested skill; `beta` alone.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let alpha = dir.path().join("alpha");
    write_skill(&alpha, &skill_md("alpha", "The first skill", "Run scripts/run.sh."));
    write(&alpha.join("scripts/run.sh"), b"#!/bin/sh\necho alpha\n");
    std::fs::set_permissions(alpha.join("scripts/run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    write(&alpha.join("references/guide.md"), "# Guide\n\nCaf\u{e9}.\n".as_bytes());
    write(&alpha.join("assets/logo.png"), &[0x89, b'P', b'N', b'G', 0, 1, 2, 3]);
    write(&alpha.join(".git/config"), b"[core]\n");
    write_skill(&alpha.join("inner"), &skill_md("inner", "Nested", "Inner."));
    write_skill(&dir.path().join("beta"), &skill_md("beta", "The second", "Beta."));
    dir
}

async fn listing(app: &TestApp, name: &str) -> Value {
    let response = app.get(&format!("/skills/{name}/files")).send().await.expect("GET files");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

fn paths(listing: &Value) -> Vec<&str> {
    listing["files"].as_array().expect("files").iter().map(|file| file["path"].as_str().expect("path")).collect()
}

#[tokio::test]
async fn the_files_of_a_skill_are_listed_with_digests_and_served_as_listed() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let alpha = listing(&app, "alpha").await;
    assert_eq!(
        paths(&alpha),
        ["SKILL.md", "assets/logo.png", "inner/SKILL.md", "references/guide.md", "scripts/run.sh"],
        "code-point order, hidden entries left out, the nested skill's files included"
    );
    let catalog: Value = app.skills().await.json().await.unwrap();
    let entry = catalog["skills"].as_array().unwrap().iter().find(|skill| skill["name"] == "alpha").unwrap();
    assert_eq!(alpha["etag"], entry["etag"], "the listing carries the skill's tag");
    assert_eq!(paths(&listing(&app, "inner").await), ["SKILL.md"]);
    for file in alpha["files"].as_array().unwrap() {
        let path = file["path"].as_str().unwrap();
        let on_disk = std::fs::read(dir.path().join("alpha").join(path)).unwrap();
        assert_eq!(file["size"], on_disk.len());
        assert_eq!(file["digest"], digest(&on_disk));
        assert_eq!(file["executable"], path == "scripts/run.sh", "{path}");
        let response = app.get(&format!("/skills/alpha/files/{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers().clone();
        assert_eq!(headers["etag"].to_str().unwrap(), format!("\"{}\"", digest(&on_disk)));
        assert_eq!(headers["content-type"].to_str().unwrap(), file["media_type"].as_str().unwrap());
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(response.bytes().await.unwrap(), on_disk, "{path}");
    }
    let media = |path: &str| {
        alpha["files"].as_array().unwrap().iter().find(|file| file["path"] == path).unwrap()["media_type"].clone()
    };
    assert_eq!(media("SKILL.md"), "text/markdown; charset=utf-8");
    assert_eq!(media("assets/logo.png"), "image/png");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn files_answer_conditional_and_range_requests_as_a_static_server_does() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let url = "/skills/alpha/files/references/guide.md";
    let bytes = std::fs::read(dir.path().join("alpha/references/guide.md")).unwrap();
    let tag = format!("\"{}\"", digest(&bytes));
    let status = |request: reqwest::RequestBuilder| async move { request.send().await.unwrap().status().as_u16() };
    assert_eq!(status(app.get(url).header("if-none-match", &tag)).await, 304);
    assert_eq!(status(app.get(url).header("if-none-match", "\"other\"")).await, 200);
    assert_eq!(status(app.get(url).header("if-match", &tag)).await, 200);
    assert_eq!(status(app.get(url).header("if-match", "\"sha256:00\"")).await, 412);
    let part = app.get(url).header("range", "bytes=2-6").send().await.unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], format!("bytes 2-6/{}", bytes.len()).as_str());
    assert_eq!(part.bytes().await.unwrap(), bytes[2..=6]);
    let tail = app.get(url).header("range", "bytes=-3").send().await.unwrap();
    assert_eq!(tail.status(), 206);
    assert_eq!(tail.bytes().await.unwrap(), bytes[bytes.len() - 3..]);
    let outside = app.get(url).header("range", "bytes=1000-2000").send().await.unwrap();
    assert_eq!(outside.status(), 416);
    assert_eq!(outside.headers()["content-range"], format!("bytes */{}", bytes.len()).as_str());
    let several = app.get(url).header("range", "bytes=0-1,4-5").send().await.unwrap();
    assert_eq!(several.status(), 200, "several ranges are answered whole");
    assert_eq!(several.bytes().await.unwrap(), bytes);
    let stale_copy = app.get(url).header("range", "bytes=0-1").header("if-range", "\"sha256:00\"").send().await;
    assert_eq!(stale_copy.unwrap().status(), 200, "If-Range with another tag: the whole file");
    let junk = app.get(url).header("range", "bytes=0-1").header("if-range", "junk").send().await.unwrap();
    assert_eq!(junk.status(), 200, "If-Range that is no validator: the whole file");
    let current = app.get(url).header("range", "bytes=0-1").header("if-range", &tag).send().await.unwrap();
    assert_eq!(current.status(), 206, "If-Range with the file's tag: the range");
    // A suffix longer than the file is the whole file (RFC 9110 14.1.2), as a range.
    let longer = app.get(url).header("range", "bytes=-100000").send().await.unwrap();
    assert_eq!(longer.status(), 206);
    assert_eq!(longer.headers()["content-range"], format!("bytes 0-{}/{}", bytes.len() - 1, bytes.len()).as_str());
    assert_eq!(longer.bytes().await.unwrap(), bytes);
    let zero = app.get(url).header("range", "bytes=-0").send().await.unwrap();
    assert_eq!(zero.status(), 416, "a zero-length suffix is unsatisfiable");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn paths_that_do_not_name_a_listed_file_never_read_outside_the_skill() {
    let dir = tree();
    write(&dir.path().join("secret.txt"), SECRET);
    let app = TestApp::spawn_dir(dir.path()).await;
    assert_paths_stay_inside(app.address, "/skills/alpha/files").await;
    assert_eq!(raw_request(app.address, "GET", "/skills/nobody/files/SKILL.md", &[], b"").await.status, 404);
    assert_eq!(raw_request(app.address, "GET", "/skills/bad%20name/files", &[], b"").await.status, 400);
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_any_file_changes_the_skill_tag_and_is_announced() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let mut events = Events::open(&app).await;
    let first = events.next(Duration::from_secs(5)).await.expect("the first event");
    let before = listing(&app, "alpha").await;
    let beta_before = listing(&app, "beta").await;
    write(&dir.path().join("alpha/references/guide.md"), b"# Guide, v2\n");
    let after = app.wait_for_catalog(|catalog| catalog["etag"] != first["etag"]).await;
    let event = events.next(Duration::from_secs(5)).await.expect("an event for the change");
    assert_eq!(event["etag"], after["etag"]);
    let alpha = listing(&app, "alpha").await;
    assert_ne!(alpha["etag"], before["etag"], "the skill's tag covers its files");
    assert_eq!(listing(&app, "beta").await["etag"], beta_before["etag"], "other skills keep theirs");
    let guide = alpha["files"].as_array().unwrap().iter().find(|file| file["path"] == "references/guide.md").unwrap();
    assert_eq!(guide["digest"], digest(b"# Guide, v2\n"));
    // A new file and a new mode count too.
    std::fs::set_permissions(dir.path().join("alpha/references/guide.md"), std::fs::Permissions::from_mode(0o755))
        .unwrap();
    let mode_changed = app.wait_for_catalog(|catalog| catalog["etag"] != after["etag"]).await;
    write(&dir.path().join("alpha/references/more.md"), b"more\n");
    app.wait_for_catalog(|catalog| catalog["etag"] != mode_changed["etag"]).await;
    assert!(paths(&listing(&app, "alpha").await).contains(&"references/more.md"));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_file_changed_since_the_listing_is_409_and_never_served() {
    let dir = tree();
    // No watcher: the snapshot stays as it was until the server itself notices.
    let app = TestApp::spawn_dir_with(dir.path(), |options| {
        options.live = skillcat::catalog::LiveOptions { rescan_interval: None, watch: false };
    })
    .await;
    let path = dir.path().join("alpha/scripts/run.sh");
    std::fs::write(&path, b"#!/bin/sh\necho changed\n").unwrap();
    let answer = app.get("/skills/alpha/files/scripts/run.sh").send().await.unwrap();
    assert_eq!(answer.status(), 409);
    let problem: Value = answer.json().await.unwrap();
    assert_eq!(problem["type"], "urn:skillcat:problem:skill-changed");
    // The refusal asked for a rescan: the listing catches up.
    eventually("the rescan lists the new digest", || async {
        let alpha = listing(&app, "alpha").await;
        alpha["files"].as_array().unwrap().iter().any(|file| file["digest"] == digest(b"#!/bin/sh\necho changed\n"))
    })
    .await;
    assert_eq!(app.get("/skills/alpha/files/scripts/run.sh").send().await.unwrap().status(), 200);
    // Swapped for a FIFO or a symlink to a secret: refused at once, never read.
    write(&dir.path().join("secret.txt"), SECRET);
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), &path).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), app.get("/skills/alpha/files/scripts/run.sh").send())
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(answer.status(), 409);
    assert!(!answer.bytes().await.unwrap().windows(SECRET.len()).any(|window| window == SECRET));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn special_entries_are_skipped_and_reported() {
    let dir = tree();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("alpha/passwd")).unwrap();
    let fifo = dir.path().join("alpha/pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let app = TestApp::spawn_dir(dir.path()).await;
    let alpha = listing(&app, "alpha").await;
    assert!(!paths(&alpha).contains(&"passwd") && !paths(&alpha).contains(&"pipe"));
    let skipped: Vec<&str> =
        alpha["skipped"].as_array().unwrap().iter().map(|entry| entry["path"].as_str().unwrap()).collect();
    assert!(skipped.contains(&"passwd") && skipped.contains(&"pipe"), "{alpha}");
    for path in ["passwd", "pipe"] {
        assert_eq!(app.get(&format!("/skills/alpha/files/{path}")).send().await.unwrap().status(), 404);
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_over_a_bound_keeps_its_entry_but_has_no_listing() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    write_skill(&big, &skill_md("big", "Too many files", "Body."));
    for index in 0..skillcat_core::MAX_SKILL_FILES {
        write(&big.join(format!("data/{index:04}.txt")), b"x");
    }
    let app = TestApp::spawn_dir(dir.path()).await;
    assert_eq!(app.skill("big").await.status(), 200);
    assert_eq!(app.content("big").await.status(), 200);
    let answer = app.get("/skills/big/files").send().await.unwrap();
    assert_eq!(answer.status(), 422);
    let problem: Value = answer.json().await.unwrap();
    assert_eq!(problem["type"], "urn:skillcat:problem:files-unavailable");
    assert!(problem["detail"].as_str().unwrap().contains("512"), "{problem}");
    for path in ["/skills/big/files/SKILL.md", "/skills/big/archive"] {
        assert_eq!(app.get(path).send().await.unwrap().status(), 422, "{path}");
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn archives_hold_the_folder_and_every_replica_gives_the_same_bytes() {
    let dir = tree();
    let (first, second) = (TestApp::spawn_dir(dir.path()).await, TestApp::spawn_dir(dir.path()).await);
    let archive = |app: &TestApp| {
        let request = app.get("/skills/alpha/archive");
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            assert_eq!(response.headers()["content-type"], "application/zip");
            let etag = response.headers()["etag"].to_str().unwrap().to_owned();
            (etag, response.bytes().await.unwrap())
        }
    };
    let (tag, bytes) = archive(&first).await;
    assert_eq!(archive(&second).await, (tag.clone(), bytes.clone()), "the same bytes on every replica");
    assert_eq!(tag, format!("\"{}\"", digest(&bytes)));
    assert_eq!(listing(&first, "alpha").await, listing(&second, "alpha").await);
    let status = first.get("/skills/alpha/archive").header("if-none-match", &tag).send().await.unwrap().status();
    assert_eq!(status, 304);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let names: Vec<String> =
        (0..zip.len()).map(|index| zip.by_index(index).unwrap().name().unwrap().into_owned()).collect();
    assert_eq!(names, ["SKILL.md", "assets/logo.png", "inner/SKILL.md", "references/guide.md", "scripts/run.sh"]);
    for name in names {
        let mut entry = zip.by_name(&name).unwrap();
        let mode = entry.unix_mode().unwrap() & 0o777;
        assert_eq!(mode, if name == "scripts/run.sh" { 0o755 } else { 0o644 }, "{name}");
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content).unwrap();
        assert_eq!(content, std::fs::read(dir.path().join("alpha").join(&name)).unwrap(), "{name}");
    }
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_archive_of_a_folder_swapped_since_the_listing_is_409_and_never_holds_outside_bytes() {
    let dir = tree();
    write(&dir.path().join("secret.txt"), SECRET);
    // No watcher: the listing stays as it was until the server itself notices.
    let app = TestApp::spawn_dir_with(dir.path(), |options| {
        options.live = skillcat::catalog::LiveOptions { rescan_interval: None, watch: false };
    })
    .await;
    let guide = dir.path().join("alpha/references/guide.md");
    std::fs::remove_file(&guide).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), &guide).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), app.get("/skills/alpha/archive").send())
        .await
        .expect("no hang")
        .unwrap();
    assert_eq!(answer.status(), 409);
    assert!(!answer.bytes().await.unwrap().windows(SECRET.len()).any(|window| window == SECRET));
    // Once rescanned, the symlink is skipped and the archive is whole again, without it.
    eventually("the rescan skips the symlink", || async {
        let alpha = listing(&app, "alpha").await;
        alpha["skipped"].as_array().unwrap().iter().any(|entry| entry["path"] == "references/guide.md")
    })
    .await;
    let answer = app.get("/skills/alpha/archive").send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let bytes = answer.bytes().await.unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    assert!(zip.by_name("references/guide.md").is_err());
    app.shutdown().await.unwrap();
}

/// A file rewritten in place (truncated, then written in pieces, as a program that saves over a
/// file does) while clients read it: every complete answer is one whole version of the file,
/// never a state halfway through a write, and the file never drops out of the listing. An answer
/// caught by a change is 409 (refresh and retry), or cut short: never complete and wrong.
///
/// A state the file rests in as long as the scan waits for a file to settle (12 ms) is one the
/// scan may list: a writer stalled that long (this machine is shared; a write after a truncation
/// may wait for the disk) looks like a writer that stopped. Such a state is allowed only when the
/// writer did stall there, for 10 ms or more; it records its pauses to tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_rewritten_in_place_is_never_served_half_written() {
    use std::io::Write as _;
    const PIECE: usize = 32 * 1024;
    const PIECES: usize = 8;
    let dir = tempfile::tempdir().expect("tempdir");
    let skill = dir.path().join("rewritten");
    write_skill(&skill, &skill_md("rewritten", "Rewritten in place", "See data.txt."));
    let versions: Vec<Vec<u8>> = (0..2u8).map(|version| vec![b'a' + version; PIECES * PIECE]).collect();
    let file = skill.join("data.txt");
    std::fs::write(&file, &versions[0]).unwrap();
    let app = TestApp::spawn_dir(dir.path()).await;
    // (version, pieces written) of the states the writer rested in for 10 ms or more.
    let stalls = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::<(usize, usize)>::new()));
    let writer = {
        let (file, versions, stalls) = (file.clone(), versions.clone(), std::sync::Arc::clone(&stalls));
        std::thread::spawn(move || {
            for round in 0..40 {
                let version = round % 2;
                // Truncating may take a while once the file is empty: from before the call.
                let mut last = std::time::Instant::now();
                let mut out = std::fs::OpenOptions::new().write(true).truncate(true).open(&file).unwrap();
                for (written, piece) in versions[version].chunks(PIECE).enumerate() {
                    // The file rests with `written` pieces from the end of the last call until
                    // some time within this one (a write after a truncation may wait for the
                    // disk): a stall if that came to 10 ms.
                    out.write_all(piece).unwrap();
                    if last.elapsed() >= Duration::from_millis(10) {
                        stalls.lock().unwrap().insert((version, written));
                    }
                    last = std::time::Instant::now();
                    if written + 1 < PIECES {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                drop(out);
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    };
    let (mut whole, mut changed, mut cut, mut rested_in) = (0, 0, 0, Vec::new());
    while !writer.is_finished() {
        // An answer whose first piece fails ends the connection before its head is sent whole.
        let Ok(response) = app.get("/skills/rewritten/files/data.txt").send().await else {
            cut += 1;
            continue;
        };
        match response.status().as_u16() {
            200 => match response.bytes().await {
                Err(_) => cut += 1,
                Ok(body) => {
                    if !versions.iter().any(|version| **version == *body) {
                        // Judged once the writer is done: it may still be stalled in this state.
                        rested_in.push(body);
                    }
                    whole += 1;
                }
            },
            409 => changed += 1,
            status => panic!("GET a file being rewritten: {status} {}", response.text().await.unwrap_or_default()),
        }
    }
    writer.join().unwrap();
    let stalls = stalls.lock().unwrap().clone();
    for body in &rested_in {
        // A state the writer rested in: that many pieces of one version (an empty file, of either).
        let rested = match body.first() {
            None => stalls.iter().any(|(_, written)| *written == 0),
            Some(first) => {
                body.len() % PIECE == 0
                    && body.iter().all(|byte| byte == first)
                    && stalls.contains(&(usize::from(first - b'a'), body.len() / PIECE))
            }
        };
        assert!(rested, "a half-written file: {} bytes", body.len());
    }
    eprintln!(
        "rewritten in place: {whole} whole answers ({} of a state the writer stalled in), {changed} refused \
         as changed, {cut} cut short",
        rested_in.len()
    );
    assert!(whole > 0, "some answers got through");
    // Once the writes stop, the last version is served.
    eventually("the last version is served", || async {
        let response = app.get("/skills/rewritten/files/data.txt").send().await.expect("GET");
        response.status() == 200 && response.bytes().await.is_ok_and(|body| *body == *versions[1])
    })
    .await;
}
