//! `skillcat-client` against a real server on port 0: the remote discoverer agrees with the local
//! ones on the same tree, follows changes (at once in watch mode), refuses stale descriptors,
//! survives a server restart, reports a failed source as an error, sends its token without
//! showing it, and composes with local sources. The folder of a skill: listed, read and
//! downloaded (by the crate and by `skillcat download`) byte for byte, modes included, and
//! nothing written for a stale descriptor or over an existing folder unless asked.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skillcat::catalog::LiveOptions;
use skillcat::config::SourceConfig;
use skillcat::sources::BuiltinSkills;
use skillcat_client::{BearerToken, ClientError, RemoteSkillDiscoverer, RetryPolicy};
use skillcat_core::{
    BuiltinSkillDiscoverer, CompositeSkillDiscoverer, Digest, DirectorySkillDiscoverer, Skill, SkillDiscoverer,
    SkillError, TokenLimit, budget_skill_content,
};

use crate::support::files::write_file;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

/// A tree with three skills, one of them not ASCII, and two files its source skips.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write_skill(&root.join("alpha"), &skill_md("alpha", "The first skill", "# Alpha\n\nDo the alpha thing."));
    write_skill(
        &root.join("beta"),
        &skill_md("beta", "Zweite Fähigkeit — <markup> & more", &"Beta ✓ body. ".repeat(50)),
    );
    write_skill(&root.join("nested/gamma"), "# Gamma without frontmatter\n");
    write_skill(&root.join("broken"), "---\nname: not a valid name\ndescription: x\n---\n");
    std::fs::create_dir_all(root.join("binary")).unwrap();
    std::fs::write(root.join("binary/SKILL.md"), b"\xff\xfe not UTF-8").unwrap();
    dir
}

/// A discoverer in conditional mode that gives up at once (tests that expect an error need no
/// retries).
fn conditional(app: &TestApp) -> RemoteSkillDiscoverer {
    RemoteSkillDiscoverer::builder(app.url("")).retry_policy(RetryPolicy::none()).build().expect("a discoverer")
}

fn watching(app: &TestApp) -> RemoteSkillDiscoverer {
    let policy = RetryPolicy::new(3, Duration::from_millis(20), Duration::from_millis(200));
    RemoteSkillDiscoverer::builder(app.url("")).retry_policy(policy).watch(true).build().expect("a discoverer")
}

fn names(skills: &[Skill]) -> Vec<&str> {
    skills.iter().map(|skill| skill.name().as_str()).collect()
}

fn find<'a>(skills: &'a [Skill], name: &str) -> &'a Skill {
    skills.iter().find(|skill| skill.name().as_str() == name).unwrap_or_else(|| panic!("no {name}"))
}

/// How many `GET /skills` the server answered with `status`.
async fn catalog_requests(app: &TestApp, status: u16) -> u64 {
    app.requests("/skills", status).await
}

/// The client's own error inside a trait method's error.
fn client_error(error: &SkillError) -> &ClientError {
    match error {
        SkillError::Source(source) => source.downcast_ref::<ClientError>().expect("a ClientError"),
        other => panic!("not a source error: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Agreement with the local discoverers

#[tokio::test]
async fn remote_discovery_and_loads_equal_the_local_discoverers_on_the_same_tree() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let local = DirectorySkillDiscoverer::new([dir.path()]).expect("a local discoverer");

    let (remote_scan, local_scan) = (remote.scan().await.expect("remote scan"), local.scan().await.expect("scan"));
    // The same descriptors and diagnostics; only a local scan knows the contents' versions.
    assert_eq!((&remote_scan.skills, &remote_scan.diagnostics), (&local_scan.skills, &local_scan.diagnostics));
    assert!(remote_scan.versions.is_empty() && local_scan.versions.len() == local_scan.skills.len());
    assert_eq!(names(&remote_scan.skills), ["alpha", "beta", "gamma"]);
    assert_eq!(remote_scan.diagnostics.len(), 2, "{:?}", remote_scan.diagnostics);
    assert_eq!(remote.discover().await.unwrap(), local.discover().await.unwrap());
    // Where each diagnostic comes from is in the full catalog.
    let catalog = remote.catalog().await.unwrap();
    let label = dir.path().to_str().unwrap();
    assert!(catalog.diagnostics().iter().all(|diagnostic| diagnostic.source == label), "{:?}", catalog.diagnostics());
    assert!(catalog.entries().iter().all(|entry| entry.source == label && entry.etag.starts_with('"')));

    for skill in &remote_scan.skills {
        let content = local.load(skill).await.expect("local load");
        assert_eq!(remote.load(skill).await.expect("remote load"), content, "{}", skill.name());
        for limit in [1, 7, 100, 10_000] {
            let limit = TokenLimit::new(limit).unwrap();
            let budgeted = remote.load_budgeted(skill, limit).await.expect("a budgeted load");
            assert_eq!(budgeted, budget_skill_content(skill, &content, limit), "{} at {limit:?}", skill.name());
        }
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_of_several_sources_equals_their_local_composite() {
    let (first, second) = (tree(), tempfile::tempdir().unwrap());
    write_skill(&second.path().join("alpha"), &skill_md("alpha", "Shadowed by the first source", "Second alpha"));
    write_skill(&second.path().join("delta"), &skill_md("delta", "Only in the second source", "Delta"));
    let sources = vec![
        SourceConfig::directory(first.path()),
        SourceConfig::directory(second.path()),
        SourceConfig::Builtin { name: None },
    ];
    let app = TestApp::spawn(sources).await;
    let remote = conditional(&app);
    let local = CompositeSkillDiscoverer::new([
        Arc::new(DirectorySkillDiscoverer::new([first.path()]).unwrap()) as Arc<dyn SkillDiscoverer>,
        Arc::new(DirectorySkillDiscoverer::new([second.path()]).unwrap()),
        Arc::new(BuiltinSkillDiscoverer::<BuiltinSkills>::new()),
    ]);
    let (remote_scan, local_scan) = (remote.scan().await.unwrap(), local.scan().await.unwrap());
    // The same descriptors and diagnostics; only a local scan knows the contents' versions.
    assert_eq!((&remote_scan.skills, &remote_scan.diagnostics), (&local_scan.skills, &local_scan.diagnostics));
    assert!(remote_scan.versions.is_empty() && local_scan.versions.len() == local_scan.skills.len());
    assert!(remote_scan.skills.len() > 4, "builtin skills are listed too: {:?}", names(&remote_scan.skills));
    assert_eq!(find(&remote_scan.skills, "alpha").description(), "The first skill");
    let catalog = remote.catalog().await.unwrap();
    let shadowed: Vec<_> = catalog.shadowed().iter().map(|entry| entry.name.as_str()).collect();
    assert_eq!(shadowed, ["alpha"]);
    for skill in &remote_scan.skills {
        assert_eq!(remote.load(skill).await.unwrap(), local.load(skill).await.unwrap(), "{}", skill.name());
    }
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Conditional discovery and changes

#[tokio::test]
async fn discovery_is_conditional_and_sees_a_change_at_the_next_call() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let first = remote.catalog().await.unwrap();
    let second = remote.catalog().await.unwrap();
    assert!(Arc::ptr_eq(&first, &second), "a 304 answers the catalog already parsed");
    assert_eq!((catalog_requests(&app, 200).await, catalog_requests(&app, 304).await), (1, 1));

    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill, edited", "# Alpha v2"));
    app.wait_for_catalog(|body| body["skills"][0]["description"] == "The first skill, edited").await;
    let skills = remote.discover().await.unwrap();
    assert_eq!(find(&skills, "alpha").description(), "The first skill, edited");
    assert_eq!(
        remote.load(find(&skills, "alpha")).await.unwrap(),
        "---\nname: alpha\ndescription: The first skill, edited\n---\n# Alpha v2\n"
    );
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_mode_answers_from_memory_and_sees_a_change_promptly() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = watching(&app);
    assert!(!remote.is_live(), "nothing is vouched for before the first discovery");
    let before = remote.discover().await.unwrap();
    eventually("the event stream vouches for the catalog", || async { remote.is_live() }).await;
    assert_eq!(app.metric("skillcat_sse_clients").await, 1);

    let requests = catalog_requests(&app, 200).await + catalog_requests(&app, 304).await;
    for _ in 0..200 {
        assert_eq!(remote.discover().await.unwrap(), before);
    }
    let after = catalog_requests(&app, 200).await + catalog_requests(&app, 304).await;
    assert_eq!(after, requests, "while the stream is up and quiet, discovery sends no request");

    write_skill(&dir.path().join("epsilon"), &skill_md("epsilon", "Added while watching", "Epsilon"));
    let seen = eventually("the new skill", || async {
        remote.discover().await.unwrap().iter().any(|skill| skill.name().as_str() == "epsilon")
    })
    .await;
    assert!(seen < Duration::from_secs(2), "a change is seen promptly in watch mode, not after {seen:?}");
    eventually("the stream vouches for the new catalog", || async { remote.is_live() }).await;
    let skills = remote.discover().await.unwrap();
    assert_eq!(
        remote.load(find(&skills, "epsilon")).await.unwrap(),
        skill_md("epsilon", "Added while watching", "Epsilon")
    );
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_watching_discoverer_ends_its_event_stream() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = watching(&app);
    remote.discover().await.unwrap();
    eventually("the stream is up", || async { remote.is_live() }).await;
    assert_eq!(app.metric("skillcat_sse_clients").await, 1);
    drop(remote);
    eventually("the server sees the stream closed", || async { app.metric("skillcat_sse_clients").await == 0 }).await;
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Stale descriptors

/// Checks the trait's and the inherent method's error for a stale descriptor.
async fn assert_stale(remote: &RemoteSkillDiscoverer, skill: &Skill, status: Option<u16>) {
    let error = remote.load(skill).await.expect_err("a stale descriptor is refused");
    assert!(error.is_stale(), "{error:?}");
    assert!(error.to_string().contains("refresh discovery"), "{error}");
    let error = remote.content(skill).await.expect_err("refused");
    assert!(error.is_stale(), "{error:?}");
    assert_eq!(error.status().map(|status| status.as_u16()), status, "{error:?}");
    let error = remote.load_budgeted(skill, TokenLimit::DEFAULT).await.expect_err("refused");
    assert!(error.is_stale(), "{error:?}");
}

#[tokio::test]
async fn a_stale_descriptor_gives_the_stale_error() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let old = remote.discover().await.unwrap();

    // Edited: the skill's tag moved on (412). Removed: the skill is gone (404).
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "# Alpha v2"));
    std::fs::remove_dir_all(dir.path().join("nested")).unwrap();
    app.wait_for_catalog(|body| body["skills"].as_array().unwrap().len() == 2).await;
    let error = remote.load(find(&old, "alpha")).await.unwrap_err();
    assert!(matches!(error, SkillError::Changed { ref name } if name.as_str() == "alpha"), "{error:?}");
    assert_eq!(error.to_string(), "Skill 'alpha' changed; refresh discovery and retry");
    assert_stale(&remote, find(&old, "alpha"), Some(412)).await;
    assert_stale(&remote, find(&old, "gamma"), Some(404)).await;
    // An unchanged skill still loads with the old catalog.
    assert!(remote.load(find(&old, "beta")).await.unwrap().contains("Beta ✓ body."));

    // After discovering again the skill loads; the vanished one is not listed.
    let skills = remote.discover().await.unwrap();
    assert_eq!(names(&skills), ["alpha", "beta"]);
    assert!(remote.load(find(&skills, "alpha")).await.unwrap().ends_with("# Alpha v2\n"));
    // A descriptor this discoverer never listed is refused without asking.
    let foreign = Skill::new("alpha", "The first skill", "/elsewhere/alpha/SKILL.md").unwrap();
    let error = remote.load(&foreign).await.unwrap_err();
    assert!(matches!(error, SkillError::NotInCatalog { .. }), "{error:?}");
    assert_stale(&remote, &foreign, None).await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_file_changed_before_the_server_rescanned_gives_the_stale_error() {
    let dir = tree();
    // No watcher and no periodic rescan: the server's catalog lags the file.
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| {
        options.live = LiveOptions { rescan_interval: None, watch: false };
    })
    .await;
    let remote = conditional(&app);
    let skills = remote.discover().await.unwrap();
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "# Alpha, edited behind the catalog"));
    assert_stale(&remote, find(&skills, "alpha"), Some(409)).await;
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Failures

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_restarting_mid_session_is_recovered_from() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let address: SocketAddr = app.address;
    let plain = conditional(&app);
    let watch = watching(&app);
    let skills = plain.discover().await.unwrap();
    watch.discover().await.unwrap();
    eventually("the stream is up", || async { watch.is_live() }).await;

    app.shutdown().await.unwrap();
    eventually("the watcher notices the stream ended", || async { !watch.is_live() }).await;
    let error = plain.discover().await.expect_err("nothing listens");
    assert!(matches!(client_error(&error), ClientError::Transport(_)), "{error:?}");
    assert!(watch.discover().await.is_err(), "with the stream down, a discovery asks the server");

    // The tree changes while the server is down; a new server comes up on the same address.
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "Changed during the restart", "# Alpha v2"));
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], |options| options.listen = address).await;
    let error = plain.load(find(&skills, "alpha")).await.expect_err("the old descriptor is stale");
    assert!(error.is_stale(), "{error:?}");
    let skills = plain.discover().await.unwrap();
    assert_eq!(find(&skills, "alpha").description(), "Changed during the restart");
    assert!(plain.load(find(&skills, "alpha")).await.unwrap().ends_with("# Alpha v2\n"));

    let skills = watch.discover().await.unwrap();
    assert_eq!(find(&skills, "alpha").description(), "Changed during the restart");
    eventually("the watcher reconnects and vouches again", || async { watch.is_live() }).await;
    write_skill(&dir.path().join("zeta"), &skill_md("zeta", "After the restart", "Zeta"));
    eventually("a change after the restart", || async {
        watch.discover().await.unwrap().iter().any(|skill| skill.name().as_str() == "zeta")
    })
    .await;
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_from_a_failed_source_is_an_error_never_an_empty_catalog() {
    // The server starts on a tree whose source fails: there is no good catalog to serve.
    let dir = tree();
    write_skill(&dir.path().join("zz-alpha"), &skill_md("alpha", "A duplicate", "Again"));
    let app = TestApp::spawn_dir(dir.path()).await;
    let (plain, watch) = (conditional(&app), watching(&app));
    let error = plain.discover().await.expect_err("a failed source is an error");
    let ClientError::Unavailable(problem) = client_error(&error) else { panic!("{error:?}") };
    assert_eq!(problem.skillcat_kind(), Some("catalog-unavailable"));
    assert!(problem.detail.starts_with("Duplicate skill name 'alpha' at "), "{problem:?}");
    assert!(error.to_string().contains(&problem.detail), "{error}");
    assert!(plain.scan().await.is_err());
    let error = watch.discover().await.expect_err("a failed source is an error in watch mode too");
    assert!(matches!(client_error(&error), ClientError::Unavailable(_)), "{error:?}");
    assert!(!watch.is_live(), "a watcher never vouches for an unavailable catalog");

    // The server asks for a retry after a second; a policy that allows it waits that second.
    let patient = RemoteSkillDiscoverer::builder(app.url(""))
        .retry_policy(RetryPolicy::new(1, Duration::from_millis(10), Duration::from_secs(2)))
        .build()
        .unwrap();
    let refused = catalog_requests(&app, 503).await;
    let started = Instant::now();
    patient.discover().await.expect_err("still failed after the retry");
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After: 1 honoured: {:?}", started.elapsed());
    assert_eq!(catalog_requests(&app, 503).await - refused, 2, "one request and one retry");

    // Repaired: both find the catalog.
    std::fs::remove_dir_all(dir.path().join("zz-alpha")).unwrap();
    eventually("the plain discoverer recovers", || async {
        plain.discover().await.is_ok_and(|skills| skills.len() == 3)
    })
    .await;
    eventually("the watcher recovers", || async { watch.discover().await.is_ok_and(|skills| skills.len() == 3) }).await;
    eventually("the stream is up", || async { watch.is_live() }).await;
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_good_catalog_a_failed_source_keeps_it_and_says_why() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let (plain, watch) = (conditional(&app), watching(&app));
    assert_eq!(plain.discover().await.unwrap().len(), 3);
    watch.discover().await.unwrap();
    eventually("the stream is up", || async { watch.is_live() }).await;
    assert_eq!(plain.catalog().await.unwrap().error(), None);

    // A second skill named alpha in the same source fails the scan; the server keeps its last
    // good catalog, and both discoverers keep returning it, with the failure for those who ask.
    write_skill(&dir.path().join("zz-alpha"), &skill_md("alpha", "A duplicate", "Again"));
    for discoverer in [&plain, &watch] {
        eventually("the failure is reported", || async {
            discoverer.catalog().await.is_ok_and(|catalog| catalog.error().is_some())
        })
        .await;
        assert_eq!(discoverer.discover().await.unwrap().len(), 3);
        let catalog = discoverer.catalog().await.unwrap();
        let failure = catalog.error().unwrap();
        assert!(failure.message.starts_with("Duplicate skill name 'alpha' at "), "{failure:?}");
        assert!(failure.message.contains("(the other is at "), "{failure:?}");
    }
    let alpha = plain.discover().await.unwrap().into_iter().find(|skill| skill.name().as_str() == "alpha").unwrap();
    assert!(plain.load(&alpha).await.unwrap().contains("Do the alpha thing."), "loads are served too");

    // Repaired: the failure clears by itself.
    std::fs::remove_dir_all(dir.path().join("zz-alpha")).unwrap();
    for discoverer in [&plain, &watch] {
        eventually("the failure clears", || async {
            discoverer.catalog().await.is_ok_and(|catalog| catalog.error().is_none())
        })
        .await;
    }
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// The bearer token

/// A stand-in server that records each request's head: `/skills` gets a one-skill catalog,
/// `/events` one event, anything else a 401 problem. Plain threads and blocking sockets: it
/// lives until the test process ends, one connection at a time.
struct Recorder {
    address: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let heads = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&heads);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                Recorder::answer(stream, &recorded);
            }
        });
        Recorder { address, heads }
    }

    fn answer(mut stream: std::net::TcpStream, recorded: &Mutex<Vec<String>>) {
        use std::io::{Read as _, Write as _};
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut head = Vec::new();
        let mut buffer = [0u8; 1024];
        while !head.windows(4).any(|window| window == b"\r\n\r\n") {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(read) => head.extend_from_slice(&buffer[..read]),
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        recorded.lock().unwrap().push(head.clone());
        let (status, content_type, body) = if head.starts_with("GET /skills ") {
            let skill = serde_json::json!({"name": "alpha", "description": "d", "location": "/srv/alpha/SKILL.md",
                "source": "/srv", "etag": "\"a1\""});
            let catalog = serde_json::json!({"etag": "\"c1\"", "skills": [skill], "shadowed": [], "diagnostics": []});
            ("200 OK", "application/json", catalog.to_string())
        } else if head.starts_with("GET /events ") {
            ("200 OK", "text/event-stream", "event: catalog\ndata: {\"etag\":\"\\\"c1\\\"\"}\n\n".to_owned())
        } else {
            let problem = r#"{"type":"urn:skillcat:problem:unauthorized","title":"Unauthorized","status":401,"detail":"a valid bearer token is required"}"#;
            ("401 Unauthorized", "application/problem+json", problem.to_owned())
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\netag: \"c1\"\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes());
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The `Authorization` values of the recorded requests whose request line starts with `start`.
    fn authorizations(&self, start: &str) -> Vec<Option<String>> {
        let heads = self.heads.lock().unwrap();
        let matching = heads.iter().filter(|head| head.starts_with(start));
        matching
            .map(|head| {
                head.lines()
                    .filter_map(|line| line.split_once(':'))
                    .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
                    .map(|(_, value)| value.trim().to_owned())
            })
            .collect()
    }
}

#[tokio::test]
async fn the_token_is_sent_when_configured_and_never_shown() {
    const SECRET: &str = "s3cr3t-Token_42";
    let recorder = Recorder::start();
    let token = BearerToken::new(SECRET).unwrap();
    assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
    let builder = RemoteSkillDiscoverer::builder(recorder.url()).bearer_token(token).retry_policy(RetryPolicy::none());
    assert!(!format!("{builder:?}").contains(SECRET), "{builder:?}");
    let with_token = builder.clone().build().unwrap();
    let skills = with_token.discover().await.unwrap();
    assert_eq!(recorder.authorizations("GET /skills "), [Some(format!("Bearer {SECRET}"))]);
    let error = with_token.content(&skills[0]).await.unwrap_err();
    assert!(matches!(error, ClientError::Unauthorized(ref problem) if problem.status == 401), "{error:?}");
    assert_eq!(recorder.authorizations("GET /skills/alpha/content "), [Some(format!("Bearer {SECRET}"))]);
    let mut shown = format!("{with_token:?} {error} {error:?}");
    shown.push_str(&format!("{:?}", SkillError::from(error)));
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");

    // The watch mode's event stream carries it too.
    let watch = builder.watch(true).build().unwrap();
    watch.discover().await.unwrap();
    eventually("the event stream is opened", || async { !recorder.authorizations("GET /events ").is_empty() }).await;
    assert_eq!(recorder.authorizations("GET /events ")[0], Some(format!("Bearer {SECRET}")));
    assert!(!format!("{watch:?}").contains(SECRET));

    // Without a token, no Authorization header at all.
    let recorder = Recorder::start();
    let without = RemoteSkillDiscoverer::new(recorder.url()).unwrap();
    without.discover().await.unwrap();
    assert_eq!(recorder.authorizations("GET /skills "), [None]);
    assert!(format!("{without:?}").contains("token: None"), "{without:?}");
}

#[tokio::test]
async fn a_token_is_accepted_by_a_server_without_authentication() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote =
        RemoteSkillDiscoverer::builder(app.url("")).bearer_token(BearerToken::new("any").unwrap()).build().unwrap();
    assert_eq!(remote.discover().await.unwrap().len(), 3);
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Composition with local sources

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composite_of_remote_and_local_sources_gives_the_first_source_precedence() {
    let (served, mine) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_skill(&served.path().join("alpha"), &skill_md("alpha", "Remote alpha", "Remote alpha body"));
    write_skill(&served.path().join("shared"), &skill_md("shared", "Remote shared", "Remote shared body"));
    write_skill(&mine.path().join("shared"), &skill_md("shared", "Local shared", "Local shared body"));
    write_skill(&mine.path().join("mine"), &skill_md("mine", "Local only", "Local only body"));
    let app = TestApp::spawn_dir(served.path()).await;

    for watch in [false, true] {
        let remote: Arc<dyn SkillDiscoverer> = Arc::new(if watch { watching(&app) } else { conditional(&app) });
        let local: Arc<dyn SkillDiscoverer> = Arc::new(DirectorySkillDiscoverer::new([mine.path()]).unwrap());

        let remote_first = CompositeSkillDiscoverer::new([Arc::clone(&remote), Arc::clone(&local)]);
        let discovery = remote_first.scan_sources().await.unwrap();
        let owners: Vec<_> = discovery.skills.iter().map(|entry| (entry.skill.name().as_str(), entry.source)).collect();
        assert_eq!(owners, [("alpha", 0), ("mine", 1), ("shared", 0)]);
        assert_eq!(discovery.shadowed.len(), 1);
        assert_eq!(discovery.shadowed[0].skill.description(), "Local shared");
        let skills: Vec<Skill> = discovery.skills.into_iter().map(|entry| entry.skill).collect();
        assert!(remote_first.load(find(&skills, "shared")).await.unwrap().contains("Remote shared body"));
        assert!(remote_first.load(find(&skills, "mine")).await.unwrap().contains("Local only body"));
        assert!(remote_first.load(find(&skills, "alpha")).await.unwrap().contains("Remote alpha body"));

        let local_first = CompositeSkillDiscoverer::new([Arc::clone(&local), Arc::clone(&remote)]);
        let skills = local_first.discover().await.unwrap();
        assert_eq!(find(&skills, "shared").description(), "Local shared");
        assert!(local_first.load(find(&skills, "shared")).await.unwrap().contains("Local shared body"));
        assert!(local_first.load(find(&skills, "alpha")).await.unwrap().contains("Remote alpha body"));
    }

    // A remote skill that changed on the server is stale through the composite too.
    let remote: Arc<dyn SkillDiscoverer> = Arc::new(conditional(&app));
    let local: Arc<dyn SkillDiscoverer> = Arc::new(DirectorySkillDiscoverer::new([mine.path()]).unwrap());
    let composite = CompositeSkillDiscoverer::new([remote, local]);
    let old = composite.discover().await.unwrap();
    write_skill(&served.path().join("alpha"), &skill_md("alpha", "Remote alpha", "Remote alpha body v2"));
    eventually("the server serves the new alpha", || async {
        app.content("alpha").await.text().await.is_ok_and(|text| text.contains("v2"))
    })
    .await;
    let error = composite.load(find(&old, "alpha")).await.unwrap_err();
    assert!(error.is_stale(), "{error:?}");
    let skills = composite.discover().await.unwrap();
    assert!(composite.load(find(&skills, "alpha")).await.unwrap().contains("Remote alpha body v2"));
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Files of a skill: listing, verified reads, downloads

/// A skill folder like the public collections' (scripts, references, assets; an executable, a
/// binary, an empty file, a name with a space and non-ASCII), with what is never served beside
/// it: hidden names and a symlink. Modes as git checks them out, whatever the umask.
fn folder_skill() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let skill = dir.path().join("toolbox");
    write_skill(&skill, &skill_md("toolbox", "A skill with supporting files", "Run scripts/run.sh."));
    let guide = "text ✓ ".repeat(3000);
    let files: [(&str, &[u8], u32); 6] = [
        ("scripts/run.sh", b"#!/bin/sh\necho hi\n", 0o755),
        ("scripts/helper.py", b"print('help')\n", 0o644),
        ("references/guide.md", guide.as_bytes(), 0o644),
        ("assets/logo.bin", &[0, 1, 2, 255, 254, 0, 10, 13], 0o644),
        ("assets/empty.txt", b"", 0o644),
        ("docs/a folder/ü n i.txt", b"unicode and spaces\n", 0o644),
    ];
    for (path, bytes, mode) in files {
        write_file(&skill.join(path), bytes, mode);
    }
    for folder in ["", "scripts", "references", "assets", "docs", "docs/a folder"] {
        std::fs::set_permissions(skill.join(folder), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(skill.join("SKILL.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(skill.join(".env"), "SECRET=1\n").unwrap();
    std::fs::create_dir(skill.join(".git")).unwrap();
    std::fs::write(skill.join(".git/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", skill.join("passwd-link")).unwrap();
    dir
}

/// What is beneath `root`: relative path => (mode, bytes) for files, (mode, None) for folders,
/// symlinks not followed (and `u32::MAX` as their mode). Two folders are equal, byte for byte and
/// modes included, exactly when these are. With `served`, what a server serves: no hidden names,
/// no symlinks.
fn snapshot(root: &std::path::Path, served: bool) -> std::collections::BTreeMap<String, (u32, Option<Vec<u8>>)> {
    use std::os::unix::fs::MetadataExt as _;
    fn walk(
        folder: &std::path::Path,
        prefix: &str,
        served: bool,
        out: &mut std::collections::BTreeMap<String, (u32, Option<Vec<u8>>)>,
    ) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let (path, relative) = (entry.path(), format!("{prefix}{name}"));
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if served && (name.starts_with('.') || meta.is_symlink()) {
                continue;
            }
            let mode = meta.mode() & 0o7777;
            if meta.is_symlink() {
                out.insert(relative, (u32::MAX, Some(std::fs::read_link(&path).unwrap().into_os_string().into_vec())));
            } else if meta.is_dir() {
                out.insert(relative.clone(), (mode, None));
                walk(&path, &format!("{relative}/"), served, out);
            } else {
                out.insert(relative, (mode, Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    use std::os::unix::ffi::OsStringExt as _;
    let mut out = std::collections::BTreeMap::new();
    walk(root, "", served, &mut out);
    out
}

#[tokio::test]
async fn a_download_equals_the_source_folder_byte_for_byte_modes_included() {
    let dir = folder_skill();
    let source = dir.path().join("toolbox");
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let skills = remote.discover().await.unwrap();
    let toolbox = find(&skills, "toolbox");

    let listing = remote.files(toolbox).await.unwrap();
    let served = snapshot(&source, true);
    let local: Vec<(&String, &Vec<u8>)> =
        served.iter().filter_map(|(path, (_, bytes))| bytes.as_ref().map(|bytes| (path, bytes))).collect();
    let listed: Vec<&str> = listing.files().iter().map(|file| file.path.as_str()).collect();
    assert_eq!(listed, local.iter().map(|(path, _)| path.as_str()).collect::<Vec<_>>());
    for (file, (_, bytes)) in listing.files().iter().zip(&local) {
        assert_eq!((file.size, file.digest), (bytes.len() as u64, Digest::of(bytes)), "{}", file.path);
        assert_eq!(file.executable, file.path.as_str() == "scripts/run.sh");
        assert_eq!(&remote.read_file(toolbox, file).await.unwrap(), *bytes, "{}", file.path);
    }
    let skipped: Vec<&str> = listing.skipped().iter().map(|entry| entry.path.as_str()).collect();
    assert_eq!(skipped, ["passwd-link"]);
    assert_eq!(listing.etag(), remote.catalog().await.unwrap().get("toolbox").unwrap().etag);

    let into = tempfile::tempdir().unwrap();
    let target = into.path().join("toolbox");
    let done = remote.download(toolbox, &target, false).await.unwrap();
    assert_eq!((done.files, done.bytes, done.replaced), (7, listing.total_size(), false));
    assert_eq!(snapshot(&target, false), served);
    assert_eq!(snapshot(into.path(), false).keys().filter(|path| !path.contains('/')).count(), 1, "nothing beside it");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stale_descriptor_lists_reads_and_downloads_nothing() {
    let dir = folder_skill();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let old = remote.discover().await.unwrap();
    let listing = remote.files(find(&old, "toolbox")).await.unwrap();
    let before = app.catalog_etag().await;
    // A supporting file changes: the skill's tag moves on although SKILL.md did not change.
    std::fs::write(dir.path().join("toolbox/references/guide.md"), "# Changed\n").unwrap();
    app.wait_for_catalog(|body| body["etag"] != before.as_str()).await;

    let into = tempfile::tempdir().unwrap();
    let target = into.path().join("toolbox");
    let stale = find(&old, "toolbox");
    let error = remote.files(stale).await.unwrap_err();
    assert!(matches!(&error, ClientError::Stale { problem, .. } if problem.status == 412), "{error:?}");
    let error = remote.download(stale, &target, false).await.unwrap_err();
    assert!(error.is_stale() && error.to_string().contains("refresh discovery and retry"), "{error}");
    let guide = listing.files().iter().find(|file| file.path.as_str() == "references/guide.md").unwrap();
    let error = remote.read_file(stale, guide).await.unwrap_err();
    assert!(matches!(&error, ClientError::Stale { problem, .. } if problem.status == 412), "{error:?}");
    assert!(snapshot(into.path(), false).is_empty(), "nothing written");

    let fresh = remote.discover().await.unwrap();
    remote.download(find(&fresh, "toolbox"), &target, false).await.unwrap();
    assert_eq!(std::fs::read(target.join("references/guide.md")).unwrap(), b"# Changed\n");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_existing_target_is_refused_unless_replace_and_then_swapped_in() {
    let dir = folder_skill();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let skills = remote.discover().await.unwrap();
    let toolbox = find(&skills, "toolbox");
    let into = tempfile::tempdir().unwrap();
    let target = into.path().join("toolbox");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("mine.txt"), "my own notes").unwrap();
    let before = snapshot(into.path(), false);

    let error = remote.download(toolbox, &target, false).await.unwrap_err();
    assert!(matches!(error, ClientError::TargetExists { folder: true, .. }), "{error:?}");
    assert_eq!(snapshot(into.path(), false), before);
    let done = remote.download(toolbox, &target, true).await.unwrap();
    assert!(done.replaced && done.leftover.is_none(), "{done:?}");
    assert_eq!(snapshot(&target, false), snapshot(&dir.path().join("toolbox"), true));
    assert_eq!(std::fs::read_dir(into.path()).unwrap().count(), 1, "the old folder is gone");
    app.shutdown().await.unwrap();
}

/// Runs `skillcat` with `args` in `cwd`, off the runtime that serves the test's server.
async fn skillcat(args: Vec<String>, cwd: &std::path::Path) -> std::process::Output {
    let cwd = cwd.to_owned();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_skillcat"))
            .args(&args)
            .current_dir(cwd)
            .env_remove("SKILLCAT_URL")
            .output()
            .expect("run skillcat")
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_download_command_writes_the_folder_into_agents_skills_and_replaces_only_when_asked() {
    let dir = folder_skill();
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), "agent-token\n").unwrap();
    let token_path = tokens.path().to_owned();
    let app = TestApp::spawn_dir_with(dir.path(), |options| options.token_file = Some(token_path)).await;
    let project = tempfile::tempdir().unwrap();
    let token_file = project.path().join("token");
    std::fs::write(&token_file, "# for skillcat\nagent-token\n").unwrap();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args =
            vec!["download", "toolbox", "--from", &app.url("")].into_iter().map(String::from).collect::<Vec<_>>();
        args.extend(extra.iter().map(|arg| arg.to_string()));
        args
    };
    let token = ["--token-file", token_file.to_str().unwrap()];

    let output = skillcat(args(&token), project.path()).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let target = project.path().join(".agents/skills/toolbox");
    assert!(stdout.starts_with("downloaded skill 'toolbox' (version \""), "{stdout}");
    assert!(stdout.contains("7 files") && stdout.trim_end().ends_with(".agents/skills/toolbox"), "{stdout}");
    assert_eq!(snapshot(&target, false), snapshot(&dir.path().join("toolbox"), true));
    // The README's recipe gives the installed folder's version, as the server states it.
    let entry: serde_json::Value =
        app.get("/skills/toolbox").bearer_auth("agent-token").send().await.unwrap().json().await.unwrap();
    assert!(entry["version"].as_str().is_some_and(|version| version.starts_with("sha256:")), "{entry}");
    assert_eq!(readme_version(&target), entry["version"].as_str().unwrap());

    // Again: refused, the folder untouched; with --replace: swapped in.
    std::fs::write(target.join("SKILL.md"), "edited locally").unwrap();
    let output = skillcat(args(&token), project.path()).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already exists") && stderr.contains("--replace"), "{stderr}");
    assert_eq!(std::fs::read_to_string(target.join("SKILL.md")).unwrap(), "edited locally");
    let output =
        skillcat(args(&[&token[..], &["--replace", "--into", ".agents/skills"]].concat()), project.path()).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("replacing the folder that was there"));
    assert_eq!(snapshot(&target, false), snapshot(&dir.path().join("toolbox"), true));

    // Without the token: the server's 401, nothing written; an unknown skill: said so.
    let elsewhere = project.path().join("elsewhere");
    let output = skillcat(args(&["--into", elsewhere.to_str().unwrap()]), project.path()).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("401"), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(std::fs::read_dir(&elsewhere).map_or(true, |mut entries| entries.next().is_none()));
    let mut unknown = args(&token);
    unknown[1] = "nope".into();
    let output = skillcat(unknown, project.path()).await;
    assert!(String::from_utf8_lossy(&output.stderr).contains("no skill named 'nope'"));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_over_the_file_bound_is_files_unavailable_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("crowded");
    write_skill(&skill, &skill_md("crowded", "More files than are served", "Body."));
    // SKILL.md and 512 more: one over the bound.
    for index in 0..512 {
        std::fs::write(skill.join(format!("f{index:03}.txt")), "x").unwrap();
    }
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = conditional(&app);
    let skills = remote.discover().await.unwrap();
    let crowded = find(&skills, "crowded");
    let error = remote.files(crowded).await.unwrap_err();
    let ClientError::FilesUnavailable { problem, .. } = &error else { panic!("{error:?}") };
    assert_eq!((problem.status, problem.skillcat_kind()), (422, Some("files-unavailable")));
    assert!(problem.detail.contains("512"), "{problem}");
    let into = tempfile::tempdir().unwrap();
    let error = remote.download(crowded, into.path().join("crowded"), false).await.unwrap_err();
    assert!(matches!(error, ClientError::FilesUnavailable { .. }), "{error:?}");
    assert!(snapshot(into.path(), false).is_empty());
    // Its SKILL.md is still served: the folder view never changes the nagents view.
    assert!(remote.load(crowded).await.unwrap().ends_with("Body.\n"));
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn search_answers_the_ranked_hits_and_refuses_bad_queries() {
    let dir = tree();
    let app = TestApp::spawn_dir(dir.path()).await;
    let remote = RemoteSkillDiscoverer::new(app.url("")).unwrap();
    let found = remote.search("alpha thing", None).await.expect("a search");
    assert_eq!(found.total, 1);
    let hit = &found.hits[0];
    assert_eq!(hit.name.as_str(), "alpha");
    assert_eq!(hit.description, "The first skill");
    assert_eq!(hit.etag, remote.catalog().await.unwrap().get("alpha").unwrap().etag);
    assert_eq!(hit.excerpt_text(), "# Alpha Do the alpha thing.");
    let highlighted: Vec<&str> =
        hit.excerpt.iter().filter(|part| part.highlight).map(|part| part.text.as_str()).collect();
    assert_eq!(highlighted, ["Alpha", "alpha", "thing"]);
    assert_eq!(found.etag, remote.catalog().await.unwrap().etag());
    // Two skills say "skill" (one in the fallback description); the limit cuts the hits only.
    let limited = remote.search("skill", Some(1)).await.unwrap();
    assert_eq!((limited.hits.len(), limited.total), (1, 2));
    assert_eq!(remote.search("  ", None).await.unwrap().total, 0, "a query without words matches nothing");
    let refused = remote.search(&"x".repeat(257), None).await.expect_err("a query too long");
    assert!(matches!(refused, ClientError::Rejected(_)), "{refused:?}");
    assert_eq!(refused.problem().unwrap().skillcat_kind(), Some("invalid-query"));
    assert!(matches!(remote.search("x", Some(0)).await, Err(ClientError::Config(_))));
    app.shutdown().await.unwrap();
}

/// The version of an installed skill folder, by the shell recipe the README gives.
fn readme_version(folder: &std::path::Path) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let (_, after) = readme.split_once("an\ninstalled copy gives the same digest:\n```sh\n").expect("the recipe");
    let (recipe, _) = after.split_once("```").expect("its end");
    let recipe = recipe.replacen("cd .agents/skills/skillcat-consuming && ", "", 1);
    let output = std::process::Command::new("sh").arg("-c").arg(&recipe).current_dir(folder).output().expect("sh");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}
