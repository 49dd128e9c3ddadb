//! The HTTP API, tested against a real server on port 0, one file per concern:
//!
//! - `catalog`: `GET /skills`, one skill, the manifest, gzip, tags that agree across replicas,
//!   bodies equal to nagents' recorded results, a failed source;
//! - `content`: `GET /skills/{name}/content` and a skill that changed since the snapshot;
//! - `load`: budgeted loads and what `token_limit` may be;
//! - `conditional`: `If-None-Match` and `If-Match` in all their forms;
//! - `events`: `GET /events`, at connect, on change and at shutdown;
//! - `operations`: probes, metrics, the OpenAPI document, 404 and 405;
//! - `bad_requests`: a table of malformed requests, and arbitrary ones: never a server error;
//! - `bad_http`: malformed HTTP on a raw socket, clients that stop sending;
//! - `limits`: load shedding and the request timeout.

mod bad_http;
mod bad_requests;
mod catalog;
mod conditional;
mod content;
mod events;
mod limits;
mod load;
mod operations;

use serde_json::Value;
use skillcat::server::ServeOptions;

use crate::support::http::Answer;
use crate::support::server::TestApp;
use crate::support::skills::write_skill;

const ALPHA: &str = "---\nname: alpha\ndescription: The first skill\n---\n# Alpha\n\nDo the alpha thing.\n";
const BETA: &str = "---\nname: beta\ndescription: The second skill, with <markup> & more\n---\nBeta body.\n";

/// The start of a `POST /skills/alpha/load` written on a raw socket: the headers before those that
/// frame its body.
const LOAD_HEAD: &str = "POST /skills/alpha/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";

/// A directory source with `alpha` and `beta`.
fn two_skills() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), ALPHA);
    write_skill(&dir.path().join("beta"), BETA);
    dir
}

/// A server over [`two_skills`], and the directory it serves (removed when dropped: keep it while
/// the server runs).
async fn serve_two_skills() -> (tempfile::TempDir, TestApp) {
    serve_two_skills_with(|_| {}).await
}

/// [`serve_two_skills`] with the server's options adjusted by `adjust`.
async fn serve_two_skills_with(adjust: impl FnOnce(&mut ServeOptions)) -> (tempfile::TempDir, TestApp) {
    let dir = two_skills();
    let app = TestApp::spawn_dir_with(dir.path(), adjust).await;
    (dir, app)
}

fn root_of(dir: &tempfile::TempDir) -> String {
    dir.path().to_str().expect("UTF-8 temporary directory").to_owned()
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = app.get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Answer::from(request.send().await.unwrap_or_else(|error| panic!("GET {path}: {error}"))).await
}

async fn post_load(app: &TestApp, name: &str, headers: &[(&str, &str)], body: Option<Value>) -> Answer {
    let mut request = app.client.post(app.url(&format!("/skills/{name}/load")));
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    Answer::from(request.send().await.expect("POST load")).await
}

fn assert_strong_etag(tag: &str) {
    assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() > 2, "not a strong entity tag: {tag}");
}

/// The entry of `name` in `GET /skills`.
async fn listed(app: &TestApp, name: &str) -> Value {
    let listing = get(app, "/skills", &[]).await.json();
    listing["skills"].as_array().expect("skills").iter().find(|skill| skill["name"] == name).expect("listed").clone()
}

/// The current tag of skill `name`, from `GET /skills`.
async fn skill_etag(app: &TestApp, name: &str) -> String {
    listed(app, name).await["etag"].as_str().expect("etag").to_owned()
}

/// Checks that the server still answers normally.
async fn assert_alive(app: &TestApp) {
    let answer = get(app, "/healthz", &[]).await;
    assert_eq!(answer.status, 200, "the server survives");
    assert_eq!(get(app, "/skills", &[]).await.status, 200, "the server survives");
}

/// Every `route` label is a route template (or `unmatched`), never a raw path.
fn assert_route_labels_are_templates(metrics: &str) {
    // The documented paths are the routes' templates.
    let document: Value = serde_json::from_str(&skillcat::router::openapi_document()).expect("OpenAPI JSON");
    let templates: Vec<&String> = document["paths"].as_object().expect("paths").keys().collect();
    let mut labels = 0;
    for line in metrics.lines().filter(|line| !line.starts_with('#')) {
        if let Some(start) = line.find("route=\"") {
            let rest = &line[start + 7..];
            let label = &rest[..rest.find('"').expect("closing quote")];
            assert!(
                templates.iter().any(|template| *template == label) || label == "unmatched",
                "raw path as a route label: {line}"
            );
            labels += 1;
        }
    }
    assert!(labels > 0, "no route labels in\n{metrics}");
}
