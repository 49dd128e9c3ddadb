//! The HTTP API, tested against a real server on port 0.

use crate::support::server::TestApp;

#[tokio::test]
async fn serves_the_builtin_catalog() {
    let app = TestApp::spawn(vec![skillcat::config::SourceConfig::Builtin { name: None }]).await;
    let response = app.skills().await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["skills"].as_array().unwrap().len(), 2);
    app.shutdown().await.unwrap();
}
