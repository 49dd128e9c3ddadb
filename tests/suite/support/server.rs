//! A real `skillcat serve` on port 0 for the tests, with one method per endpoint.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use skillcat::app::App;
use skillcat::auth::TokenReloads;
use skillcat::catalog::LiveOptions;
use skillcat::config::SourceConfig;
use skillcat::server::{ServeOptions, Server};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::wait::DEADLINE;

/// A running server and a client for it. Dropping it stops the server.
pub struct TestApp {
    pub address: SocketAddr,
    pub client: reqwest::Client,
    /// The server's shared state, for what no answer shows (re-reads of the token file).
    state: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestApp {
    /// Serves `sources` (no builtin unless listed) with file watching on and no periodic rescan.
    pub async fn spawn(sources: Vec<SourceConfig>) -> TestApp {
        Self::spawn_with(sources, |_| {}).await
    }

    /// A server over one directory source.
    pub async fn spawn_dir(root: &Path) -> TestApp {
        Self::spawn_dir_with(root, |_| {}).await
    }

    /// A server over one directory source, with options adjusted by `adjust`.
    pub async fn spawn_dir_with(root: &Path, adjust: impl FnOnce(&mut ServeOptions)) -> TestApp {
        Self::spawn_with(vec![SourceConfig::directory(root)], adjust).await
    }

    /// Serves with options adjusted by `adjust`; returns once the first discovery is published.
    pub async fn spawn_with(sources: Vec<SourceConfig>, adjust: impl FnOnce(&mut ServeOptions)) -> TestApp {
        // The process's TLS provider, as the server's git client installs it (ring): the MCP
        // client of the tests is the same reqwest, which needs one even for plain http.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut options = ServeOptions::new(SocketAddr::from(([127, 0, 0, 1], 0)), sources);
        options.live = LiveOptions { rescan_interval: None, watch: true };
        adjust(&mut options);
        let server = Server::bind(options).await.expect("bind a test server");
        let address = server.local_addr().expect("address");
        let state = Arc::clone(server.app());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        tokio::time::timeout(Duration::from_secs(10), state.catalog.ready())
            .await
            .expect("the first discovery finishes");
        let client = reqwest::Client::builder().no_gzip().build().expect("client");
        TestApp { address, client, state, stop: Some(stop), task: Some(task) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(self.url(path))
    }

    pub async fn skills(&self) -> reqwest::Response {
        self.get("/skills").send().await.expect("GET /skills")
    }

    pub async fn skill(&self, name: &str) -> reqwest::Response {
        self.get(&format!("/skills/{name}")).send().await.expect("GET /skills/{name}")
    }

    pub async fn content(&self, name: &str) -> reqwest::Response {
        self.get(&format!("/skills/{name}/content")).send().await.expect("GET content")
    }

    pub async fn load(&self, name: &str, body: Option<serde_json::Value>) -> reqwest::Response {
        let request = self.client.post(self.url(&format!("/skills/{name}/load")));
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        request.send().await.expect("POST load")
    }

    pub async fn manifest(&self) -> reqwest::Response {
        self.get("/manifest").send().await.expect("GET /manifest")
    }

    /// The catalog's current tag, from `GET /skills`.
    pub async fn catalog_etag(&self) -> String {
        let response = self.skills().await;
        assert_eq!(response.status(), 200);
        response.headers()["etag"].to_str().expect("etag").to_owned()
    }

    /// Waits (at most [`DEADLINE`]) until `GET /skills` satisfies `check`; returns the body.
    pub async fn wait_for_catalog(&self, check: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let response = self.skills().await;
            if response.status() == 200 {
                let body: serde_json::Value = response.json().await.expect("json");
                if check(&body) {
                    return body;
                }
            }
            assert!(tokio::time::Instant::now() < deadline, "the catalog did not reach the expected state in time");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The value of a series of `GET /metrics` (a full line's name and labels); the series must
    /// be exported.
    pub async fn metric(&self, series: &str) -> u64 {
        self.metric_if_any(series).await.unwrap_or_else(|| panic!("{series} is not exported"))
    }

    /// How many requests of `route` (its template) were answered with `status`: 0 until one is.
    pub async fn requests(&self, route: &str, status: u16) -> u64 {
        let series = format!("skillcat_http_requests_total{{route=\"{route}\",status=\"{status}\"}}");
        self.metric_if_any(&series).await.unwrap_or(0)
    }

    async fn metric_if_any(&self, series: &str) -> Option<u64> {
        let response = self.get("/metrics").send().await.expect("GET /metrics");
        assert_eq!(response.status(), 200, "GET /metrics");
        let text = response.text().await.expect("metrics text");
        text.lines()
            .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
            .map(|value| value.trim().parse().expect("an integer sample"))
    }

    /// How the re-reads of the token file went so far; the server must have one.
    pub fn token_reloads(&self) -> TokenReloads {
        self.state.tokens.as_ref().expect("the server has a token file").reloads()
    }

    /// Starts a graceful shutdown and waits for the server to finish.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        task.await.expect("the server task")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
