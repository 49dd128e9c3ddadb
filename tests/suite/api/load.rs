//! `POST /skills/{name}/load`: nagents' budgeted load, and what `token_limit` may be.

use serde_json::{Value, json};

use super::{ALPHA, post_load, root_of, skill_etag, two_skills};
use crate::support::server::TestApp;

fn load_result(root: &str, name: &str, content: &str, truncated: bool, limit: u64) -> Value {
    json!({
        "name": name,
        "location": format!("{root}/{name}/SKILL.md"),
        "content": content,
        "truncated": truncated,
        "estimated_tokens": content.len().div_ceil(4),
        "token_limit": limit,
    })
}

#[tokio::test]
async fn loads_are_budgeted_as_nagents_does() {
    let dir = two_skills();
    let root = root_of(&dir);
    let app = TestApp::spawn_dir(dir.path()).await;
    let full = load_result(&root, "alpha", ALPHA, false, 10_000);
    let empty = app.load("alpha", None).await;
    assert_eq!(empty.status(), 200);
    assert_eq!(empty.headers()["content-type"], "application/json");
    assert_eq!(empty.json::<Value>().await.unwrap(), full, "an empty body takes the default limit");
    assert_eq!(post_load(&app, "alpha", &[], Some(json!({}))).await.json(), full);
    assert_eq!(
        post_load(&app, "alpha", &[], Some(json!({"token_limit": 3}))).await.json(),
        load_result(&root, "alpha", &ALPHA[..12], true, 3)
    );
    assert_eq!(
        post_load(&app, "alpha", &[], Some(json!({"token_limit": 100_000}))).await.json(),
        load_result(&root, "alpha", ALPHA, false, 100_000)
    );
    let tag = skill_etag(&app, "alpha").await;
    assert_eq!(post_load(&app, "alpha", &[("if-match", &tag)], None).await.json(), full);
    assert_eq!(post_load(&app, "alpha", &[("if-match", "*")], None).await.json(), full);
    for form in ["\"other\"", &format!("W/{tag}")] {
        post_load(&app, "alpha", &[("if-match", form)], None).await.problem(412, "precondition-failed");
    }
    post_load(&app, "gamma", &[], None).await.problem(404, "skill-not-found");
    post_load(&app, "bad!", &[], None).await.problem(400, "invalid-name");
    app.shutdown().await.unwrap();
}
