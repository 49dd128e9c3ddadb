//! `GET /search`: ranking by name, description and `SKILL.md` text, excerpts, typing prefixes,
//! limits, and an index that follows the catalog. (Malformed searches are rows of the
//! bad-requests table.)

use serde_json::Value;

use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::eventually;

async fn search(app: &TestApp, query: &str) -> Value {
    let response = app.get("/search").query(&[("q", query)]).send().await.expect("GET /search");
    assert_eq!(response.status(), 200, "{query}");
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.expect("json")
}

fn names(body: &Value) -> Vec<&str> {
    body["hits"].as_array().expect("hits").iter().map(|hit| hit["name"].as_str().expect("name")).collect()
}

/// The excerpt of a hit with its highlighted pieces in brackets.
fn excerpt(hit: &Value) -> String {
    hit["excerpt"]
        .as_array()
        .expect("excerpt")
        .iter()
        .map(|part| {
            let text = part["text"].as_str().expect("text");
            if part["highlight"] == true { format!("[{text}]") } else { text.to_owned() }
        })
        .collect()
}

fn catalog() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write_skill(
        &root.join("pdf-tools"),
        &skill_md("pdf-tools", "Fill and merge PDF forms", "# PDF tools\n\nMerge two PDF files into one.\n"),
    );
    write_skill(
        &root.join("docx"),
        &skill_md(
            "docx",
            "Edit Word documents",
            "# Word\n\nTracked changes and comments. Export to PDF when the reviewer asks for it.\n",
        ),
    );
    write_skill(&root.join("slides"), &skill_md("slides", "Make presentation decks", "Layouts, themes, notes.\n"));
    write_skill(&root.join("pdf"), &skill_md("pdf", "A skill named as the query", "Nothing else here.\n"));
    dir
}

#[tokio::test]
async fn skills_are_ranked_by_relevance_with_highlighted_excerpts() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    let body = search(&app, "pdf").await;
    // The skill named as the query first, then the one with the term in its name, description
    // and text, then the one that mentions it once in its text.
    assert_eq!(names(&body), ["pdf", "pdf-tools", "docx"]);
    assert_eq!(body["total"], 3);
    assert_eq!(body["etag"].as_str(), Some(app.catalog_etag().await.as_str()));
    let hits = body["hits"].as_array().unwrap();
    let scores: Vec<f64> = hits.iter().map(|hit| hit["score"].as_f64().unwrap()).collect();
    assert!(scores[1] > scores[2], "{scores:?}");
    let docx = &hits[2];
    assert_eq!(docx["description"], "Edit Word documents");
    assert_eq!(docx["source"], dir.path().to_str().unwrap());
    let skill: Value = app.skill("docx").await.json().await.unwrap();
    assert_eq!(docx["etag"], skill["etag"]);
    // The excerpt comes from the text after the frontmatter, whitespace made single spaces.
    assert_eq!(excerpt(docx), "# Word Tracked changes and comments. Export to [PDF] when the reviewer asks for it.");
    // Every term must match: the query narrows as it grows.
    assert_eq!(names(&search(&app, "pdf merge").await), ["pdf-tools"]);
    assert_eq!(names(&search(&app, "PDF  Forms!").await), ["pdf-tools"]);
    // When no skill holds every term, those holding any are answered.
    assert_eq!(names(&search(&app, "presentation zebra").await), ["slides"]);
    assert_eq!(search(&app, "zebra").await["total"], 0);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_last_term_matches_as_a_prefix_while_it_is_typed() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    assert_eq!(names(&search(&app, "presen").await), ["slides"]);
    let typed = search(&app, "merge pd").await;
    assert_eq!(names(&typed), ["pdf-tools"]);
    assert!(excerpt(&typed["hits"][0]).contains("[Merge] two [PDF] files"), "{}", excerpt(&typed["hits"][0]));
    // A term followed by a separator is a whole word: `presen ` matches nothing.
    assert_eq!(search(&app, "presen ").await["total"], 0);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn limits_cut_the_hits_but_not_the_total() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    let response = app.get("/search?q=pdf&limit=1").send().await.unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(names(&body), ["pdf"]);
    assert_eq!(body["total"], 3);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_index_follows_the_catalog_and_remakes_only_what_changed() {
    let dir = catalog();
    let app = TestApp::spawn_dir(dir.path()).await;
    assert_eq!(search(&app, "kangaroo").await["total"], 0);
    let etag_of = |body: &Value, name: &str| {
        body["skills"].as_array().unwrap().iter().find(|skill| skill["name"] == name).map(|skill| skill["etag"].clone())
    };
    let before = etag_of(&app.wait_for_catalog(|_| true).await, "slides");
    write_skill(&dir.path().join("slides"), &skill_md("slides", "Make presentation decks", "A kangaroo theme.\n"));
    write_skill(&dir.path().join("zoo"), &skill_md("zoo", "Animals", "Kangaroo facts.\n"));
    app.wait_for_catalog(|body| etag_of(body, "zoo").is_some() && etag_of(body, "slides") != before).await;
    let mut found = names(&search(&app, "kangaroo").await).into_iter().map(str::to_owned).collect::<Vec<_>>();
    found.sort_unstable();
    assert_eq!(found, ["slides", "zoo"]);
    // One index per catalog version searched; documents only for the skills that changed (the
    // first index made all 4, this one the changed and the new skill).
    assert_eq!(app.metric("skillcat_search_indexes_total").await, 2);
    assert_eq!(app.metric("skillcat_search_documents_total").await, 4 + 2);
    std::fs::remove_dir_all(dir.path().join("zoo")).unwrap();
    eventually("the removed skill is gone", || async { names(&search(&app, "kangaroo").await) == ["slides"] }).await;
    app.shutdown().await.unwrap();
}
