//! The token file's reloads: the folders on the way to it are watched, and the file is read
//! again when they change (and every `recheck` in any case), taking new tokens only once the file
//! is settled.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::throttle::Throttle;
use super::{TokenFileError, Tokens, read_text};
use crate::watch::{Events, RecursiveMode, Watched, Watcher};

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
    throttle: Arc<Throttle>,
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
        warn_if_readable_by_others(&path);
        let (sender, receiver) = watch::channel(Arc::new(tokens));
        let reloads = Arc::new(ReloadCounts::default());
        let reloader = Reloader { path, recheck, sender, counts: Arc::clone(&reloads), changed, folders };
        tokio::spawn(reloader.run(shutdown));
        Ok(TokenStore { tokens: receiver, reloads, throttle: Arc::default() })
    }

    /// The tokens accepted now.
    pub fn current(&self) -> Arc<Tokens> {
        Arc::clone(&self.tokens.borrow())
    }

    /// The wrong tokens clients presented, and who may not present one now.
    pub fn throttle(&self) -> &Throttle {
        &self.throttle
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
struct FolderWatch(Option<Watcher>);

impl FolderWatch {
    fn new(changed: Arc<Notify>) -> FolderWatch {
        // A writer closing the file says its write is complete; reads (the reloads' own among
        // them) change nothing.
        let watcher = Watcher::new(Events::ChangesAndCloses, move |_| changed.notify_one())
            .inspect_err(|error| {
                tracing::warn!(%error, "cannot watch the token file's folder; re-reading it periodically");
            })
            .ok();
        FolderWatch(watcher)
    }

    /// Watches exactly `folders` from now on; whether one of them was not watched before.
    fn update(&mut self, folders: Vec<PathBuf>) -> bool {
        let Some(watcher) = &mut self.0 else { return false };
        let wanted = folders.into_iter().map(|folder| Watched::new(folder, RecursiveMode::NonRecursive, 0)).collect();
        watcher.watch(wanted, &[], false).added
    }
}

/// Warns (as ssh does of a private key) when others than the file's owner may read the token
/// file: any local user could then call the server as a client.
fn warn_if_readable_by_others(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(metadata) = std::fs::metadata(path)
        && metadata.permissions().mode() & 0o044 != 0
    {
        let mode = metadata.permissions().mode() & 0o777;
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:o}"),
            "the token file is readable by others than its owner; `chmod 600` it"
        );
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

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
        let tokens = Tokens::parse("s3cr3t\n", Path::new("/run/tokens")).unwrap();
        let store = TokenStore {
            tokens: watch::channel(Arc::new(tokens.clone())).1,
            reloads: Arc::default(),
            throttle: Arc::default(),
        };
        let shown = format!("{tokens:?} {store:?}");
        assert!(!shown.contains("s3cr3t"));
        let digest = Sha256::digest(b"s3cr3t");
        assert!(!shown.contains(&format!("{digest:x}")[..8]), "{shown}");
    }
}
