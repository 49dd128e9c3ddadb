//! Bearer tokens: the token file, its reloads, and the constant-time check of a presented token.
//!
//! Tokens are kept only as SHA-256 digests, so a check compares fixed-size values whatever the
//! token's length, every stored digest is compared (no early exit), and the tokens themselves
//! appear in no error, log line or `Debug` output.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// The largest token file read: far more than any real list of tokens.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// How long the file must be left alone after a change before it is read: the rest of an
/// editor's save, or the write that follows a `> tokens` redirection's truncation.
const SETTLE: Duration = Duration::from_millis(50);

/// The longest a burst of changes can put a re-read off.
const SETTLE_AT_MOST: Duration = Duration::from_secs(1);

/// How many reads, [`SETTLE`] apart, may disagree before a changed file is left for later: new
/// tokens are taken only once two reads in a row agree, so that a file caught half written
/// (by a periodic re-read, say) never replaces the tokens.
const AGREEING_READS_WITHIN: usize = 10;

/// How soon a file that is empty or still changing is read again; the wait doubles up to the
/// recheck interval.
const RETRY_FIRST: Duration = Duration::from_millis(100);

/// The symlinks followed from the token file's path when choosing the folders to watch (the
/// kernel's own limit).
const MAX_LINKS: usize = 40;

/// Why the token file could not be used. Messages name the file and the line, never a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read the token file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the token file {path} is a {kind}, not a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("the token file {path} is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("the token file {path} is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error(
        "line {line} of the token file {path} is not a bearer token (RFC 6750: letters, digits and -._~+/, then optional =)"
    )]
    InvalidToken { path: PathBuf, line: usize },
    #[error("the token file {path} holds no token")]
    Empty { path: PathBuf },
}
/// The digest a token is kept and compared as.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    fn of(token: &[u8]) -> Self {
        TokenDigest(Sha256::digest(token).into())
    }

    /// Equality that takes the same time whatever the values.
    fn equals(&self, other: &TokenDigest) -> bool {
        let difference = self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(..)")
    }
}

/// The accepted tokens, as digests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    digests: Vec<TokenDigest>,
}

impl Tokens {
    /// Parses a token file: one token per line; surrounding whitespace, blank lines and lines
    /// starting with `#` are ignored. A token must be an RFC 6750 `b64token`, which is what an
    /// `Authorization: Bearer` header can carry.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TokenFileError> {
        let mut digests = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let token = line.trim();
            if token.is_empty() || token.starts_with('#') {
                continue;
            }
            if !is_b64token(token) {
                return Err(TokenFileError::InvalidToken { path: path.to_path_buf(), line: index + 1 });
            }
            let digest = TokenDigest::of(token.as_bytes());
            if !digests.contains(&digest) {
                digests.push(digest);
            }
        }
        Ok(Tokens { digests })
    }

    /// Reads and parses the token file.
    pub fn read(path: &Path) -> Result<Self, TokenFileError> {
        Tokens::parse(&read_text(path)?, path)
    }

    pub fn len(&self) -> usize {
        self.digests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The digest of `presented` if it is one of the tokens. Every stored digest is compared.
    pub fn check(&self, presented: &[u8]) -> Option<TokenDigest> {
        let digest = TokenDigest::of(presented);
        let found = self.digests.iter().fold(false, |found, stored| found | stored.equals(&digest));
        found.then_some(digest)
    }

    /// Whether a token accepted earlier (by its digest) is still accepted.
    pub fn contains(&self, digest: &TokenDigest) -> bool {
        self.digests.iter().fold(false, |found, stored| found | stored.equals(digest))
    }
}

/// RFC 6750 `b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

/// The token file's text, read without ever blocking on what is not a regular file: it is opened
/// `O_NONBLOCK` (a FIFO would otherwise wait for a writer for ever), checked with `fstat` and
/// read up to a bound. Symlinks are followed: the file may be a link into a secrets volume.
fn read_text(path: &Path) -> Result<String, TokenFileError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let read_error = |source| TokenFileError::Read { path: path.to_path_buf(), source };
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path);
    let file = match opened {
        Ok(file) => file,
        // What opening a socket answers.
        Err(error) if error.raw_os_error() == Some(libc::ENXIO) => {
            return Err(match std::fs::metadata(path) {
                Ok(metadata) if !metadata.is_file() => {
                    TokenFileError::NotRegular { path: path.to_path_buf(), kind: kind_of(metadata.file_type()) }
                }
                _ => read_error(error),
            });
        }
        Err(error) => return Err(read_error(error)),
    };
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(TokenFileError::NotRegular { path: path.to_path_buf(), kind: kind_of(metadata.file_type()) });
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(TokenFileError::TooLarge { path: path.to_path_buf() });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(TokenFileError::TooLarge { path: path.to_path_buf() });
    }
    String::from_utf8(bytes).map_err(|_| TokenFileError::NotUtf8 { path: path.to_path_buf() })
}

/// What a file that is not a regular file is, for the error.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// What one read of the token file found, during reloads.
#[derive(Debug)]
enum Reading {
    Tokens(Tokens),
    /// Nothing but whitespace: a file being written (`> tokens` truncates it, then the command
    /// writes it, maybe much later). Unlike a file of comments, it says nothing yet.
    Blank,
    /// Reads kept finding different tokens: a write still in progress.
    Unsettled,
    Failed(TokenFileError),
}

impl Reading {
    fn of(path: &Path) -> Reading {
        match read_text(path) {
            Ok(text) if text.trim().is_empty() => Reading::Blank,
            Ok(text) => match Tokens::parse(&text, path) {
                Ok(tokens) => Reading::Tokens(tokens),
                Err(error) => Reading::Failed(error),
            },
            Err(error) => Reading::Failed(error),
        }
    }
}

/// The current tokens of a token file, re-read when the file changes.
///
/// A change is noticed by watching the folder that holds the file and, when the file is reached
/// through symlinks, the folder of each link and of the file they lead to (a Kubernetes Secret
/// volume replaces the file by flipping a symlink; `tokens -> /run/secrets/x` sees `x` replaced),
/// and by a periodic re-read in case an event is missed. Once the file has been left alone for a
/// moment, a file that reads and parses replaces the tokens, even with none (a file of comments:
/// then every request is refused); an empty file is taken for one being written and keeps the
/// last tokens until it has content; a file that cannot be read or parsed (removed for a moment,
/// half written, not a regular file) keeps the last tokens and is logged.
#[derive(Clone)]
pub struct TokenStore {
    tokens: watch::Receiver<Arc<Tokens>>,
    reloads: Arc<ReloadCounts>,
}

/// How the re-reads of the token file went since the server started. A re-read that keeps the
/// previous tokens changes nothing a client can see, so these counts are the only way to tell
/// that it happened (and why).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenReloads {
    /// Re-reads that parsed: the tokens were replaced, or were already the same.
    pub read: u64,
    /// Re-reads that kept the previous tokens because the file could not be read (removed for a
    /// moment, no permission).
    pub unreadable: u64,
    /// Re-reads that kept the previous tokens because the file is no token file (a line that is
    /// no token, not UTF-8, too large, not a regular file).
    pub invalid: u64,
    /// Re-reads that kept the previous tokens because the file was empty or kept changing: a
    /// write in progress. The file is read again shortly, change or not.
    pub transient: u64,
}

impl TokenReloads {
    /// Every re-read, whatever came of it.
    pub fn total(&self) -> u64 {
        self.read + self.unreadable + self.invalid + self.transient
    }
}

#[derive(Debug, Default)]
struct ReloadCounts {
    read: AtomicU64,
    unreadable: AtomicU64,
    invalid: AtomicU64,
    transient: AtomicU64,
}

impl TokenStore {
    /// Reads the token file (it must hold at least one token) and keeps re-reading it on changes
    /// and every `recheck` until `shutdown` flips to true.
    pub fn watch_file(
        path: PathBuf,
        recheck: Duration,
        shutdown: watch::Receiver<bool>,
    ) -> Result<TokenStore, TokenFileError> {
        let changed = Arc::new(Notify::new());
        // Watching starts before the first read, so that no change after that read goes unseen.
        let mut folders = FolderWatch::new(Arc::clone(&changed));
        folders.update(folders_to_watch(&path));
        let tokens = Tokens::read(&path)?;
        if tokens.is_empty() {
            return Err(TokenFileError::Empty { path });
        }
        tracing::info!(path = %path.display(), tokens = tokens.len(), "bearer tokens required");
        let (sender, receiver) = watch::channel(Arc::new(tokens));
        let reloads = Arc::new(ReloadCounts::default());
        let reloader = Reloader { path, recheck, sender, counts: Arc::clone(&reloads), changed, folders };
        tokio::spawn(reloader.run(shutdown));
        Ok(TokenStore { tokens: receiver, reloads })
    }

    /// The tokens accepted now.
    pub fn current(&self) -> Arc<Tokens> {
        Arc::clone(&self.tokens.borrow())
    }

    /// Every change of the tokens, starting with the current ones.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Tokens>> {
        self.tokens.clone()
    }

    /// The re-reads of the file so far, each counted once its outcome is in effect.
    pub fn reloads(&self) -> TokenReloads {
        TokenReloads {
            read: self.reloads.read.load(Ordering::Acquire),
            unreadable: self.reloads.unreadable.load(Ordering::Acquire),
            invalid: self.reloads.invalid.load(Ordering::Acquire),
            transient: self.reloads.transient.load(Ordering::Acquire),
        }
    }
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore").field("tokens", &self.tokens.borrow().len()).finish()
    }
}

/// A file found empty or changing, by the reads since the first such read.
struct WriteInProgress {
    since: Instant,
    /// The wait before the next read; it doubles with each read that finds the write unfinished.
    wait: Duration,
    read_again: Instant,
    /// Whether the warning that it lasts has been logged.
    warned: bool,
}

/// The task that re-reads the token file.
struct Reloader {
    path: PathBuf,
    recheck: Duration,
    sender: watch::Sender<Arc<Tokens>>,
    counts: Arc<ReloadCounts>,
    /// Signalled on every change in a watched folder.
    changed: Arc<Notify>,
    folders: FolderWatch,
}

impl Reloader {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval_at(Instant::now() + self.recheck, self.recheck);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // While the file is empty or changing.
        let mut write: Option<WriteInProgress> = None;
        loop {
            let retry_at = write.as_ref().map(|write| write.read_again);
            tokio::select! {
                () = self.changed.notified() => settle(&self.changed).await,
                _ = ticker.tick() => {}
                () = sleep_until(retry_at), if retry_at.is_some() => {}
                () = crate::shutdown::stopped(&mut shutdown) => return,
            }
            // `None`: the runtime is shutting down.
            let Some(reading) = self.read_settled().await else { return };
            match reading {
                Reading::Tokens(tokens) => {
                    write = None;
                    self.replace(tokens);
                }
                Reading::Failed(error) => {
                    write = None;
                    self.keep(error);
                }
                Reading::Blank | Reading::Unsettled => self.keep_for_now(&reading, &mut write),
            }
        }
    }

    /// Reads the file until two reads in a row agree, unless the first finds what is in effect
    /// already or nothing to take.
    async fn read_settled(&mut self) -> Option<Reading> {
        let current = Arc::clone(&self.sender.borrow());
        let mut previous: Option<Tokens> = None;
        for _ in 0..AGREEING_READS_WITHIN {
            match self.read_once().await? {
                Reading::Tokens(tokens) if tokens != *current && previous.as_ref() != Some(&tokens) => {
                    previous = Some(tokens);
                    tokio::time::sleep(SETTLE).await;
                }
                reading => return Some(reading),
            }
        }
        Some(Reading::Unsettled)
    }

    /// One read, and the folders to watch as the symlinks lead now.
    async fn read_once(&mut self) -> Option<Reading> {
        let path = self.path.clone();
        let (reading, folders) =
            tokio::task::spawn_blocking(move || (Reading::of(&path), folders_to_watch(&path))).await.ok()?;
        if self.folders.update(folders) {
            // The symlinks lead somewhere new: what changed there before the watch began is only
            // seen by reading once more.
            self.changed.notify_one();
        }
        Some(reading)
    }

    /// Keeps the tokens through an empty or changing file, and says when to read it next.
    fn keep_for_now(&self, reading: &Reading, write: &mut Option<WriteInProgress>) {
        let now = Instant::now();
        let longest = self.recheck.max(RETRY_FIRST);
        let write = match write {
            Some(write) => {
                write.wait = (write.wait * 2).min(longest);
                write
            }
            None => write.insert(WriteInProgress { since: now, wait: RETRY_FIRST, read_again: now, warned: false }),
        };
        write.read_again = now + write.wait;
        let path = self.path.display();
        let state = if matches!(reading, Reading::Blank) { "empty" } else { "still changing" };
        tracing::debug!(%path, state, wait = ?write.wait, "the token file is being written; keeping the previous bearer tokens");
        if !write.warned && now.duration_since(write.since) >= longest {
            write.warned = true;
            tracing::warn!(%path, state, since = ?now.duration_since(write.since), "the token file has been empty or changing for a while; keeping the previous bearer tokens (a file of comments only refuses every request)");
        }
        self.counts.transient.fetch_add(1, Ordering::Release);
    }

    /// Puts the tokens read in effect (if they differ from those in effect).
    fn replace(&self, tokens: Tokens) {
        let path = self.path.display();
        self.sender.send_if_modified(|current| {
            if **current == tokens {
                return false;
            }
            if tokens.is_empty() {
                tracing::warn!(%path, "the token file holds no token; every request is refused");
            } else {
                tracing::info!(%path, tokens = tokens.len(), "bearer tokens reloaded");
            }
            *current = Arc::new(tokens);
            true
        });
        self.counts.read.fetch_add(1, Ordering::Release);
    }

    /// Keeps the tokens through a file that cannot be used.
    fn keep(&self, error: TokenFileError) {
        tracing::warn!(%error, "keeping the previous bearer tokens");
        let count = match error {
            TokenFileError::Read { .. } => &self.counts.unreadable,
            _ => &self.counts.invalid,
        };
        count.fetch_add(1, Ordering::Release);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Waits until the watched folders have been quiet for [`SETTLE`], at most [`SETTLE_AT_MOST`].
async fn settle(changed: &Notify) {
    let give_up = Instant::now() + SETTLE_AT_MOST;
    loop {
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(SETTLE) => return,
            () = tokio::time::sleep_until(give_up) => return,
        }
    }
}

/// The folders whose changes can change what the token file's path reads: the folder of the path,
/// and of each symlink it leads through to the file (each as the real folder, so a link to a
/// folder is watched where it points). Folders that do not exist (now) are left out.
fn folders_to_watch(path: &Path) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    let mut current = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    for _ in 0..=MAX_LINKS {
        let folder = current.parent().unwrap_or(Path::new("/")).to_path_buf();
        if let Ok(real) = std::fs::canonicalize(&folder)
            && !folders.contains(&real)
        {
            folders.push(real);
        }
        match std::fs::read_link(&current) {
            // A relative target is relative to the link's folder; an absolute one replaces it.
            Ok(target) => current = folder.join(target),
            Err(_) => break,
        }
    }
    folders
}

/// The watch on the folders [`folders_to_watch`] names; without a watcher (logged), only the
/// periodic re-reads remain.
struct FolderWatch {
    watcher: Option<RecommendedWatcher>,
    folders: Vec<PathBuf>,
    /// Folders that could not be watched, so that each is logged once.
    unwatchable: Vec<PathBuf>,
}

impl FolderWatch {
    fn new(changed: Arc<Notify>) -> FolderWatch {
        // Reads (the reloads' own among them) change nothing; a writer closing the file says its
        // write is complete.
        let handler = move |event: notify::Result<notify::Event>| match event {
            Ok(event)
                if event.kind.is_access()
                    && event.kind
                        != notify::EventKind::Access(notify::event::AccessKind::Close(
                            notify::event::AccessMode::Write,
                        )) => {}
            _ => changed.notify_one(),
        };
        let watcher = RecommendedWatcher::new(handler, notify::Config::default())
            .inspect_err(|error| {
                tracing::warn!(%error, "cannot watch the token file's folder; re-reading it periodically");
            })
            .ok();
        FolderWatch { watcher, folders: Vec::new(), unwatchable: Vec::new() }
    }

    /// Watches exactly `folders` from now on; whether one of them was not watched before.
    fn update(&mut self, folders: Vec<PathBuf>) -> bool {
        let Some(watcher) = &mut self.watcher else { return false };
        for old in &self.folders {
            if !folders.contains(old) {
                // It may be gone already, and its watch with it.
                let _ = watcher.unwatch(old);
            }
        }
        let mut added = false;
        let mut watched = Vec::with_capacity(folders.len());
        let mut unwatchable = Vec::new();
        for folder in folders {
            // Watching again costs little, and renews a watch the kernel dropped when the folder
            // was replaced by another of the same name.
            match watcher.watch(&folder, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    added |= !self.folders.contains(&folder);
                    watched.push(folder);
                }
                Err(error) => {
                    if !self.unwatchable.contains(&folder) {
                        tracing::warn!(folder = %folder.display(), %error, "cannot watch a folder of the token file; re-reading it periodically");
                    }
                    unwatchable.push(folder);
                }
            }
        }
        self.folders = watched;
        self.unwatchable = unwatchable;
        added
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Tokens, TokenFileError> {
        Tokens::parse(text, Path::new("/run/tokens"))
    }

    #[test]
    fn one_token_per_line_with_blanks_and_comments() {
        let tokens = parse("# deploy tokens\n\n  alpha-1  \r\nbeta.2~+/==\nalpha-1\n").unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(tokens.check(b"alpha-1").is_some());
        assert!(tokens.check(b"beta.2~+/==").is_some());
        assert!(tokens.check(b"alpha-").is_none());
        assert!(tokens.check(b"alpha-1 ").is_none());
        assert!(tokens.check(b"").is_none());
    }

    #[test]
    fn a_line_that_cannot_be_a_bearer_token_is_an_error_naming_the_line_not_the_token() {
        for (text, line) in [("ok\nsecret value\n", 2), ("=abc\n", 1), ("a=b\n", 1), ("ok\n\nclé\n", 3)] {
            let error = parse(text).unwrap_err();
            assert!(matches!(error, TokenFileError::InvalidToken { line: l, .. } if l == line), "{text:?}");
            let message = error.to_string();
            assert!(!message.contains("secret") && !message.contains("clé") && !message.contains("abc"), "{message}");
        }
    }

    #[test]
    fn a_file_of_comments_holds_no_token() {
        assert!(parse("# none yet\n\n").unwrap().is_empty());
    }

    #[test]
    fn accepted_digests_stay_valid_only_while_listed() {
        let before = parse("old\nnew\n").unwrap();
        let after = parse("new\n").unwrap();
        let old = before.check(b"old").unwrap();
        let new = before.check(b"new").unwrap();
        assert!(!after.contains(&old));
        assert!(after.contains(&new));
    }

    #[test]
    fn an_empty_file_is_blank_but_a_file_of_comments_holds_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        for (text, blank) in [("", true), ("\n  \n", true), ("# all revoked\n", false), ("t0ken\n", false)] {
            std::fs::write(&path, text).unwrap();
            let reading = Reading::of(&path);
            assert_eq!(matches!(reading, Reading::Blank), blank, "{text:?}: {reading:?}");
        }
        std::fs::write(&path, "# all revoked\n").unwrap();
        assert!(matches!(Reading::of(&path), Reading::Tokens(tokens) if tokens.is_empty()));
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for (path, kind) in
            [(fifo, "FIFO"), (link, "FIFO"), (socket, "socket"), (dir.path().to_path_buf(), "directory")]
        {
            // On a thread: reading a FIFO the ordinary way waits for a writer for ever.
            let (sender, receiver) = std::sync::mpsc::channel();
            let read = path.clone();
            std::thread::spawn(move || sender.send(Tokens::read(&read)));
            let result = receiver.recv_timeout(Duration::from_secs(5)).expect("an answer within 5 s");
            assert!(
                matches!(&result, Err(TokenFileError::NotRegular { kind: k, .. }) if *k == kind),
                "{}: {result:?}",
                path.display()
            );
            let message = result.unwrap_err().to_string();
            assert!(message.ends_with(&format!("is a {kind}, not a regular file")), "{message}");
        }
    }

    #[test]
    fn the_folders_watched_follow_the_symlinks_to_the_file() {
        let base = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(base.path()).unwrap();
        let [config, links, secrets, data] =
            ["config", "links", "secrets", "secrets/..2026_01"].map(|name| base.join(name));
        for folder in [&config, &links, &secrets, &data] {
            std::fs::create_dir(folder).unwrap();
        }
        std::fs::write(data.join("tokens"), "t0ken\n").unwrap();
        // config/tokens -> ../links/tokens -> <secrets>/tokens -> ..data/tokens, ..data -> ..2026_01
        std::os::unix::fs::symlink("..2026_01", secrets.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/tokens", secrets.join("tokens")).unwrap();
        std::os::unix::fs::symlink(secrets.join("tokens"), links.join("tokens")).unwrap();
        std::os::unix::fs::symlink("../links/tokens", config.join("tokens")).unwrap();
        assert_eq!(folders_to_watch(&config.join("tokens")), [config.as_path(), &links, &secrets, &data]);
        // A plain file: its folder only. A missing one: its folder, to see it come back.
        assert_eq!(folders_to_watch(&data.join("tokens")), [data.as_path()]);
        assert_eq!(folders_to_watch(&config.join("missing")), [config.as_path()]);
        // A dangling link: the folders as far as they exist.
        std::os::unix::fs::symlink("../nowhere/tokens", config.join("dangling")).unwrap();
        assert_eq!(folders_to_watch(&config.join("dangling")), [config.as_path()]);
        // A loop ends.
        std::os::unix::fs::symlink("loop", config.join("loop")).unwrap();
        assert_eq!(folders_to_watch(&config.join("loop")), [config.as_path()]);
    }

    #[test]
    fn debug_output_shows_no_token_material() {
        let tokens = parse("s3cr3t\n").unwrap();
        let store = TokenStore { tokens: watch::channel(Arc::new(tokens.clone())).1, reloads: Arc::default() };
        let shown = format!("{tokens:?} {store:?}");
        assert!(!shown.contains("s3cr3t"));
        let digest = Sha256::digest(b"s3cr3t");
        assert!(!shown.contains(&format!("{digest:x}")[..8]), "{shown}");
    }
}
