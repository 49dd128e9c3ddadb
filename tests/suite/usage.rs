//! Usage per skill: every surface's loads counted in `skillcat_skill_loads_total{skill,surface}`
//! (names of the catalog only), the catalog page's counts, and `GET /api/search` (what
//! `npx skills find` reads: installable hits, their installs, where to install them from) under
//! the request's base URL or the configured public URL. (The real `skills` CLI against it is
//! scripts/test-installer.)

use serde_json::{Value, json};
use skillcat::config::PublicUrl;

use crate::support::files::write;
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

fn catalog() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write_skill(&root.join("pdf"), &skill_md("pdf", "Fill and merge PDF forms", "# PDF\n\nMerge PDF files.\n"));
    write(&root.join("pdf/scripts/merge.py"), b"print('merge')\n");
    write_skill(&root.join("pdf-lite"), &skill_md("pdf-lite", "A lighter PDF reader", "Reads PDF text.\n"));
    // Served by REST, left out of the well-known indexes (not an agentskills.io name).
    write_skill(&root.join("Pdf_Legacy"), &skill_md("Pdf_Legacy", "Old PDF macros", "PDF macros.\n"));
    dir
}

async fn loads(app: &TestApp, skill: &str, surface: &str) -> u64 {
    let series = format!("skillcat_skill_loads_total{{skill=\"{skill}\",surface=\"{surface}\"}}");
    let text = app.get("/metrics").send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()).and_then(|rest| rest.strip_prefix(' ')))
        .map_or(0, |value| value.parse().expect("an integer"))
}

async fn find(app: &TestApp, query: &str, host: Option<&str>) -> Value {
    let mut request = app.get("/api/search").query(&[("q", query), ("limit", "10")]);
    if let Some(host) = host {
        request = request.header("host", host);
    }
    let response = request.send().await.expect("GET /api/search");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.expect("json")
}

#[tokio::test]
async fn every_surface_counts_its_loads_of_catalog_skills_only() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    assert_eq!(app.load("pdf", None).await.status(), 200);
    assert_eq!(app.content("pdf").await.status(), 200);
    assert_eq!(app.get("/skills/pdf/archive").send().await.unwrap().status(), 200);
    assert_eq!(app.get("/skills/pdf/files/SKILL.md").send().await.unwrap().status(), 200);
    // Another file of the skill is not a load of it.
    assert_eq!(app.get("/skills/pdf/files/scripts/merge.py").send().await.unwrap().status(), 200);
    for path in ["/.well-known/skills/pdf/SKILL.md", "/.well-known/skills/pdf/scripts/merge.py"] {
        assert_eq!(app.get(path).send().await.unwrap().status(), 200, "{path}");
    }
    // A revalidation carries no bytes: not a load.
    let tag = app.content("pdf").await.headers()["etag"].clone();
    let unmodified = app.get("/skills/pdf/content").header("if-none-match", tag).send().await.unwrap();
    assert_eq!(unmodified.status(), 304);
    // Unknown names are never counted, so the series stay bounded by the catalog.
    assert_eq!(app.load("ghost", None).await.status(), 404);
    for (surface, count) in [("load", 1), ("content", 2), ("archive", 1), ("file", 1), ("well-known", 1), ("mcp", 0)] {
        assert_eq!(loads(&app, "pdf", surface).await, count, "{surface}");
    }
    let text = app.get("/metrics").send().await.unwrap().text().await.unwrap();
    assert!(!text.contains("ghost"), "{text}");
    for name in ["pdf", "pdf-lite", "Pdf_Legacy"] {
        assert!(text.contains(&format!("skillcat_catalog_skill{{skill=\"{name}\"}} 1\n")), "{name}: {text}");
    }
    assert!(!text.contains("skill=\"pdf-lite\",surface"), "a skill never loaded has no load series");

    // A skill that leaves the catalog leaves the metrics.
    std::fs::remove_dir_all(dir.path().join("pdf")).unwrap();
    eventually("pdf leaves the metrics", || async {
        let text = app.get("/metrics").send().await.unwrap().text().await.unwrap();
        !text.contains("skill=\"pdf\"")
    })
    .await;
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_catalog_page_shows_each_skill_s_loads_and_installs() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    let row = |html: &str, name: &str| {
        let start = html.find(&format!("<tr data-name=\"{name}\">")).expect("a row");
        let end = start + html[start..].find("</tr>").expect("the row's end");
        html[start..end].to_owned()
    };
    let first = app.get("/").send().await.unwrap();
    let tag = first.headers()["etag"].clone();
    let html = first.text().await.unwrap();
    assert!(row(&html, "pdf").ends_with("<td class=\"count loads\">0</td><td class=\"count installs\">0</td>"));
    // Unchanged counts: the same page and tag.
    let again = app.get("/").header("if-none-match", tag.clone()).send().await.unwrap();
    assert_eq!(again.status(), 304);

    assert_eq!(app.get("/skills/pdf/archive").send().await.unwrap().status(), 200);
    assert_eq!(app.load("pdf", None).await.status(), 200);
    assert_eq!(app.load("pdf", None).await.status(), 200);
    let changed = app.get("/").header("if-none-match", tag).send().await.unwrap();
    assert_eq!(changed.status(), 200, "a load changes the page");
    let html = changed.text().await.unwrap();
    assert!(row(&html, "pdf").ends_with("<td class=\"count loads\">3</td><td class=\"count installs\">1</td>"));
    assert!(row(&html, "pdf-lite").ends_with("<td class=\"count loads\">0</td><td class=\"count installs\">0</td>"));
    assert!(!html.contains("count-"), "no mark is left in the page");
    // Its gzip form has the counts too.
    let gzip = app.get("/").header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(gzip.headers()["content-encoding"], "gzip");
    let bytes = gzip.bytes().await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
    assert_eq!(text, html);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn api_search_answers_installable_hits_with_their_installs_and_source() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    let body = find(&app, "pdf", None).await;
    let base = app.url("");
    // Pdf_Legacy matches but cannot be installed: left out.
    assert_eq!(
        body,
        json!({"skills": [
            {"id": "ui/skills/pdf", "name": "pdf", "installs": 0, "source": base},
            {"id": "ui/skills/pdf-lite", "name": "pdf-lite", "installs": 0, "source": base},
        ]})
    );
    // Installs: archives and SKILL.md downloads through either index, not loads or contents.
    for path in ["/skills/pdf/archive", "/.well-known/skills/pdf/SKILL.md", "/skills/pdf-lite/files/SKILL.md"] {
        assert_eq!(app.get(path).send().await.unwrap().status(), 200, "{path}");
    }
    assert_eq!(app.load("pdf", None).await.status(), 200);
    assert_eq!(app.content("pdf-lite").await.status(), 200);
    let body = find(&app, "pdf", None).await;
    let installs: Vec<(&str, u64)> = (body["skills"].as_array().unwrap().iter())
        .map(|hit| (hit["name"].as_str().unwrap(), hit["installs"].as_u64().unwrap()))
        .collect();
    assert_eq!(installs, [("pdf", 2), ("pdf-lite", 1)]);
    // The source is the URL the request reached the server at, for any host, nothing kept per host.
    let body = find(&app, "pdf", Some("catalog.internal:8080")).await;
    assert_eq!(body["skills"][0]["source"], "http://catalog.internal:8080");
    // The limit holds, and a malformed search is a problem as for /search.
    let one = app.get("/api/search").query(&[("q", "pdf"), ("limit", "1")]).send().await.unwrap();
    assert_eq!(one.json::<Value>().await.unwrap()["skills"].as_array().unwrap().len(), 1);
    let missing = app.get("/api/search").send().await.unwrap();
    assert_eq!(missing.status(), 400);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_public_url_is_every_absolute_url_whatever_the_host() {
    let dir = catalog();
    let public: PublicUrl = "https://skills.example.com/".parse().unwrap();
    let app = TestApp::spawn_dir_with(dir.path(), |options| options.public_url = Some(public)).await;
    for host in [None, Some("other.example:9000")] {
        let body = find(&app, "pdf", host).await;
        assert_eq!(body["skills"][0]["source"], "https://skills.example.com", "{host:?}");
        let mut request = app.get("/ui/skills/pdf");
        if let Some(host) = host {
            request = request.header("host", host);
        }
        let html = request.send().await.unwrap().text().await.unwrap();
        assert!(html.contains("curl -s https://skills.example.com/skills/pdf/content"), "{html}");
        assert!(
            html.contains("npx skills add https://skills.example.com --skill pdf -y --agent claude-code"),
            "{html}"
        );
        assert!(!html.contains("127.0.0.1") && !html.contains("other.example"), "{html}");
    }
    app.shutdown().await.unwrap();
}
