//! The live catalog against real files: a real server with its file watcher (or only its periodic
//! rescan), real HTTP. Every wait polls with a deadline. That something does *not* happen is shown
//! against an event that would have come after it: a server that watches the same tree and has
//! seen the change, or a later event on the same stream.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use skillcat::catalog::LiveOptions;
use skillcat::config::SourceConfig;

use crate::support::events::Events;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::{DEADLINE, eventually};

fn location(folder: &Path) -> String {
    folder.join("SKILL.md").to_str().expect("UTF-8 temporary paths").to_owned()
}

fn names(catalog: &Value) -> Vec<&str> {
    catalog["skills"].as_array().expect("skills").iter().map(|skill| skill["name"].as_str().expect("name")).collect()
}

fn entry<'a>(catalog: &'a Value, name: &str) -> Option<&'a Value> {
    catalog["skills"].as_array().expect("skills").iter().find(|skill| skill["name"] == name)
}

fn field(catalog: &Value, name: &str, key: &str) -> String {
    let skill = entry(catalog, name).unwrap_or_else(|| panic!("no skill {name} in {catalog}"));
    skill[key].as_str().expect("a string field").to_owned()
}

/// `skillcat_scan_duration_seconds_count`: how many rescans have finished.
async fn scan_count(app: &TestApp) -> u64 {
    app.metric("skillcat_scan_duration_seconds_count").await
}

/// Waits until no rescan has finished for 100 ms (rescans follow a change within milliseconds).
/// The one fixed wait here: nothing signals that no rescan is pending, so quiet can only be seen
/// over a window.
async fn wait_until_idle(app: &TestApp) {
    let mut count = scan_count(app).await;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = scan_count(app).await;
        if now == count {
            return;
        }
        count = now;
    }
    panic!("the server kept rescanning");
}

async fn sources(root: &Path, live: LiveOptions) -> TestApp {
    TestApp::spawn_with(vec![SourceConfig::directory(root)], |options| options.live = live).await
}

async fn problem(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    response.json().await.expect("a problem document")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_adds_edits_renames_and_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md("alpha", "First.", "Alpha v1"));
    let app = TestApp::spawn_dir(&root).await;
    assert_eq!(names(&app.wait_for_catalog(|_| true).await), ["alpha"]);

    // Added: its name comes from the folder.
    write_skill(&root.join("beta"), &skill_md(None, "Second.", "Beta"));
    let catalog = app.wait_for_catalog(|catalog| entry(catalog, "beta").is_some()).await;
    assert_eq!(names(&catalog), ["alpha", "beta"]);
    assert_eq!(field(&catalog, "beta", "location"), location(&root.join("beta")));
    assert_eq!(field(&catalog, "beta", "description"), "Second.");

    // A new description: a new catalog tag, and the body's tag is the header's.
    let before = app.catalog_etag().await;
    write_skill(&root.join("alpha"), &skill_md("alpha", "First, edited.", "Alpha v1"));
    let catalog = app
        .wait_for_catalog(|catalog| entry(catalog, "alpha").is_some_and(|s| s["description"] == "First, edited."))
        .await;
    let after = app.catalog_etag().await;
    assert_ne!(after, before);
    assert_eq!(catalog["etag"], after.as_str());

    // Only the body changes: the descriptor is the same, the skill's tag (and so the catalog's) is not.
    let skill_before = field(&catalog, "alpha", "etag");
    let text = skill_md("alpha", "First, edited.", "Alpha v2, a longer body");
    write_skill(&root.join("alpha"), &text);
    let catalog = app.wait_for_catalog(|catalog| field(catalog, "alpha", "etag") != skill_before).await;
    assert_eq!(field(&catalog, "alpha", "description"), "First, edited.");
    assert_ne!(app.catalog_etag().await, after);
    let content = app.content("alpha").await;
    assert_eq!(content.status(), 200);
    assert_eq!(content.headers()["etag"].to_str().unwrap(), field(&catalog, "alpha", "etag"));
    assert_eq!(content.text().await.unwrap(), text);

    // Renamed folder, name from the folder: a new name and location.
    std::fs::rename(root.join("beta"), root.join("gamma")).expect("rename beta");
    let catalog = app.wait_for_catalog(|catalog| names(catalog) == ["alpha", "gamma"]).await;
    assert_eq!(field(&catalog, "gamma", "location"), location(&root.join("gamma")));
    assert_eq!(app.skill("beta").await.status(), 404);

    // Renamed folder, name from the frontmatter: the same name at a new location.
    std::fs::rename(root.join("alpha"), root.join("alpha-moved")).expect("rename alpha");
    let moved = location(&root.join("alpha-moved"));
    let catalog = app.wait_for_catalog(|catalog| entry(catalog, "alpha").is_some_and(|s| s["location"] == moved)).await;
    assert_eq!(names(&catalog), ["alpha", "gamma"]);

    // Deleted.
    std::fs::remove_dir_all(root.join("gamma")).expect("delete gamma");
    app.wait_for_catalog(|catalog| names(catalog) == ["alpha"]).await;
    assert_eq!(app.skill("gamma").await.status(), 404);

    // A second skill named alpha inside the same source: the scan fails, and the last good
    // catalog is still served, carrying the failure: nagents' message naming the second one (the
    // walk visits folders in code-point order), then the first.
    let good = app.catalog_etag().await;
    assert_eq!(app.metric("skillcat_catalog_failing").await, 0);
    write_skill(&root.join("zeta"), &skill_md("alpha", "Impostor.", "Z"));
    let catalog = app.wait_for_catalog(|catalog| catalog.get("error").is_some()).await;
    assert_eq!(names(&catalog), ["alpha"]);
    assert_eq!(field(&catalog, "alpha", "location"), moved);
    let error = &catalog["error"];
    let message = format!("Duplicate skill name 'alpha' at {} (the other is at {moved})", location(&root.join("zeta")));
    assert_eq!(error["message"], message.as_str());
    assert_eq!(error["source"], root.to_str().expect("UTF-8 temporary paths"));
    let since = error["since"].as_str().expect("since");
    assert!(since.len() == 20 && since.ends_with('Z') && since.as_bytes()[10] == b'T', "RFC 3339: {since}");
    assert_ne!(catalog["etag"], good.as_str(), "the failure is news to clients");
    // Everything else is served as before, and the server stays ready: it serves a catalog.
    assert_eq!(app.content("alpha").await.status(), 200);
    assert_eq!(app.get("/readyz").send().await.expect("readyz").status(), 200);
    assert_eq!(app.manifest().await.status(), 200);
    assert_eq!(app.metric("skillcat_catalog_failing").await, 1);
    assert!(app.metric("skillcat_scan_failures_total").await >= 1);

    // Removing it brings back the current catalog, without the error: the same files, the same tag.
    std::fs::remove_dir_all(root.join("zeta")).expect("delete zeta");
    let catalog = app.wait_for_catalog(|catalog| catalog.get("error").is_none()).await;
    assert_eq!(field(&catalog, "alpha", "location"), moved);
    assert_eq!(catalog["etag"], good.as_str());
    assert_eq!(app.metric("skillcat_catalog_failing").await, 0);
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_any_good_catalog_a_failed_scan_is_503_until_the_files_are_fixed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("a"), &skill_md("alpha", "First.", "A"));
    write_skill(&root.join("b"), &skill_md("alpha", "Second.", "B"));
    let app = TestApp::spawn_dir(&root).await;
    let body = problem(app.skills().await, 503).await;
    assert_eq!(body["type"], "urn:skillcat:problem:catalog-unavailable");
    // nagents' message alone, as a nagents source raises it (the log also names the first).
    assert_eq!(body["detail"], format!("Duplicate skill name 'alpha' at {}", location(&root.join("b"))));
    assert_eq!(app.manifest().await.status(), 503);
    assert_eq!(app.metric("skillcat_catalog_failing").await, 1);
    // Not ready: a pod started on such files must not replace a healthy one.
    assert_eq!(problem(app.get("/readyz").send().await.expect("readyz"), 503).await["type"], body["type"]);
    std::fs::remove_dir_all(root.join("b")).expect("delete b");
    let catalog = app.wait_for_catalog(|_| true).await;
    assert_eq!(names(&catalog), ["alpha"]);
    assert_eq!(app.get("/readyz").send().await.expect("readyz").status(), 200, "ready once it has a catalog");
    assert!(catalog.get("error").is_none());
    app.shutdown().await.expect("clean shutdown");
}

/// Points `link` at `target` the way git-sync does: a new symlink renamed over the old one.
fn flip(link: &Path, target: &str) {
    let temporary = link.with_extension("tmp-link");
    std::os::unix::fs::symlink(target, &temporary).expect("create the new link");
    std::fs::rename(&temporary, link).expect("rename the link into place");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_symlinked_root_flipped_like_git_sync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let current = dir.path().join("current");
    write_skill(&dir.path().join("rev-1/alpha"), &skill_md(None, "Revision one.", "one"));
    std::os::unix::fs::symlink("rev-1", &current).expect("link current -> rev-1");
    let app = TestApp::spawn_dir(&current).await;
    let catalog = app.wait_for_catalog(|_| true).await;
    assert_eq!(names(&catalog), ["alpha"]);
    // Locations are the configured root's, not where the link leads.
    assert_eq!(field(&catalog, "alpha", "location"), location(&current.join("alpha")));

    write_skill(&dir.path().join("rev-2/beta"), &skill_md(None, "Revision two.", "two"));
    write_skill(&dir.path().join("rev-2/gamma"), &skill_md(None, "Revision two, too.", "two"));
    flip(&current, "rev-2");
    let catalog = app.wait_for_catalog(|catalog| names(catalog) == ["beta", "gamma"]).await;
    assert_eq!(field(&catalog, "beta", "location"), location(&current.join("beta")));
    // git-sync then removes the old worktree: nothing changes.
    std::fs::remove_dir_all(dir.path().join("rev-1")).expect("remove rev-1");

    // The root itself is watched where the link leads now: a new top-level skill is seen.
    wait_until_idle(&app).await;
    write_skill(&dir.path().join("rev-2/omega"), &skill_md(None, "New in two.", "two"));
    app.wait_for_catalog(|catalog| names(catalog) == ["beta", "gamma", "omega"]).await;

    // The watch moved with the link: an edit inside rev-2 is seen.
    write_skill(&dir.path().join("rev-2/beta"), &skill_md(None, "Revision two, edited.", "two"));
    app.wait_for_catalog(|catalog| {
        entry(catalog, "beta").is_some_and(|skill| skill["description"] == "Revision two, edited.")
    })
    .await;

    // And a second flip too.
    write_skill(&dir.path().join("rev-3/delta"), &skill_md(None, "Revision three.", "three"));
    flip(&current, "rev-3");
    app.wait_for_catalog(|catalog| names(catalog) == ["delta"]).await;
    write_skill(&dir.path().join("rev-3/epsilon"), &skill_md(None, "Added to three.", "three"));
    app.wait_for_catalog(|catalog| names(catalog) == ["delta", "epsilon"]).await;
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_root_beneath_a_flipped_symlink() {
    // `--dir /git/current/skills`: the skills in a subfolder of a git-sync'd repository.
    let dir = tempfile::tempdir().expect("tempdir");
    let current = dir.path().join("current");
    write_skill(&dir.path().join("rev-1/skills/alpha"), &skill_md(None, "Revision one.", "one"));
    std::os::unix::fs::symlink("rev-1", &current).expect("link current -> rev-1");
    let root = current.join("skills");
    let app = sources(&root, LiveOptions { rescan_interval: None, watch: true }).await;
    let catalog = app.wait_for_catalog(|_| true).await;
    assert_eq!(names(&catalog), ["alpha"]);
    wait_until_idle(&app).await;
    write_skill(&dir.path().join("rev-2/skills/beta"), &skill_md(None, "Revision two.", "two"));
    flip(&current, "rev-2");
    let catalog = app.wait_for_catalog(|catalog| names(catalog) == ["beta"]).await;
    assert_eq!(field(&catalog, "beta", "location"), location(&root.join("beta")));
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_root_directory_replaced_by_renames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md(None, "Old tree.", "old"));
    let app = TestApp::spawn_dir(&root).await;
    assert_eq!(names(&app.wait_for_catalog(|_| true).await), ["alpha"]);

    // A deploy that swaps in a whole new tree: move the old one away, the new one in.
    let staged = dir.path().join("skills.new");
    write_skill(&staged.join("beta"), &skill_md(None, "New tree.", "new"));
    std::fs::rename(&root, dir.path().join("skills.old")).expect("move the old root away");
    std::fs::rename(&staged, &root).expect("move the new root in");
    app.wait_for_catalog(|catalog| names(catalog) == ["beta"]).await;

    // The new tree is watched: an edit in it is seen.
    write_skill(&root.join("gamma"), &skill_md(None, "Added after the swap.", "new"));
    app.wait_for_catalog(|catalog| names(catalog) == ["beta", "gamma"]).await;
    // Edits in the old tree (now elsewhere) change nothing.
    write_skill(&dir.path().join("skills.old/omega"), &skill_md(None, "Old tree.", "old"));
    write_skill(&root.join("delta"), &skill_md(None, "Added last.", "new"));
    let catalog = app.wait_for_catalog(|catalog| names(catalog) == ["beta", "delta", "gamma"]).await;
    assert!(entry(&catalog, "omega").is_none());
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_root_that_appears_after_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("later");
    let app = TestApp::spawn_dir(&root).await;
    assert_eq!(names(&app.wait_for_catalog(|_| true).await), Vec::<&str>::new());
    write_skill(&root.join("alpha"), &skill_md(None, "Arrived late.", "late"));
    app.wait_for_catalog(|catalog| names(catalog) == ["alpha"]).await;
    write_skill(&root.join("beta"), &skill_md(None, "Arrived later.", "later"));
    app.wait_for_catalog(|catalog| names(catalog) == ["alpha", "beta"]).await;
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sees_a_change_made_as_soon_as_the_server_is_ready() {
    // Many folders make watching the tree take a while; a change made right after the first
    // catalog is published must still be seen (no periodic rescan here to catch up).
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    for group in 0..60 {
        for folder in 0..60 {
            std::fs::create_dir_all(root.join(format!("g{group:03}/f{folder:03}"))).expect("create a folder");
        }
    }
    write_skill(&root.join("alpha"), &skill_md(None, "Present at start.", "a"));
    let app = TestApp::spawn_dir(&root).await;
    // Deep in the tree, where a watch set up only after the first scan arrives last.
    write_skill(&root.join("g030/f030"), &skill_md(None, "Written at once.", "b"));
    app.wait_for_catalog(|catalog| names(catalog) == ["alpha", "f030"]).await;
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_one_event_per_change_and_none_for_a_no_op() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    let alpha = skill_md(None, "Alpha.", "alpha body");
    write_skill(&root.join("alpha"), &alpha);
    write_skill(&root.join("beta"), &skill_md(None, "Beta.", "beta body"));
    let app = TestApp::spawn_dir(&root).await;
    let mut events = Events::open(&app).await;
    let first = events.next(DEADLINE).await.expect("an event at connect");
    assert_eq!(first["etag"], app.catalog_etag().await.as_str());

    // Each change is atomic (a rename), so every rescan sees the tree before or after it; and
    // each starts with the server idle, so no rescan of the previous change overlaps it.
    let staging = dir.path().join("staging");
    type Change = Box<dyn Fn(&Path)>;
    type Visible = fn(&Value) -> bool;
    let changes: Vec<(Change, Visible)> = vec![
        (Box::new(|root| write_skill(&root.join("beta"), &skill_md(None, "Beta, edited.", "beta body"))), |catalog| {
            entry(catalog, "beta").is_some_and(|skill| skill["description"] == "Beta, edited.")
        }),
        (
            Box::new(move |root| {
                write_skill(&staging.join("gamma"), &skill_md(None, "Gamma.", "g"));
                std::fs::rename(staging.join("gamma"), root.join("gamma")).expect("move gamma in");
            }),
            |catalog| names(catalog) == ["alpha", "beta", "gamma"],
        ),
        (
            Box::new(|root| {
                let trash = root.with_file_name("trash");
                std::fs::rename(root.join("beta"), &trash).expect("move beta out");
                std::fs::remove_dir_all(trash).expect("delete beta");
            }),
            |catalog| names(catalog) == ["alpha", "gamma"],
        ),
        (Box::new(|root| write_skill(&root.join("gamma"), &skill_md(None, "Gamma.", "another body"))), |catalog| {
            entry(catalog, "gamma").is_some_and(|skill| skill["description"] == "Gamma.")
                && names(catalog) == ["alpha", "gamma"]
        }),
    ];
    let mut previous = first["etag"].as_str().unwrap().to_owned();
    for (index, (change, visible)) in changes.iter().enumerate() {
        wait_until_idle(&app).await;
        change(&root);
        let catalog = app.wait_for_catalog(|catalog| visible(catalog) && catalog["etag"] != previous.as_str()).await;
        let etag = app.catalog_etag().await;
        assert_eq!(catalog["etag"], etag.as_str());
        let event = events.next(DEADLINE).await.unwrap_or_else(|| panic!("no event for change {index}"));
        assert_eq!(event["etag"], etag.as_str(), "the event of change {index} carries the new tag");
        previous = etag;
    }

    // Identical bytes written over the file in place (never truncated, so no rescan can see
    // anything else): a rescan runs and publishes nothing.
    wait_until_idle(&app).await;
    let scans = scan_count(&app).await;
    {
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new().write(true).open(root.join("alpha/SKILL.md")).expect("open");
        file.write_all(alpha.as_bytes()).expect("rewrite");
        file.sync_all().expect("sync");
    }
    eventually("the rewrite causes a rescan", || async { scan_count(&app).await > scans }).await;
    assert_eq!(app.catalog_etag().await, previous);

    // Neither that rescan nor the last change sent another event: the next one on the stream is
    // the next real change's. (The stream sends events in order, so one sent earlier would come
    // first.)
    wait_until_idle(&app).await;
    write_skill(&root.join("delta"), &skill_md(None, "Delta.", "d"));
    let catalog = app.wait_for_catalog(|catalog| names(catalog) == ["alpha", "delta", "gamma"]).await;
    let event = events.next(DEADLINE).await.expect("an event for the next change");
    assert_eq!(event["etag"], catalog["etag"], "one event per change, and none for a change of nothing");
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_rescan_alone_sees_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md(None, "Alpha.", "a"));
    let live = LiveOptions { rescan_interval: Some(Duration::from_millis(200)), watch: false };
    let app = sources(&root, live).await;
    write_skill(&root.join("beta"), &skill_md(None, "Beta.", "b"));
    app.wait_for_catalog(|catalog| names(catalog) == ["alpha", "beta"]).await;
    std::fs::remove_dir_all(root.join("alpha")).expect("delete alpha");
    app.wait_for_catalog(|catalog| names(catalog) == ["beta"]).await;
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_watcher_or_timer_nothing_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md(None, "Alpha.", "a"));
    let app = sources(&root, LiveOptions { rescan_interval: None, watch: false }).await;
    // A second server on the same tree, with its watcher, shows when the changes were there to
    // be seen: once it has seen a second change, the first server, had it a watcher, would long
    // have shown the first.
    let watching = TestApp::spawn_dir(&root).await;
    let etag = app.catalog_etag().await;
    let scans = scan_count(&app).await;
    write_skill(&root.join("beta"), &skill_md(None, "Beta.", "b"));
    watching.wait_for_catalog(|catalog| names(catalog) == ["alpha", "beta"]).await;
    write_skill(&root.join("gamma"), &skill_md(None, "Gamma.", "c"));
    watching.wait_for_catalog(|catalog| names(catalog) == ["alpha", "beta", "gamma"]).await;
    let catalog = app.wait_for_catalog(|_| true).await;
    assert_eq!(names(&catalog), ["alpha"], "only the watcher or the timer make changes visible");
    assert_eq!(app.catalog_etag().await, etag);
    assert_eq!(scan_count(&app).await, scans);
    watching.shutdown().await.expect("clean shutdown");
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_of_a_file_changed_since_the_scan_is_a_conflict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    for name in ["alpha", "beta", "gamma", "delta"] {
        write_skill(&root.join(name), &skill_md(None, "Original.", "version one"));
    }
    // Nothing rescans on its own: the catalog stays at the first scan unless a request asks.
    let app = sources(&root, LiveOptions { rescan_interval: None, watch: false }).await;
    let listed = field(&app.wait_for_catalog(|_| true).await, "alpha", "etag");
    let load = app.load("alpha", None).await;
    assert_eq!(load.status(), 200);
    assert_eq!(load.json::<Value>().await.unwrap()["content"], skill_md(None, "Original.", "version one"));
    let changed = |detail: &str, name: &str| {
        assert_eq!(detail, format!("Skill '{name}' changed; refresh discovery and retry"));
    };

    // Only the body changed: the descriptor still matches, the content no longer does.
    write_skill(&root.join("alpha"), &skill_md(None, "Original.", "version two"));
    let conflict = problem(app.load("alpha", None).await, 409).await;
    assert_eq!(conflict["type"], "urn:skillcat:problem:skill-changed");
    changed(conflict["detail"].as_str().unwrap(), "alpha");
    // That conflict asked for a rescan: the catalog catches up and the new content is served.
    let catalog = app.wait_for_catalog(|catalog| field(catalog, "alpha", "etag") != listed).await;
    let listed = field(&catalog, "alpha", "etag");
    let content = app.content("alpha").await;
    assert_eq!(content.status(), 200);
    assert_eq!(content.headers()["etag"].to_str().unwrap(), listed);
    assert_eq!(content.text().await.unwrap(), skill_md(None, "Original.", "version two"));

    // The same through GET content.
    write_skill(&root.join("alpha"), &skill_md(None, "Original.", "version three"));
    let conflict = problem(app.content("alpha").await, 409).await;
    assert_eq!(conflict["type"], "urn:skillcat:problem:skill-changed");
    changed(conflict["detail"].as_str().unwrap(), "alpha");
    let catalog = app.wait_for_catalog(|catalog| field(catalog, "alpha", "etag") != listed).await;
    let load = app.load("alpha", Some(serde_json::json!({"token_limit": 100}))).await;
    assert_eq!(load.status(), 200);
    assert_eq!(load.json::<Value>().await.unwrap()["content"], skill_md(None, "Original.", "version three"));
    let content = app.content("alpha").await;
    assert_eq!(content.headers()["etag"].to_str().unwrap(), field(&catalog, "alpha", "etag"));

    // The descriptor changed (a new description): a conflict for a load and for the content,
    // and each asks for the rescan that brings the catalog up to date. (Each request follows a
    // change with no rescan pending, so it always meets the stale catalog.)
    write_skill(&root.join("beta"), &skill_md(None, "Edited.", "version one"));
    let conflict = problem(app.load("beta", None).await, 409).await;
    assert_eq!(conflict["type"], "urn:skillcat:problem:skill-changed");
    changed(conflict["detail"].as_str().unwrap(), "beta");
    app.wait_for_catalog(|catalog| field(catalog, "beta", "description") == "Edited.").await;
    assert_eq!(app.load("beta", None).await.status(), 200);
    write_skill(&root.join("gamma"), &skill_md(None, "Edited.", "version one"));
    let conflict = problem(app.content("gamma").await, 409).await;
    assert_eq!(conflict["type"], "urn:skillcat:problem:skill-changed");
    changed(conflict["detail"].as_str().unwrap(), "gamma");
    app.wait_for_catalog(|catalog| field(catalog, "gamma", "description") == "Edited.").await;
    assert_eq!(app.content("gamma").await.status(), 200);

    // Deleted on disk: a conflict too, then (after the rescan it asked for) unknown.
    std::fs::remove_dir_all(root.join("delta")).expect("delete delta");
    let conflict = problem(app.load("delta", None).await, 409).await;
    assert_eq!(conflict["type"], "urn:skillcat:problem:skill-changed");
    changed(conflict["detail"].as_str().unwrap(), "delta");
    app.wait_for_catalog(|catalog| entry(catalog, "delta").is_none()).await;
    assert_eq!(app.load("delta", None).await.status(), 404);
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contents_read_before_a_change_are_not_served_after_it() {
    // Loads and contents are kept between requests (per version, while no file event arrives);
    // after a change, in place or by rename, with the same descriptor, the new version is served.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md(None, "Same.", "version 0"));
    let app = sources(&root, LiveOptions { rescan_interval: None, watch: true }).await;
    for version in 1..=6 {
        for _ in 0..3 {
            let load = app.load("alpha", None).await;
            assert_eq!(load.status(), 200);
            let expected = skill_md(None, "Same.", &format!("version {}", version - 1));
            assert_eq!(load.json::<Value>().await.unwrap()["content"], expected);
            assert_eq!(app.content("alpha").await.text().await.unwrap(), expected);
        }
        let listed = field(&app.wait_for_catalog(|_| true).await, "alpha", "etag");
        let text = skill_md(None, "Same.", &format!("version {version}"));
        if version % 2 == 0 {
            std::fs::write(root.join("alpha/SKILL.md"), &text).expect("write in place");
        } else {
            std::fs::write(root.join("alpha/SKILL.md.new"), &text).expect("write");
            std::fs::rename(root.join("alpha/SKILL.md.new"), root.join("alpha/SKILL.md")).expect("rename");
        }
        app.wait_for_catalog(|catalog| field(catalog, "alpha", "etag") != listed).await;
    }
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_atomic_change_costs_one_rescan() {
    // Saving a file atomically is a handful of events within a millisecond (create, write,
    // rename); they settle into one rescan, not one plus a redundant second.
    const CHANGES: u64 = 10;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md(None, "Version 0.", "a"));
    let app = TestApp::spawn_dir(&root).await;
    let mut rescans = 0;
    for version in 1..=CHANGES {
        wait_until_idle(&app).await;
        let before = scan_count(&app).await;
        let description = format!("Version {version}.");
        write_skill(&root.join("alpha"), &skill_md(None, &description, "a"));
        app.wait_for_catalog(|catalog| field(catalog, "alpha", "description") == description).await;
        wait_until_idle(&app).await;
        rescans += scan_count(&app).await - before;
    }
    // One each; slack for a loaded machine where a save straddles the settling delay, but well
    // under the two per save that a redundant rescan after every burst would cost.
    assert!(rescans <= CHANGES * 3 / 2, "{CHANGES} atomic saves cost {rescans} rescans");
    app.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_writes_costs_few_rescans() {
    const SKILLS: usize = 20;
    const WRITES: usize = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    let folders: Vec<PathBuf> = (0..SKILLS).map(|index| root.join(format!("skill-{index:02}"))).collect();
    for folder in &folders {
        write_skill(folder, &skill_md(None, "Version 0.", "body"));
    }
    let app = TestApp::spawn_dir(&root).await;
    assert_eq!(names(&app.wait_for_catalog(|_| true).await).len(), SKILLS);
    wait_until_idle(&app).await;
    let before = scan_count(&app).await;

    // 200 writes, one per 0.5 ms at most (about 100 ms where the filesystem keeps up; a slow disk
    // stretches it), from a thread of their own so the server runs and rescans meanwhile.
    let writer = {
        let folders = folders.clone();
        tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            for write in 0..WRITES {
                let version = write / SKILLS + 1;
                write_skill(&folders[write % SKILLS], &skill_md(None, &format!("Version {version}."), "body"));
                let due = Duration::from_micros(500) * (write as u32 + 1);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            started.elapsed()
        })
    };
    let took = writer.await.expect("the writer");
    let last = format!("Version {}.", WRITES / SKILLS);
    app.wait_for_catalog(|catalog| {
        catalog["skills"].as_array().unwrap().iter().all(|skill| skill["description"] == last.as_str())
    })
    .await;
    // Let any rescan still pending finish before counting.
    wait_until_idle(&app).await;
    let after = scan_count(&app).await;
    let rescans = after - before;
    assert!(rescans >= 1, "the burst caused no rescan");
    assert!(rescans < 50, "{WRITES} writes in {took:?} caused {rescans} rescans");
    let catalog = app.wait_for_catalog(|_| true).await;
    assert_eq!(names(&catalog).len(), SKILLS);
    assert!(catalog["diagnostics"].as_array().unwrap().is_empty());
    app.shutdown().await.expect("clean shutdown");
}

/// The inodes `pid`'s inotify instances watch, from `/proc/PID/fdinfo` (`inotify wd:1 ino:1f ...`,
/// the inode in hex).
fn watched_inodes(pid: u32) -> Vec<u64> {
    let mut inodes = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).expect("fdinfo").flatten() {
        let Ok(info) = std::fs::read_to_string(entry.path()) else { continue };
        for line in info.lines().filter(|line| line.starts_with("inotify ")) {
            let inode = line.split_whitespace().find_map(|field| field.strip_prefix("ino:")).expect("an inode");
            inodes.push(u64::from_str_radix(inode, 16).expect("a hex inode"));
        }
    }
    inodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_larger_than_the_watch_limit_is_said_and_rescanned() {
    use std::os::unix::fs::MetadataExt as _;

    use crate::support::process::ServeProcess;

    // 40 skills with a `references/` folder each: 81 folders, against a limit of 20 watches.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    for index in 0..40 {
        let folder = root.join(format!("skill-{index:02}"));
        write_skill(&folder, &skill_md(None, "Before.", "body"));
        std::fs::create_dir_all(folder.join("references")).expect("references");
    }
    let root_text = root.to_str().expect("UTF-8");
    let args = ["serve", "--no-builtin", "--dir", root_text, "--rescan-interval", "0"];
    let server = ServeProcess::start_with_watch_limit(20, &args, &[("SKILLCAT_LISTEN", "127.0.0.1:0")], "info");
    server.ready().await;

    // Said once, with the numbers and the fix.
    let log = server.log();
    let warnings: Vec<Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["message"].as_str().is_some_and(|message| message.contains("max_user_watches")))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning; log:\n{log}");
    let warning = &warnings[0];
    assert_eq!(warning["limit"], "20", "{warning}");
    assert_eq!(warning["folders"], 81, "{warning}");
    assert_eq!(warning["rescan_every_seconds"], 10.0, "{warning}");
    assert_eq!(warning["fix"], "sysctl fs.inotify.max_user_watches=128", "{warning}");
    // In the metrics and the catalog.
    let metrics = reqwest::get(server.url("/metrics")).await.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("\nskillcat_watch_incomplete 1\n"), "{metrics}");
    let limit_reached = metrics
        .lines()
        .find_map(|line| line.strip_prefix("skillcat_watch_limit_reached_total "))
        .and_then(|count| count.parse::<u64>().ok());
    assert!(limit_reached.is_some_and(|count| count >= 1), "{metrics}");
    let catalog: Value = reqwest::get(server.url("/skills")).await.expect("skills").json().await.expect("json");
    assert_eq!(names(&catalog).len(), 40);
    let diagnostics = catalog["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diagnostics.len(), 1, "{catalog}");
    assert_eq!(diagnostics[0]["source"], root_text);
    let message = diagnostics[0]["message"].as_str().expect("a message");
    assert!(message.starts_with("file watch incomplete: the kernel's limit of 20 inotify watches"), "{message}");
    assert!(message.contains("rescans every 10 s"), "{message}");

    // A change in a folder the kernel does not watch is still seen, by the periodic rescan that
    // runs although `--rescan-interval` is 0.
    let watched = watched_inodes(server.pid());
    assert_eq!(watched.len(), 20, "every watch the limit allows is placed");
    let unwatched = (0..40)
        .map(|index| root.join(format!("skill-{index:02}")))
        .find(|folder| !watched.contains(&std::fs::metadata(folder).expect("a folder").ino()))
        .expect("a skill folder without a watch");
    let name = unwatched.file_name().and_then(|name| name.to_str()).expect("a name").to_owned();
    // Rewritten in place: the only event would be in that folder, which nothing watches.
    std::fs::write(unwatched.join("SKILL.md"), skill_md(None, "After.", "body")).expect("rewrite");
    let deadline = std::time::Instant::now() + Duration::from_secs(25);
    loop {
        let catalog: Value = reqwest::get(server.url("/skills")).await.expect("skills").json().await.expect("json");
        if field(&catalog, &name, "description") == "After." {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the change to {name} stayed invisible");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, log) = server.terminate();
    assert!(status.success(), "{status}; log:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_watch_limit_only_the_trees_left_short_are_counted_in_the_gap() {
    use crate::support::process::ServeProcess;

    // One source of two trees, walked in order: `first` (3 folders) fits the limit of 20
    // watches whole, `second` (1 + 30 skills with a `references/` folder each: 61 folders) does not.
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    for index in 0..2 {
        write_skill(&first.join(format!("one-{index}")), &skill_md(None, "First.", "body"));
    }
    for index in 0..30 {
        let folder = second.join(format!("two-{index:02}"));
        write_skill(&folder, &skill_md(None, "Second.", "body"));
        std::fs::create_dir_all(folder.join("references")).expect("references");
    }
    let config = dir.path().join("skillcat.toml");
    let roots = serde_json::json!([first.to_str().expect("UTF-8"), second.to_str().expect("UTF-8")]);
    std::fs::write(&config, format!("[[sources]]\nkind = \"directory\"\nroots = {roots}\n")).expect("config");
    let args = ["serve", "--config", config.to_str().expect("UTF-8"), "--rescan-interval", "0"];
    let server = ServeProcess::start_with_watch_limit(20, &args, &[("SKILLCAT_LISTEN", "127.0.0.1:0")], "info");
    server.ready().await;
    let catalog: Value = reqwest::get(server.url("/skills")).await.expect("skills").json().await.expect("json");
    assert_eq!(names(&catalog).len(), 32);
    let log = server.log();
    let warning = (log.lines())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|entry| entry["message"].as_str().is_some_and(|message| message.contains("max_user_watches")))
        .unwrap_or_else(|| panic!("a warning; log:\n{log}"));
    // The folders of the tree the limit cut short, as the walk found them; not those of the other.
    assert_eq!(warning["folders"], 61, "{warning}");
    assert_eq!(warning["fix"], "sysctl fs.inotify.max_user_watches=128", "{warning}");
    let (status, log) = server.terminate();
    assert!(status.success(), "{status}; log:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_rescanned_alone_and_the_periodic_full_walk_agrees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("skills");
    write_skill(&root.join("alpha"), &skill_md(None, "Present at start.", "a"));
    let live = LiveOptions { rescan_interval: Some(Duration::from_millis(300)), watch: true };
    let app = sources(&root, live).await;
    let series = |kind: &str| format!("skillcat_directory_scans_total{{kind=\"{kind}\"}}");
    for index in 0..6 {
        let name = format!("added-{index}");
        write_skill(&root.join(&name), &skill_md(None, "Added.", "b"));
        app.wait_for_catalog(|catalog| names(catalog).contains(&name.as_str())).await;
    }
    assert!(app.metric(&series("incremental")).await >= 3, "changes are rescanned from the picture");
    // Periodic full walks, each checked against a rescan from the picture.
    let full = app.metric(&series("full")).await;
    eventually("periodic full walks", || async { app.metric(&series("full")).await >= full + 4 }).await;
    assert_eq!(app.metric("skillcat_rescan_disagreements_total").await, 0);
    app.shutdown().await.expect("clean shutdown");
}
