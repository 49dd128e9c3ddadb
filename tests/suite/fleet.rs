//! MCP as deployed: three replicas of the server binary on one tree behind nginx's round-robin
//! balancer (a request to each replica in turn, as ingress controllers spread them), on loopback.
//! Through the balancer, clients of both revisions rebuild every skill folder byte for byte and
//! call the tools without a failed call; then the replicas are replaced one at a time (a rolling
//! update) while the clients go on, and every call that fails succeeds when retried.
//!
//! Needs Debian's nginx (`.ci/run` installs it); without it the test fails, saying so.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{GetSkillRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::mcp::{Client, Listener, bytes_of, call, connect_2026, connect_to, folder_files, rebuild, text};
use crate::support::git::free_port;
use crate::support::process::ServeProcess;

/// The nginx executable of Debian's package.
fn nginx() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
        .expect("nginx is needed (Debian's package `nginx`; .ci/run installs it)")
}

/// nginx on a free loopback port, spreading requests over its upstreams round-robin; killed on
/// drop. Its upstreams change as a Service's endpoints do in a rolling update: a new replica joins
/// once ready, then the old one leaves before it is stopped ([`Balancer::upstreams`]).
struct Balancer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Balancer {
    fn start(upstreams: &[u16]) -> Balancer {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("tmp")).expect("tmp");
        let port = free_port();
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, Self::conf(dir.path(), port, upstreams)).expect("nginx.conf");
        let child = Command::new(nginx())
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        Balancer { child, port, dir }
    }

    /// As ingress-nginx configures it: keep-alive to the upstreams, answers streamed as they come
    /// (event streams), the client's Host passed on, no replica ever marked down (`max_fails=0`),
    /// nginx's default retry of a request that could not be sent to one replica (`error timeout`)
    /// on the next, and no affinity of any kind.
    fn conf(prefix: &Path, port: u16, upstreams: &[u16]) -> String {
        let servers: String =
            upstreams.iter().map(|port| format!("        server 127.0.0.1:{port} max_fails=0;\n")).collect();
        // Root's workers would otherwise switch to `nobody`.
        let user = if rustix::process::geteuid().is_root() { "user root root;\n" } else { "" };
        format!(
            "{user}worker_processes 1;\ndaemon off;\nmaster_process on;\npid {p}/nginx.pid;\n\
             error_log {p}/error.log warn;\nevents {{ worker_connections 1024; }}\nhttp {{\n\
             access_log off;\n client_body_temp_path {p}/tmp/body;\n proxy_temp_path {p}/tmp/proxy;\n\
             fastcgi_temp_path {p}/tmp/fastcgi;\n uwsgi_temp_path {p}/tmp/uwsgi;\n scgi_temp_path {p}/tmp/scgi;\n\
             upstream skillcat {{\n{servers}        keepalive 16;\n }}\n\
             server {{\n  listen 127.0.0.1:{port};\n  location / {{\n\
             proxy_pass http://skillcat;\n proxy_http_version 1.1;\n proxy_set_header Connection \"\";\n\
             proxy_set_header Host $http_host;\n proxy_buffering off;\n proxy_read_timeout 300s;\n\
             client_max_body_size 8m;\n  }}\n }}\n}}\n",
            p = prefix.display(),
        )
    }

    /// Replaces the upstreams: the configuration rewritten and reloaded (SIGHUP to the master),
    /// then a moment for the old worker to hand over.
    async fn upstreams(&self, upstreams: &[u16]) {
        std::fs::write(self.dir.path().join("nginx.conf"), Self::conf(self.dir.path(), self.port, upstreams))
            .expect("nginx.conf");
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::HUP).expect("SIGHUP");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What nginx has logged (warnings and errors: each failed exchange with a replica).
    fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    async fn ready(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while reqwest::get(self.url("/readyz")).await.map(|answer| answer.status()).ok()
            != Some(reqwest::StatusCode::OK)
        {
            assert!(std::time::Instant::now() < deadline, "nginx did not answer in 10 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The public collections of `tests/data/collections`, each a `--dir`.
const COLLECTIONS: [&str; 4] = [
    "anthropics-skills/skills",
    "K-Dense-AI-claude-scientific-skills/scientific-skills",
    "obra-superpowers/skills",
    "openai-skills/skills",
];

/// A replica of the service on `port`, serving the public collections.
fn replica(port: u16) -> ServeProcess {
    let collections = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/collections");
    let mut args = vec!["serve".to_owned(), "--no-builtin".to_owned(), "--rescan-interval".to_owned(), "0".to_owned()];
    args.extend(["--listen".to_owned(), format!("127.0.0.1:{port}")]);
    for collection in COLLECTIONS {
        args.extend(["--dir".to_owned(), collections.join(collection).to_str().expect("UTF-8").to_owned()]);
    }
    ServeProcess::start(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[], "warn,skillcat=info")
}

/// How many MCP requests a replica has answered, by its metrics.
async fn mcp_requests(replica: &ServeProcess) -> u64 {
    let text = reqwest::get(replica.url("/metrics")).await.expect("GET /metrics").text().await.expect("text");
    text.lines()
        .filter(|line| line.starts_with("skillcat_mcp_requests_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Every skill rebuilt byte for byte from `resources/read`, each entry as `skills/get` gives it,
/// and the tools answering for each; every call through the balancer.
async fn rebuild_everything(client: &Client, folders: &[(String, PathBuf)]) {
    let listed = client.list_all_skills().await.expect("skills/list");
    let names: Vec<&str> = listed.iter().map(|skill| skill.frontmatter.name.as_str()).collect();
    assert_eq!(names, folders.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>());
    for (skill, (_, folder)) in listed.iter().zip(folders) {
        assert_eq!(rebuild(client, skill).await, folder_files(folder), "{}", skill.uri);
        let got = client.get_skill(GetSkillRequestParams::new(&skill.uri)).await.expect("skills/get");
        assert_eq!(&got.skill, skill);
    }
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 4);
    let manifest = call(client, "list_skills", json!({})).await;
    assert_eq!(manifest.is_error, Some(false));
    for (name, folder) in folders {
        let loaded = call(client, "load_skill", json!({"name": name})).await;
        assert_eq!(loaded.is_error, Some(false), "{name}: {}", text(&loaded));
        let file = call(client, "read_skill_file", json!({"name": name, "path": "SKILL.md"})).await;
        assert_eq!(text(&file).as_bytes(), std::fs::read(folder.join("SKILL.md")).expect("SKILL.md"), "{name}");
        assert!(text(&manifest).contains(name.as_str()), "{name}");
    }
}

/// The protocol revision a client speaks.
#[derive(Debug, Clone, Copy)]
enum Revision {
    /// 2025-11-25: `initialize`, then requests that name the revision in a header.
    Legacy,
    /// 2026-07-28: `server/discover`, then self-contained requests.
    Current,
}

impl Revision {
    async fn connect(self, url: &str) -> Client {
        match self {
            Revision::Legacy => connect_to(url, Listener::default(), None).await,
            Revision::Current => connect_2026(url).await,
        }
    }
}

/// One call of the clients' mix: a listing, or a read of a SKILL.md.
async fn one_call(client: &Client, round: usize, folders: &[(String, PathBuf)]) -> Result<(), String> {
    if round.is_multiple_of(2) {
        let listed = client.list_all_skills().await.map_err(|error| error.to_string())?;
        return if listed.len() == folders.len() { Ok(()) } else { Err(format!("{} skills listed", listed.len())) };
    }
    let (name, folder) = &folders[round / 2 % folders.len()];
    let read = client
        .read_resource(ReadResourceRequestParams::new(format!("skill://{name}/SKILL.md")))
        .await
        .map_err(|error| error.to_string())?;
    let expected = std::fs::read(folder.join("SKILL.md")).expect("SKILL.md");
    if bytes_of(&read.contents[0]) == expected { Ok(()) } else { Err(format!("{name}: other bytes")) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_behind_a_round_robin_balancer_answer_every_call_and_survive_a_rolling_restart() {
    // The MCP client's reqwest needs the process's TLS provider even for plain http.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ports = [free_port(), free_port(), free_port()];
    let mut replicas: Vec<ServeProcess> = ports.iter().map(|port| replica(*port)).collect();
    for replica in &replicas {
        replica.ready().await;
    }
    let balancer = Balancer::start(&ports);
    balancer.ready().await;
    let url = balancer.url("/mcp");

    let catalog: Value = reqwest::get(balancer.url("/skills")).await.expect("GET /skills").json().await.expect("JSON");
    let folders: Vec<(String, PathBuf)> = catalog["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| {
            let location = PathBuf::from(skill["location"].as_str().expect("location"));
            (skill["name"].as_str().expect("name").to_owned(), location.parent().expect("a folder").to_path_buf())
        })
        .collect();
    assert_eq!(folders.len(), 9, "the skills of the four collections");

    let legacy = Revision::Legacy.connect(&url).await;
    let current = Revision::Current.connect(&url).await;
    let mut before = Vec::new();
    for replica in &replicas {
        before.push(mcp_requests(replica).await);
    }
    rebuild_everything(&legacy, &folders).await;
    rebuild_everything(&current, &folders).await;
    // The balancer spread the calls: every replica answered its share.
    for (index, (replica, before)) in replicas.iter().zip(before).enumerate() {
        let answered = mcp_requests(replica).await - before;
        assert!(answered >= 20, "replica {index} answered {answered} calls");
    }

    // A rolling update, as Kubernetes runs one: a new replica started, once ready put in the
    // balancer's rotation and the old one taken out, then stopped with SIGTERM; one replica after
    // the other while a client of each revision keeps calling. A call that fails must succeed when
    // sent again; rmcp's client ends its transport at an HTTP error, so the retry goes through a
    // new client of the same revision, as a host would reconnect (the server has no session to
    // lose).
    let folders = Arc::new(folders);
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicU64::new(0));
    let mut callers = Vec::new();
    for (revision, client) in [(Revision::Legacy, legacy), (Revision::Current, current)] {
        let (folders, stop, calls, retried) = (folders.clone(), stop.clone(), calls.clone(), retried.clone());
        let url = url.clone();
        callers.push(tokio::spawn(async move {
            let mut client = client;
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                if let Err(error) = one_call(&client, round, &folders).await {
                    retried.fetch_add(1, Ordering::Relaxed);
                    client = revision.connect(&url).await;
                    one_call(&client, round, &folders)
                        .await
                        .unwrap_or_else(|again| panic!("{revision:?}: a call failed ({error}) and again ({again})"));
                }
                calls.fetch_add(1, Ordering::Relaxed);
                round += 1;
            }
            client
        }));
    }
    let mut ports = ports.to_vec();
    for index in 0..ports.len() {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let port = free_port();
        let started = replica(port);
        started.ready().await;
        ports[index] = port;
        balancer.upstreams(&ports).await;
        let stopped = std::mem::replace(&mut replicas[index], started);
        let (status, log) = tokio::task::spawn_blocking(move || stopped.terminate()).await.expect("terminate");
        assert!(status.success(), "replica {index} exited {status}:\n{log}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let mut clients = Vec::new();
    for caller in callers {
        clients.push(caller.await.unwrap_or_else(|error| panic!("{error}; nginx logged:\n{}", balancer.errors())));
    }
    let (calls, retried) = (calls.load(Ordering::Relaxed), retried.load(Ordering::Relaxed));
    assert!(calls >= 50, "{calls} calls during the restart");
    eprintln!("rolling restart: {calls} calls, {retried} retried");
    // The clients are as good as new afterwards.
    for client in &clients {
        rebuild_everything(client, &folders).await;
    }
    for client in clients {
        client.cancel().await.expect("close");
    }
}
