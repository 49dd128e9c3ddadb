//! The command line: offline commands over the same sources the server uses.

mod check;
mod download;
mod health;
mod init;
mod locks;
mod staging;

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use skillcat_core::{MAX_SKILL_TOKEN_LIMIT, SkillName, TokenLimit};

use crate::catalog::OfflineCatalog;
use crate::config::SourceArgs;
use crate::limits::{ConnectionLimits, memory_limit, raise_descriptor_limit};
use crate::listen::ListenAddr;
use crate::observability::LogFormat;
use crate::server::{ServeOptions, Server};
use crate::sources::Sources;

#[derive(Debug, Parser)]
#[command(name = "skillcat", version, about = "A skill catalog for LLM agents")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the catalog over HTTP, kept current as files change.
    Serve(ServeArgs),
    /// List skills, shadowed skills and diagnostics; exit 1 on any diagnostic or source error.
    Check {
        #[command(flatten)]
        sources: SourceArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also check each skill against the agentskills.io specification: errors (its MUSTs)
        /// exit 1, advisories are only shown.
        #[arg(long)]
        spec: bool,
    },
    /// Print the prompt manifest of the catalog, exactly as agents receive it.
    Manifest {
        #[command(flatten)]
        sources: SourceArgs,
    },
    /// Ask a running server whether it is alive (GET /healthz); exit 0 if it answers 200. For
    /// container health checks, where there is no HTTP client to run.
    Health {
        /// The server's address, as `serve --listen` takes it; an unspecified one (0.0.0.0, [::],
        /// :PORT) means this host's loopback.
        #[arg(long, value_name = "ADDR", env = "SKILLCAT_LISTEN", default_value_t = DEFAULT_LISTEN)]
        listen: ListenAddr,
        /// Seconds to wait for the answer.
        #[arg(long, value_name = "SECS", default_value_t = 3)]
        timeout: u64,
    },
    /// Download skills' folders from a running server into DIR/NAME: every file checked
    /// against its digest, each folder written beside it and renamed into place at once. With
    /// --lock, record the version installed; with --frozen --lock, install exactly the locked
    /// versions.
    Download(download::DownloadArgs),
    /// Check an installed tree against a lock: each locked skill's DIR/NAME recomputed to its
    /// version (its regular files, 644 or 755, in path order) and compared with the lock's.
    /// Exit 1 naming each skill that differs or is missing, 0 when all match.
    Verify(locks::VerifyArgs),
    /// List the locked skills whose current version on their source differs from the lock's
    /// (or that their source no longer has). Exit 1 when any is outdated, 0 when none is, 2
    /// when the lock cannot be read or a source cannot be asked.
    Outdated(locks::OutdatedArgs),
    /// Create a new skill's folder, DIR/NAME, with a SKILL.md that passes `check --spec`
    /// (and with --full, `scripts/` and `references/` stubs). An existing folder is left alone.
    Init(init::InitArgs),
    /// Print the budgeted load of one skill as JSON.
    Load {
        #[command(flatten)]
        sources: SourceArgs,
        /// The skill to load.
        name: SkillName,
        /// The budget in estimated tokens (4 UTF-8 bytes each), 1 to 100000.
        #[arg(long, value_name = "N", value_parser = token_limit, default_value = "10000")]
        token_limit: TokenLimit,
    },
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub sources: SourceArgs,
    /// The address to listen on: IP:PORT, [IPv6]:PORT, HOST:PORT (resolved at start, its first
    /// IPv4 address preferred) or :PORT (every IPv4 interface) [default: the config file's
    /// `listen`, else 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR", env = "SKILLCAT_LISTEN")]
    pub listen: Option<ListenAddr>,
    /// The URL clients reach the server at (behind a proxy, the proxy's): every absolute URL the
    /// server writes (pages' snippets, /api/search's sources, the startup line) uses it
    /// [default: the config file's `public_url`, else the URL each request reached it at].
    #[arg(long, value_name = "URL", env = "SKILLCAT_PUBLIC_URL")]
    pub public_url: Option<crate::config::PublicUrl>,
    /// Seconds between fallback rescans (for missed file events); 0 disables them.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub rescan_interval: u64,
    /// Bearer tokens, one per line: every route but /healthz and /readyz then requires
    /// `Authorization: Bearer <token>`. The file is re-read when it changes.
    #[arg(long, value_name = "FILE", env = "SKILLCAT_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// The secret of `POST /hooks/git` (its first line): a push webhook signed with it (GitHub's
    /// X-Hub-Signature-256, GitLab's X-Gitlab-Token, or Authorization: Bearer) fetches the git
    /// sources at once. Without it the route answers 404.
    #[arg(long, value_name = "FILE", env = "SKILLCAT_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<std::path::PathBuf>,
    /// How log lines are written (filter them with RUST_LOG).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "SKILLCAT_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Connections open at once [default: the limit on open files less 256 kept in reserve].
    #[arg(long, value_name = "N", env = "SKILLCAT_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// GET /events streams open at once [default: half the connections].
    #[arg(long, value_name = "N", env = "SKILLCAT_MAX_STREAMS", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: Option<u32>,
    /// Seconds a write may wait for a client that stopped reading before its connection closes.
    #[arg(long, value_name = "SECS", env = "SKILLCAT_SEND_TIMEOUT", default_value_t = crate::server::DEFAULT_SEND_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub send_timeout: u64,
    /// GET /events streams open at once from one client address [default: a sixteenth of the
    /// streams, at most 64].
    #[arg(long, value_name = "N", env = "SKILLCAT_MAX_STREAMS_PER_CLIENT", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams_per_client: Option<u32>,
}

impl Command {
    /// Records the order of `--dir` and `--git` in the command line (clap keeps each flag's
    /// values apart).
    fn order_sources(&mut self, matches: &clap::ArgMatches) {
        match self {
            Command::Serve(ServeArgs { sources, .. })
            | Command::Check { sources, .. }
            | Command::Manifest { sources }
            | Command::Load { sources, .. } => sources.order_from(matches),
            Command::Health { .. }
            | Command::Download(_)
            | Command::Verify(_)
            | Command::Outdated(_)
            | Command::Init(_) => {}
        }
    }
}

const DEFAULT_LISTEN: ListenAddr =
    ListenAddr::socket(std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080));

/// Runs the command line and returns the process's exit code.
pub fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    if let Some((_, matches)) = matches.subcommand() {
        cli.command.order_sources(matches);
    }
    match cli.command {
        Command::Serve(args) => return serve_main(args),
        Command::Health { listen, timeout } => return health::main(listen, std::time::Duration::from_secs(timeout)),
        _ => {}
    }
    pad_malloc_heaps();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::new(error).context("cannot start the async runtime")),
    };
    let done = runtime.block_on(run(cli));
    // The answer is out: the runtime's idle threads are not waited for.
    runtime.shutdown_background();
    match done {
        Ok(code) => code,
        Err(error) => fail(&error),
    }
}

fn serve_main(args: ServeArgs) -> ExitCode {
    limit_malloc_arenas();
    crate::observability::init_tracing(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::new(error).context("cannot start the async runtime")),
    };
    let served = runtime.block_on(serve(args));
    // A blocking task stuck in a system call (a read of a hung network filesystem) must not keep
    // the process from exiting once the server has shut down.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// A command's scan builds its catalog on the walk's threads, in their own arenas, which glibc
/// grows a page or two at a time, one `mprotect` call each: about 800 calls in a scan of
/// 10,000 skills (docs/BENCHMARKS.md). Padded, an arena grows in steps of 16 MiB, which cost
/// nothing until they are used. A command answers once and exits, so the
/// padding is never kept beyond it. `MALLOC_TOP_PAD_` in the environment still wins.
fn pad_malloc_heaps() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_TOP_PAD_").is_none() {
        // SAFETY: called before any other thread exists; mallopt only sets an allocator option.
        unsafe {
            libc::mallopt(libc::M_TOP_PAD, 16 << 20);
        }
    }
}

/// glibc gives each thread that allocates its own arena (up to 8 per core) and returns little of
/// it: a server whose catalogs are built on the blocking pool grows by whole arenas over its
/// first minutes. Two arenas keep the footprint flat (the soak of tests/reliability checks it).
/// Buffers of 1 MiB and more (a large catalog's listing and its gzip form, made again for every
/// version) are mapped on their own, so freeing one gives it back: by default glibc raises that
/// threshold to the largest buffer freed so far, and from then on keeps buffers of that size in
/// its arenas, where they stay resident after the version that held them is gone.
/// `MALLOC_ARENA_MAX` and `MALLOC_MMAP_THRESHOLD_` in the environment still win.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: called before any other thread exists; mallopt only sets an allocator option.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: as above.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let (sources, file) = args.sources.resolve()?;
    let listen = args.listen.or(file.listen.clone()).unwrap_or(DEFAULT_LISTEN);
    let address = listen.resolve().with_context(|| format!("cannot resolve the address to listen on, {listen}"))?;
    let mut options = ServeOptions::new(address, sources);
    options.state_dir = args.sources.state_dir(&options.sources, &file)?;
    options.webhook_secret_file = args.webhook_secret_file.or(file.webhook_secret_file);
    options.public_url = args.public_url.or(file.public_url);
    options.token_file = args.token_file;
    options.send_timeout = std::time::Duration::from_secs(args.send_timeout);
    if args.max_connections.is_some() || args.max_streams.is_some() || args.max_streams_per_client.is_some() {
        let mut limits = match args.max_connections {
            Some(connections) => ConnectionLimits::for_connections(connections as usize),
            None => ConnectionLimits::for_machine(raise_descriptor_limit(), memory_limit()),
        };
        if let Some(streams) = args.max_streams {
            limits = limits.with_streams(streams as usize);
        }
        if let Some(per_client) = args.max_streams_per_client {
            limits.max_streams_per_client = per_client as usize;
        }
        options.connections = Some(limits);
    }
    options.live.rescan_interval =
        (args.rescan_interval > 0).then(|| std::time::Duration::from_secs(args.rescan_interval));
    let server = Server::bind(options).await?;
    server.run(crate::shutdown::signal()).await
}

fn fail(error: &anyhow::Error) -> ExitCode {
    eprintln!("skillcat: {}", explain(error));
    ExitCode::FAILURE
}

/// The error and its causes on one line, each said once: many errors (the config file's, the
/// token file's, an I/O error with context) end with their cause's text already, which `{:#}`
/// would repeat.
fn explain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if text.ends_with(message.as_str()) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
    }
    text
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(_) | Command::Health { .. } => unreachable!("runs without this runtime"),
        Command::Check { sources, json, spec } => {
            // The files of each skill only for `--spec`, which says when they are not served.
            let catalog = OfflineCatalog::scan(build(&sources, spec)?).await;
            let mut report = check::Report::new(&catalog);
            if spec {
                report.check_spec(&catalog).await;
            }
            // Straight to standard output, not through its line buffer, which would look for the
            // last newline of every block of the answer (a line of megabytes with `--json`).
            let stdout = std::fs::File::from(std::os::fd::AsFd::as_fd(&std::io::stdout()).try_clone_to_owned()?);
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
            if json {
                report.write_json(&mut out)?;
                writeln!(out)?;
            } else {
                report.write_table(&mut out)?;
                if spec {
                    report.write_spec_table(&mut out)?;
                }
            }
            out.flush()?;
            let code = if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
            drop(report);
            // The process ends here: freeing a large catalog piece by piece would only delay it.
            std::mem::forget(catalog);
            Ok(code)
        }
        Command::Manifest { sources } => {
            let catalog = OfflineCatalog::scan(build(&sources, false)?).await;
            let mut out = std::io::stdout().lock();
            out.write_all(catalog.manifest()?.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Load { sources, name, token_limit } => {
            let catalog = OfflineCatalog::scan(build(&sources, false)?).await;
            let loaded = catalog.load(&name, token_limit).await?;
            let mut out = std::io::stdout().lock();
            serde_json::to_writer(&mut out, &loaded)?;
            writeln!(out)?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Download(args) => download::run(args).await,
        Command::Verify(args) => locks::verify(&args),
        Command::Init(args) => init::run(&args),
        Command::Outdated(args) => Ok(locks::outdated(&args).await),
    }
}

/// `--token-limit`: refused as the flag it is, with the range (the core's message names the
/// field of nagents' API, which a command-line user never sees).
fn token_limit(text: &str) -> Result<TokenLimit, String> {
    let limit = || text.parse::<u64>().ok().and_then(|limit| TokenLimit::new(limit).ok());
    limit().ok_or_else(|| format!("expected an integer from 1 to {MAX_SKILL_TOKEN_LIMIT}"))
}

/// The sources of a command, which scans once, counts nothing and prints one answer: nagents'
/// view of the skills, with each skill's files only when `files` (the folder view costs a listing
/// of every skill's folder and a digest of every file).
fn build(args: &SourceArgs, files: bool) -> anyhow::Result<Sources> {
    let (configs, file) = args.resolve()?;
    let state_dir = args.state_dir(&configs, &file)?;
    Sources::for_command(&configs, &state_dir, files).context("cannot set up the sources")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_limit_flag_defaults_to_nagents_default() {
        let cli = Cli::try_parse_from(["skillcat", "load", "x"]).unwrap();
        let Command::Load { token_limit, .. } = cli.command else { panic!("{cli:?}") };
        assert_eq!(token_limit, TokenLimit::DEFAULT);
    }

    #[test]
    fn an_error_that_ends_with_its_cause_says_it_once() {
        let missing = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let config = crate::config::ConfigError::Read { path: "a.toml".into(), source: missing() };
        let tokens = crate::auth::TokenFileError::Read { path: "tokens".into(), source: missing() };
        for error in [anyhow::Error::new(config), anyhow::Error::new(tokens)] {
            let text = explain(&error);
            assert_eq!(text.matches(&missing().to_string()).count(), 1, "{text}");
        }
        // A context that does not say its cause is followed by it.
        let error = anyhow::Error::new(missing()).context("cannot set up the sources");
        assert_eq!(explain(&error), format!("cannot set up the sources: {}", missing()));
    }
}
