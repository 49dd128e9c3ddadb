//! The OpenAPI document: generated from the code, checked in, and served unchanged.
//!
//! After an API change, regenerate the checked-in file with
//! `SKILLCAT_UPDATE_OPENAPI=1 cargo test --test suite openapi` and review the diff.

use std::path::PathBuf;

use crate::support::server::TestApp;

fn checked_in() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json")
}

#[test]
fn the_checked_in_document_is_current() {
    let generated = skillcat::router::openapi_document();
    if std::env::var_os("SKILLCAT_UPDATE_OPENAPI").is_some() {
        std::fs::write(checked_in(), &generated).expect("write openapi/openapi.json");
    }
    let file = std::fs::read_to_string(checked_in()).expect("openapi/openapi.json");
    assert!(
        file == generated,
        "openapi/openapi.json is out of date; run SKILLCAT_UPDATE_OPENAPI=1 cargo test --test suite openapi"
    );
    let document: serde_json::Value = serde_json::from_str(&generated).expect("JSON");
    assert!(document["openapi"].as_str().is_some_and(|version| version.starts_with("3.1")));
    let paths = document["paths"].as_object().expect("paths");
    for path in [
        "/skills",
        "/skills/{name}",
        "/skills/{name}/content",
        "/skills/{name}/load",
        "/manifest",
        "/events",
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
    ] {
        assert!(paths.contains_key(path), "{path} is not documented");
    }
}

#[tokio::test]
async fn the_served_document_is_the_checked_in_one() {
    let app = TestApp::spawn(vec![]).await;
    let response = app.get("/openapi.json").send().await.expect("GET /openapi.json");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let served = response.text().await.expect("body");
    assert_eq!(served, std::fs::read_to_string(checked_in()).expect("openapi/openapi.json"));
}
