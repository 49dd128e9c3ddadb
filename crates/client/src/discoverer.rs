//! [`RemoteSkillDiscoverer`]: a skillcat server's catalog as a [`SkillDiscoverer`].

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use reqwest::header::{ACCEPT, IF_MATCH};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use skillcat_core::{Discovery, Skill, SkillDiscoverer, SkillError, SkillLoadResult, TokenLimit, budget_skill_content};
use tokio::task::JoinHandle;

use crate::catalog::RemoteCatalog;
use crate::config::Builder;
use crate::error::ClientError;
use crate::pinned::PinnedSkills;
use crate::shared::{Shared, lock};
use crate::{retry, watch};

/// A skillcat server's catalog over HTTP, usable wherever a local discoverer is: alone, or inside
/// a [`CompositeSkillDiscoverer`](skillcat_core::CompositeSkillDiscoverer) next to local
/// directories.
///
/// - [`discover`](SkillDiscoverer::discover) sends `GET /skills` with `If-None-Match` naming the
///   last catalog's tag; a 304 answers with the catalog already parsed (nothing is parsed
///   again). A 503 (a server-side source failed) is an error, never an empty catalog.
/// - In [watch mode](Builder::watch), while the event stream is connected and announced no
///   change since the last discovery, `discover` answers from memory without a request. After a
///   change, and while the stream is down (it reconnects with backoff), it asks the server as
///   above. On (re)connection the server's first event names its current catalog: a catalog
///   that changed during the gap is fetched; an unchanged one (same tag, and tags are hashes of
///   the catalog) is trusted again without the 304 a request would get.
/// - [`load`](SkillDiscoverer::load) sends `GET /skills/{name}/content` with `If-Match` naming the
///   skill's tag from the same discovery, so the content is exactly the version discovered. A
///   404, 409 or 412 is a stale descriptor: [`SkillError::Changed`] ("refresh discovery and
///   retry"); a descriptor not from the last discovery is [`SkillError::NotInCatalog`].
/// - [`scan`](SkillDiscoverer::scan) reports each server-side diagnostic's message alone, as a
///   composite of local sources does; [`catalog`](Self::catalog) has the source of each.
/// - A [pinned](Builder::pin) skill is discovered with its descriptor at its pinned version
///   (in place of the catalog's, or beside the catalog's skills when the current catalog no
///   longer has it) and read at that version: `?version=V` on every read, the files' version
///   recomputed and checked against the version's digest, `SKILL.md` checked against its
///   listed digest, and budgeted loads cut here from that checked content. A version the server
///   no longer has is [`ClientError::VersionNotFound`] naming the skill and version; the
///   current version is never read instead. [`catalog`](Self::catalog) stays the server's
///   current catalog, unpinned.
///
/// Every request is idempotent and retried under the [`RetryPolicy`](crate::RetryPolicy),
/// `POST /skills/{name}/load` included: it is read-only on the server (a budgeted read that
/// needs a body) and guarded by `If-Match`, so sending it twice has the effect of sending it once.
///
/// The inherent methods answer the client's own [`ClientError`]; the trait's map it into
/// [`SkillError`] (stale descriptors to errors whose [`is_stale`](SkillError::is_stale) holds,
/// anything else to [`SkillError::Source`] holding the [`ClientError`]).
pub struct RemoteSkillDiscoverer {
    pub(crate) shared: Arc<Shared>,
    /// The pinned skills resolved so far.
    pub(crate) pinned: PinnedSkills,
    /// The watch task, started at the first discovery; aborted on drop.
    watch: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Serialize)]
struct LoadRequest {
    token_limit: u32,
}

impl RemoteSkillDiscoverer {
    /// A discoverer of the server at `base_url` (such as `http://127.0.0.1:8080`, or a URL with
    /// a path prefix) with the defaults of [`Builder`].
    pub fn new(base_url: impl AsRef<str>) -> Result<Self, ClientError> {
        Self::builder(base_url).build()
    }

    /// Configures a discoverer: token, timeouts, retry policy, HTTP client, watch mode.
    pub fn builder(base_url: impl AsRef<str>) -> Builder {
        Builder::new(base_url.as_ref())
    }

    /// The base URL the routes are joined to (it ends in `/`).
    pub fn base_url(&self) -> &reqwest::Url {
        &self.shared.settings.base
    }

    /// The current catalog, with sources, tags, shadowed skills and diagnostics: from memory in
    /// watch mode while the event stream vouches for it, otherwise by a conditional
    /// `GET /skills` (a 304 answers the same [`Arc`] again).
    pub async fn catalog(&self) -> Result<Arc<RemoteCatalog>, ClientError> {
        if self.shared.settings.watch {
            if let Some(catalog) = self.shared.vouched() {
                return Ok(catalog);
            }
            self.ensure_watching();
        }
        self.shared.fetch_catalog().await
    }

    /// The last catalog answered, without a request.
    pub fn cached(&self) -> Option<Arc<RemoteCatalog>> {
        self.shared.cached()
    }

    /// Whether the next discovery will answer from memory: watch mode is on, the event stream
    /// is connected, and the last event announced the cached catalog.
    pub fn is_live(&self) -> bool {
        self.shared.settings.watch && self.shared.vouched().is_some()
    }

    /// The skills as [`discover`](SkillDiscoverer::discover) gives them: the current catalog's
    /// with each [pinned](Builder::pin) skill's descriptor at its version in place of (or
    /// beside) the catalog's, in name order; with the catalog they come from.
    pub async fn discover_pinned(&self) -> Result<(Arc<RemoteCatalog>, Vec<Skill>), ClientError> {
        let catalog = self.catalog().await?;
        let pins = &self.shared.settings.pins;
        if pins.is_empty() {
            let skills = catalog.skills().to_vec();
            return Ok((catalog, skills));
        }
        let mut skills: Vec<Skill> =
            catalog.skills().iter().filter(|skill| !pins.contains_key(skill.name())).cloned().collect();
        skills.extend(self.pinned_skills().await?);
        skills.sort_by(|a, b| a.name().cmp(b.name()));
        Ok((catalog, skills))
    }

    /// The whole `SKILL.md` of `skill`, exactly the version the last discovery listed (or, for
    /// a pinned skill, its pinned version, checked against the version's listing).
    pub async fn content(&self, skill: &Skill) -> Result<String, ClientError> {
        if let Some(pinned) = self.pinned_for(skill).await? {
            return self.pinned_content(&pinned).await;
        }
        let tag = self.shared.current_tag(skill)?;
        let settings = &self.shared.settings;
        let url = settings.url(&format!("skills/{}/content", skill.name()));
        let response =
            retry::send(settings, || settings.request(Method::GET, url.clone()).header(IF_MATCH, tag.clone())).await?;
        if response.status() != StatusCode::OK {
            return Err(ClientError::from_response(response, Some(skill.name())).await);
        }
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        String::from_utf8(bytes.into())
            .map_err(|_| ClientError::InvalidResponse(format!("the content of '{}' is not UTF-8", skill.name())))
    }

    /// The content of `skill` within `limit` estimated tokens, cut by the server as nagents'
    /// `budget_skill_content` cuts it (`POST /skills/{name}/load`, guarded like [`content`](Self::content)).
    /// A pinned skill's is cut here, by the same function, from its checked
    /// [`content`](Self::content).
    pub async fn load_budgeted(&self, skill: &Skill, limit: TokenLimit) -> Result<SkillLoadResult, ClientError> {
        if let Some(pinned) = self.pinned_for(skill).await? {
            let content = self.pinned_content(&pinned).await?;
            return Ok(budget_skill_content(&pinned.skill, &content, limit));
        }
        let tag = self.shared.current_tag(skill)?;
        let settings = &self.shared.settings;
        let url = settings.url(&format!("skills/{}/load", skill.name()));
        let body = LoadRequest { token_limit: limit.get() };
        let response = retry::send(settings, || {
            settings
                .request(Method::POST, url.clone())
                .header(IF_MATCH, tag.clone())
                .header(ACCEPT, "application/json")
                .json(&body)
        })
        .await?;
        if response.status() != StatusCode::OK {
            return Err(ClientError::from_response(response, Some(skill.name())).await);
        }
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        let result: SkillLoadResult = serde_json::from_slice(&bytes)
            .map_err(|error| ClientError::InvalidResponse(format!("the load of '{}': {error}", skill.name())))?;
        if result.name != *skill.name() || result.token_limit != limit {
            return Err(ClientError::InvalidResponse(format!("the load of '{}' answered another load", skill.name())));
        }
        Ok(result)
    }

    /// Starts the watch task if it is not running (first use, or its runtime went away).
    fn ensure_watching(&self) {
        let mut task = lock(&self.watch);
        if task.as_ref().is_none_or(JoinHandle::is_finished) {
            *task = watch::spawn(&self.shared);
        }
    }
}

// The builder's last step lives beside the discoverer it makes, so that the configuration
// depends on nothing of the discoverer.
impl Builder {
    /// Checks the base URL (`http` or `https`, without credentials in it) and makes the
    /// discoverer. Makes no request.
    pub fn build(self) -> Result<RemoteSkillDiscoverer, ClientError> {
        let shared = Shared::new(self.into_settings()?);
        Ok(RemoteSkillDiscoverer { shared: Arc::new(shared), pinned: PinnedSkills::default(), watch: Mutex::default() })
    }
}

impl Drop for RemoteSkillDiscoverer {
    fn drop(&mut self) {
        if let Some(task) = self.watch.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
    }
}

impl fmt::Debug for RemoteSkillDiscoverer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings = &self.shared.settings;
        f.debug_struct("RemoteSkillDiscoverer")
            .field("base_url", &settings.base.as_str())
            .field("token", &settings.token)
            .field("retry", &settings.retry)
            .field("request_timeout", &settings.request_timeout)
            .field("watch", &settings.watch)
            .field("pins", &settings.pins)
            .field("live", &self.is_live())
            .field("catalog", &self.cached().map(|catalog| catalog.etag().to_owned()))
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl SkillDiscoverer for RemoteSkillDiscoverer {
    async fn discover(&self) -> Result<Vec<Skill>, SkillError> {
        Ok(self.discover_pinned().await?.1)
    }

    async fn scan(&self) -> Result<Discovery, SkillError> {
        let (catalog, skills) = self.discover_pinned().await?;
        let mut discovery = catalog.discovery();
        discovery.skills = skills;
        Ok(discovery)
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        Ok(self.content(skill).await?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::RetryPolicy;
    use crate::fake::{FakeServer, Reply};

    fn catalog(etag: &str, names: &[&str]) -> Reply {
        let skills: Vec<_> = names
            .iter()
            .map(|name| {
                json!({"name": name, "description": format!("The {name} skill"), "location": format!("/srv/{name}/SKILL.md"),
                    "source": "/srv", "etag": format!("\"{name}-{etag}\"")})
            })
            .collect();
        let body = json!({"etag": format!("\"{etag}\""), "skills": skills, "shadowed": [], "diagnostics": []});
        Reply::json(200, body).header("etag", format!("\"{etag}\""))
    }

    fn problem(status: u16, kind: &str, detail: &str) -> Reply {
        let body =
            json!({"type": format!("urn:skillcat:problem:{kind}"), "title": "T", "status": status, "detail": detail});
        Reply::json(status, body).header("content-type", "application/problem+json")
    }

    fn quick(server: &FakeServer, retries: u32) -> RemoteSkillDiscoverer {
        let policy = RetryPolicy::new(retries, Duration::from_millis(1), Duration::from_millis(5));
        RemoteSkillDiscoverer::builder(server.url()).retry_policy(policy).build().unwrap()
    }

    #[tokio::test]
    async fn discovery_is_conditional_and_a_304_reuses_the_parsed_catalog() {
        let server =
            FakeServer::start(vec![catalog("c1", &["alpha"]), Reply::status(304), catalog("c2", &["beta"])]).await;
        let remote = quick(&server, 0);
        let first = remote.catalog().await.unwrap();
        let second = remote.catalog().await.unwrap();
        assert!(Arc::ptr_eq(&first, &second), "a 304 answers the catalog already parsed");
        let third = remote.discover().await.unwrap();
        assert_eq!(third[0].name().as_str(), "beta");
        let requests = server.requests();
        assert_eq!(requests[0].line, "GET /skills HTTP/1.1");
        assert_eq!(requests[0].header("if-none-match"), None);
        assert_eq!(requests[1].header("if-none-match"), Some("\"c1\""));
        assert_eq!(requests[2].header("if-none-match"), Some("\"c1\""));
        assert_eq!(remote.cached().unwrap().etag(), "\"c2\"");
    }

    #[tokio::test]
    async fn broken_connections_5xx_and_429_are_retried_honouring_retry_after() {
        let replies = vec![
            Reply::Hang,
            problem(503, "overloaded", "busy").header("retry-after", "0"),
            Reply::status(429).header("retry-after", "0"),
            // A date already past: retried at once.
            Reply::status(503).header("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
            Reply::status(502),
            catalog("c1", &["alpha"]),
        ];
        let server = FakeServer::start(replies).await;
        let remote = quick(&server, 5);
        assert_eq!(remote.discover().await.unwrap().len(), 1);
        assert_eq!(server.requests().len(), 6);
    }

    #[tokio::test]
    async fn retries_are_bounded_and_the_last_answer_is_the_error() {
        let server = FakeServer::start(Vec::new()).await;
        let remote = quick(&server, 2);
        let error = remote.catalog().await.unwrap_err();
        assert!(matches!(error, ClientError::Server(ref problem) if problem.status == 500), "{error:?}");
        assert_eq!(server.requests().len(), 3);

        let server = FakeServer::start(vec![Reply::Hang, Reply::Hang]).await;
        let error = quick(&server, 1).catalog().await.unwrap_err();
        assert!(matches!(error, ClientError::Transport(_)), "{error:?}");
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test]
    async fn client_errors_are_never_retried() {
        for (reply, expected) in [
            (problem(404, "not-found", "no such route"), "Rejected"),
            (problem(401, "unauthorized", "a bearer token is required"), "Unauthorized"),
            (problem(400, "bad-request", "no"), "Rejected"),
        ] {
            let server = FakeServer::start(vec![reply, catalog("c1", &["alpha"])]).await;
            let error = quick(&server, 3).catalog().await.unwrap_err();
            assert!(format!("{error:?}").starts_with(expected), "{error:?}");
            assert!(error.problem().is_some_and(|problem| !problem.detail.is_empty()), "{error:?}");
            assert_eq!(server.requests().len(), 1);
        }
    }

    #[tokio::test]
    async fn a_retry_after_longer_than_the_policy_allows_ends_the_retries() {
        let in_an_hour = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3600));
        for retry_after in ["60".to_owned(), in_an_hour] {
            let server = FakeServer::start(vec![Reply::status(429).header("retry-after", retry_after)]).await;
            let started = std::time::Instant::now();
            let error = quick(&server, 3).catalog().await.unwrap_err();
            assert!(matches!(error, ClientError::RateLimited(_)), "{error:?}");
            assert_eq!(server.requests().len(), 1);
            assert!(started.elapsed() < Duration::from_secs(5));
        }
    }

    #[tokio::test]
    async fn a_503_is_an_error_and_an_invalid_catalog_too() {
        let detail = "Duplicate skill name 'x' at /srv/b/SKILL.md";
        let server = FakeServer::start(vec![problem(503, "catalog-unavailable", detail)]).await;
        let error = quick(&server, 0).discover().await.unwrap_err();
        assert!(!error.is_stale());
        let SkillError::Source(source) = &error else { panic!("{error:?}") };
        let ClientError::Unavailable(problem) = source.downcast_ref::<ClientError>().unwrap() else { panic!() };
        assert_eq!((problem.skillcat_kind(), problem.detail.as_str()), (Some("catalog-unavailable"), detail));
        assert!(error.to_string().contains(detail), "{error}");

        let duplicate = catalog("c1", &["alpha", "alpha"]);
        let server = FakeServer::start(vec![duplicate]).await;
        let error = quick(&server, 0).catalog().await.unwrap_err();
        assert!(matches!(error, ClientError::InvalidResponse(_)), "{error:?}");
    }

    #[tokio::test]
    async fn loads_are_guarded_by_the_skill_tag_and_stale_answers_are_stale_errors() {
        let content =
            Reply::Answer { status: 200, headers: vec![("content-type", "text/markdown".into())], body: "# A".into() };
        let replies = vec![
            catalog("c1", &["alpha"]),
            content,
            problem(412, "precondition-failed", "the skill's current etag does not match If-Match"),
            problem(409, "skill-changed", "Skill 'alpha' changed; refresh discovery and retry"),
            problem(404, "skill-not-found", "no skill named 'alpha' in the catalog"),
        ];
        let server = FakeServer::start(replies).await;
        let remote = quick(&server, 3);
        let skills = remote.discover().await.unwrap();
        assert_eq!(remote.load(&skills[0]).await.unwrap(), "# A");
        for status in [412, 409, 404] {
            let error = remote.content(&skills[0]).await.unwrap_err();
            assert!(matches!(&error, ClientError::Stale { problem, .. } if problem.status == status), "{error:?}");
            assert!(error.to_string().contains("refresh discovery and retry"), "{error}");
        }
        let requests = server.requests();
        assert_eq!(requests.len(), 5, "stale answers are not retried");
        for request in &requests[1..] {
            assert_eq!(request.line, "GET /skills/alpha/content HTTP/1.1");
            assert_eq!(request.header("if-match"), Some("\"alpha-c1\""));
        }
        // A descriptor that is not the last discovery's is refused without a request.
        let other = Skill::new("alpha", "Another alpha", "/elsewhere/SKILL.md").unwrap();
        let error = remote.load(&other).await.unwrap_err();
        assert!(matches!(error, SkillError::NotInCatalog { catalog: "remote", .. }), "{error:?}");
        assert_eq!(server.requests().len(), 5);
    }

    #[tokio::test]
    async fn budgeted_loads_post_the_limit_and_are_retried() {
        let result = json!({"name": "alpha", "location": "/srv/alpha/SKILL.md", "content": "# A", "truncated": false,
            "estimated_tokens": 1, "token_limit": 7});
        let replies = vec![
            catalog("c1", &["alpha"]),
            Reply::status(503).header("retry-after", "0"),
            Reply::json(200, result),
            Reply::json(
                200,
                json!({"name": "beta", "location": "/srv/beta/SKILL.md", "content": "", "truncated": false,
                "estimated_tokens": 0, "token_limit": 7}),
            ),
        ];
        let server = FakeServer::start(replies).await;
        let remote = quick(&server, 1);
        let skills = remote.discover().await.unwrap();
        let limit = TokenLimit::new(7).unwrap();
        let load = remote.load_budgeted(&skills[0], limit).await.unwrap();
        assert_eq!((load.content.as_str(), load.token_limit), ("# A", limit));
        let requests = server.requests();
        assert_eq!(requests.len(), 3);
        for request in &requests[1..] {
            assert_eq!(request.line, "POST /skills/alpha/load HTTP/1.1");
            assert_eq!(request.header("if-match"), Some("\"alpha-c1\""));
            assert_eq!(request.header("content-type"), Some("application/json"));
        }
        let error = remote.load_budgeted(&skills[0], limit).await.unwrap_err();
        assert!(matches!(error, ClientError::InvalidResponse(_)), "another skill's load is refused: {error:?}");
    }

    #[tokio::test]
    async fn watch_mode_answers_from_memory_and_reopens_a_silent_stream() {
        use std::sync::atomic::Ordering;

        let body = r#"{"etag":"\"c1\"","skills":[{"name":"alpha","description":"d","location":"/a","source":"s","etag":"\"a\""}]}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\netag: \"c1\"\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let server = crate::fake::EventServer::start(answer, "\"c1\"").await;
        let remote = RemoteSkillDiscoverer::builder(server.url())
            .watch(true)
            .watch_idle_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        assert!(!remote.is_live());
        remote.discover().await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !remote.is_live() {
            assert!(tokio::time::Instant::now() < deadline, "the stream vouches for the catalog");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let fetched = server.catalogs.load(Ordering::SeqCst);
        for _ in 0..100 {
            assert_eq!(remote.discover().await.unwrap().len(), 1);
        }
        assert_eq!(server.catalogs.load(Ordering::SeqCst), fetched, "answered from memory");
        // The stream says nothing more (not even keep-alives): it is taken for dead and reopened.
        while server.streams.load(Ordering::SeqCst) < 2 {
            assert!(tokio::time::Instant::now() < deadline, "a silent stream is reopened");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Dropping the discoverer ends its task: no more streams are opened.
        drop(remote);
        let streams = server.streams.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(server.streams.load(Ordering::SeqCst), streams);
    }

    #[tokio::test]
    async fn a_timeout_is_an_error_and_not_retried() {
        let server = FakeServer::start(vec![Reply::Silent, catalog("c1", &["alpha"])]).await;
        let remote = RemoteSkillDiscoverer::builder(server.url())
            .request_timeout(Duration::from_millis(200))
            .retry_policy(RetryPolicy::new(3, Duration::from_millis(1), Duration::from_millis(5)))
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let error = remote.catalog().await.unwrap_err();
        assert!(matches!(&error, ClientError::Transport(error) if error.is_timeout()), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn an_injected_client_is_used() {
        let server = FakeServer::start(vec![catalog("c1", &["alpha"])]).await;
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-probe", reqwest::header::HeaderValue::from_static("injected"));
        let client = reqwest::Client::builder().default_headers(headers).build().unwrap();
        let remote = RemoteSkillDiscoverer::builder(server.url()).client(client).build().unwrap();
        remote.discover().await.unwrap();
        assert_eq!(server.requests()[0].header("x-probe"), Some("injected"));
    }
}
