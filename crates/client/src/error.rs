//! The client's errors, keyed on the status the server answered, and their mapping into
//! `skillcat-core`'s [`SkillError`].

use std::path::PathBuf;

use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde::Deserialize;
use skillcat_core::{SkillError, SkillFilePath, SkillName};

/// The most of an error body that is read; a problem document is a few hundred bytes.
const MAX_PROBLEM_BYTES: usize = 64 * 1024;
/// The most of a body that is not a problem document kept as its `detail`, in characters.
const MAX_FOREIGN_DETAIL_CHARS: usize = 300;

/// An RFC 9457 problem document, as the server answers every error. An error answer that is not
/// one (from a proxy, say) becomes a problem of type `about:blank` whose detail is the start of
/// its body.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Problem {
    /// `urn:skillcat:problem:<kind>` for the server's own problems.
    #[serde(rename = "type", default = "about_blank")]
    pub kind: String,
    #[serde(default)]
    pub title: String,
    /// The status of the answer (the HTTP status wins over the document's own field).
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub detail: String,
}

fn about_blank() -> String {
    "about:blank".to_owned()
}

impl Problem {
    /// The `<kind>` of a `urn:skillcat:problem:<kind>` type, such as `catalog-unavailable`.
    pub fn skillcat_kind(&self) -> Option<&str> {
        self.kind.strip_prefix("urn:skillcat:problem:")
    }

    /// Reads an error answer's body (at most 64 KiB of it) as a problem.
    pub(crate) async fn read(mut response: reqwest::Response) -> Problem {
        let status = response.status();
        let json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.split(';').next().unwrap_or_default().trim().ends_with("json"));
        let mut body = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            body.extend_from_slice(&chunk);
            if body.len() >= MAX_PROBLEM_BYTES {
                break;
            }
        }
        Problem::parse(status, json, &body)
    }

    fn parse(status: StatusCode, json: bool, body: &[u8]) -> Problem {
        let parsed = json.then(|| serde_json::from_slice::<Problem>(body).ok()).flatten();
        let mut problem = parsed.unwrap_or_else(|| Problem {
            kind: about_blank(),
            title: String::new(),
            status: status.as_u16(),
            detail: String::from_utf8_lossy(body).trim().chars().take(MAX_FOREIGN_DETAIL_CHARS).collect(),
        });
        problem.status = status.as_u16();
        if problem.title.is_empty() {
            problem.title = status.canonical_reason().unwrap_or("Error").to_owned();
        }
        problem
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{} ({})", self.title, self.status)
        } else {
            write!(f, "{} ({}): {}", self.title, self.status, self.detail)
        }
    }
}

/// Why a request to the catalog failed. Answers of the server are keyed on their status and
/// carry its problem document.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The builder was given something unusable (a base URL that is not `http(s)`, say).
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// No answer: the connection failed, was cut, or the request timed out. Connection
    /// failures were already retried as the retry policy allows.
    #[error("request to the skill catalog failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// The descriptor is not one of this discoverer's last discovery (no request was sent).
    #[error("Skill '{name}' is not in this remote catalog; refresh discovery")]
    NotInCatalog { name: SkillName },
    /// 404, 409 or 412 for a skill: it vanished, changed, or is no longer the version the
    /// descriptor names. Discover again and retry.
    #[error("Skill '{name}' changed; refresh discovery and retry ({problem})")]
    Stale { name: SkillName, problem: Problem },
    /// 401 or 403: the bearer token is missing or not accepted.
    #[error("the skill catalog refused the credentials: {0}")]
    Unauthorized(Problem),
    /// 429, still after the retries the policy allows.
    #[error("the skill catalog is rate limiting: {0}")]
    RateLimited(Problem),
    /// 503: the catalog is unavailable, for example because a source failed (the detail is the
    /// source's message), the server is starting, shutting down or overloaded.
    #[error("the skill catalog is unavailable: {0}")]
    Unavailable(Problem),
    /// Any other 4xx: the request itself is wrong (this client sends none such, unless the base
    /// URL points at something that is not a skillcat server).
    #[error("the skill catalog rejected the request: {0}")]
    Rejected(Problem),
    /// Any other 5xx, still after the retries the policy allows.
    #[error("the skill catalog failed: {0}")]
    Server(Problem),
    /// An answer that is not what the protocol says: an unexpected status, or a body that is not
    /// a valid catalog (an invalid descriptor, a duplicate name, malformed JSON) or file listing
    /// (an unsafe path, a listing beyond the bounds).
    #[error("invalid answer from the skill catalog: {0}")]
    InvalidResponse(String),
    /// 422 for a skill's files: the server lists no files for it, because the skill is over a
    /// bound of what is served (512 files, 16 MiB); the problem's detail names the bound.
    #[error("the files of skill '{name}' are not served: {problem}")]
    FilesUnavailable { name: SkillName, problem: Problem },
    /// A file's bytes are not what its listing says (another size or SHA-256): damaged on the
    /// way, or a server or proxy that does not keep its word. The bytes are never returned.
    #[error("file '{path}' of skill '{name}' does not match its listing: {reason}")]
    Corrupt { name: SkillName, path: SkillFilePath, reason: String },
    /// A pinned skill's version is not on the server (404 to a pinned read): never one the
    /// server has was used instead. Servers keep a skill's versions as far as their history
    /// goes; a folder source has its current version only.
    #[error("skill '{name}' at version '{version}' is not on the server: {problem}")]
    VersionNotFound { name: SkillName, version: String, problem: Problem },
    /// What the server answered for a pinned skill is not the version pinned: its files make
    /// another version, or a file is not what the pinned listing says.
    #[error("skill '{name}' at version '{version}' does not match it: {reason}")]
    VersionMismatch { name: SkillName, version: String, reason: String },
    /// The lock file given to the builder could not be read.
    #[error(transparent)]
    Lock(#[from] crate::lock::LockError),
    /// The target of a download exists: a folder is replaced only when asked, and anything else
    /// (a file, a symlink) never.
    #[error("{}", target_exists(path, *folder))]
    TargetExists { path: PathBuf, folder: bool },
    /// Writing a download failed (nothing of it was left behind, and the target is as it was).
    #[error("cannot download into {}: {action}: {source}", target.display())]
    Io {
        target: PathBuf,
        /// What was being done, such as "creating 'scripts/run.py'".
        action: String,
        #[source]
        source: std::io::Error,
    },
}

fn target_exists(path: &std::path::Path, folder: bool) -> String {
    if folder {
        format!("{} already exists; a download replaces it only when asked to", path.display())
    } else {
        format!("{} exists and is not a folder; a download never replaces it", path.display())
    }
}

impl ClientError {
    /// Maps an answer that is not a success, for a request about `skill` if any (a 404, 409 or
    /// 412 about a skill means the caller's descriptor is stale).
    pub(crate) async fn from_response(response: reqwest::Response, skill: Option<&SkillName>) -> ClientError {
        let status = response.status();
        if !(status.is_client_error() || status.is_server_error()) {
            return ClientError::InvalidResponse(format!("unexpected status {status}"));
        }
        let problem = Problem::read(response).await;
        match (status, skill) {
            (StatusCode::NOT_FOUND | StatusCode::CONFLICT | StatusCode::PRECONDITION_FAILED, Some(name)) => {
                ClientError::Stale { name: name.clone(), problem }
            }
            (StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN, _) => ClientError::Unauthorized(problem),
            (StatusCode::TOO_MANY_REQUESTS, _) => ClientError::RateLimited(problem),
            (StatusCode::SERVICE_UNAVAILABLE, _) => ClientError::Unavailable(problem),
            _ if status.is_client_error() => ClientError::Rejected(problem),
            _ => ClientError::Server(problem),
        }
    }

    /// Maps an answer that is not a success to a pinned read of `name` at `version`: a 404 is
    /// [`VersionNotFound`](ClientError::VersionNotFound), whatever else is missing.
    pub(crate) async fn from_pinned_response(
        response: reqwest::Response,
        name: &SkillName,
        version: &str,
    ) -> ClientError {
        if response.status() == StatusCode::NOT_FOUND {
            let problem = Problem::read(response).await;
            return ClientError::VersionNotFound { name: name.clone(), version: version.to_owned(), problem };
        }
        ClientError::from_response(response, None).await
    }

    /// The HTTP status the server answered, if it answered.
    pub fn status(&self) -> Option<StatusCode> {
        self.problem().and_then(|problem| StatusCode::from_u16(problem.status).ok())
    }

    /// The server's problem document, if it answered with an error status.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ClientError::Stale { problem, .. }
            | ClientError::VersionNotFound { problem, .. }
            | ClientError::Unauthorized(problem)
            | ClientError::RateLimited(problem)
            | ClientError::Unavailable(problem)
            | ClientError::Rejected(problem)
            | ClientError::Server(problem) => Some(problem),
            _ => None,
        }
    }

    /// Whether discovering again and retrying may succeed: the caller's descriptor is stale.
    pub fn is_stale(&self) -> bool {
        matches!(self, ClientError::NotInCatalog { .. } | ClientError::Stale { .. })
    }
}

/// Stale descriptors become [`SkillError::NotInCatalog`] (none sent) or [`SkillError::Changed`]
/// (the server said 404, 409 or 412), so composites and callers see
/// [`is_stale`](SkillError::is_stale); anything else is a [`SkillError::Source`] holding the
/// [`ClientError`], which callers can downcast to.
impl From<ClientError> for SkillError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::NotInCatalog { name } => SkillError::NotInCatalog { name, catalog: "remote" },
            ClientError::Stale { name, .. } => SkillError::Changed { name },
            other => SkillError::Source(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_read_from_problem_documents_and_from_anything_else() {
        let body = br#"{"type":"urn:skillcat:problem:catalog-unavailable","title":"Catalog unavailable","status":503,"detail":"Duplicate skill name 'x' at /a"}"#;
        let problem = Problem::parse(StatusCode::SERVICE_UNAVAILABLE, true, body);
        assert_eq!(problem.skillcat_kind(), Some("catalog-unavailable"));
        assert_eq!(problem.detail, "Duplicate skill name 'x' at /a");
        assert_eq!(problem.to_string(), "Catalog unavailable (503): Duplicate skill name 'x' at /a");

        let problem = Problem::parse(StatusCode::BAD_GATEWAY, false, b"<html>upstream down</html>\n");
        assert_eq!(
            problem,
            Problem {
                kind: "about:blank".into(),
                title: "Bad Gateway".into(),
                status: 502,
                detail: "<html>upstream down</html>".into()
            }
        );
        // A document that lies about its status is corrected to the answer's.
        let problem = Problem::parse(StatusCode::NOT_FOUND, true, br#"{"status": 200}"#);
        assert_eq!((problem.status, problem.title.as_str()), (404, "Not Found"));
        let long = vec![b'x'; 10_000];
        assert_eq!(Problem::parse(StatusCode::BAD_GATEWAY, false, &long).detail.len(), MAX_FOREIGN_DETAIL_CHARS);
    }

    #[test]
    fn stale_errors_become_stale_skill_errors_and_the_rest_sources() {
        let name = SkillName::parse("alpha").unwrap();
        let problem = Problem::parse(StatusCode::PRECONDITION_FAILED, false, b"");
        let stale = ClientError::Stale { name: name.clone(), problem: problem.clone() };
        assert!(stale.is_stale());
        assert_eq!(stale.status(), Some(StatusCode::PRECONDITION_FAILED));
        let error = SkillError::from(stale);
        assert!(matches!(&error, SkillError::Changed { name: changed } if *changed == name), "{error:?}");
        assert!(error.is_stale());
        assert!(error.to_string().contains("refresh discovery and retry"), "{error}");

        let error = SkillError::from(ClientError::NotInCatalog { name: name.clone() });
        assert!(matches!(error, SkillError::NotInCatalog { catalog: "remote", .. }));

        let unavailable = ClientError::Unavailable(Problem::parse(StatusCode::SERVICE_UNAVAILABLE, false, b"down"));
        assert!(!unavailable.is_stale());
        let error = SkillError::from(unavailable);
        assert!(!error.is_stale());
        let SkillError::Source(source) = error else { panic!("a source error") };
        let client = source.downcast_ref::<ClientError>().expect("the client's error inside");
        assert_eq!(client.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    }
}
