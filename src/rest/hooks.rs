//! `POST /hooks/git`: a git host's push webhook makes the git sources it names fetch at once. It
//! stands outside the bearer tokens (a git host cannot send them) and proves itself with the
//! webhook secret instead (`crate::auth::WebhookSecret`). Hooks that arrive while a fetch runs
//! collapse into one more fetch per source, so a flood costs at most one fetch in flight each.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;
use crate::http::{BoundedBody, Headers, HttpError, Problem};

pub fn router() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(git_hook))
}

/// What a webhook started.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HookAnswer {
    /// The labels of the git sources now fetching (those whose URL the payload names, or all of
    /// them when it names none).
    pub fetching: Vec<String>,
}

/// A push webhook (GitHub, GitLab, or anything that sends the secret as a bearer token): the git
/// sources whose repository the payload names fetch now (every git source, when the payload names
/// no repository or is not JSON). The new commit is served once fetched and scanned.
#[utoipa::path(post, path = "/hooks/git", tag = "operations",
    request_body(content = Object, content_type = "application/json",
        description = "The push event as GitHub or GitLab sends it (`repository` / `project` URLs name the repository); any body, or none, fetches every git source"),
    params(
        ("X-Hub-Signature-256" = Option<String>, Header, description = "GitHub: `sha256=` and the HMAC-SHA256 of the body under the webhook secret, in hex"),
        ("X-Gitlab-Token" = Option<String>, Header, description = "GitLab: the webhook secret"),
    ),
    security(()),
    responses(
        (status = 202, description = "Accepted: the named git sources fetch", body = HookAnswer),
        (status = 401, description = "No valid signature, GitLab token or bearer secret", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Webhooks are not enabled (no --webhook-secret-file)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is over 64 KiB", body = Problem, content_type = "application/problem+json"),
    ))]
async fn git_hook(
    State(app): State<Arc<App>>,
    Headers(headers): Headers,
    BoundedBody(body): BoundedBody,
) -> Result<Response, HttpError> {
    let Some(secret) = &app.webhook_secret else {
        return Err(HttpError::RouteNotFound);
    };
    if !secret.verify(&headers, &body) {
        return Err(HttpError::BadSignature);
    }
    let fetching = app.catalog.fetch_for(&repositories_named(&body));
    tracing::info!(sources = ?fetching, "a webhook asked for a fetch");
    Ok((StatusCode::ACCEPTED, axum::Json(HookAnswer { fetching })).into_response())
}

/// The URLs a push payload gives for its repository: GitHub's `repository` (`clone_url`,
/// `html_url`, `ssh_url`, `git_url`, `url`), GitLab's `project` (`git_http_url`, `git_ssh_url`,
/// `web_url`, `http_url`, `ssh_url`, `url`) and `repository` (`url`, `git_http_url`,
/// `git_ssh_url`, `homepage`). None for a body that is not such JSON.
fn repositories_named(body: &[u8]) -> Vec<String> {
    const KEYS: &[&str] = &[
        "clone_url",
        "html_url",
        "ssh_url",
        "git_url",
        "url",
        "git_http_url",
        "git_ssh_url",
        "web_url",
        "http_url",
        "homepage",
    ];
    let Ok(serde_json::Value::Object(payload)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    ["repository", "project"]
        .iter()
        .filter_map(|field| payload.get(*field)?.as_object())
        .flat_map(|object| KEYS.iter().filter_map(|key| object.get(*key)?.as_str()))
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_urls_of_github_and_gitlab_payloads() {
        let github = br#"{"ref":"refs/heads/main","repository":{"clone_url":"https://github.com/o/r.git","ssh_url":"git@github.com:o/r.git","html_url":"https://github.com/o/r","private":false}}"#;
        assert_eq!(
            repositories_named(github),
            ["https://github.com/o/r.git", "https://github.com/o/r", "git@github.com:o/r.git"]
        );
        let gitlab = br#"{"object_kind":"push","project":{"git_http_url":"https://gitlab.com/o/r.git","web_url":"https://gitlab.com/o/r"},"repository":{"url":"git@gitlab.com:o/r.git"}}"#;
        assert_eq!(
            repositories_named(gitlab),
            ["git@gitlab.com:o/r.git", "https://gitlab.com/o/r.git", "https://gitlab.com/o/r"]
        );
        for other in [&b""[..], b"not json", b"[1]", br#"{"repository":"x"}"#, br#"{"repository":{"url":5}}"#] {
            assert!(repositories_named(other).is_empty());
        }
    }
}
