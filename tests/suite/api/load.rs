//! `POST /skills/{name}/load`: nagents' budgeted load, and what `token_limit` may be.

use serde_json::{Value, json};

use super::{ALPHA, post_load, root_of, serve_two_skills, skill_etag};
use crate::support::http::Answer;
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
    let (dir, app) = serve_two_skills().await;
    let root = root_of(&dir);
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

/// A load of `alpha` with `body` as written, `Content-Type: application/json`.
async fn load_raw(app: &TestApp, body: &str) -> Answer {
    let request = app.client.post(app.url("/skills/alpha/load")).header("content-type", "application/json");
    Answer::from(request.body(body.to_owned()).send().await.expect("POST load")).await
}

/// JSON Schema's `integer` (what the OpenAPI document says `token_limit` is) admits any number
/// whose fraction is zero, however it is written: `2.0` is the limit 2. A fraction, a boolean, a
/// string, or a number out of 1..=100000 is no limit.
#[tokio::test]
async fn an_integral_number_is_a_token_limit() {
    let (dir, app) = serve_two_skills().await;
    let root = root_of(&dir);
    for (limit, value) in [("2.0", 2), ("1.0", 1), ("100000.0", 100_000), ("1e3", 1000), ("2.50e1", 25)] {
        let answer = load_raw(&app, &format!(r#"{{"token_limit": {limit}}}"#)).await;
        assert_eq!(answer.status, 200, "token_limit {limit}: {answer:?}");
        let content = &ALPHA[..ALPHA.len().min(4 * value)];
        let truncated = content.len() < ALPHA.len();
        assert_eq!(answer.json(), load_result(&root, "alpha", content, truncated, value as u64), "token_limit {limit}");
    }
    for limit in ["2.5", "true", r#""2""#, "0", "100001", "-1", "0.0", "-1.0", "100001.0", "1e6", "0.5"] {
        let problem = load_raw(&app, &format!(r#"{{"token_limit": {limit}}}"#)).await.problem(422, "invalid-body");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with("token_limit: ") && detail.contains("expected an integer between 1 and 100000"),
            "token_limit {limit}: {detail}"
        );
    }
    app.shutdown().await.unwrap();
}

/// A load by a percent-encoded name goes through the router (which decodes it); by the plain name
/// it is taken before the router (`router::front`). Both answer alike, error or not, and are
/// counted under the same route.
#[tokio::test]
async fn a_load_answers_alike_before_the_router_and_through_it() {
    let (_dir, app) = serve_two_skills().await;
    let tag = skill_etag(&app, "alpha").await;
    // A name as the fast route reads it and percent-encoded, the request's headers, its body.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);
    let cases: [Case<'_>; 9] = [
        ("alpha", "%61lpha", &[], None),
        ("alpha", "%61lpha", &[("content-type", "application/json")], Some(r#"{"token_limit": 3}"#)),
        ("alpha", "%61lpha", &[("if-match", &tag)], None),
        ("alpha", "%61lpha", &[("if-match", "\"other\"")], None),
        ("alpha", "%61lpha", &[("content-type", "text/plain")], Some("{}")),
        ("alpha", "%61lpha", &[("content-type", "application/json")], Some("{")),
        ("alpha", "%61lpha", &[("content-type", "application/json")], Some(r#"{"other": 1}"#)),
        ("gamma", "g%61mma", &[], None),
        ("bad!", "b%61d!", &[], None),
    ];
    let before = app.requests("/skills/{name}/load", 200).await;
    for (plain, encoded, headers, body) in cases {
        let mut answers = Vec::new();
        for name in [plain, encoded] {
            let mut request = app.client.post(app.url(&format!("/skills/{name}/load")));
            for (header, value) in headers {
                request = request.header(*header, *value);
            }
            if let Some(body) = body {
                request = request.body(body.to_owned());
            }
            let mut answer = Answer::from(request.send().await.expect("POST load")).await;
            assert!(answer.header("x-request-id").is_some(), "{answer:?}");
            answer.headers.retain(|(name, _)| name != "x-request-id" && name != "date");
            answers.push(answer);
        }
        let (fast, routed) = (&answers[0], &answers[1]);
        assert_eq!((fast.status, &fast.headers, &fast.body), (routed.status, &routed.headers, &routed.body), "{plain}");
    }
    assert_eq!(app.requests("/skills/{name}/load", 200).await, before + 6, "3 loads of 200, each asked twice");
    app.shutdown().await.unwrap();
}
