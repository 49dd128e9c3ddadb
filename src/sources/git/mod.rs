//! A git repository as a source: a bare mirror in the state dir, fetched every `interval` and on
//! webhooks, whose ref's commit is read straight from the object store (nothing is checked out).
//! For a commit, the catalog is nagents' walk of a checkout of it ([`skillcat_core::walk_tree`]),
//! with locations `<url>#<path in the repository>`.
//!
//! A fetch that fails keeps the last good commit: the source's scans fail with the fetch's error
//! (so the live catalog serves its last good catalog, carrying the error) until a fetch succeeds.
//! At start, a commit the mirror already holds is served while the first fetch runs.

mod history;
mod mirror;
mod remote;
mod store;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use gix::ObjectId;
use sha2::{Digest as _, Sha256};
use skillcat_core::{
    Digest, Discovery, Skill, SkillDiscoverer, SkillError, SkillFilePath, SkillName, TreeRoot, list_tree,
    skill_catalog, walk_tree,
};
use tokio::sync::{Notify, watch};

use self::history::{History, PinnedReader};
pub use self::mirror::FetchError;
use self::mirror::Mirror;
pub use self::remote::{InvalidRemote, RemoteUrl, key_of};
use self::store::ObjectStore;
use super::{HistoryEntry, Opened, PinError, Pinned, Source, VersionSpec, run_blocking};
use crate::config::GitConfig;
use crate::observability::Metrics;

/// How long the first scan waits for the first fetch when the mirror holds nothing yet (a fetch
/// that takes longer is served when it ends; until then the catalog routes answer 503).
const FIRST_FETCH_WAIT: Duration = Duration::from_secs(10);
/// How long past its timeout a fetch stuck in a read is waited for.
const STUCK_GRACE: Duration = Duration::from_secs(5);
/// The first retry after a failed fetch; doubled after each failure, up to the interval (or
/// [`MAX_BACKOFF`] for a source fetched only on webhooks).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One git source. Clones share it.
#[derive(Clone)]
pub struct GitSource {
    inner: Arc<Inner>,
}

struct Inner {
    label: String,
    mirror: Mirror,
    config: GitConfig,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
    /// Digests of the blobs the current commit lists, by object id: a new commit hashes only
    /// the blobs it adds.
    digests: Mutex<HashMap<ObjectId, Digest>>,
    /// Asks the fetch loop for a fetch now (a webhook); permits collapse into one.
    fetch_now: Notify,
    /// Set once the fetch loop runs; until then (the command line's one scan) a scan fetches
    /// first.
    live: AtomicBool,
    /// Signalled when a fetch ends, for a first scan waiting on the first fetch.
    fetch_ended: Condvar,
    /// Set when the server stops: a fetch in progress stops too.
    stopping: AtomicBool,
    /// The bytes of blobs being sent, by object id: requests for one file share one copy while
    /// any of them holds it (what a stalled reader can hold is one file, however many ask).
    sent: Mutex<HashMap<ObjectId, std::sync::Weak<Vec<u8>>>>,
    /// The history of the commit served last (see `history.rs`), and a lock held while one is
    /// built, so that one build runs at a time and requests wait for it rather than build again.
    history: Mutex<Option<Arc<History>>>,
    building: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// The commit the last successful fetch found the ref at.
    fetched: Option<ObjectId>,
    /// The last fetch's failure, until one succeeds.
    failure: Option<Arc<FetchError>>,
    /// The last successful scan.
    scanned: Option<Arc<Scanned>>,
}

/// One commit's catalog and what reads of it need.
struct Scanned {
    commit: ObjectId,
    discovery: Discovery,
    skills: BTreeMap<SkillName, GitSkill>,
}

struct GitSkill {
    skill: Skill,
    skill_md: ObjectId,
    blobs: BTreeMap<SkillFilePath, ObjectId>,
}

impl GitSource {
    /// The source `config` describes, its mirror under `state_dir`.
    pub fn new(config: GitConfig, state_dir: &std::path::Path, metrics: Arc<Metrics>) -> Result<Self, InvalidRemote> {
        let url = RemoteUrl::parse(&config.url)?;
        let label = label_of(&config, &url);
        // A mirror per source (its URL, ref, path and label): two sources never fetch into one.
        let mut hash = Sha256::new();
        for part in [url.fetch_url(), config.reference.as_deref().unwrap_or_default(), &config.path, &label] {
            hash.update(part.as_bytes());
            hash.update(b"\n");
        }
        let mut id = String::new();
        skillcat_core::push_hex(&mut id, &hash.finalize()[..10]);
        let name: String = url
            .checkout_name()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .take(40)
            .collect();
        let dir = state_dir.join("git").join(format!("{name}-{id}.git"));
        let mirror = Mirror {
            dir,
            url,
            reference: config.reference.clone(),
            token_file: config.token_file.clone(),
            max_bytes: config.max_mirror_bytes,
            timeout: config.fetch_timeout,
        };
        let inner = Inner {
            label,
            mirror,
            config,
            metrics,
            state: Mutex::default(),
            digests: Mutex::default(),
            fetch_now: Notify::new(),
            live: AtomicBool::new(false),
            fetch_ended: Condvar::new(),
            stopping: AtomicBool::new(false),
            sent: Mutex::default(),
            history: Mutex::default(),
            building: Mutex::default(),
        };
        Ok(GitSource { inner: Arc::new(inner) })
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The mirror's repository, opened once per thread (gix's handles are not shared between
    /// threads without its `parallel` feature); its object store sees the packs later fetches add,
    /// and refs are read from disk each time.
    fn repository(&self) -> Result<gix::Repository, String> {
        thread_local! {
            static OPENED: std::cell::RefCell<HashMap<std::path::PathBuf, gix::Repository>> = Default::default();
        }
        OPENED.with_borrow_mut(|opened| {
            if let Some(repository) = opened.get(&self.mirror.dir) {
                return Ok(repository.clone());
            }
            let repository = gix::open(&self.mirror.dir).map_err(|error| format!("cannot open the mirror: {error}"))?;
            opened.insert(self.mirror.dir.clone(), repository.clone());
            Ok(repository)
        })
    }

    /// Fetches once; whether what the source would serve changed (a new commit, or a failure
    /// that began or ended).
    async fn fetch(self: &Arc<Self>) -> bool {
        let started = Instant::now();
        let source = Arc::clone(self);
        let task = tokio::task::spawn_blocking(move || source.mirror.fetch(&source.stopping));
        // The fetch's watchdog stops it at its timeout while it receives; a remote that stops
        // answering in the middle of a read can hold the fetch's thread longer, but not the
        // source: the fetch counts as failed, and the next one starts on time.
        let fetched = match tokio::time::timeout(self.mirror.timeout + STUCK_GRACE, task).await {
            Ok(Ok(fetched)) => fetched,
            Ok(Err(error)) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down.
            Ok(Err(_)) => return false,
            Err(_) => Err(FetchError::TimedOut {
                url: self.mirror.url.shown().to_owned(),
                seconds: self.mirror.timeout.as_secs(),
            }),
        };
        self.fetched(fetched, started)
    }

    /// A fetch on this thread, for the command line's one scan.
    fn fetch_blocking(&self) {
        let started = Instant::now();
        let fetched = self.mirror.fetch(&AtomicBool::new(false));
        self.fetched(fetched, started);
    }

    /// Records a fetch's outcome; whether what the source would serve changed (a new commit, or
    /// a failure that began or ended).
    fn fetched(&self, fetched: Result<ObjectId, FetchError>, started: Instant) -> bool {
        let ok = fetched.is_ok();
        self.metrics.git_fetched(&self.label, ok, started.elapsed(), SystemTime::now());
        let mut state = self.state();
        self.fetch_ended.notify_all();
        match fetched {
            Ok(commit) => {
                let changed = state.fetched != Some(commit) || state.failure.is_some();
                if state.failure.take().is_some() {
                    tracing::info!(source = self.label, %commit, "git fetches succeed again");
                }
                if state.fetched != Some(commit) {
                    tracing::info!(source = self.label, %commit, "fetched a new commit");
                }
                state.fetched = Some(commit);
                changed
            }
            Err(error) => {
                let message = error.to_string();
                let new = state.failure.as_ref().is_none_or(|known| known.to_string() != message);
                if new {
                    tracing::warn!(
                        source = self.label,
                        error = message,
                        "a git fetch failed; serving the last good commit"
                    );
                }
                state.failure = Some(Arc::new(error));
                new
            }
        }
    }

    /// Fetches every `interval`, on webhooks, and after a failure with backoff, until shutdown;
    /// `changed` asks the live catalog for a rescan.
    async fn run(self: Arc<Self>, changed: Arc<dyn Fn() + Send + Sync>, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.fetch().await {
                changed();
            }
            let failing = self.state().failure.is_some();
            let wait = if failing {
                let wait = backoff;
                backoff = (backoff * 2).min(self.config.interval.unwrap_or(MAX_BACKOFF).max(FIRST_BACKOFF));
                Some(wait)
            } else {
                backoff = FIRST_BACKOFF;
                self.config.interval
            };
            tokio::select! {
                () = self.fetch_now.notified() => {}
                () = async { tokio::time::sleep(wait.expect("a wait")).await }, if wait.is_some() => {}
                () = crate::shutdown::stopped(&mut shutdown) => {
                    self.stopping.store(true, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// The catalog of the commit to serve now; the last one's when the commit did not change.
    fn scan_blocking(&self) -> Result<Discovery, SkillError> {
        let first = {
            let state = self.state();
            state.fetched.is_none() && state.failure.is_none() && state.scanned.is_none()
        };
        if !self.live.load(Ordering::Acquire) && self.state().fetched.is_none() {
            self.fetch_blocking();
        } else if first && self.mirror.local_commit().is_none() {
            // Nothing to serve before the first fetch ends: wait for it a while rather than
            // publish a failure that the fetch is about to clear.
            let state = self.state();
            let first = |state: &mut State| state.fetched.is_none() && state.failure.is_none();
            let _ = self.fetch_ended.wait_timeout_while(state, FIRST_FETCH_WAIT, first);
        }
        let (fetched, failure, scanned) = {
            let state = self.state();
            (state.fetched, state.failure.clone(), state.scanned.clone())
        };
        // Before any fetch ended: a restart serves the commit the mirror holds.
        let commit =
            fetched.or_else(|| scanned.as_ref().map(|scanned| scanned.commit)).or_else(|| self.mirror.local_commit());
        if let Some(failure) = failure
            && (scanned.is_some() || commit.is_none())
        {
            return Err(SkillError::Source(Box::new(SharedFailure(failure))));
        }
        let Some(commit) = commit else {
            let message = format!("the first fetch of {} has not finished", self.mirror.url);
            return Err(SkillError::Source(message.into()));
        };
        if let Some(scanned) = scanned.filter(|scanned| scanned.commit == commit) {
            return Ok(scanned.discovery.clone());
        }
        let scanned = Arc::new(self.scan_commit(commit)?);
        let discovery = scanned.discovery.clone();
        self.state().scanned = Some(scanned);
        Ok(discovery)
    }

    fn scan_commit(&self, commit: ObjectId) -> Result<Scanned, SkillError> {
        let failed = |message: String| SkillError::Source(message.into());
        let repo = self.repository().map_err(failed)?;
        let store = ObjectStore { repo: &repo, digests: &self.digests };
        let unreadable =
            |error: &dyn std::fmt::Display| failed(format!("cannot read commit {commit} from the mirror: {error}"));
        let tree = repo
            .find_commit(commit)
            .map_err(|error| unreadable(&error))?
            .tree_id()
            .map_err(|error| unreadable(&error))?
            .detach();
        let folder = self.root_folder(&store, tree).map_err(|error| failed(error.0))?;
        let walk = self
            .with_root(folder, |root| walk_tree(&store, root, self.config.max_entries.get(), self.config.max_depth))
            .map_err(|error| failed(error.0))?;
        skill_catalog(walk.found.iter().map(|found| found.skill.clone()))?;
        let mut found = walk.found;
        found.sort_by(|a, b| a.skill.name().cmp(b.skill.name()));
        let mut discovery = Discovery { diagnostics: walk.diagnostics, ..Discovery::default() };
        let mut skills = BTreeMap::new();
        for found in found {
            let listed = list_tree(&store, &found.folder).map_err(|error| failed(error.0))?;
            let skill_md = skillcat_core::SkillFilePath::parse(skillcat_core::SKILL_MD).expect("a valid path");
            let skill_md = match listed.blobs.get(&skill_md) {
                Some(id) => *id,
                None => find_blob(&store, &found.folder, skillcat_core::SKILL_MD.as_bytes())
                    .map_err(|error| failed(error.0))?,
            };
            discovery.skills.push(found.skill.clone());
            discovery.versions.push(found.version);
            discovery.files.push(Arc::new(listed.listing));
            let skill = GitSkill { skill: found.skill, skill_md, blobs: listed.blobs };
            skills.insert(skill.skill.name().clone(), skill);
        }
        // Digests are kept for the blobs this commit lists, not for every blob ever met: the
        // memory they take follows the catalog, not the history.
        let listed: std::collections::HashSet<&ObjectId> =
            skills.values().flat_map(|skill| skill.blobs.values()).collect();
        self.digests.lock().unwrap_or_else(PoisonError::into_inner).retain(|id, _| listed.contains(id));
        Ok(Scanned { commit, discovery, skills })
    }

    /// The walk's root at `folder` (see [`Self::root_folder`]), given to `walk`.
    fn with_root<R>(&self, folder: Result<ObjectId, String>, walk: impl FnOnce(&TreeRoot<'_, ObjectId>) -> R) -> R {
        let shown = self.mirror.url.shown();
        let display = |path: &[u8]| [shown.as_bytes(), b"#", path].concat();
        let top_name = self.mirror.url.checkout_name();
        walk(&TreeRoot { folder, path: &self.config.path, display: &display, top_name: &top_name })
    }

    /// The skills of the walk from `folder`, walking again only what `memo` has not seen.
    fn walk_memo(
        &self,
        store: &ObjectStore<'_>,
        folder: Result<ObjectId, String>,
        memo: &mut skillcat_core::WalkMemo<ObjectId>,
    ) -> Result<Vec<Arc<skillcat_core::TreeSkill<ObjectId>>>, skillcat_core::TreeError> {
        self.with_root(folder, |root| {
            skillcat_core::walk_tree_memo(store, root, self.config.max_entries.get(), self.config.max_depth, memo)
        })
    }

    /// The history of the commit served now, built (or extended from the last one) unless it is
    /// current already.
    fn history_now(&self) -> Result<Arc<History>, PinError> {
        let head = self.state().scanned.as_ref().map(|scanned| scanned.commit);
        let head = head.ok_or_else(|| PinError::Unreadable(format!("{} has not been read yet", self.label)))?;
        let current = |history: &Option<Arc<History>>| history.as_ref().filter(|history| history.head == head).cloned();
        if let Some(history) = current(&self.history.lock().unwrap_or_else(PoisonError::into_inner)) {
            return Ok(history);
        }
        let _building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = self.history.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(history) = current(&previous) {
            return Ok(history);
        }
        let started = Instant::now();
        let history = Arc::new(History::build(self, head, previous.as_deref()).map_err(PinError::Unreadable)?);
        tracing::debug!(source = self.label, commit = %head, elapsed = ?started.elapsed(), "built the history");
        *self.history.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&history));
        Ok(history)
    }

    /// The bytes of `blob`, shared by the requests sending it while any of them holds them.
    async fn open_blob(self: &Arc<Self>, blob: ObjectId) -> Result<Opened, SkillError> {
        let shared =
            |sent: &HashMap<ObjectId, std::sync::Weak<Vec<u8>>>| sent.get(&blob).and_then(std::sync::Weak::upgrade);
        let held = shared(&self.sent.lock().unwrap_or_else(PoisonError::into_inner));
        let bytes = match held {
            Some(bytes) => bytes,
            None => {
                let inner = Arc::clone(self);
                let read = run_blocking(move || inner.read_blob(blob, skillcat_core::MAX_SKILL_BYTES)).await?;
                let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
                // Another request may have read it meanwhile: keep one copy.
                let bytes = shared(&sent).unwrap_or_else(|| Arc::new(read));
                sent.retain(|_, held| held.strong_count() > 0);
                sent.insert(blob, Arc::downgrade(&bytes));
                bytes
            }
        };
        Ok(Opened::Memory(bytes::Bytes::from_owner(SharedBlob(bytes))))
    }

    /// The folder the walk starts at: the configured path in the commit's tree, or nagents'
    /// message for a checkout where it is missing or no folder.
    fn root_folder(
        &self,
        store: &ObjectStore<'_>,
        tree: ObjectId,
    ) -> Result<Result<ObjectId, String>, skillcat_core::TreeError> {
        use skillcat_core::{TreeEntryKind, TreeStore as _};
        let mut folder = tree;
        for part in self.config.path.split('/').filter(|part| !part.is_empty()) {
            let entries = store.folder(&folder)?;
            let errno = match entries.iter().find(|entry| entry.name == part.as_bytes()) {
                None => libc::ENOENT,
                Some(entry) => match entry.kind {
                    TreeEntryKind::Folder => {
                        folder = entry.id;
                        continue;
                    }
                    TreeEntryKind::Submodule => {
                        folder = ObjectId::empty_tree(tree.kind());
                        continue;
                    }
                    TreeEntryKind::Symlink => libc::ELOOP,
                    TreeEntryKind::File { .. } => libc::ENOTDIR,
                },
            };
            let error = std::io::Error::from_raw_os_error(errno);
            return Ok(Err(skillcat_core::pystr::os_error_message(&error, part.as_bytes())));
        }
        Ok(Ok(folder))
    }

    /// The current scan's entry of `skill`, refused unless `skill` is its current descriptor.
    fn current(&self, skill: &Skill) -> Result<(Arc<Scanned>, ObjectId), SkillError> {
        let scanned = self.state().scanned.clone();
        let stale = || SkillError::NotInCatalog { name: skill.name().clone(), catalog: "git" };
        let scanned = scanned.ok_or_else(stale)?;
        let entry = scanned.skills.get(skill.name()).filter(|entry| entry.skill == *skill).ok_or_else(stale)?;
        let skill_md = entry.skill_md;
        Ok((scanned, skill_md))
    }

    fn read_blob(&self, id: ObjectId, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        let io = |error: String| SkillError::Io {
            context: format!("{}: {id}", self.mirror.url),
            source: std::io::Error::other(error),
        };
        let repo = self.repository().map_err(io)?;
        let store = ObjectStore { repo: &repo, digests: &self.digests };
        use skillcat_core::TreeStore as _;
        if store.size(&id).map_err(|error| io(error.0))? > max_bytes {
            return Err(io(format!("larger than {max_bytes} bytes")));
        }
        store.read(&id).map_err(|error| io(error.0))
    }

    fn file_blob(&self, skill: &Skill, path: &SkillFilePath) -> Result<ObjectId, SkillError> {
        let (scanned, _) = self.current(skill)?;
        let entry = &scanned.skills[skill.name()];
        entry.blobs.get(path).copied().ok_or_else(|| SkillError::Io {
            context: format!("{} of {}", path, skill.name()),
            source: std::io::ErrorKind::NotFound.into(),
        })
    }
}

/// The label a source of `config` shows: its name, or its URL (never with credentials) with the
/// ref and path it was given.
fn label_of(config: &GitConfig, url: &RemoteUrl) -> String {
    if let Some(name) = &config.name {
        return name.clone();
    }
    let mut label = url.shown().to_owned();
    if config.reference.is_some() || !config.path.is_empty() {
        label.push('#');
        label.push_str(config.reference.as_deref().unwrap_or_default());
        if !config.path.is_empty() {
            label.push(':');
            label.push_str(&config.path);
        }
    }
    label
}

/// The blob `name` in the folder `folder`.
fn find_blob(store: &ObjectStore<'_>, folder: &ObjectId, name: &[u8]) -> Result<ObjectId, skillcat_core::TreeError> {
    use skillcat_core::TreeStore as _;
    store
        .folder(folder)?
        .into_iter()
        .find(|entry| entry.name == name)
        .map(|entry| entry.id)
        .ok_or_else(|| skillcat_core::TreeError(format!("no {} in the folder {folder}", String::from_utf8_lossy(name))))
}

/// Bytes of a blob shared by the requests sending it.
struct SharedBlob(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedBlob {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A fetch failure, shared by every scan that reports it.
#[derive(Debug)]
struct SharedFailure(Arc<FetchError>);

impl std::fmt::Display for SharedFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedFailure {}

#[async_trait]
impl SkillDiscoverer for GitSource {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        let inner = Arc::clone(&self.inner);
        let discovery = run_blocking(move || inner.scan_blocking()).await?;
        // A server keeps the history of what it serves ready for the first request for it.
        if self.inner.live.load(Ordering::Acquire) && self.inner.config.history.get() > 1 {
            let inner = Arc::clone(&self.inner);
            tokio::task::spawn_blocking(move || {
                if let Err(error) = inner.history_now() {
                    tracing::warn!(source = inner.label, %error, "cannot read the history");
                }
            });
        }
        Ok(discovery)
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        let (_, skill_md) = self.inner.current(skill)?;
        let inner = Arc::clone(&self.inner);
        let bytes = run_blocking(move || inner.read_blob(skill_md, skillcat_core::MAX_FILE_BYTES as u64)).await?;
        String::from_utf8(bytes).map_err(|_| SkillError::Changed { name: skill.name().clone() })
    }
}

#[async_trait]
impl Source for GitSource {
    fn label(&self) -> &str {
        &self.inner.label
    }

    fn kind(&self) -> &'static str {
        "git"
    }

    fn revision(&self) -> Option<String> {
        self.inner.state().scanned.as_ref().map(|scanned| scanned.commit.to_string())
    }

    fn start(&self, changed: Arc<dyn Fn() + Send + Sync>, shutdown: watch::Receiver<bool>) {
        self.inner.live.store(true, Ordering::Release);
        tokio::spawn(Arc::clone(&self.inner).run(changed, shutdown));
    }

    fn fetch_for(&self, repositories: &[String]) -> bool {
        let key = self.inner.mirror.url.key();
        if repositories.is_empty() || repositories.iter().any(|named| key_of(named) == key) {
            self.inner.fetch_now.notify_one();
            return true;
        }
        false
    }

    fn read_file_blocking(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        let blob = self.inner.file_blob(skill, path)?;
        self.inner.read_blob(blob, max_bytes)
    }

    async fn read_file(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        let (inner, skill, path) = (Arc::clone(&self.inner), skill.clone(), path.clone());
        run_blocking(move || {
            let blob = inner.file_blob(&skill, &path)?;
            inner.read_blob(blob, max_bytes)
        })
        .await
    }

    async fn open_file(&self, skill: &Skill, path: &SkillFilePath) -> Result<Opened, SkillError> {
        self.inner.open_blob(self.inner.file_blob(skill, path)?).await
    }

    fn keeps_history(&self) -> bool {
        true
    }

    async fn history(&self, name: &SkillName) -> Option<Result<Vec<HistoryEntry>, PinError>> {
        let (inner, name) = (Arc::clone(&self.inner), name.clone());
        Some(blocking(move || inner.history_now()?.versions(&inner, &name)).await)
    }

    async fn pinned(&self, name: &SkillName, version: &VersionSpec) -> Option<Result<Pinned, PinError>> {
        let (inner, name, version) = (Arc::clone(&self.inner), name.clone(), version.clone());
        Some(
            blocking(move || {
                let history::PinnedAt { skill, commit, listed } =
                    inner.history_now()?.pinned(&inner, &name, &version)?;
                let reader = PinnedReader {
                    inner: Arc::clone(&inner),
                    skill: skill.skill.clone(),
                    content: skill.version,
                    listed,
                };
                Ok(Pinned {
                    skill: skill.skill.clone(),
                    content: skill.version,
                    listing: Arc::clone(&reader.listed.listing),
                    version: reader.listed.version.expect("a pinned folder has a version"),
                    commit: commit.to_string(),
                    reader: Arc::new(reader),
                })
            })
            .await,
        )
    }
}

/// `work` off the async workers; a task the runtime cancelled (it is shutting down) is a
/// failure to read.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PinError> + Send + 'static,
) -> Result<T, PinError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(PinError::Unreadable("the read was cancelled".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::num::NonZeroUsize;
    use std::path::Path;
    use std::process::{Command, Stdio};

    use skillcat_core::{SkipReason, TokenLimit};

    use super::*;

    /// Runs the real `git` in `dir` with `input` on its standard input (a fixed author); its
    /// output, trimmed.
    pub(super) fn git(dir: &Path, args: &[&str], input: &[u8]) -> String {
        let mut child = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "a")
            .env("GIT_AUTHOR_EMAIL", "a@example.com")
            .env("GIT_COMMITTER_NAME", "a")
            .env("GIT_COMMITTER_EMAIL", "a@example.com")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("git runs");
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len()).step_by(2).map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap()).collect()
    }

    /// A repository no checkout could hold: names git refuses (`..`, `.git`, a `/`), 1,500 levels
    /// of nested folders, a folder of 20,000 entries, a 5 MB `SKILL.md`, symlinks (to a file
    /// outside, and as a `SKILL.md`), a name that is not UTF-8 and a submodule. The scan gives
    /// nagents' bounded answer, reads nothing it must not, and serves nothing outside a skill.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hostile_repository_costs_only_what_its_bounds_allow() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("hostile");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"], b"");
        let mut stream = Vec::new();
        let file = |stream: &mut Vec<u8>, mode: &str, path: &[u8], data: &[u8]| {
            stream.extend_from_slice(format!("M {mode} inline ").as_bytes());
            stream.extend_from_slice(path);
            stream.extend_from_slice(format!("\ndata {}\n", data.len()).as_bytes());
            stream.extend_from_slice(data);
            stream.push(b'\n');
        };
        stream.extend_from_slice(b"commit refs/heads/main\ncommitter a <a@example.com> 0 +0000\ndata 7\nhostile\n");
        let skill = |name: &str| format!("---\nname: {name}\ndescription: d\n---\nbody\n").into_bytes();
        file(&mut stream, "100644", &[&b"deep/"[..], &b"d/".repeat(1500), b"SKILL.md"].concat(), &skill("deep"));
        for index in 0..20_000 {
            file(&mut stream, "100644", format!("wide/f{index:05}").as_bytes(), b"");
        }
        file(&mut stream, "100644", b"big/SKILL.md", &vec![b'a'; 5_000_000]);
        file(&mut stream, "100644", b"skill/SKILL.md", &skill("skill"));
        file(&mut stream, "100755", b"skill/run.sh", b"#!/bin/sh\n");
        file(&mut stream, "120000", b"skill/passwd", b"/etc/passwd");
        file(&mut stream, "100644", b"\"skill/bad-\\377-name\"", b"x");
        file(&mut stream, "120000", b"linked/SKILL.md", b"../skill/SKILL.md");
        stream.extend_from_slice(b"M 160000 4b825dc642cb6eb9a060e54bf8d69288fbee4904 skill/module\n\n");
        git(&repo, &["fast-import", "--quiet"], &stream);
        // The same skill ("ok") under names a checkout never has: walked, they would repeat it.
        let ok_blob = git(&repo, &["hash-object", "-w", "--stdin"], &skill("ok"));
        let ok_tree = git(&repo, &["mktree"], format!("100644 blob {ok_blob}\tSKILL.md\n").as_bytes());
        let mut top = Vec::new();
        for line in git(&repo, &["ls-tree", "-z", "main^{tree}"], b"").split('\0').filter(|line| !line.is_empty()) {
            let (meta, name) = line.split_once('\t').unwrap();
            let mut fields = meta.split(' ');
            let mode = fields.next().unwrap().trim_start_matches('0');
            let id = fields.nth(1).unwrap();
            top.extend_from_slice(format!("{mode} {name}\0").as_bytes());
            top.extend_from_slice(&hex(id));
        }
        for name in ["..", ".git", "a/b", "ok"] {
            top.extend_from_slice(format!("40000 {name}\0").as_bytes());
            top.extend_from_slice(&hex(&ok_tree));
        }
        let tree = git(&repo, &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"], &top);
        let commit = git(&repo, &["commit-tree", &tree, "-m", "hostile names"], b"");
        git(&repo, &["update-ref", "refs/heads/main", &commit], b"");

        let config = GitConfig {
            name: None,
            url: format!("file://{}", repo.display()),
            reference: None,
            path: String::new(),
            interval: None,
            token_file: None,
            max_entries: NonZeroUsize::new(10_000).unwrap(),
            max_depth: 16,
            max_mirror_bytes: 1 << 30,
            fetch_timeout: Duration::from_secs(60),
            history: NonZeroUsize::new(1000).unwrap(),
        };
        let source = GitSource::new(config, &dir.path().join("state"), Arc::new(Metrics::default())).unwrap();
        let discovery = source.scan().await.expect("a bounded scan, not a failure");
        let names: Vec<&str> = discovery.skills.iter().map(|skill| skill.name().as_str()).collect();
        assert_eq!(names, ["ok", "skill"], "{discovery:#?}");
        let url = format!("file://{}", repo.display());
        assert_eq!(discovery.skills[1].location(), format!("{url}#skill/SKILL.md"));
        let deep = format!("{url}#deep/{}d: discovery depth/entry limit reached", "d/".repeat(15));
        let big = format!("{url}#big/SKILL.md: SKILL.md exceeds 4000000 bytes");
        let wide = format!("{url}#wide: discovery entry limit reached; increase max_entries");
        assert_eq!(discovery.diagnostics, [big, deep, wide]);

        let files = discovery.files[1].files().expect("a listing");
        let listed: Vec<(&str, bool)> = files.iter().map(|file| (file.path.as_str(), file.executable)).collect();
        assert_eq!(listed, [("SKILL.md", false), ("run.sh", true)]);
        let skipped: Vec<(&str, &SkipReason)> =
            discovery.files[1].skipped().iter().map(|entry| (entry.path.as_str(), &entry.reason)).collect();
        assert_eq!(skipped, [("bad-\u{fffd}-name", &SkipReason::NotUtf8), ("passwd", &SkipReason::Symlink)]);
        let skill = &discovery.skills[1];
        let run = SkillFilePath::parse("run.sh").unwrap();
        assert_eq!(source.read_file(skill, &run, 1 << 20).await.unwrap(), b"#!/bin/sh\n");
        // Requests sending one file share one copy of it while any of them holds it.
        let (first, second) =
            (source.open_file(skill, &run).await.unwrap(), source.open_file(skill, &run).await.unwrap());
        let (Opened::Memory(first), Opened::Memory(second)) = (first, second) else {
            panic!("a blob is sent from memory")
        };
        assert_eq!((first.as_ptr(), &first[..]), (second.as_ptr(), &b"#!/bin/sh\n"[..]));
        let passwd = SkillFilePath::parse("passwd").unwrap();
        assert!(source.read_file(skill, &passwd, 1 << 20).await.is_err(), "a symlink is never served");
        let content = source.load(skill).await.unwrap();
        assert_eq!(skillcat_core::budget_skill_content(skill, &content, TokenLimit::new(10).unwrap()).content, content);
    }
}
