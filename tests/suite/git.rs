//! Git sources against real git servers on loopback: `git daemon` (git://), smart HTTP through
//! `git http-backend` (http://, one repository private behind a token), file:// URLs and local
//! paths. Every test runs the real `skillcat serve --git ...` (or a config file's git sources)
//! with a state dir of its own, and pushes, force-pushes and deletes refs with the real `git`.
//!
//! The catalogs are compared with nagents over a checkout of the served commit (`git archive`,
//! extracted), with `<checkout>/` written `<url>#`: a public collection of `tests/data`, and the
//! differential of random trees (the churn test's generator) committed over several commits on
//! every transport. Without a Python with nagents those comparisons print `skipped:` (unless
//! `SKILLCAT_REQUIRE_NAGENTS=1`); the rest runs anyway.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::churn::{Random, Tree};
use crate::support::files::digest;
use crate::support::git::{
    Compared, Expectation, FETCH_DEADLINE, GitDaemon, HttpGit, Repo, copy_tree, differences, expected_catalog,
    expected_catalogs, file_url, free_port, get_json, git, git_command, github_signature, hook, hook_all, metric,
    path_url, serve, served_catalog, wait_catalog, wait_commits, write_file,
};
use crate::support::nagents;
use crate::support::skills::skill_md;

const SECRET: &str = "hook-secret";

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_gzip().timeout(Duration::from_secs(20)).build().expect("client")
}

fn collections() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/collections")
}

/// A temporary folder with the webhook secret file (`SECRET` and a newline).
fn secret_file(dir: &Path) -> String {
    let path = dir.join("webhook-secret");
    std::fs::write(&path, format!("{SECRET}\n")).expect("write the secret");
    path.to_str().expect("UTF-8").to_owned()
}

fn s(text: impl Into<String>) -> String {
    text.into()
}

/// How many fetches reached the repository `name` of `http` (each begins with `GET info/refs`).
fn handshakes(http: &HttpGit, name: &str) -> usize {
    let path = format!("/{name}/info/refs");
    http.seen().iter().filter(|seen| seen.path == path).count()
}

/// The labels, kinds and commits of `GET /skills`'s `sources`.
fn sources_of(listing: &Value) -> Vec<Value> {
    listing["sources"].as_array().cloned().unwrap_or_default()
}

// ------------------------------------------------------------------- the churn generator

// --------------------------------------------------------------------------------- a.

/// Two public collections of `tests/data/collections`, each committed as a repository: one served
/// at its top over http://, one below `skills` of its `main` over git://. The catalog equals
/// nagents over the checkouts of the two commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_collection_equals_nagents_over_its_checkout() {
    let Some(python) = nagents::python("git::a_public_collection_equals_nagents_over_its_checkout") else { return };
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut anthropic = Repo::create(&dir.path().join("anthropic"), &base, "anthropic.git");
    copy_tree(&collections().join("anthropics-skills"), &anthropic.work);
    let anthropic_commit = anthropic.commit_and_push("anthropics/skills, as kept in tests/data");
    let mut obra = Repo::create(&dir.path().join("obra"), &base, "obra.git");
    copy_tree(&collections().join("obra-superpowers"), &obra.work);
    let obra_commit = obra.commit_and_push("obra/superpowers, as kept in tests/data");
    let http = HttpGit::start(&base, None);
    let daemon = GitDaemon::start(&base);
    let (anthropic_url, obra_url) = (http.url("anthropic.git"), daemon.url("obra.git"));
    let state = dir.path().join("state");
    let server = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(state.to_str().unwrap()),
        s("--git"),
        anthropic_url.clone(),
        s("--git"),
        format!("{obra_url}#main:skills"),
    ]);
    let client = client();
    let listing = wait_commits(&client, &server, &[(0, anthropic_commit.as_str()), (1, obra_commit.as_str())]).await;
    let obra_label = format!("{obra_url}#main:skills");
    assert_eq!(
        sources_of(&listing),
        vec![
            json!({"label": anthropic_url, "kind": "git", "commit": anthropic_commit}),
            json!({"label": obra_label, "kind": "git", "commit": obra_commit}),
        ],
        "GET /skills's sources"
    );
    let (anthropic_checkout, obra_checkout) = (anthropic.checkout(&anthropic_commit), obra.checkout(&obra_commit));
    let expected = expected_catalog(
        &python,
        &Expectation {
            checkouts: vec![
                (anthropic_checkout.path(), anthropic_url.clone()),
                (obra_checkout.path(), obra_url.clone()),
            ],
            sources: vec![Compared::new(0, "", &anthropic_url), Compared::new(1, "skills", &obra_label)],
            token_limits: vec![50],
        },
    );
    let served = served_catalog(&client, &server, &listing, &[50]).await;
    assert!(served["skills"].as_array().expect("skills").len() >= 4, "the collections give skills: {served}");
    let found = differences(&expected, &served, "collections");
    assert!(found.is_empty(), "the catalog differs from nagents over the checkouts:\n{}", found.join("\n"));

    // A replica on a state dir of its own, on the same commits: byte-identical answers and tags.
    let replica = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(dir.path().join("replica-state").to_str().unwrap()),
        s("--git"),
        anthropic_url.clone(),
        s("--git"),
        format!("{obra_url}#main:skills"),
    ]);
    wait_commits(&client, &replica, &[(0, anthropic_commit.as_str()), (1, obra_commit.as_str())]).await;
    let names: Vec<String> =
        listing["skills"].as_array().unwrap().iter().map(|skill| skill["name"].as_str().unwrap().to_owned()).collect();
    let mut paths = vec![s("/skills"), s("/manifest")];
    for name in &names {
        paths.extend([format!("/skills/{name}"), format!("/skills/{name}/files"), format!("/skills/{name}/content")]);
    }
    for path in paths {
        let one = client.get(server.url(&path)).send().await.expect("GET");
        let other = client.get(replica.url(&path)).send().await.expect("GET");
        assert_eq!(one.status(), other.status(), "{path}");
        assert_eq!(one.headers().get("etag"), other.headers().get("etag"), "{path}");
        let (one, other) = (one.bytes().await.expect("body"), other.bytes().await.expect("body"));
        assert_eq!(one, other, "{path}: replicas differ");
    }
}

/// One commit of the differential: a checkout of it, and what the server served for it.
struct Step {
    checkout: tempfile::TempDir,
    url: String,
    /// The first source's label and bounds (the second is `r1`, named "second").
    label: String,
    bounds: (u64, u64),
    what: String,
    catalog: Value,
}

/// How a differential run reaches its repository.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Daemon,
    Http,
    File,
    Path,
}

/// Random trees (the churn generator) committed over several commits of adds, edits, renames,
/// deletes, symlinks and bursts, on every transport; the repository's `r0` of `main` (with small
/// bounds drawn from the seed) and `r1` of the remote's HEAD are two git sources of one server
/// (two mirrors: one per URL and ref), fetched after each push by a hook. For every commit the
/// served catalog (skills, shadowed, diagnostics, manifest, loads) equals nagents over a checkout
/// of that commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_differential_of_random_commits_equals_nagents_over_each_checkout() {
    let Some(python) = nagents::python("git::the_differential_of_random_commits_equals_nagents_over_each_checkout")
    else {
        return;
    };
    let client = client();
    let mut steps: Vec<Step> = Vec::new();
    let mut dirs = Vec::new();
    for (index, transport) in
        [Transport::Daemon, Transport::Http, Transport::File, Transport::Path].into_iter().enumerate()
    {
        for seed in 1..=2u64 {
            let seed = seed + 10 * index as u64;
            let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let dir = tempfile::tempdir().expect("temp");
            let base = dir.path().join("served");
            let work = dir.path().join("work");
            let mut repo = Repo::create(&work, &base, "skills.git");
            let mut tree = Tree::new(work.clone());
            // Each root always exists in a commit (git keeps no empty folder).
            tree.write("r0/README.md", "r0\n");
            tree.write("r1/README.md", "r1\n");
            for _ in 0..8 {
                tree.change(&mut random);
            }
            let first = repo.commit_and_push("the first tree");
            let (daemon, http);
            let url = match transport {
                Transport::Daemon => {
                    daemon = GitDaemon::start(&base);
                    daemon.url("skills.git")
                }
                Transport::Http => {
                    http = HttpGit::start(&base, None);
                    http.url("skills.git")
                }
                Transport::File => file_url(&repo.bare),
                Transport::Path => path_url(&repo.bare),
            };
            let max_entries = *random.pick(&[6u64, 11, 18, 10_000]);
            let max_depth = *random.pick(&[1u64, 2, 16]);
            let config = dir.path().join("skillcat.toml");
            std::fs::write(
                &config,
                format!(
                    "[[sources]]\nkind = \"git\"\nurl = \"{url}\"\nref = \"main\"\npath = \"r0\"\ninterval = 0\n\
                     max_entries = {max_entries}\nmax_depth = {max_depth}\n\n\
                     [[sources]]\nkind = \"git\"\nname = \"second\"\nurl = \"{url}\"\npath = \"r1\"\n\
                     interval = 0\n"
                ),
            )
            .expect("write the config");
            let secret = secret_file(dir.path());
            let server = serve(&[
                s("--config"),
                s(config.to_str().unwrap()),
                s("--state-dir"),
                s(dir.path().join("state").to_str().unwrap()),
                s("--webhook-secret-file"),
                secret,
            ]);
            let label = format!("{url}#main:r0");
            let mut commit = first;
            for step in 0..6 {
                if step > 0 {
                    for _ in 0..=random.below(5) {
                        tree.change(&mut random);
                    }
                    commit = repo.commit_and_push(&format!("step {step}"));
                    let answer = hook_all(&client, &server, SECRET).await;
                    let mut fetching: Vec<&str> =
                        answer["fetching"].as_array().expect("fetching").iter().filter_map(Value::as_str).collect();
                    fetching.sort_unstable();
                    let mut wanted = vec![label.as_str(), "second"];
                    wanted.sort_unstable();
                    assert_eq!(fetching, wanted, "{transport:?} seed {seed}: the hook names the sources it fetches");
                }
                let listing = wait_commits(&client, &server, &[(0, commit.as_str()), (1, commit.as_str())]).await;
                assert!(listing.get("error").is_none(), "{transport:?} seed {seed}: {listing}");
                assert_eq!(
                    sources_of(&listing),
                    vec![
                        json!({"label": label, "kind": "git", "commit": commit}),
                        json!({"label": "second", "kind": "git", "commit": commit}),
                    ]
                );
                let catalog = served_catalog(&client, &server, &listing, &[3]).await;
                steps.push(Step {
                    checkout: repo.checkout(&commit),
                    url: url.clone(),
                    label: label.clone(),
                    bounds: (max_entries, max_depth),
                    what: format!("{transport:?} seed {seed} step {step} ({commit})"),
                    catalog,
                });
            }
            let (status, _) = server.terminate();
            assert!(status.success(), "{transport:?}: {status}");
            dirs.push(dir);
        }
    }
    let expectations: Vec<Expectation<'_>> = steps
        .iter()
        .map(|step| {
            let mut first = Compared::new(0, "r0", &step.label);
            (first.max_entries, first.max_depth) = (Some(step.bounds.0), Some(step.bounds.1));
            Expectation {
                checkouts: vec![(step.checkout.path(), step.url.clone())],
                sources: vec![first, Compared::new(0, "r1", "second")],
                token_limits: vec![3],
            }
        })
        .collect();
    let expected = expected_catalogs(&python, &expectations);
    let mut failures = Vec::new();
    let (mut skills, mut diagnostics, mut shadowed) = (0, 0, 0);
    for (step, expected) in steps.iter().zip(&expected) {
        skills += expected["skills"].as_array().map_or(0, Vec::len);
        diagnostics += expected["diagnostics"].as_array().map_or(0, Vec::len);
        shadowed += expected["shadowed"].as_array().map_or(0, Vec::len);
        let found = differences(expected, &step.catalog, &step.what);
        if !found.is_empty() {
            failures.push(found.join("\n"));
        }
    }
    eprintln!(
        "git differential: {} commits, {skills} skills, {diagnostics} diagnostics, {shadowed} shadowed",
        steps.len()
    );
    assert!(skills >= 30 && diagnostics >= 5, "the differential exercises too little");
    assert!(failures.is_empty(), "{} of {} commits differ:\n{}", failures.len(), steps.len(), failures.join("\n\n"));
}

// --------------------------------------------------------------------------------- b.

/// A force-push that rewrites `main` is followed (the new commit is served, equal to nagents over
/// its checkout), while a source on an annotated tag keeps serving the tag's commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_push_is_followed_and_a_tag_is_served() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    write_file(&repo.work.join("alpha/SKILL.md"), skill_md(None, "Alpha one.", "A").as_bytes(), 0o644);
    let a = repo.commit_and_push("alpha");
    repo.tag("v1", &a);
    write_file(&repo.work.join("beta/SKILL.md"), skill_md(None, "Beta.", "B").as_bytes(), 0o644);
    let b = repo.commit_and_push("beta");
    let daemon = GitDaemon::start(&base);
    let url = daemon.url("skills.git");
    let server = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
        s("--webhook-secret-file"),
        secret_file(dir.path()),
        s("--git"),
        url.clone(),
        s("--git"),
        format!("{url}#v1"),
    ]);
    let client = client();
    let listing = wait_commits(&client, &server, &[(0, b.as_str()), (1, a.as_str())]).await;
    assert_eq!(repo.served_rev("refs/tags/v1"), a);
    assert_eq!(
        sources_of(&listing),
        vec![
            json!({"label": url, "kind": "git", "commit": b}),
            json!({"label": format!("{url}#v1"), "kind": "git", "commit": a}),
        ]
    );
    let names = |listing: &Value| -> Vec<String> {
        listing["skills"].as_array().unwrap().iter().map(|skill| skill["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(&listing), ["alpha", "beta"]);
    assert_eq!(listing["shadowed"][0]["name"], "alpha", "the tag's alpha is shadowed: {listing}");

    // Rewrite main: back to A, then a different second commit; force-pushed.
    git(&repo.work, &["reset", "-q", "--hard", &a]);
    std::fs::remove_dir_all(repo.work.join("alpha")).expect("remove alpha");
    write_file(&repo.work.join("gamma/SKILL.md"), skill_md(None, "Gamma.", "C").as_bytes(), 0o644);
    let c = repo.commit_and_push("gamma instead of beta, alpha gone");
    assert_eq!(repo.served_rev("refs/heads/main"), c);
    assert_ne!(git(&repo.work, &["merge-base", &b, &c]), b, "history was rewritten");
    hook_all(&client, &server, SECRET).await;
    let listing = wait_commits(&client, &server, &[(0, c.as_str()), (1, a.as_str())]).await;
    assert!(listing.get("error").is_none(), "{listing}");
    assert_eq!(names(&listing), ["alpha", "gamma"], "alpha from the tag now; beta gone");
    assert_eq!(listing["skills"][0]["location"], format!("{url}#alpha/SKILL.md"));
    assert_eq!(listing["skills"][0]["source"], format!("{url}#v1"));
    assert_eq!(listing["skills"][1]["location"], format!("{url}#gamma/SKILL.md"));
    assert_eq!(listing["shadowed"], json!([]));
    if let Some(python) = nagents::python("git::a_force_push_is_followed_and_a_tag_is_served") {
        let (main_checkout, tag_checkout) = (repo.checkout(&c), repo.checkout(&a));
        let expected = expected_catalog(
            &python,
            &Expectation {
                checkouts: vec![(main_checkout.path(), url.clone()), (tag_checkout.path(), url.clone())],
                sources: vec![Compared::new(0, "", &url), Compared::new(1, "", &format!("{url}#v1"))],
                token_limits: vec![],
            },
        );
        let served = served_catalog(&client, &server, &listing, &[]).await;
        let found = differences(&expected, &served, "after the force-push");
        assert!(found.is_empty(), "{}", found.join("\n"));
    }
}

/// A branch deleted on the remote: the fetch fails, the last good catalog is served with the
/// `error` entry naming the source; the branch back, the error is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_ref_keeps_the_last_good_catalog_with_an_error() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    write_file(&repo.work.join("alpha/SKILL.md"), skill_md(None, "Alpha.", "A").as_bytes(), 0o644);
    repo.commit_and_push("on main");
    write_file(&repo.work.join("feature-skill/SKILL.md"), skill_md(None, "Feature.", "F").as_bytes(), 0o644);
    let feature = repo.commit("on feature");
    repo.push("feature");
    let http = HttpGit::start(&base, None);
    let url = http.url("skills.git");
    let label = format!("{url}#feature");
    let server = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
        s("--webhook-secret-file"),
        secret_file(dir.path()),
        s("--git"),
        label.clone(),
    ]);
    let client = client();
    let good = wait_commits(&client, &server, &[(0, feature.as_str())]).await;
    assert_eq!(good["skills"].as_array().unwrap().len(), 2, "{good}");

    repo.delete_ref("refs/heads/feature");
    let before = http.requests_for("skills.git");
    hook_all(&client, &server, SECRET).await;
    let failing = wait_catalog(&client, &server, "the failed fetch reported", FETCH_DEADLINE, |status, body| {
        status == 200 && body.get("error").is_some()
    })
    .await;
    assert!(http.requests_for("skills.git") > before, "the hook fetched");
    assert_eq!(failing["skills"], good["skills"], "the last good catalog is kept");
    assert_eq!(failing["sources"], good["sources"], "still the last good commit");
    let error = &failing["error"];
    assert_eq!(error["source"], label, "{error}");
    assert!(error["message"].as_str().is_some_and(|message| !message.is_empty()), "{error}");
    assert!(error["since"].is_string(), "{error}");
    assert_ne!(failing["etag"], good["etag"], "the failure is news to clients");
    assert_eq!(client.get(server.url("/skills/feature-skill/content")).send().await.unwrap().status(), 200);
    let failed =
        metric(&client, &server, &format!("skillcat_git_fetches_total{{source=\"{label}\",outcome=\"failed\"}}")).await;
    assert!(failed.is_some_and(|count| count >= 1.0), "fetch failures counted: {failed:?}");

    // The branch back, one commit further: served, no error.
    write_file(&repo.work.join("late/SKILL.md"), skill_md(None, "Late.", "L").as_bytes(), 0o644);
    let back = repo.commit("back");
    repo.push("feature");
    hook_all(&client, &server, SECRET).await;
    let listing = wait_commits(&client, &server, &[(0, back.as_str())]).await;
    assert!(listing.get("error").is_none(), "the error is gone: {listing}");
    assert_eq!(listing["skills"].as_array().unwrap().len(), 3);
}

/// The remote is unreachable at start: the catalog routes answer 503 until the first fetch
/// succeeds, which a retry does once `git daemon` listens (no hook). Restarted on its state dir
/// with the remote gone, the service serves the mirror's commit at once and reports the failed
/// fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_remote_answers_503_until_reachable_then_the_mirror_survives_a_restart() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    write_file(&repo.work.join("alpha/SKILL.md"), skill_md(None, "Alpha.", "A").as_bytes(), 0o644);
    let commit = repo.commit_and_push("alpha");
    let port = free_port();
    let url = format!("git://127.0.0.1:{port}/skills.git");
    let state = dir.path().join("state");
    let args = [s("--no-builtin"), s("--state-dir"), s(state.to_str().unwrap()), s("--git"), url.clone()];
    let server = serve(&args);
    let client = client();
    // For a while (several fetch attempts' worth), every catalog route answers 503.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        for path in ["/skills", "/manifest", "/skills/alpha"] {
            let (status, body) = get_json(&client, &server, path).await;
            assert_eq!(status, 503, "{path} before any good catalog: {body}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let daemon = GitDaemon::start_on(&base, port);
    let reachable = Instant::now();
    let listing = wait_catalog(
        &client,
        &server,
        "the first fetch after the remote came up",
        Duration::from_secs(30),
        |status, body| status == 200 && body["sources"][0]["commit"] == commit.as_str(),
    )
    .await;
    eprintln!("git: the remote was served {:?} after it became reachable", reachable.elapsed());
    assert_eq!(listing["skills"][0]["location"], format!("{url}#alpha/SKILL.md"));
    let (status, _) = server.terminate();
    assert!(status.success());

    // Restart with the remote gone: the mirror in the state dir is served at once.
    drop(daemon);
    let restarted = serve(&args);
    let listing = wait_catalog(
        &client,
        &restarted,
        "the mirror served after a restart",
        Duration::from_secs(5),
        |status, body| status == 200 && body["sources"][0]["commit"] == commit.as_str(),
    )
    .await;
    assert_eq!(listing["skills"][0]["name"], "alpha");
    let failing =
        wait_catalog(&client, &restarted, "the failed first fetch reported", FETCH_DEADLINE, |status, body| {
            status == 200 && body.get("error").is_some()
        })
        .await;
    assert_eq!(failing["error"]["source"], url);
    assert_eq!(failing["skills"], listing["skills"], "a failed fetch never shrinks the catalog");
}

/// A private repository over http://, its token in a file re-read at every fetch: a wrong token
/// is 503 before any good catalog and an error after one; the right one works. The token goes as
/// the Basic password, user `x-access-token` or the URL's user; no credential shows in answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_fails_and_the_right_one_works() {
    const TOKEN: &str = "right-token";
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "private.git");
    write_file(&repo.work.join("alpha/SKILL.md"), skill_md(None, "Alpha.", "A").as_bytes(), 0o644);
    write_file(&repo.work.join("extra/beta/SKILL.md"), skill_md(None, "Beta.", "B").as_bytes(), 0o644);
    let first = repo.commit_and_push("private skills");
    let http = HttpGit::start(&base, Some(("private.git", TOKEN)));
    let url = http.url("private.git");
    let with_user = url.replacen("http://", "http://alice@", 1);
    // The server itself: git's own client is refused without the token and served with it.
    let ls_remote =
        |url: &str| git_command().args(["-c", "credential.helper=", "ls-remote", url]).output().expect("git ls-remote");
    assert!(!ls_remote(&url).status.success(), "no token, no refs");
    let listed = ls_remote(&url.replacen("http://", &format!("http://anyone:{TOKEN}@"), 1));
    assert!(listed.status.success(), "git ls-remote with the token: {}", String::from_utf8_lossy(&listed.stderr));
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&first), "the refs are listed");
    let served_before = http.seen().len();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "wrong-token\n").expect("write the token");
    let config = dir.path().join("skillcat.toml");
    let token_path = token_file.to_str().unwrap();
    std::fs::write(
        &config,
        format!(
            "[[sources]]\nkind = \"git\"\nurl = \"{url}\"\ninterval = 0\ntoken_file = \"{token_path}\"\n\n\
             [[sources]]\nkind = \"git\"\nurl = \"{with_user}\"\nref = \"main\"\npath = \"extra\"\ninterval = 0\n\
             token_file = \"{token_path}\"\n"
        ),
    )
    .expect("write the config");
    let server = serve(&[
        s("--config"),
        s(config.to_str().unwrap()),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
        s("--webhook-secret-file"),
        secret_file(dir.path()),
    ]);
    let client = client();
    // The first fetches are refused; then the catalog routes still answer 503.
    let refused = Instant::now();
    while !http.seen().iter().any(|seen| seen.status == 401 && seen.user.as_deref() == Some("x-access-token"))
        || !http.seen().iter().any(|seen| seen.status == 401 && seen.user.as_deref() == Some("alice"))
    {
        assert!(
            refused.elapsed() < FETCH_DEADLINE,
            "no refused fetch with users x-access-token and alice: {:?}\n{}",
            http.seen(),
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = get_json(&client, &server, "/skills").await;
    assert_eq!(status, 503, "no good catalog with a wrong token: {body}");
    assert!(
        http.seen()[served_before..].iter().all(|seen| seen.status == 401),
        "nothing served without the token: {:?}",
        http.seen()
    );

    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write the token");
    hook_all(&client, &server, SECRET).await;
    let listing = wait_commits(&client, &server, &[(0, first.as_str()), (1, first.as_str())]).await;
    let label_with_path = format!("{url}#main:extra");
    assert_eq!(
        sources_of(&listing),
        vec![
            json!({"label": url, "kind": "git", "commit": first}),
            json!({"label": label_with_path, "kind": "git", "commit": first}),
        ]
    );
    assert_eq!(listing["skills"][1]["location"], format!("{url}#extra/beta/SKILL.md"));
    assert_eq!(
        listing["shadowed"],
        json!([{"name": "beta", "location": format!("{url}#extra/beta/SKILL.md"), "source": label_with_path}])
    );
    assert!(!listing.to_string().contains("alice") && !listing.to_string().contains(TOKEN), "{listing}");
    let ok = http.seen().iter().filter(|seen| seen.status == 200).map(|seen| seen.user.clone()).collect::<Vec<_>>();
    assert!(ok.contains(&Some("x-access-token".to_owned())) && ok.contains(&Some("alice".to_owned())), "{ok:?}");

    // A wrong token again, and a new commit: the fetch fails, the last good catalog stays.
    std::fs::write(&token_file, "wrong-again\n").expect("write the token");
    write_file(&repo.work.join("gamma/SKILL.md"), skill_md(None, "Gamma.", "C").as_bytes(), 0o644);
    let second = repo.commit_and_push("gamma");
    hook_all(&client, &server, SECRET).await;
    let failing = wait_catalog(&client, &server, "the refused fetch reported", FETCH_DEADLINE, |status, body| {
        status == 200 && body.get("error").is_some()
    })
    .await;
    assert_eq!(failing["skills"], listing["skills"], "the last good catalog");
    assert!(!failing.to_string().contains("wrong-again"), "the token never shows: {failing}");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write the token");
    hook_all(&client, &server, SECRET).await;
    let listing = wait_catalog(&client, &server, "the right token again", FETCH_DEADLINE, |status, body| {
        status == 200
            && body["sources"][0]["commit"] == second.as_str()
            && body["sources"][1]["commit"] == second.as_str()
            && body.get("error").is_none()
    })
    .await;
    assert_eq!(listing["skills"].as_array().unwrap().len(), 3, "{listing}");
}

/// `max_entries` and `max_depth` of git sources in a config file bound the walk of the commit's
/// tree exactly as nagents' bounds bound the walk of a checkout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_equal_nagents_over_the_checkout() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    for (path, description) in [
        ("a/SKILL.md", "A at depth one."),
        ("b/deep/SKILL.md", "B at depth two."),
        ("c/d/e/SKILL.md", "E at depth three."),
        ("f/g/h/i/j/SKILL.md", "J at depth five."),
        ("k/SKILL.md", "K late in the walk."),
        ("l/SKILL.md", "L later still."),
    ] {
        write_file(&repo.work.join(path), skill_md(None, description, "Body.").as_bytes(), 0o644);
    }
    for index in 0..6 {
        write_file(&repo.work.join(format!("b/file{index}.txt")), b"x", 0o644);
    }
    let commit = repo.commit_and_push("a tree the bounds cut");
    let url = file_url(&repo.bare);
    let bounds = [(4u64, 16u64), (10_000, 1), (9, 2), (10_000, 3)];
    let mut config = String::new();
    for (index, (max_entries, max_depth)) in bounds.iter().enumerate() {
        config.push_str(&format!(
            "[[sources]]\nkind = \"git\"\nname = \"b{index}\"\nurl = \"{url}\"\ninterval = 0\n\
             max_entries = {max_entries}\nmax_depth = {max_depth}\n\n"
        ));
    }
    let config_path = dir.path().join("skillcat.toml");
    std::fs::write(&config_path, config).expect("write the config");
    let server = serve(&[
        s("--config"),
        s(config_path.to_str().unwrap()),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
    ]);
    let client = client();
    let pairs: Vec<(usize, &str)> = (0..bounds.len()).map(|index| (index, commit.as_str())).collect();
    let listing = wait_commits(&client, &server, &pairs).await;
    let diagnostics = listing["diagnostics"].as_array().expect("diagnostics");
    assert!(
        diagnostics.iter().any(|d| d["message"].as_str().unwrap().contains("limit reached")),
        "the bounds cut the walk: {listing}"
    );
    let Some(python) = nagents::python("git::bounds_equal_nagents_over_the_checkout") else { return };
    let checkout = repo.checkout(&commit);
    let sources = bounds
        .iter()
        .enumerate()
        .map(|(index, (max_entries, max_depth))| Compared {
            checkout: 0,
            path: String::new(),
            label: format!("b{index}"),
            max_entries: Some(*max_entries),
            max_depth: Some(*max_depth),
        })
        .collect();
    let expected = expected_catalog(
        &python,
        &Expectation { checkouts: vec![(checkout.path(), url.clone())], sources, token_limits: vec![] },
    );
    let served = served_catalog(&client, &server, &listing, &[]).await;
    let found = differences(&expected, &served, "bounds");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Sources on one URL and ref with different paths (each with a mirror of its own in the state
/// dir): started together, on fresh state dirs, again and again, every source serves the commit
/// and none reports an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_sharing_a_url_and_ref_all_serve_the_commit() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    let paths = ["p0", "p1", "p2", "p3"];
    for path in paths {
        write_file(
            &repo.work.join(format!("{path}/{path}-skill/SKILL.md")),
            skill_md(None, "A skill.", "B").as_bytes(),
            0o644,
        );
    }
    let commit = repo.commit_and_push("four folders");
    let daemon = GitDaemon::start(&base);
    let url = daemon.url("skills.git");
    let client = client();
    for round in 0..4 {
        let mut args =
            vec![s("--no-builtin"), s("--state-dir"), s(dir.path().join(format!("state{round}")).to_str().unwrap())];
        for path in paths {
            args.extend([s("--git"), format!("{url}#main:{path}")]);
        }
        let server = serve(&args);
        let pairs: Vec<(usize, &str)> = (0..paths.len()).map(|index| (index, commit.as_str())).collect();
        let listing = wait_commits(&client, &server, &pairs).await;
        assert!(listing.get("error").is_none(), "round {round}: {listing}");
        assert_eq!(listing["skills"].as_array().unwrap().len(), paths.len(), "round {round}: {listing}");
    }
}

// --------------------------------------------------------------------------------- c.

/// `POST /hooks/git`: a GitHub signature, a GitLab token and a bearer secret each fetch the
/// sources the payload names (its URL compared without `.git` and a trailing `/`) and the new
/// commit is served shortly after; a bad or missing signature is 401 and fetches nothing; a hook
/// naming another repository fetches nothing of ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_fetches_what_it_names_and_refuses_bad_signatures() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut ours = Repo::create(&dir.path().join("ours"), &base, "ours.git");
    write_file(&ours.work.join("alpha/SKILL.md"), skill_md(None, "Alpha.", "A").as_bytes(), 0o644);
    let mut commit = ours.commit_and_push("alpha");
    let mut other = Repo::create(&dir.path().join("other"), &base, "other.git");
    write_file(&other.work.join("zeta/SKILL.md"), skill_md(None, "Zeta.", "Z").as_bytes(), 0o644);
    let other_commit = other.commit_and_push("zeta");
    let http = HttpGit::start(&base, None);
    let daemon = GitDaemon::start(&base);
    let (ours_url, other_url) = (http.url("ours.git"), daemon.url("other.git"));
    let server = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
        s("--webhook-secret-file"),
        secret_file(dir.path()),
        s("--git"),
        ours_url.clone(),
        s("--git"),
        other_url.clone(),
    ]);
    let client = client();
    wait_commits(&client, &server, &[(0, commit.as_str()), (1, other_commit.as_str())]).await;
    let mut step = 0;
    let mut push = |repo: &mut Repo| {
        step += 1;
        write_file(&repo.work.join(format!("s{step}/SKILL.md")), skill_md(None, "Pushed.", "P").as_bytes(), 0o644);
        repo.commit_and_push(&format!("step {step}"))
    };

    // GitHub: the HMAC of the body.
    commit = push(&mut ours);
    let payload = json!({"ref": "refs/heads/main", "repository": {"clone_url": ours_url, "full_name": "org/ours"}});
    let body = payload.to_string().into_bytes();
    let signature = github_signature(SECRET.as_bytes(), &body);
    let sent = Instant::now();
    let (status, answer, _) = hook(
        &client,
        &server,
        &[("x-hub-signature-256", signature), ("x-github-event", s("push")), ("content-type", s("application/json"))],
        &body,
    )
    .await;
    assert_eq!((status, answer.clone()), (202, json!({"fetching": [ours_url]})));
    wait_commits(&client, &server, &[(0, commit.as_str())]).await;
    eprintln!("git: a push was served {:?} after its GitHub hook", sent.elapsed());

    // Bad signatures: 401 problems, and nothing fetched.
    let requests = http.requests_for("ours.git");
    commit = push(&mut ours);
    let wrong = github_signature(b"not-the-secret", &body);
    for headers in [
        vec![("x-hub-signature-256", wrong)],
        vec![("x-hub-signature-256", s("sha256=00"))],
        vec![("x-gitlab-token", s("not-the-secret"))],
        vec![("authorization", s("Bearer not-the-secret"))],
        vec![],
    ] {
        let (status, answer, content_type) = hook(&client, &server, &headers, &body).await;
        assert_eq!(status, 401, "{headers:?}: {answer}");
        assert_eq!(content_type.as_deref(), Some("application/problem+json"), "{headers:?}");
    }
    // A signature of another body.
    let (status, _, _) =
        hook(&client, &server, &[("x-hub-signature-256", github_signature(SECRET.as_bytes(), b"{}"))], &body).await;
    assert_eq!(status, 401, "a signature of another body");
    let (status, listing) = get_json(&client, &server, "/skills").await;
    assert_eq!(status, 200);
    assert_ne!(listing["sources"][0]["commit"], commit.as_str(), "no refused hook fetched");
    assert_eq!(http.requests_for("ours.git"), requests, "no refused hook fetched: {:?}", http.seen());

    // GitLab: the token, and the project's http URL.
    let payload =
        json!({"object_kind": "push", "project": {"git_http_url": ours_url, "web_url": "http://gitlab.invalid/x"}});
    let (status, answer, _) = hook(
        &client,
        &server,
        &[("x-gitlab-token", s(SECRET)), ("x-gitlab-event", s("Push Hook"))],
        payload.to_string().as_bytes(),
    )
    .await;
    assert_eq!((status, answer), (202, json!({"fetching": [ours_url]})));
    wait_commits(&client, &server, &[(0, commit.as_str())]).await;

    // Bearer, a GitHub payload whose html_url lacks `.git` and ends with `/`.
    commit = push(&mut ours);
    let html_url = format!("{}/", ours_url.trim_end_matches(".git"));
    let payload = json!({"repository": {"html_url": html_url}});
    let (status, answer, _) =
        hook(&client, &server, &[("authorization", format!("Bearer {SECRET}"))], payload.to_string().as_bytes()).await;
    assert_eq!((status, answer), (202, json!({"fetching": [ours_url]})));
    wait_commits(&client, &server, &[(0, commit.as_str())]).await;

    // A hook naming the other repository: only it is fetched, nothing of ours.
    commit = push(&mut ours);
    let other_next = push(&mut other);
    let requests = http.requests_for("ours.git");
    let payload = json!({"repository": {"git_url": other_url, "clone_url": "http://elsewhere.invalid/ours.git"}});
    let (status, answer, _) =
        hook(&client, &server, &[("authorization", format!("Bearer {SECRET}"))], payload.to_string().as_bytes()).await;
    assert_eq!((status, answer), (202, json!({"fetching": [other_url]})));
    let listing = wait_commits(&client, &server, &[(1, other_next.as_str())]).await;
    assert_ne!(listing["sources"][0]["commit"], commit.as_str(), "ours was not fetched");
    let quiet = Instant::now();
    while quiet.elapsed() < Duration::from_millis(500) {
        assert_eq!(http.requests_for("ours.git"), requests, "a hook for another repository fetched ours");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Naming nothing of ours at all: nothing fetched.
    let payload = json!({"repository": {"clone_url": "https://github.com/someone/else.git"}});
    let (status, answer, _) =
        hook(&client, &server, &[("authorization", format!("Bearer {SECRET}"))], payload.to_string().as_bytes()).await;
    assert_eq!((status, answer), (202, json!({"fetching": []})));
    // Naming no repository: every git source.
    let answer = hook_all(&client, &server, SECRET).await;
    let mut fetching: Vec<String> = answer["fetching"]
        .as_array()
        .expect("fetching")
        .iter()
        .map(|label| label.as_str().unwrap().to_owned())
        .collect();
    fetching.sort();
    let mut both = vec![ours_url.clone(), other_url.clone()];
    both.sort();
    assert_eq!(fetching, both);
    wait_commits(&client, &server, &[(0, commit.as_str())]).await;

    // Twenty hooks at once: they collapse into at most one fetch in flight plus one queued (a
    // third only if the first finished before the last hook arrived).
    commit = push(&mut ours);
    let ok_series = format!("skillcat_git_fetches_total{{source=\"{ours_url}\",outcome=\"ok\"}}");
    let fetches_before = metric(&client, &server, &ok_series).await.unwrap_or(0.0);
    let handshakes_before = handshakes(&http, "ours.git");
    let payload = json!({"repository": {"clone_url": ours_url}}).to_string();
    let hooks: Vec<_> = (0..20)
        .map(|_| {
            let request = client
                .post(server.url("/hooks/git"))
                .header("authorization", format!("Bearer {SECRET}"))
                .body(payload.clone());
            tokio::spawn(async move { request.send().await.expect("POST /hooks/git").status().as_u16() })
        })
        .collect();
    for task in hooks {
        assert_eq!(task.await.expect("a hook"), 202);
    }
    wait_commits(&client, &server, &[(0, commit.as_str())]).await;
    // Quiet: no fetch still running or queued.
    let mut last = (metric(&client, &server, &ok_series).await, handshakes(&http, "ours.git"));
    let quiet = Instant::now();
    let mut still = Instant::now();
    while still.elapsed() < Duration::from_millis(500) {
        assert!(quiet.elapsed() < FETCH_DEADLINE, "the fetches never settle");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = (metric(&client, &server, &ok_series).await, handshakes(&http, "ours.git"));
        if now != last {
            (last, still) = (now, Instant::now());
        }
    }
    let fetches = last.0.unwrap_or(0.0) - fetches_before;
    assert!((1.0..=3.0).contains(&fetches), "20 concurrent hooks made {fetches} fetches");
    let handshakes = handshakes(&http, "ours.git") - handshakes_before;
    assert!((1..=3).contains(&handshakes), "20 concurrent hooks reached the remote {handshakes} times");

    // Over 64 KiB, the bound of every request body: 413.
    let (status, _, _) =
        hook(&client, &server, &[("authorization", format!("Bearer {SECRET}"))], &vec![b' '; (64 << 10) + 1]).await;
    assert_eq!(status, 413);

    let ok =
        metric(&client, &server, &format!("skillcat_git_fetches_total{{source=\"{ours_url}\",outcome=\"ok\"}}")).await;
    assert!(ok.is_some_and(|count| count >= 5.0), "successful fetches counted: {ok:?}");
    let seconds = metric(&client, &server, &format!("skillcat_git_fetch_seconds_total{{source=\"{ours_url}\"}}")).await;
    assert!(seconds.is_some_and(|seconds| seconds > 0.0), "{seconds:?}");
    let last =
        metric(&client, &server, &format!("skillcat_git_last_fetch_timestamp_seconds{{source=\"{ours_url}\"}}")).await;
    assert!(last.is_some_and(|time| time > 1.6e9), "{last:?}");
}

// --------------------------------------------------------------------------------- d. e.

/// A git skill's files: an executable blob is executable, digests and sizes are those of the
/// blobs, bytes are served as committed, a symlink is not served; the listing equals that of a
/// folder source over the checkout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_a_git_skill_are_its_blobs_and_equal_a_checkouts() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    let skill = repo.work.join("tool");
    write_file(&skill.join("SKILL.md"), skill_md(None, "A tool.", "Run scripts/run.sh.").as_bytes(), 0o644);
    write_file(&skill.join("scripts/run.sh"), b"#!/bin/sh\necho run\n", 0o755);
    write_file(&skill.join("data.bin"), &[0, 159, 146, 150, 255, 10], 0o644);
    write_file(&skill.join("references/notes.md"), b"# Notes\n", 0o644);
    std::os::unix::fs::symlink("SKILL.md", skill.join("link.md")).expect("symlink");
    std::os::unix::fs::symlink("scripts", skill.join("linked-scripts")).expect("symlink");
    let commit = repo.commit_and_push("a tool");
    let url = file_url(&repo.bare);
    let server = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
        s("--git"),
        url.clone(),
    ]);
    let client = client();
    wait_commits(&client, &server, &[(0, commit.as_str())]).await;
    let (status, listing) = get_json(&client, &server, "/skills/tool/files").await;
    assert_eq!(status, 200, "{listing}");
    let files = listing["files"].as_array().expect("files");
    let blobs = repo.blobs(&commit);
    let mut listed = Vec::new();
    for (path, mode, bytes) in &blobs {
        let Some(inside) = path.strip_prefix("tool/") else { continue };
        if mode == "120000" {
            assert!(files.iter().all(|file| file["path"] != inside), "the symlink {inside} is listed: {listing}");
            let response = client.get(server.url(&format!("/skills/tool/files/{inside}"))).send().await.unwrap();
            assert_eq!(response.status(), 404, "the symlink {inside} is served");
            continue;
        }
        let file = files
            .iter()
            .find(|file| file["path"] == inside)
            .unwrap_or_else(|| panic!("{inside} not listed: {listing}"));
        assert_eq!(file["digest"], digest(bytes), "{inside}");
        assert_eq!(file["size"], bytes.len(), "{inside}");
        assert_eq!(file["executable"], mode == "100755", "{inside} (mode {mode})");
        let response = client.get(server.url(&format!("/skills/tool/files/{inside}"))).send().await.unwrap();
        assert_eq!(response.status(), 200, "{inside}");
        assert_eq!(response.bytes().await.unwrap().as_ref(), bytes.as_slice(), "{inside}");
        listed.push(inside.to_owned());
    }
    assert_eq!(listed.len(), files.len(), "every listed file is a blob: {listing}");
    assert!(listed.contains(&s("scripts/run.sh")));
    let (_, skill_listing) = get_json(&client, &server, "/skills/tool").await;
    assert_eq!(skill_listing["location"], format!("{url}#tool/SKILL.md"), "{skill_listing}");

    // A folder source over the checkout lists the same files and skips the same entries.
    let checkout = repo.checkout(&commit);
    let folder = serve(&[s("--no-builtin"), s("--dir"), s(checkout.path().to_str().unwrap())]);
    folder.ready().await;
    let (status, folder_listing) = get_json(&client, &folder, "/skills/tool/files").await;
    assert_eq!(status, 200);
    assert_eq!(listing["files"], folder_listing["files"], "files as of a checkout");
    assert_eq!(listing["skipped"], folder_listing["skipped"], "skipped as of a checkout");
}

/// `GET /skills` names, per source in precedence order (`--dir a --git U --dir b`), its label,
/// kind and commit (`git rev-parse`); a local path serves as a URL, and the folder before it
/// shadows its skill. Without `--webhook-secret-file` there is no hook route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_name_the_commit_in_precedence_order() {
    let dir = tempfile::tempdir().expect("temp");
    let base = dir.path().join("served");
    let mut repo = Repo::create(&dir.path().join("work"), &base, "skills.git");
    write_file(&repo.work.join("shared/SKILL.md"), skill_md(None, "From git.", "G").as_bytes(), 0o644);
    write_file(&repo.work.join("only-git/SKILL.md"), skill_md(None, "Only in git.", "G").as_bytes(), 0o644);
    let commit = repo.commit_and_push("git skills");
    assert_eq!(commit, git(&repo.bare, &["rev-parse", "HEAD"]));
    let first = dir.path().join("first");
    write_file(&first.join("shared/SKILL.md"), skill_md(None, "From the first folder.", "F").as_bytes(), 0o644);
    let last = dir.path().join("last");
    write_file(&last.join("only-last/SKILL.md"), skill_md(None, "Only last.", "L").as_bytes(), 0o644);
    let (first_label, last_label, url) =
        (first.to_str().unwrap().to_owned(), last.to_str().unwrap().to_owned(), path_url(&repo.bare));
    let server = serve(&[
        s("--no-builtin"),
        s("--state-dir"),
        s(dir.path().join("state").to_str().unwrap()),
        s("--dir"),
        first_label.clone(),
        s("--git"),
        url.clone(),
        s("--dir"),
        last_label.clone(),
    ]);
    let client = client();
    let listing = wait_commits(&client, &server, &[(1, commit.as_str())]).await;
    assert_eq!(
        sources_of(&listing),
        vec![
            json!({"label": first_label, "kind": "directory", "commit": null}),
            json!({"label": url, "kind": "git", "commit": commit}),
            json!({"label": last_label, "kind": "directory", "commit": null}),
        ]
    );
    let text = client.get(server.url("/skills")).send().await.unwrap().text().await.unwrap();
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap_or_else(|| panic!("{key} in {text}"));
    assert!(
        ["skills", "shadowed", "diagnostics"].iter().all(|key| at(key) < at("sources")),
        "sources come after the nagents fields: {text}"
    );
    let owners: Vec<(String, String)> = listing["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|skill| (skill["name"].as_str().unwrap().to_owned(), skill["source"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        owners,
        vec![(s("only-git"), url.clone()), (s("only-last"), last_label.clone()), (s("shared"), first_label.clone())]
    );
    assert_eq!(
        listing["shadowed"],
        json!([{"name": "shared", "location": format!("{url}#shared/SKILL.md"), "source": url}])
    );
    let (status, _, _) = hook(&client, &server, &[("authorization", format!("Bearer {SECRET}"))], b"").await;
    assert_eq!(status, 404, "no hook route without --webhook-secret-file");
}
