//! The catalog (`GET /skills`, `GET /skills/{name}`, `GET /manifest`): bodies and tags, gzip,
//! tags that agree across replicas, bodies equal to nagents' recorded results, a failed source.

use serde_json::{Value, json};
use skillcat::config::SourceConfig;

use super::conditional::assert_conditional_get;
use super::{assert_strong_etag, get, listed, post_load, root_of, serve_two_skills, two_skills};
use crate::support::conformance::{case_sources, case_tree, recorded, skill_triples};
use crate::support::events::Events;
use crate::support::http::Answer;
use crate::support::server::TestApp;
use crate::support::skills::write_skill;
use crate::support::wait::DEADLINE;

/// Checks a 200 of `content_type` that a cache must revalidate before reusing it (`no-cache`).
fn assert_200_no_cache(answer: &Answer, content_type: &str) {
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some(content_type));
    assert_eq!(answer.header("cache-control"), Some("no-cache"));
}

#[tokio::test]
async fn the_catalog_has_a_strong_etag_that_its_body_repeats() {
    let (dir, app) = serve_two_skills().await;
    let answer = Answer::from(app.skills().await).await;
    assert_200_no_cache(&answer, "application/json");
    let tag = answer.header("etag").expect("an ETag").to_owned();
    assert_strong_etag(&tag);
    let body = answer.json();
    assert_eq!(body["etag"], tag, "the body's etag is the header's");
    let root = root_of(&dir);
    assert_eq!(body["shadowed"], json!([]));
    assert_eq!(body["diagnostics"], json!([]));
    assert_eq!(body["sources"], json!([{"label": root, "kind": "directory", "commit": null}]));
    let skills = body["skills"].as_array().expect("skills");
    let names: Vec<&str> = skills.iter().map(|skill| skill["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["alpha", "beta"], "name order");
    assert_eq!(skills[1]["description"], "The second skill, with <markup> & more");
    assert_eq!(skills[0]["location"], format!("{root}/alpha/SKILL.md"));
    assert_eq!(skills[0]["source"], root, "a directory source is labelled with its root");
    for skill in skills {
        let fields: Vec<&String> = skill.as_object().expect("object").keys().collect();
        assert_eq!(fields.len(), 6, "{skill}");
        assert_strong_etag(skill["etag"].as_str().expect("etag"));
        let version = skill["version"].as_str().expect("a version");
        assert!(version.starts_with("sha256:") && version.len() == 71, "{skill}");
    }
    assert_ne!(skills[0]["etag"], skills[1]["etag"]);
    assert_conditional_get(&app, "/skills", &tag).await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn one_skill_is_its_entry_of_the_catalog() {
    let (_dir, app) = serve_two_skills().await;
    let entry = listed(&app, "beta").await;
    let answer = Answer::from(app.skill("beta").await).await;
    assert_200_no_cache(&answer, "application/json");
    assert_eq!(answer.json(), entry);
    let tag = entry["etag"].as_str().expect("etag");
    assert_eq!(answer.header("etag"), Some(tag));
    assert_conditional_get(&app, "/skills/beta", tag).await;
    get(&app, "/skills/not%20valid", &[]).await.problem(400, "invalid-name");
    let missing = get(&app, "/skills/gamma", &[]).await.problem(404, "skill-not-found");
    assert_eq!(missing["detail"], "no skill named 'gamma' in the catalog");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_manifest_is_plain_text_with_an_etag() {
    let (dir, app) = serve_two_skills().await;
    let root = root_of(&dir);
    let answer = Answer::from(app.manifest().await).await;
    assert_200_no_cache(&answer, "text/plain; charset=utf-8");
    let tag = answer.header("etag").expect("ETag").to_owned();
    assert_strong_etag(&tag);
    assert_ne!(Some(tag.as_str()), get(&app, "/skills", &[]).await.header("etag"));
    let manifest = answer.text();
    assert!(manifest.starts_with("Available skills: use skill(name)"), "{manifest}");
    assert!(
        manifest.contains(&format!(
            "<skill name=\"beta\" location=\"{root}/beta/SKILL.md\">The second skill, with &lt;markup&gt; &amp; more</skill>"
        )),
        "{manifest}"
    );
    assert!(manifest.ends_with("</available_skills>"), "{manifest}");
    assert_conditional_get(&app, "/manifest", &tag).await;
    app.shutdown().await.unwrap();
}

/// Every tag a server answers for the `two_skills` catalog.
async fn all_tags(app: &TestApp) -> Vec<String> {
    let mut tags = Vec::new();
    for path in ["/skills", "/manifest", "/skills/alpha", "/skills/beta", "/skills/alpha/content"] {
        let answer = get(app, path, &[]).await;
        assert_eq!(answer.status, 200);
        tags.push(answer.header("etag").expect("ETag").to_owned());
    }
    let listing = get(app, "/skills", &[]).await.json();
    tags.extend(listing["skills"].as_array().expect("skills").iter().map(|s| s["etag"].to_string()));
    tags
}

#[tokio::test]
async fn two_servers_on_the_same_files_give_the_same_tags() {
    let dir = two_skills();
    let first = TestApp::spawn_dir(dir.path()).await;
    let second = TestApp::spawn_dir(dir.path()).await;
    let (a, b) = (all_tags(&first).await, all_tags(&second).await);
    assert_eq!(a, b);
    assert_eq!(a[2], a[4], "the content's tag is the skill's");
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Compression

/// A directory source with `count` skills whose listing is well over 1 KiB.
pub(super) fn many_skills(count: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for index in 0..count {
        let name = format!("skill-{index:03}");
        let text = format!(
            "---\nname: {name}\ndescription: Skill number {index}, which explains how to do task {index} well\n---\nBody of {name}.\n"
        );
        write_skill(&dir.path().join(&name), &text);
    }
    dir
}

#[tokio::test]
async fn gzip_bodies_decompress_to_the_identity_bodies() {
    let dir = many_skills(30);
    let app = TestApp::spawn_dir(dir.path()).await;
    for path in ["/skills", "/manifest"] {
        let identity = get(&app, path, &[]).await;
        assert_eq!(identity.status, 200);
        assert!(identity.body.len() > 1024, "{path}: {} bytes", identity.body.len());
        assert_eq!(identity.header("content-encoding"), None);
        assert_eq!(identity.header("vary"), Some("accept-encoding"));

        let compressed = get(&app, path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(compressed.status, 200);
        assert_eq!(compressed.header("content-encoding"), Some("gzip"), "{path}");
        assert_eq!(compressed.header("vary"), Some("accept-encoding"));
        // Two representations, two strong tags: the identity tag with `-gzip` inside the quotes.
        let tag = identity.header("etag").expect("ETag");
        let gzip_tag = format!("{}-gzip\"", &tag[..tag.len() - 1]);
        assert_eq!(compressed.header("etag"), Some(gzip_tag.as_str()), "{path}");
        assert_strong_etag(&gzip_tag);
        assert_eq!(compressed.header("content-type"), identity.header("content-type"));
        assert!(compressed.body.len() < identity.body.len());
        let mut decoded = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&compressed.body[..]), &mut decoded)
            .expect("valid gzip");
        assert_eq!(decoded, identity.body, "{path}");

        // RFC 9110 12.5.3: an explicit weight of 0 refuses gzip even where `*` is acceptable, and
        // `q` is case-insensitive. (The parser's own table is in src/api/http.rs.)
        for refused in
            ["gzip;q=0", "identity", "br", "gzip;q=0.0, identity", "gzip;q=0, *", "*, gzip;q=0", "gzip;Q=0", "*;q=0"]
        {
            let answer = get(&app, path, &[("accept-encoding", refused)]).await;
            assert_eq!(answer.header("content-encoding"), None, "{path} with Accept-Encoding: {refused}");
            assert_eq!(answer.header("etag"), Some(tag), "{path} with Accept-Encoding: {refused}");
            assert_eq!(answer.body, identity.body);
        }
        for accepted in ["br;q=1, GZIP;q=0.5", "x-gzip", "*", "br, *;q=0.5"] {
            let answer = get(&app, path, &[("accept-encoding", accepted)]).await;
            assert_eq!(answer.header("content-encoding"), Some("gzip"), "{path} with Accept-Encoding: {accepted}");
            assert_eq!(answer.header("etag"), Some(gzip_tag.as_str()), "{path} with Accept-Encoding: {accepted}");
            assert_eq!(answer.body, compressed.body);
        }

        // A client that decodes gzip itself sees the identity body.
        let decoding = reqwest::Client::builder().gzip(true).build().expect("client");
        let response = decoding.get(app.url(path)).send().await.expect("GET");
        assert_eq!(response.bytes().await.expect("body").as_ref(), &identity.body[..]);
    }
    // A small body is not worth compressing.
    let small = get(&app, "/skills/skill-001", &[("accept-encoding", "gzip")]).await;
    assert_eq!(small.status, 200);
    assert_eq!(small.header("content-encoding"), None);
    app.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Bodies equal to nagents' recorded results

#[tokio::test]
async fn bodies_are_nagents_recorded_results() {
    for name in ["budget-multibyte-cuts", "manifest-html-escaping", "dup-across-sources", "non-utf8-content"] {
        let (root, case) = case_tree(name);
        let expected = recorded(name);
        let sources = case_sources(&root, &case);
        let labels: Vec<String> = sources
            .iter()
            .map(|source| match source {
                SourceConfig::Directory { roots, .. } => {
                    roots.iter().map(|root| root.display().to_string()).collect::<Vec<_>>().join(", ")
                }
                SourceConfig::Builtin { .. } | SourceConfig::Git(_) => unreachable!(),
            })
            .collect();
        let app = TestApp::spawn(sources).await;

        let listing = root.relative(get(&app, "/skills", &[]).await.json());
        assert_eq!(skill_triples(&listing), expected["composite"]["skills"], "{name}: skills");
        let shadowed: Vec<Value> = listing["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|s| json!([s["name"], s["location"], s["source"]]))
            .collect();
        let wanted: Vec<Value> = expected["composite"]["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|s| {
                let label = &labels[s[2].as_u64().expect("source index") as usize];
                root.relative(json!([s[0], s[1], label]))
            })
            .collect();
        assert_eq!(shadowed, wanted, "{name}: shadowed");
        let diagnostics: Vec<Value> = listing["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .map(|d| json!([d["source"], d["message"]]))
            .collect();
        let wanted: Vec<Value> = expected["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .zip(&labels)
            .flat_map(|(source, label)| {
                let messages = source["diagnostics"].as_array().expect("diagnostics").clone();
                messages.into_iter().map(move |message| json!([label, message]))
            })
            .map(|diagnostic| root.relative(diagnostic))
            .collect();
        assert_eq!(diagnostics, wanted, "{name}: diagnostics");

        let manifest = Answer::from(app.manifest().await).await;
        assert_eq!(manifest.status, 200);
        assert_eq!(root.relative(json!(manifest.text())), expected["manifest"], "{name}: manifest");

        let loads = expected["loads"].as_array().expect("loads");
        assert!(!loads.is_empty());
        for load in loads {
            let skill = load["name"].as_str().expect("name");
            let body = json!({"token_limit": load["token_limit"]});
            let answer = post_load(&app, skill, &[], Some(body)).await;
            assert_eq!(answer.status, 200, "{name}: load {skill}");
            assert_eq!(root.relative(answer.json()), load["result"], "{name}: load {skill} {}", load["token_limit"]);
        }
        app.shutdown().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// A failed source

#[tokio::test]
async fn a_failed_source_answers_503_with_nagents_message() {
    let (root, case) = case_tree("dup-same-source");
    let message = recorded("dup-same-source")["composite"]["error"]
        .as_str()
        .expect("nagents' error")
        .replace("$T", root.path_str());
    assert!(message.starts_with("Duplicate skill name 'x' at "), "{message}");
    let app = TestApp::spawn(case_sources(&root, &case)).await;
    for path in ["/skills", "/skills/x", "/skills/c", "/skills/x/content", "/manifest"] {
        let answer = get(&app, path, &[]).await;
        let problem = answer.problem(503, "catalog-unavailable");
        assert_eq!(problem["detail"], message.as_str(), "{path}");
        assert_eq!(answer.header("retry-after"), Some("1"), "{path}");
    }
    for body in [None, Some(json!({"token_limit": 5}))] {
        let problem = post_load(&app, "x", &[], body).await.problem(503, "catalog-unavailable");
        assert_eq!(problem["detail"], message.as_str());
    }
    // Requests that are wrong in themselves are still refused for that reason first.
    get(&app, "/skills/bad%20name", &[]).await.problem(400, "invalid-name");
    post_load(&app, "x", &[], Some(json!({"token_limit": 0}))).await.problem(422, "invalid-body");
    // The server is up, and not ready: it has no catalog to serve, so a rolling update must not
    // put it in front of clients in place of a healthy one. (A kept last good catalog counts as
    // ready: `live::a_failed_rescan_keeps_the_last_good_catalog...`.)
    assert_eq!(get(&app, "/healthz", &[]).await.status, 200);
    let problem = get(&app, "/readyz", &[]).await.problem(503, "catalog-unavailable");
    assert_eq!(problem["detail"], message.as_str());
    let mut events = Events::open(&app).await;
    assert_eq!(events.next(DEADLINE).await, Some(json!({"etag": null})), "the first event");
    drop(events);
    app.shutdown().await.unwrap();
}
