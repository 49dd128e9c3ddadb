//! The operations routes (probes, metrics, the OpenAPI document), wrong methods and unknown routes.

use reqwest::Method;
use serde_json::json;

use super::{assert_route_labels_are_templates, get, serve_two_skills};
use crate::support::events::Events;
use crate::support::http::Answer;
use crate::support::wait::DEADLINE;

#[tokio::test]
async fn operations_routes_answer() {
    let (_dir, app) = serve_two_skills().await;
    let health = get(&app, "/healthz", &[]).await;
    assert_eq!((health.status, health.json()), (200, json!({"status": "ok"})));
    let ready = get(&app, "/readyz", &[]).await;
    assert_eq!((ready.status, ready.json()), (200, json!({"status": "ready"})));

    let openapi = get(&app, "/openapi.json", &[]).await;
    assert_eq!(openapi.status, 200);
    assert_eq!(openapi.header("content-type"), Some("application/json"));
    let document = openapi.json();
    assert!(document["openapi"].as_str().is_some_and(|version| version.starts_with("3.1")), "{}", document["openapi"]);

    // Requests that the metrics must count under their route template.
    assert_eq!(get(&app, "/skills/alpha", &[]).await.status, 200);
    assert_eq!(get(&app, "/skills/nobody", &[]).await.status, 404);
    assert_eq!(get(&app, "/skills/alpha/content", &[]).await.status, 200);
    assert_eq!(get(&app, "/no/such/route", &[]).await.status, 404);
    let mut events = Events::open(&app).await;
    events.next(DEADLINE).await.expect("a first event");

    let metrics = get(&app, "/metrics", &[]).await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.header("content-type").is_some_and(|value| value.starts_with("text/plain")), "{metrics:?}");
    let text = metrics.text();
    for line in [
        "skillcat_http_requests_total{route=\"/skills/{name}\",status=\"200\"} 1",
        "skillcat_http_requests_total{route=\"/skills/{name}\",status=\"404\"} 1",
        "skillcat_http_requests_total{route=\"/skills/{name}/content\",status=\"200\"} 1",
        "skillcat_http_requests_total{route=\"/healthz\",status=\"200\"} 1",
        "skillcat_catalog_skills 2",
        "skillcat_sse_clients 1",
    ] {
        assert!(text.lines().any(|metric| metric == line), "missing {line:?} in\n{text}");
    }
    assert_route_labels_are_templates(text);
    drop(events);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow_and_unknown_routes_404() {
    let (_dir, app) = serve_two_skills().await;
    let cases = [
        (Method::PUT, "/skills", "GET"),
        (Method::DELETE, "/skills/alpha", "GET"),
        (Method::POST, "/skills/alpha/content", "GET"),
        (Method::GET, "/skills/alpha/load", "POST"),
        (Method::POST, "/manifest", "GET"),
        (Method::POST, "/events", "GET"),
        (Method::DELETE, "/metrics", "GET"),
    ];
    for (method, path, allowed) in cases {
        let answer = Answer::from(app.client.request(method.clone(), app.url(path)).send().await.expect("send")).await;
        answer.problem(405, "method-not-allowed");
        let allow = answer.header("allow").unwrap_or_else(|| panic!("{method} {path}: no Allow header"));
        let methods: Vec<&str> = allow.split(',').map(str::trim).collect();
        assert!(methods.contains(&allowed), "{method} {path}: Allow: {allow}");
        assert!(!methods.contains(&method.as_str()), "{method} {path}: Allow: {allow}");
    }
    let problem = get(&app, "/nothing-here", &[]).await.problem(404, "not-found");
    assert_eq!(problem["detail"], "no such route");
    app.shutdown().await.unwrap();
}

/// Every answer carries an `x-request-id`: a new one per request (refusals and problems too), or
/// the client's own, sent back as it came.
#[tokio::test]
async fn every_answer_carries_a_request_id() {
    let (_dir, app) = serve_two_skills().await;
    let mut seen = std::collections::HashSet::new();
    for (path, status) in [("/skills", 200), ("/skills", 200), ("/skills/nobody", 404), ("/no/such/route", 404)] {
        let answer = get(&app, path, &[]).await;
        assert_eq!(answer.status, status, "{path}");
        let id = answer.header("x-request-id").unwrap_or_else(|| panic!("{path}: no x-request-id in {answer:?}"));
        assert!(!id.is_empty() && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-'), "{id:?}");
        assert!(seen.insert(id.to_owned()), "{id} given twice");
    }
    let answer = get(&app, "/skills", &[("x-request-id", "client-chosen-7")]).await;
    assert_eq!(answer.header("x-request-id"), Some("client-chosen-7"));
    // A refusal before the handler (here a wrong Host) carries one too.
    let answer = get(&app, "/skills", &[("host", "user@x")]).await;
    assert_eq!(answer.status, 400);
    assert!(answer.header("x-request-id").is_some(), "{answer:?}");
    app.shutdown().await.unwrap();
}
