//! Measures `discover()` against a local server, in conditional mode (a `GET /skills` with
//! `If-None-Match` answered 304) and in watch mode (from memory while the event stream is up),
//! and prints p50, p99 and max of each; also `catalog()` in watch mode ("watch Arc"), which
//! shares the cached catalog instead of cloning its descriptors.
//!
//! Against a running server:
//!
//! ```text
//! cargo build --release && target/release/skillcat serve --listen 127.0.0.1:8080 &
//! cargo run --release -p skillcat-client --example discover_bench -- --url http://127.0.0.1:8080
//! ```
//!
//! Or let the bench start one (builtin skills plus any `--dir`) on a free loopback port and stop
//! it at the end:
//!
//! ```text
//! cargo build --release
//! cargo run --release -p skillcat-client --example discover_bench -- --server target/release/skillcat
//! ```
//!
//! Options: `--calls N` (default 10000) measured calls per mode after `--warmup N` (default 1000).
//! Targets: p50 <= 100 µs conditional, <= 5 µs watch.

use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use skillcat_client::RemoteSkillDiscoverer;
use skillcat_core::SkillDiscoverer;

struct Options {
    url: Option<String>,
    server: Option<String>,
    dirs: Vec<String>,
    calls: usize,
    warmup: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options { url: None, server: None, dirs: Vec::new(), calls: 10_000, warmup: 1_000 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--url" => options.url = Some(value()?),
            "--server" => options.server = Some(value()?),
            "--dir" => options.dirs.push(value()?),
            "--calls" => options.calls = value()?.parse().map_err(|_| "--calls takes a count")?,
            "--warmup" => options.warmup = value()?.parse().map_err(|_| "--warmup takes a count")?,
            other if options.url.is_none() && other.starts_with("http") => options.url = Some(other.to_owned()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.url.is_none() == options.server.is_none() {
        return Err("give exactly one of --url URL and --server PATH-TO-SKILLCAT".into());
    }
    if options.calls == 0 {
        return Err("--calls must be positive".into());
    }
    Ok(options)
}

/// A server process this bench started; killed when dropped.
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `binary serve` on a free loopback port and waits until it is ready.
async fn spawn_server(binary: &str, dirs: &[String]) -> Result<(Spawned, String), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|error| format!("no free port: {error}"))?
        .port();
    let mut command = Command::new(binary);
    command.args(["serve", "--listen", &format!("127.0.0.1:{port}")]);
    for dir in dirs {
        command.args(["--dir", dir]);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot run {binary}: {error}"))?;
    let spawned = Spawned(child);
    let url = format!("http://127.0.0.1:{port}");
    let client = skillcat_client::reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ready = client.get(format!("{url}/readyz")).send().await.is_ok_and(|response| response.status() == 200);
        if ready {
            return Ok((spawned, url));
        }
        if Instant::now() > deadline {
            return Err(format!("{binary} did not become ready on port {port} in 10 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Summary {
    p50: Duration,
    p99: Duration,
    max: Duration,
    mean: Duration,
}

fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort_unstable();
    let at = |quantile: f64| samples[((samples.len() as f64 * quantile).ceil() as usize).clamp(1, samples.len()) - 1];
    let total: Duration = samples.iter().sum();
    Summary { p50: at(0.50), p99: at(0.99), max: at(1.0), mean: total / samples.len() as u32 }
}

/// Times `calls` discoveries after `warmup` untimed ones.
async fn measure(remote: &RemoteSkillDiscoverer, warmup: usize, calls: usize) -> Result<Vec<Duration>, String> {
    for _ in 0..warmup {
        remote.discover().await.map_err(|error| error.to_string())?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let skills = remote.discover().await;
        samples.push(started.elapsed());
        skills.map_err(|error| error.to_string())?;
    }
    Ok(samples)
}

fn report(mode: &str, summary: &Summary, target: Duration) {
    let verdict = if summary.p50 <= target { "meets" } else { "MISSES" };
    println!(
        "{mode:<12} p50 {:>9.1?}  p99 {:>9.1?}  max {:>9.1?}  mean {:>9.1?}   ({verdict} p50 target {target:?})",
        summary.p50, summary.p99, summary.max, summary.mean
    );
}

async fn run(options: Options) -> Result<(), String> {
    let (_server, url) = match (&options.url, &options.server) {
        (Some(url), _) => (None, url.clone()),
        (None, Some(binary)) => {
            let (server, url) = spawn_server(binary, &options.dirs).await?;
            (Some(server), url)
        }
        (None, None) => unreachable!("checked by options()"),
    };
    let conditional = RemoteSkillDiscoverer::new(&url).map_err(|error| error.to_string())?;
    let skills = conditional.discover().await.map_err(|error| error.to_string())?;
    println!("{url}: {} skills; {} calls per mode after {} warm-up calls", skills.len(), options.calls, options.warmup);
    let samples = measure(&conditional, options.warmup, options.calls).await?;
    report("conditional", &summarize(samples), Duration::from_micros(100));

    let watching = RemoteSkillDiscoverer::builder(&url).watch(true).build().map_err(|error| error.to_string())?;
    watching.discover().await.map_err(|error| error.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !watching.is_live() {
        if Instant::now() > deadline {
            return Err("the event stream did not vouch for the catalog within 5 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        watching.discover().await.map_err(|error| error.to_string())?;
    }
    let samples = measure(&watching, options.warmup, options.calls).await?;
    report("watch", &summarize(samples), Duration::from_micros(5));
    // The trait's discover() returns an owned Vec<Skill> (three reference counts per skill), so
    // its cost grows with the catalog; the inherent catalog() hands out the shared Arc.
    let mut samples = Vec::with_capacity(options.calls);
    for _ in 0..options.calls {
        let started = Instant::now();
        let catalog = watching.catalog().await;
        samples.push(started.elapsed());
        catalog.map_err(|error| error.to_string())?;
    }
    report("watch Arc", &summarize(samples), Duration::from_micros(5));
    if !watching.is_live() {
        println!("note: the event stream went down during the watch run; some calls asked the server");
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let result = match options() {
        Ok(options) => run(options).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("discover_bench: {error}");
            ExitCode::FAILURE
        }
    }
}
