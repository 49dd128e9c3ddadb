//! The bare mirror of one git source in the state dir: fetched with gix (no git binary), never
//! checked out. A fetch updates the mirror's refs for the source's ref (forced: a force-push is
//! followed) and its tags, and says which commit the ref now names on the remote.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use gix::ObjectId;
use gix::remote::Direction;

use super::remote::RemoteUrl;

/// Where the mirror keeps the commit of a source without a configured ref (the remote's HEAD).
const HEAD_REF: &str = "refs/skillcat/head";

/// Why a fetch failed; the message is shown in the catalog's `error` and the log, so it never
/// carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot prepare the mirror {path}: {message}")]
    Mirror { path: PathBuf, message: String },
    #[error("cannot fetch {url}: {message}")]
    Remote { url: String, message: String },
    #[error("{url} has no ref {reference:?} (deleted, or never there); serving the last good commit")]
    NoSuchRef { url: String, reference: String },
    #[error("{url} has no HEAD to serve (an empty repository?)")]
    NoHead { url: String },
    #[error("the fetch of {url} took longer than {seconds} s (the source's fetch_timeout); stopped")]
    TimedOut { url: String, seconds: u64 },
    #[error(
        "the mirror of {url} would hold more than {max} bytes (the source's max_mirror_bytes); the fetch was stopped"
    )]
    TooLarge { url: String, max: u64 },
    #[error("cannot read the token file {path}: {message}")]
    Token { path: PathBuf, message: String },
}

/// One source's mirror.
#[derive(Debug, Clone)]
pub struct Mirror {
    pub dir: PathBuf,
    pub url: RemoteUrl,
    pub reference: Option<String>,
    pub token_file: Option<PathBuf>,
    /// The most the mirror's packs may hold: a fetch that grows them beyond is stopped.
    pub max_bytes: u64,
    /// The longest a fetch may take before it is stopped.
    pub timeout: Duration,
}

/// The longest an HTTP(S) fetch waits to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Seconds an HTTP(S) fetch waits while the server sends nothing at all.
const STALLED_SECONDS: u64 = 60;
/// The options of gix's HTTP transport.
type HttpOptions = gix::protocol::transport::client::blocking_io::http::Options;

/// How often a fetch's watchdog looks at the clock and the mirror's size.
const WATCH_EVERY: Duration = Duration::from_millis(50);

impl Mirror {
    /// The local refs a fetch writes, and the one to serve from (first that exists).
    fn refspecs(&self) -> Vec<String> {
        let mut specs = match &self.reference {
            Some(reference) => vec![format!("+refs/heads/{reference}:refs/heads/{reference}")],
            None => vec![format!("+HEAD:{HEAD_REF}")],
        };
        specs.push("+refs/tags/*:refs/tags/*".to_owned());
        specs
    }

    /// The names the served ref may have on the remote, in the order they are tried.
    fn wanted(&self) -> Vec<String> {
        match &self.reference {
            Some(reference) => vec![format!("refs/heads/{reference}"), format!("refs/tags/{reference}")],
            None => vec!["HEAD".to_owned()],
        }
    }

    /// The local refs the served commit is read from when the mirror is opened without a fetch.
    fn local_refs(&self) -> Vec<String> {
        match &self.reference {
            Some(reference) => vec![format!("refs/heads/{reference}"), format!("refs/tags/{reference}")],
            None => vec![HEAD_REF.to_owned()],
        }
    }

    fn mirror_error(&self, error: impl std::fmt::Display) -> FetchError {
        FetchError::Mirror { path: self.dir.clone(), message: error.to_string() }
    }

    fn remote_error(&self, error: impl std::error::Error) -> FetchError {
        // The error with its causes, each said once; gix's messages name the URL it was given,
        // which the shown one replaces.
        let mut message = error.to_string();
        let mut cause = error.source();
        while let Some(error) = cause {
            let text = error.to_string();
            if !message.ends_with(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            cause = error.source();
        }
        let message = message.replace(self.url.fetch_url(), self.url.shown());
        FetchError::Remote { url: self.url.shown().to_owned(), message }
    }

    /// Opens the mirror, making an empty bare repository first if there is none.
    pub fn open(&self) -> Result<gix::Repository, FetchError> {
        if self.dir.join("HEAD").is_file() {
            return gix::open(&self.dir).map_err(|error| self.mirror_error(error));
        }
        if let Some(parent) = self.dir.parent() {
            std::fs::create_dir_all(parent).map_err(|error| self.mirror_error(error))?;
        }
        // Made beside and renamed into place, so that a crash never leaves half a repository (a
        // leftover of one is made again).
        let making = self.dir.with_extension("new");
        let _ = std::fs::remove_dir_all(&making);
        let _ = std::fs::remove_dir(&self.dir);
        gix::init_bare(&making).map_err(|error| self.mirror_error(error))?;
        std::fs::rename(&making, &self.dir).map_err(|error| self.mirror_error(error))?;
        gix::open(&self.dir).map_err(|error| self.mirror_error(error))
    }

    /// The commit the mirror holds for the source's ref, without fetching: what a restart
    /// serves while its first fetch runs.
    pub fn local_commit(&self) -> Option<ObjectId> {
        if !self.dir.join("HEAD").is_file() {
            return None;
        }
        let repo = gix::open(&self.dir).ok()?;
        self.local_refs().iter().find_map(|name| {
            let mut reference = repo.find_reference(name.as_str()).ok()?;
            Some(reference.peel_to_commit().ok()?.id)
        })
    }

    /// Fetches the source's ref and tags into the mirror; the commit the ref names on the remote.
    /// A watchdog stops the fetch when it takes longer than [`timeout`](Self::timeout), grows the
    /// mirror beyond [`max_bytes`](Self::max_bytes), or `stop` is set (the server stops).
    pub fn fetch(&self, stop: &AtomicBool) -> Result<ObjectId, FetchError> {
        const RUNNING: u8 = 0;
        const DONE: u8 = 1;
        const TOO_SLOW: u8 = 2;
        const TOO_LARGE: u8 = 3;
        let state = AtomicU8::new(RUNNING);
        let interrupt = AtomicBool::new(false);
        let started = Instant::now();
        let fetched = std::thread::scope(|scope| {
            scope.spawn(|| {
                while state.load(Ordering::Acquire) == RUNNING {
                    let over = if started.elapsed() > self.timeout {
                        Some(TOO_SLOW)
                    } else if packs_size(&self.dir) > self.max_bytes {
                        Some(TOO_LARGE)
                    } else {
                        stop.load(Ordering::Acquire).then_some(DONE)
                    };
                    if let Some(over) = over {
                        let _ = state.compare_exchange(RUNNING, over, Ordering::AcqRel, Ordering::Acquire);
                        interrupt.store(true, Ordering::Release);
                        return;
                    }
                    std::thread::sleep(WATCH_EVERY);
                }
            });
            let fetched = self.fetch_now(&interrupt);
            // A fetch quicker than the watchdog's look is held to the bound all the same.
            let end = if packs_size(&self.dir) > self.max_bytes { TOO_LARGE } else { DONE };
            let _ = state.compare_exchange(RUNNING, end, Ordering::AcqRel, Ordering::Acquire);
            fetched
        });
        let url = self.url.shown().to_owned();
        match state.load(Ordering::Acquire) {
            TOO_SLOW => Err(FetchError::TimedOut { url, seconds: self.timeout.as_secs() }),
            TOO_LARGE => Err(FetchError::TooLarge { url, max: self.max_bytes }),
            _ => fetched,
        }
    }

    fn fetch_now(&self, interrupt: &AtomicBool) -> Result<ObjectId, FetchError> {
        // gix's HTTP client takes the process's TLS provider: ring (see Cargo.toml). Installed
        // once; a provider installed before (by an embedding program) is kept.
        static TLS_PROVIDER: std::sync::Once = std::sync::Once::new();
        TLS_PROVIDER.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let repo = self.open()?;
        let token = self.token()?;
        let remote = repo
            .remote_at(self.url.fetch_url())
            .map_err(|error| self.remote_error(error))?
            .with_refspecs(self.refspecs().iter().map(String::as_str), Direction::Fetch)
            .map_err(|error| self.remote_error(error))?;
        let mut connection = remote.connect(Direction::Fetch).map_err(|error| self.remote_error(error))?;
        // Never a credential helper or a terminal (a service has neither): a token is sent with
        // the first request, as HTTP Basic credentials (what GitHub, GitLab and Gitea take).
        connection = connection.with_credentials(|_| Ok(None));
        if self.url.is_http() {
            let options = repo
                .transport_options(self.url.fetch_url(), None)
                .map_err(|error| self.remote_error(error))?
                .and_then(|options| options.downcast::<HttpOptions>().ok())
                .map(|options| *options);
            let mut options = options.unwrap_or_default();
            // A server that stops sending gives up the fetch rather than hold it to its timeout.
            options.connect_timeout = Some(CONNECT_TIMEOUT);
            options.low_speed_limit_bytes_per_second = 1;
            options.low_speed_time_seconds = STALLED_SECONDS;
            if let Some(token) = token {
                use base64::Engine as _;
                let username = self.url.user().unwrap_or_else(|| "x-access-token".to_owned());
                let basic = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{token}"));
                options.extra_headers.push(format!("Authorization: Basic {basic}"));
            }
            connection = connection.with_transport_options(Box::new(options));
        } else if token.is_some() {
            tracing::warn!(url = %self.url, "a token_file is used only for http(s) URLs; this fetch sends none");
        }
        let prepared = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|error| self.remote_error(error))?;
        // What the remote advertises decides the commit, before anything is received: a ref that
        // is gone is an error of its own (the mirror keeps its last commit).
        let advertised = |wanted: &str| {
            prepared.ref_map().remote_refs.iter().find_map(|reference| {
                let (name, target, peeled) = reference.unpack();
                (name == wanted).then(|| peeled.or(target).map(ToOwned::to_owned)).flatten()
            })
        };
        let commit =
            self.wanted().iter().find_map(|wanted| advertised(wanted)).ok_or_else(|| match &self.reference {
                Some(reference) => {
                    FetchError::NoSuchRef { url: self.url.shown().to_owned(), reference: reference.clone() }
                }
                None => FetchError::NoHead { url: self.url.shown().to_owned() },
            })?;
        prepared.receive(gix::progress::Discard, interrupt).map_err(|error| self.remote_error(error))?;
        // The commit the remote names must now be in the mirror (and be a commit).
        let object = repo.find_object(commit).map_err(|error| self.remote_error(error))?;
        let commit = object.peel_to_commit().map_err(|error| self.remote_error(error))?.id;
        Ok(commit)
    }

    /// The token to send, re-read at every fetch (a rotated secret is used at once).
    fn token(&self) -> Result<Option<String>, FetchError> {
        let Some(path) = &self.token_file else { return Ok(None) };
        let error = |message: String| FetchError::Token { path: path.clone(), message };
        let text = crate::config::read_small(path).map_err(|e| error(e.to_string()))?;
        let token = text.lines().map(str::trim).find(|line| !line.is_empty() && !line.starts_with('#'));
        token.map(|token| Some(token.to_owned())).ok_or_else(|| error("it holds no token".to_owned()))
    }
}

/// The bytes of the mirror's packs (where a fetch writes what it receives), and of its loose
/// objects' folders' files (none, unless something else wrote there).
fn packs_size(mirror: &Path) -> u64 {
    let size_of = |folder: &Path| -> u64 {
        std::fs::read_dir(folder)
            .map(|entries| {
                entries.filter_map(Result::ok).filter_map(|entry| entry.metadata().ok()).map(|meta| meta.len()).sum()
            })
            .unwrap_or(0)
    };
    size_of(&mirror.join("objects/pack"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::git::tests::git;

    fn mirror(url: &str, dir: &Path, max_bytes: u64, timeout: Duration) -> Mirror {
        Mirror {
            dir: dir.join("mirror.git"),
            url: RemoteUrl::parse(url).unwrap(),
            reference: Some("main".to_owned()),
            token_file: None,
            max_bytes,
            timeout,
        }
    }

    #[test]
    fn a_fetch_is_stopped_beyond_the_mirror_s_size_and_follows_force_pushes() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"], b"");
        // Incompressible bytes: 3 MiB of a simple generator's output.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let noise: Vec<u8> = (0..3 << 20)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        std::fs::write(work.join("blob.bin"), noise).unwrap();
        git(&work, &["add", "-A"], b"");
        git(&work, &["commit", "-qm", "big"], b"");
        let url = format!("file://{}", work.display());

        let small = mirror(&url, &dir.path().join("small"), 1 << 20, Duration::from_secs(60));
        let error = small.fetch(&AtomicBool::new(false)).expect_err("over the bound");
        assert!(matches!(error, FetchError::TooLarge { .. }), "{error}");

        let large = mirror(&url, &dir.path().join("large"), 64 << 20, Duration::from_secs(60));
        let fetched = large.fetch(&AtomicBool::new(false)).unwrap();
        assert_eq!(fetched.to_string(), git(&work, &["rev-parse", "HEAD"], b""));
        assert_eq!(large.local_commit(), Some(fetched), "a restart reads the commit from the mirror");
        // A rewritten branch (a force-push) is followed.
        git(&work, &["commit", "-q", "--amend", "-m", "rewritten"], b"");
        let rewritten = large.fetch(&AtomicBool::new(false)).unwrap();
        assert_eq!(rewritten.to_string(), git(&work, &["rev-parse", "HEAD"], b""));
        assert_ne!(rewritten, fetched);
        // A deleted branch is an error, and the mirror keeps the last commit.
        git(&work, &["checkout", "-q", "-b", "other"], b"");
        git(&work, &["branch", "-q", "-D", "main"], b"");
        let error = large.fetch(&AtomicBool::new(false)).expect_err("no main");
        assert!(matches!(error, FetchError::NoSuchRef { .. }), "{error}");
        assert_eq!(large.local_commit(), Some(rewritten));
    }
}
