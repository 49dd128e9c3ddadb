//! What a discoverer is configured with: the bearer token (a secret type), the retry policy, the
//! builder and the settings it makes. Nothing here depends on the discoverer, so every other part
//! of the client can use these types.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::HeaderValue;
use skillcat_core::SkillName;

use crate::error::ClientError;
use crate::lock::Lock;

/// A bearer token for `Authorization: Bearer <token>`. Its `Debug` output is redacted, it has no
/// `Display`, and the header value it makes is marked sensitive (so HTTP libraries leave it out
/// of their own debug output too).
#[derive(Clone)]
pub struct BearerToken(HeaderValue);

/// A token that cannot be sent in a header: empty, or with characters other than visible ASCII.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a bearer token must be nonempty visible ASCII (no spaces or control characters)")]
pub struct InvalidToken;

impl BearerToken {
    /// The token; surrounding whitespace (a trailing newline from a file, say) is removed.
    pub fn new(token: impl AsRef<str>) -> Result<Self, InvalidToken> {
        let token = token.as_ref().trim();
        if token.is_empty() || !token.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(InvalidToken);
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| InvalidToken)?;
        value.set_sensitive(true);
        Ok(BearerToken(value))
    }

    /// The `Authorization` header value.
    pub(crate) fn header_value(&self) -> &HeaderValue {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl std::str::FromStr for BearerToken {
    type Err = InvalidToken;

    fn from_str(token: &str) -> Result<Self, Self::Err> {
        BearerToken::new(token)
    }
}

/// When a failed request is sent again: only idempotent requests (every request this client
/// makes is one, see [`RemoteSkillDiscoverer`](crate::RemoteSkillDiscoverer)), only after a
/// connection failure, a 5xx or a 429, never after another 4xx; at most `max_retries` times,
/// waiting an exponentially growing, jittered delay (half fixed, half random) from
/// `initial_backoff` up to `max_backoff`. A `Retry-After` (seconds or an HTTP date) is honoured
/// as the delay; one longer than `max_backoff` ends the retries at once (the error is returned
/// rather than waited out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_retries: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Three retries, from 100 ms up to 2 s.
    fn default() -> Self {
        RetryPolicy::new(3, Duration::from_millis(100), Duration::from_secs(2))
    }
}

impl RetryPolicy {
    /// `max_backoff` is raised to `initial_backoff` if it is smaller.
    pub fn new(max_retries: u32, initial_backoff: Duration, max_backoff: Duration) -> Self {
        RetryPolicy { max_retries, initial_backoff, max_backoff: max_backoff.max(initial_backoff) }
    }

    /// Every request is sent once.
    pub fn none() -> Self {
        RetryPolicy::new(0, Duration::ZERO, Duration::ZERO)
    }

    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    pub fn initial_backoff(&self) -> Duration {
        self.initial_backoff
    }

    pub fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// The delay before retry number `retry` (0 for the first): between half and all of
    /// `initial_backoff * 2^retry`, capped at `max_backoff`.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self.initial_backoff.saturating_mul(1u32 << retry.min(20)).min(self.max_backoff);
        ceiling / 2 + (ceiling / 2).mul_f64(fastrand::f64())
    }
}

/// Builds a [`RemoteSkillDiscoverer`](crate::RemoteSkillDiscoverer); start with
/// [`RemoteSkillDiscoverer::builder`](crate::RemoteSkillDiscoverer::builder).
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    base_url: String,
    token: Option<BearerToken>,
    client: Option<reqwest::Client>,
    connect_timeout: Duration,
    request_timeout: Duration,
    retry: RetryPolicy,
    watch: bool,
    watch_idle_timeout: Duration,
    pins: Vec<(SkillName, String)>,
    lock_file: Option<PathBuf>,
}

impl Builder {
    pub(crate) fn new(base_url: &str) -> Self {
        Builder {
            base_url: base_url.to_owned(),
            token: None,
            client: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            watch: false,
            watch_idle_timeout: Duration::from_secs(45),
            pins: Vec::new(),
            lock_file: None,
        }
    }

    /// Pins the skill `name` to `version`: a version digest (`sha256:<64 hex>`), a commit id
    /// (7 to 40 hex digits) or a tag, as the server resolves them. A pinned skill is discovered
    /// with its descriptor at that version (also when the current catalog no longer has it),
    /// and its content, files and downloads are of that version, checked against the version's
    /// digest: the files' recomputed version must be the one the server resolved (and `version`
    /// itself when it is a digest), `SKILL.md` must be the listed bytes. A version the server
    /// does not have is [`ClientError::VersionNotFound`], from discovery on: never the current
    /// version instead. Pinning a name again replaces its pin; a pin wins over the
    /// [`lock_file`](Self::lock_file)'s entry for the name.
    pub fn pin(mut self, name: SkillName, version: impl Into<String>) -> Self {
        self.pins.push((name, version.into()));
        self
    }

    /// Pins every skill of the lock file at `path` (as `skillcat download --lock` writes it)
    /// whose `source` is this discoverer's base URL, as [`pin`](Self::pin) does; entries of
    /// other servers are ignored. The file is read by [`build`](Self::build); an unreadable
    /// or invalid one is [`ClientError::Lock`].
    pub fn lock_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.lock_file = Some(path.into());
        self
    }

    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn bearer_token(mut self, token: BearerToken) -> Self {
        self.token = Some(token);
        self
    }

    /// The HTTP client to use (its connection pool, proxy and TLS settings), instead of one the
    /// builder makes. Give it no total `timeout`: that would also cut the watch mode's event
    /// stream; this discoverer sets [`request_timeout`](Self::request_timeout) per request.
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// How long connecting may take (default 5 s). Only for the client the builder makes: an
    /// injected [`client`](Self::client) keeps its own.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one request may take, connecting through reading the whole body (default 30 s).
    /// Not applied to the watch mode's event stream, which has
    /// [`watch_idle_timeout`](Self::watch_idle_timeout).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// When failed requests are sent again (default: [`RetryPolicy::default`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Watch mode (default off): a background task holds `GET /events` open, and while it is
    /// connected and announced no change, `discover()` answers from memory without a request.
    /// The task starts at the first discovery (inside a Tokio runtime) and ends when the
    /// discoverer is dropped.
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = watch;
        self
    }

    /// In watch mode, how long the event stream may stay silent before it is taken for dead
    /// and reopened (default 45 s; the server sends a keep-alive every 15 s).
    pub fn watch_idle_timeout(mut self, timeout: Duration) -> Self {
        self.watch_idle_timeout = timeout;
        self
    }

    /// Checks the base URL and makes the client, if none was injected: what
    /// [`build`](Self::build) makes a discoverer of.
    pub(crate) fn into_settings(self) -> Result<Settings, ClientError> {
        let base = base_url(&self.base_url)?;
        let client = match self.client {
            Some(client) => client,
            None => reqwest::Client::builder()
                .connect_timeout(self.connect_timeout)
                .tcp_nodelay(true)
                .build()
                .map_err(|error| ClientError::Config(format!("cannot make an HTTP client: {error}")))?,
        };
        let mut pins = BTreeMap::new();
        if let Some(path) = &self.lock_file {
            let lock = Lock::read(path)?;
            for (name, locked) in lock.skills() {
                if base_url(&locked.source).is_ok_and(|source| source == base) {
                    pins.insert(name.clone(), locked.version.to_string());
                }
            }
        }
        for (name, version) in self.pins {
            check_version(&name, &version)?;
            pins.insert(name, version);
        }
        Ok(Settings {
            endpoints: Endpoints::new(&base)?,
            pins,
            base,
            client,
            token: self.token,
            request_timeout: self.request_timeout,
            retry: self.retry,
            watch: self.watch,
            watch_idle_timeout: self.watch_idle_timeout,
        })
    }
}

/// A version a pin may name: what a server can resolve (a digest, hex digits, a tag), never
/// empty, blank or with control characters; one that claims to be a digest must be one.
fn check_version(name: &SkillName, version: &str) -> Result<(), ClientError> {
    let usable = !version.is_empty()
        && version.len() <= 256
        && version.chars().all(|c| !c.is_control() && !c.is_whitespace())
        && (!version.starts_with("sha256:") || skillcat_core::Digest::parse(version).is_ok());
    if usable {
        Ok(())
    } else {
        Err(ClientError::Config(format!(
            "the pin of '{name}', {version:?}, is not a version (a sha256: digest, a commit id or a tag)"
        )))
    }
}

/// The base URL with a path that ends in `/`, so that the routes join below it.
fn base_url(text: &str) -> Result<Url, ClientError> {
    let mut url =
        Url::parse(text.trim()).map_err(|error| ClientError::Config(format!("base URL {text:?}: {error}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() || url.host().is_none() {
        return Err(ClientError::Config(format!("base URL {text:?} is not an http or https URL")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ClientError::Config("the base URL must not hold credentials; use a bearer token".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ClientError::Config(format!("base URL {text:?} must not have a query or a fragment")));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// The fixed routes, joined once.
#[derive(Debug)]
pub(crate) struct Endpoints {
    pub skills: Url,
    pub events: Url,
}

impl Endpoints {
    fn new(base: &Url) -> Result<Self, ClientError> {
        let join = |path: &str| base.join(path).map_err(|error| ClientError::Config(format!("{path}: {error}")));
        Ok(Endpoints { skills: join("skills")?, events: join("events")? })
    }
}

/// Appends `segment` with every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`.
fn encode_segment(segment: &str, out: &mut String) {
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

/// Everything a built discoverer (and its watch task) shares.
#[derive(Debug)]
pub(crate) struct Settings {
    pub base: Url,
    /// The pinned skills and the version each is pinned to, as given.
    pub pins: BTreeMap<SkillName, String>,
    pub endpoints: Endpoints,
    pub client: reqwest::Client,
    pub token: Option<BearerToken>,
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    pub watch: bool,
    pub watch_idle_timeout: Duration,
}

impl Settings {
    /// A route below the base URL; skill names need no escaping (they are `[A-Za-z0-9_-]`).
    pub fn url(&self, path: &str) -> Url {
        self.base.join(path).expect("a relative path of a valid skill name joins")
    }

    /// The route `skills/{name}/{tail...}` below the base URL. Every segment is percent-encoded
    /// but for RFC 3986's unreserved characters, so a file's name reaches the server as exactly
    /// one segment, which it decodes once.
    pub fn skill_url<'a>(&self, name: &SkillName, tail: impl IntoIterator<Item = &'a str>) -> Url {
        let mut path = format!("skills/{name}");
        for segment in tail {
            path.push('/');
            encode_segment(segment, &mut path);
        }
        self.url(&path)
    }

    /// A request with the token, if any.
    pub fn request(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        let request = self.client.request(method, url);
        match &self.token {
            Some(token) => request.header(reqwest::header::AUTHORIZATION, token.header_value().clone()),
            None => request,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_redacted_and_validated() {
        let token = BearerToken::new(" s3cr3t-t0ken\n").unwrap();
        assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
        assert_eq!(token.header_value().to_str().unwrap(), "Bearer s3cr3t-t0ken");
        assert!(token.header_value().is_sensitive());
        assert!(!format!("{:?}", token.header_value()).contains("s3cr3t"));
        for bad in ["", "  ", "two words", "tab\there", "é"] {
            assert_eq!(BearerToken::new(bad).unwrap_err(), InvalidToken, "{bad:?}");
        }
        let builder = Builder::new("http://127.0.0.1:1").bearer_token(token);
        assert!(!format!("{builder:?}").contains("s3cr3t"));
    }

    #[test]
    fn base_urls_are_http_without_credentials_and_end_in_a_slash() {
        let ok = |text: &str| base_url(text).unwrap().to_string();
        assert_eq!(ok("http://127.0.0.1:8080"), "http://127.0.0.1:8080/");
        assert_eq!(ok("https://skills.example/api"), "https://skills.example/api/");
        assert_eq!(ok("http://host/api/"), "http://host/api/");
        for bad in ["127.0.0.1:8080", "ftp://host/", "http://user:pw@host/", "http://host/?q=1", "not a url"] {
            assert!(matches!(base_url(bad), Err(ClientError::Config(_))), "{bad}");
        }
        let endpoints = Endpoints::new(&base_url("http://host/api").unwrap()).unwrap();
        assert_eq!(endpoints.skills.as_str(), "http://host/api/skills");
        assert_eq!(endpoints.events.as_str(), "http://host/api/events");
    }

    #[test]
    fn file_routes_encode_each_segment_whole() {
        let settings = Builder::new("http://host/api").into_settings().unwrap();
        let name = SkillName::parse("alpha").unwrap();
        assert_eq!(settings.skill_url(&name, ["files"]).as_str(), "http://host/api/skills/alpha/files");
        let url = settings.skill_url(&name, ["files", "a b", "ü%2F?#;:", "run.py"]);
        assert_eq!(url.as_str(), "http://host/api/skills/alpha/files/a%20b/%C3%BC%252F%3F%23%3B%3A/run.py");
        assert_eq!(settings.skill_url(&name, ["archive"]).as_str(), "http://host/api/skills/alpha/archive");
    }

    #[test]
    fn backoff_grows_exponentially_with_jitter_up_to_the_cap() {
        let policy = RetryPolicy::new(5, Duration::from_millis(100), Duration::from_millis(350));
        for _ in 0..100 {
            let first = policy.backoff(0);
            assert!((Duration::from_millis(50)..=Duration::from_millis(100)).contains(&first), "{first:?}");
            let second = policy.backoff(1);
            assert!((Duration::from_millis(100)..=Duration::from_millis(200)).contains(&second), "{second:?}");
            let capped = policy.backoff(30);
            assert!((Duration::from_millis(175)..=Duration::from_millis(350)).contains(&capped), "{capped:?}");
        }
        let spread: std::collections::HashSet<_> = (0..50).map(|_| policy.backoff(3)).collect();
        assert!(spread.len() > 10, "jitter varies the delay: {spread:?}");
        assert_eq!(RetryPolicy::none().backoff(0), Duration::ZERO);
    }
}
