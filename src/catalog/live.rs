//! Keeps the published snapshot current: a file watcher and a periodic timer request rescans,
//! bursts of requests collapse into one rescan, and a rescan that changes nothing publishes
//! nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures_util::FutureExt as _;
use futures_util::StreamExt as _;
use futures_util::TryStreamExt as _;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use skillcat_core::{
    CompositeDiscovery, ContentVersion, Digest, Skill, SkillDiscoverer, SkillError, SkillFile, SourceError,
    SourcedDiagnostic,
};
use tokio::sync::{Notify, watch};

use super::CatalogError;
use super::contents::{Content, ContentCache};
use super::snapshot::{Catalog, CatalogFailure, CatalogSkill, CatalogState, PreparedBody, Snapshot};
use super::wellknown::{self, DiscoveryEntry, LeftOut};
use crate::observability::Metrics;
use crate::shutdown::stopped;
use crate::sources::Sources;

/// Skill files read at once while preparing a snapshot.
const CONCURRENT_READS: usize = 16;

/// How long to wait after a change for the burst it belongs to (an editor's save, a git checkout).
const SETTLE: Duration = Duration::from_millis(5);

/// The rescan period while some folder is not watched (the kernel's limit on inotify watches was
/// reached), when `--rescan-interval` is longer or off: changes must not stay invisible.
const UNWATCHED_RESCAN: Duration = Duration::from_secs(10);

/// Beyond this many changed paths in one rescan (a checkout of a whole tree), a full walk, which
/// lists folders on several threads, is faster than listing each named folder in turn.
const MAX_CHANGED_PATHS: usize = 4096;

/// How often watches that hit the kernel's limit are tried again (the limit may have been raised).
const WATCH_RETRY: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The fallback rescan period; `None` disables it.
    pub rescan_interval: Option<Duration>,
    /// Whether to watch the directories (tests of the periodic path turn it off).
    pub watch: bool,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions { rescan_interval: Some(Duration::from_secs(30)), watch: true }
    }
}

/// The catalog as the server sees it: the published snapshot, and a way to ask for a rescan.
#[derive(Clone)]
pub struct LiveCatalog {
    inner: Arc<Inner>,
}

struct Inner {
    sources: Sources,
    snapshots: watch::Sender<Arc<Snapshot>>,
    rescan: Notify,
    metrics: Arc<Metrics>,
    /// File events seen (any path under any root), and whether every root is watched: together
    /// they say whether a content read earlier is still what is on disk.
    changes: AtomicU64,
    watch_complete: AtomicBool,
    /// Set for good by a watcher error other than the limit on watches (events lost).
    watch_failed: AtomicBool,
    /// Folders the watcher could not watch since the last refresh (the limit on watches, met by
    /// a folder made while running), for the next refresh to account for.
    unwatched: std::sync::Mutex<Vec<PathBuf>>,
    /// Set by a queue overflow: the watcher may have missed new folders, so every recursive watch
    /// is placed again before the next rescan.
    rewatch: AtomicBool,
    /// Whether a queue overflow has been logged (once per process).
    overflow_logged: AtomicBool,
    /// The folders left unwatched, while there are any: the catalog says so, and the periodic
    /// rescan runs at least every `UNWATCHED_RESCAN`.
    gap: std::sync::Mutex<Option<WatchGap>>,
    /// The periodic rescan's period while the watch is incomplete.
    unwatched_period: Duration,
    /// The paths file events named since the last rescan began: a rescan lists again only what
    /// they may have changed.
    changed: std::sync::Mutex<Vec<PathBuf>>,
    /// Set when the next rescan must walk everything: a reason other than a named change asked
    /// for it (a stale read, the periodic timer, lost events).
    full_rescan: AtomicBool,
    contents: ContentCache,
}

impl LiveCatalog {
    /// Starts the catalog: the first discovery runs at once; the watcher and the timer run until
    /// `shutdown` flips to true.
    pub fn start(
        sources: Sources,
        options: LiveOptions,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let (snapshots, _) = watch::channel(Arc::new(Snapshot::starting()));
        let inner = Arc::new(Inner {
            sources,
            snapshots,
            rescan: Notify::new(),
            metrics,
            changes: AtomicU64::new(0),
            watch_complete: AtomicBool::new(false),
            watch_failed: AtomicBool::new(false),
            unwatched: std::sync::Mutex::default(),
            rewatch: AtomicBool::new(false),
            overflow_logged: AtomicBool::new(false),
            gap: std::sync::Mutex::default(),
            changed: std::sync::Mutex::default(),
            full_rescan: AtomicBool::new(true),
            unwatched_period: options.rescan_interval.map_or(UNWATCHED_RESCAN, |period| period.min(UNWATCHED_RESCAN)),
            contents: ContentCache::default(),
        });
        let catalog = LiveCatalog { inner };
        let watcher = if options.watch { catalog.watch() } else { None };
        tokio::spawn(catalog.clone().run(options, watcher, shutdown));
        catalog
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.inner.snapshots.borrow())
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Every published snapshot, starting with the current one.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.inner.snapshots.subscribe()
    }

    /// The content of `skill` (a skill of a published snapshot) now, refused unless it is exactly
    /// the version the snapshot lists; then the snapshot is stale, and a rescan is requested.
    /// A content read earlier is reused while no file event arrived since (see `ContentCache`).
    pub async fn content(&self, skill: &CatalogSkill) -> Result<Arc<Content>, CatalogError> {
        // Taken before reading: an event during the read makes the next request read again.
        let stamp = self.change_stamp();
        if let Some(content) = self.inner.contents.get(&skill.entry.etag, stamp) {
            return Ok(content);
        }
        let text = self.text(skill).await?;
        Ok(self.inner.contents.insert(&skill.entry.etag, Content::new(skill.skill.clone(), text), stamp))
    }

    /// The `SKILL.md` of `skill` (a skill of a published snapshot) read now, refused unless it is
    /// exactly the version the snapshot lists (then a rescan is requested). Not kept: what is made
    /// from it (a search document, a page) is kept per skill version instead.
    pub async fn text(&self, skill: &CatalogSkill) -> Result<String, CatalogError> {
        let name = skill.skill.name();
        let text = match self.inner.sources.composite.load(&skill.skill).await {
            Ok(text) => text,
            Err(error) if error.is_stale() => {
                self.request_rescan();
                return Err(CatalogError::Changed(name.clone()));
            }
            Err(source) => return Err(CatalogError::Read { name: name.clone(), source }),
        };
        if skill.version != Some(ContentVersion::of(&text)) {
            self.request_rescan();
            return Err(CatalogError::Changed(name.clone()));
        }
        Ok(text)
    }

    /// The bytes of `file`, a listed file of `skill` (a skill of a published snapshot), refused
    /// unless they are exactly what the listing says (then the snapshot is stale, and a rescan is
    /// requested).
    pub async fn file(&self, skill: &CatalogSkill, file: &SkillFile) -> Result<Vec<u8>, CatalogError> {
        let reader = self.inner.sources.reader(skill.source);
        let read = reader.read(&skill.skill, &file.path, file.size).await;
        self.verified(&skill.skill, file, read)
    }

    /// The zip of `skill`'s files, made once per skill version from files each checked against
    /// the listing.
    pub async fn archive(&self, skill: &CatalogSkill) -> Result<Arc<PreparedBody>, CatalogError> {
        let (files, _) = skill.files()?;
        files.archive.get_or_try_init(|| async { Ok(Arc::new(self.build_archive(skill).await?.0)) }).await.cloned()
    }

    /// The digest of `skill`'s archive, found once per skill version. The archive made to find it
    /// is not kept: the discovery index needs every skill's digest, and keeping every archive
    /// would keep a compressed copy of every file in memory. The same files make the same bytes,
    /// so the archive made again when it is asked for has this digest (or is refused as changed).
    pub async fn archive_digest(&self, skill: &CatalogSkill) -> Result<Digest, CatalogError> {
        let (files, _) = skill.files()?;
        files
            .archive_digest
            .get_or_try_init(|| async {
                // An archive already made: its tag is its digest, quoted.
                let made =
                    files.archive.get().and_then(|archive| Digest::parse(archive.etag.as_str().trim_matches('"')).ok());
                match made {
                    Some(digest) => Ok(digest),
                    None => Ok(self.build_archive(skill).await?.1),
                }
            })
            .await
            .copied()
    }

    /// The zip of `skill`'s files and its digest, made off the async workers.
    async fn build_archive(&self, skill: &CatalogSkill) -> Result<(PreparedBody, Digest), CatalogError> {
        let (_, listed) = skill.files()?;
        let (catalog, reader, descriptor, listed) =
            (self.clone(), self.inner.sources.reader(skill.source).clone(), skill.skill.clone(), listed.to_vec());
        let name = skill.skill.name().clone();
        let built = tokio::task::spawn_blocking(move || {
            super::files::archive(&listed, |file| {
                let read = reader.read_blocking(&descriptor, &file.path, file.size);
                catalog.verified(&descriptor, file, read)
            })
        })
        .await;
        match built {
            Ok(archive) => archive,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(CatalogError::Changed(name)),
        }
    }

    /// `GET /.well-known/agent-skills/index.json` of `snapshot`, made once per catalog version.
    /// Making it finds the archive digest of every skill that has more than its `SKILL.md`
    /// (each once per skill version, so a new catalog version costs only its changed skills). It
    /// is made in a task of its own, which goes on when the request that started it ends (a first
    /// index of a large catalog may take longer than a request may), so the next request finds
    /// it made or waits for the same task.
    pub async fn discovery_index(&self, snapshot: Arc<Snapshot>) -> Result<Arc<PreparedBody>, CatalogError> {
        if let Some(index) = snapshot.ready()?.wellknown.discovery.get() {
            return Ok(Arc::clone(index));
        }
        let live = self.clone();
        let making = tokio::spawn(async move {
            let catalog = snapshot.ready()?;
            catalog.wellknown.discovery.get_or_try_init(|| live.make_discovery_index(catalog)).await.cloned()
        });
        match making.await {
            Ok(index) => index,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(CatalogError::NotReady),
        }
    }

    async fn make_discovery_index(&self, catalog: &Catalog) -> Result<Arc<PreparedBody>, CatalogError> {
        // Archives are made on the blocking pool, compressing: one per core at a time.
        let parallel = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        // Owned skills in each future: a spawned task's futures must be `Send` for every
        // lifetime, which futures borrowing a closure's argument are not shown to be.
        let entries: Vec<Option<DiscoveryEntry>> = futures_util::stream::iter(catalog.skills.iter().cloned())
            .map(|skill| {
                let live = self.clone();
                async move { live.discovery_entry(&skill).await }
            })
            .buffered(parallel)
            .try_collect()
            .await?;
        let entries: Vec<DiscoveryEntry> = entries.into_iter().flatten().collect();
        match tokio::task::spawn_blocking(move || wellknown::discovery_body(entries)).await {
            Ok(body) => Ok(Arc::new(body)),
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(CatalogError::NotReady),
        }
    }

    /// The discovery index's entry for `skill`, if it publishes it. A skill whose archive cannot
    /// be read (an I/O error) is left out of this catalog version's index, and logged; one that
    /// changed fails the index, which the next request makes again after the rescan this asked for.
    async fn discovery_entry(&self, skill: &CatalogSkill) -> Result<Option<DiscoveryEntry>, CatalogError> {
        let Ok(published) = wellknown::published(skill) else {
            return Ok(None);
        };
        if published.is_skill_md_only() {
            return Ok(Some(DiscoveryEntry::skill_md(&published)));
        }
        match self.archive_digest(skill).await {
            Ok(digest) => Ok(Some(DiscoveryEntry::archive(&published, digest))),
            Err(CatalogError::Read { name, source }) => {
                let reason = LeftOut::Archive(source.to_string());
                tracing::warn!(skill = %name, %reason, "a skill is left out of the discovery index");
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// `GET /.well-known/skills/index.json` of `snapshot`, made once per catalog version.
    pub async fn legacy_index(&self, snapshot: Arc<Snapshot>) -> Result<Arc<PreparedBody>, CatalogError> {
        let cell = &snapshot.ready()?.wellknown.legacy;
        cell.get_or_try_init(|| async {
            let snapshot = Arc::clone(&snapshot);
            let made = tokio::task::spawn_blocking(move || snapshot.ready().map(wellknown::legacy_body)).await;
            match made {
                Ok(body) => body.map(Arc::new),
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(_) => Err(CatalogError::NotReady),
            }
        })
        .await
        .cloned()
    }

    /// `read` if it gave exactly the listed bytes of `file`; otherwise the snapshot is stale.
    fn verified(
        &self,
        skill: &Skill,
        file: &SkillFile,
        read: Result<Vec<u8>, SkillError>,
    ) -> Result<Vec<u8>, CatalogError> {
        let changed = || {
            self.request_rescan();
            CatalogError::Changed(skill.name().clone())
        };
        match read {
            Ok(bytes) if Digest::of(&bytes) == file.digest => Ok(bytes),
            Ok(_) => Err(changed()),
            Err(error) if error.is_stale() => Err(changed()),
            Err(source) => Err(CatalogError::Read { name: skill.name().clone(), source }),
        }
    }

    /// The count of file events so far, when every root is watched (`None` otherwise: then no
    /// earlier read can be trusted to still be current).
    fn change_stamp(&self) -> Option<u64> {
        let stamp = self.inner.changes.load(Ordering::Acquire);
        let trusted =
            self.inner.watch_complete.load(Ordering::Acquire) && !self.inner.watch_failed.load(Ordering::Acquire);
        trusted.then_some(stamp)
    }

    /// Asks for a full rescan; requests made while one runs collapse into one more.
    fn request_rescan(&self) {
        self.inner.full_rescan.store(true, Ordering::Release);
        self.inner.rescan.notify_one();
    }

    /// Asks for a rescan of what changed at `paths`.
    fn request_rescan_of(&self, paths: Vec<PathBuf>) {
        lock(&self.inner.changed).extend(paths);
        self.inner.rescan.notify_one();
    }

    /// Waits until the first discovery has been published.
    pub async fn ready(&self) {
        let mut snapshots = self.subscribe();
        let _ = snapshots.wait_for(|snapshot| !matches!(snapshot.state, CatalogState::Starting)).await;
    }

    async fn run(self, options: LiveOptions, mut watcher: Option<RootWatcher>, mut shutdown: watch::Receiver<bool>) {
        // The next periodic rescan: every `--rescan-interval`, and at least every
        // `UNWATCHED_RESCAN` while some folder is not watched.
        let mut next_periodic: Option<tokio::time::Instant> = None;
        // Whether this rescan is the periodic one, which also checks the picture of the folders
        // the rescans of changes keep against the full walk.
        let mut verify = false;
        loop {
            // Requests made before this rescan starts (while the last burst settled) are answered
            // by it; left pending, each burst would cost a second, redundant full rescan.
            let _ = self.inner.rescan.notified().now_or_never();
            // Watch first, then scan: a change made after the watch is in place requests another
            // rescan, and one made before it is seen by this scan. (The other order loses changes
            // made between the scan and the watch, e.g. right after the first catalog is ready, or
            // right after a symlinked root flipped.)
            if let Some(mut moved) = watcher.take() {
                // Adding recursive watches walks the trees (every folder of a large catalog):
                // blocking work, kept off the async workers.
                let metrics = Arc::clone(&self.inner.metrics);
                let unwatched = std::mem::take(&mut *lock(&self.inner.unwatched));
                let rewatch = self.inner.rewatch.swap(false, Ordering::AcqRel);
                let refreshed = tokio::task::spawn_blocking(move || {
                    let outcome = moved.refresh(&metrics, &unwatched, rewatch);
                    (moved, outcome)
                })
                .await;
                match refreshed {
                    Ok((moved, (complete, gap))) => {
                        self.inner.watch_complete.store(complete, Ordering::Release);
                        self.set_gap(gap);
                        watcher = Some(moved);
                    }
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    // The runtime is shutting down.
                    Err(_) => return,
                }
            }
            self.rescan(std::mem::take(&mut verify)).await;
            let period = match (options.rescan_interval, lock(&self.inner.gap).is_some()) {
                (_, true) => Some(self.inner.unwatched_period),
                (configured, false) => configured,
            };
            let now = tokio::time::Instant::now();
            next_periodic = period.map(|period| match next_periodic {
                Some(next) if next > now => next.min(now + period),
                _ => now + period,
            });
            tokio::select! {
                () = self.inner.rescan.notified() => tokio::time::sleep(SETTLE).await,
                () = async { tokio::time::sleep_until(next_periodic.expect("a period")).await }, if next_periodic.is_some() => {
                    next_periodic = None;
                    self.inner.full_rescan.store(true, Ordering::Release);
                    verify = true;
                }
                () = stopped(&mut shutdown) => return,
            }
        }
    }

    /// Records what the watcher could not watch now, logging once when folders start or stop
    /// going unwatched.
    fn set_gap(&self, gap: Option<WatchGap>) {
        let mut current = lock(&self.inner.gap);
        self.inner.metrics.set_watch_incomplete(gap.is_some());
        match (&*current, &gap) {
            (None, Some(gap)) => {
                let limit = gap.limit.map_or_else(|| "unknown".to_owned(), |limit| limit.to_string());
                tracing::warn!(
                    limit,
                    folders = gap.folders,
                    rescan_every_seconds = self.inner.unwatched_period.as_secs_f64(),
                    fix = format!("sysctl fs.inotify.max_user_watches={}", gap.suggested_limit()),
                    "the kernel's limit on inotify watches (fs.inotify.max_user_watches, per user, shared by \
                     all of its processes) is reached: some folders are not watched, so their changes are seen \
                     only by periodic rescans; raise the limit (the watches are placed again every {} s)",
                    WATCH_RETRY.as_secs()
                );
            }
            (Some(_), None) => tracing::info!("every folder is watched again"),
            _ => {}
        }
        *current = gap;
    }
    /// Discovers every source and publishes the result if it answers anything differently.
    /// Directory sources list again only what the changes named since the last rescan may have
    /// touched, unless a full walk is due: at start, after lost events or a stale read, while a
    /// folder is not watched, and at the periodic rescan (`verify`), which also rescans from the
    /// picture first and counts any difference (the full walk's answer is the one published).
    async fn rescan(&self, verify: bool) {
        let started = Instant::now();
        let sources = &self.inner.sources;
        let changed = std::mem::take(&mut *lock(&self.inner.changed));
        let full = self.inner.full_rescan.swap(false, Ordering::AcqRel);
        let watched = self.change_stamp().is_some();
        let covered = watched && changed.len() <= MAX_CHANGED_PATHS && changed.iter().all(|path| self.covered(path));
        let scanned = if full || !covered {
            if verify && covered {
                let stamp = self.change_stamp();
                let from_picture = self.discover(Some(changed)).await;
                let walked = self.discover(None).await;
                if stamp.is_some() && stamp == self.change_stamp() && !same_discovery(&from_picture, &walked) {
                    self.inner.metrics.picture_disagreement();
                    tracing::warn!("the rescan of changes and the full walk disagree; serving the full walk's catalog");
                }
                walked
            } else {
                self.discover(None).await
            }
        } else {
            self.discover(Some(changed)).await
        };
        let state = match scanned {
            Ok(mut discovery) => {
                self.inner.metrics.set_failing(false);
                self.read_missing_versions(&mut discovery).await;
                if let Some(gap) = &*lock(&self.inner.gap) {
                    discovery.diagnostics.extend(gap.diagnostics(self.inner.unwatched_period));
                }
                let labels: Vec<String> = sources.info.iter().map(|info| info.label.clone()).collect();
                // The first catalog is compressed before it is published (nothing is served yet);
                // later ones after, so that compressing never delays a change.
                let current = self.snapshot();
                let catalog = tokio::task::spawn_blocking(move || {
                    let previous = match &current.state {
                        CatalogState::Ready(catalog) => Some(&**catalog),
                        _ => None,
                    };
                    let catalog = Catalog::rebuild(previous, &discovery, &labels);
                    if let Some(catalog) = &catalog
                        && current.version == 0
                    {
                        catalog.compress();
                    }
                    catalog
                })
                .await;
                match catalog {
                    Ok(catalog) => catalog.map(|catalog| CatalogState::Ready(Box::new(catalog))),
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    // The runtime is shutting down.
                    Err(_) => return,
                }
            }
            Err(failure) => self.failed(&failure),
        };
        let metrics = &self.inner.metrics;
        metrics.scan_finished(started.elapsed());
        // `None`: the same catalog as the published one.
        let Some(state) = state else { return };
        if let CatalogState::Ready(catalog) = &state {
            metrics.set_catalog_size(catalog.skills.len());
        }
        let mut published = None;
        self.inner.snapshots.send_if_modified(|current| {
            if current.same_as(&state) {
                return false;
            }
            let version = current.version + 1;
            self.report(version, &state);
            let previous = std::mem::replace(current, Arc::new(Snapshot { version, state }));
            published = Some((previous, Arc::clone(current)));
            true
        });
        if let Some((previous, snapshot)) = published {
            tokio::task::spawn_blocking(move || {
                if let CatalogState::Ready(catalog) = &snapshot.state {
                    catalog.compress();
                }
                report_left_out(&previous, &snapshot);
            });
        }
    }

    /// Whether a change at `path` can be rescanned from a directory source's picture: it lies
    /// beneath one of their roots, as the last scan resolved them.
    fn covered(&self, path: &Path) -> bool {
        let sources = &self.inner.sources;
        (0..sources.info.len()).filter_map(|source| sources.directory(source)).any(|directory| directory.covers(path))
    }

    /// One scan of every source: with `changed`, directory sources rescan what those paths may
    /// have changed (falling back to a full walk where they cannot tell); without, everything.
    async fn discover(&self, changed: Option<Vec<PathBuf>>) -> Result<CompositeDiscovery, SourceError> {
        let sources = &self.inner.sources;
        let changed = changed.map(Arc::new);
        let mut scans = Vec::with_capacity(sources.info.len());
        for (index, discoverer) in sources.composite.sources().iter().enumerate() {
            let scan = match sources.directory(index) {
                Some(directory) => {
                    let (directory, changed, metrics) =
                        (directory.clone(), changed.clone(), Arc::clone(&self.inner.metrics));
                    let scanned = tokio::task::spawn_blocking(move || {
                        let rescanned = changed.as_deref().and_then(|changed| directory.rescan_blocking(changed));
                        metrics.rescanned(rescanned.is_some());
                        rescanned.unwrap_or_else(|| directory.scan_blocking())
                    })
                    .await;
                    match scanned {
                        Ok(scan) => scan,
                        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                        // The runtime is shutting down.
                        Err(error) => Err(SkillError::Io {
                            context: "the scan was cancelled".to_owned(),
                            source: std::io::Error::other(error),
                        }),
                    }
                }
                None => discoverer.scan().await,
            };
            let failed = scan.is_err();
            scans.push(scan);
            if failed {
                break;
            }
        }
        sources.composite.compose(scans)
    }

    /// What a failed scan leaves published. Before any good catalog it is the failure (every
    /// catalog route answers 503); after one, the last good catalog stays, carrying the failure.
    /// `None`: this failure is already published.
    fn failed(&self, failure: &SourceError) -> Option<CatalogState> {
        let metrics = &self.inner.metrics;
        metrics.scan_failed();
        metrics.set_failing(true);
        let source = self.inner.sources.label(failure.index).to_owned();
        let message = failure.error.explanation();
        let current = self.snapshot();
        match &current.state {
            CatalogState::Ready(catalog) => {
                if catalog.error.as_ref().is_some_and(|known| known.source == source && known.message == message) {
                    return None;
                }
                tracing::warn!(
                    source,
                    error = message,
                    "a scan failed; serving the last good catalog until it succeeds"
                );
                let since = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
                Some(CatalogState::Ready(Box::new(catalog.failing(CatalogFailure { source, message, since }))))
            }
            // The 503's detail is nagents' message alone, as a nagents source would raise it.
            CatalogState::Failed(known) if *known == failure.error.to_string() => None,
            _ => {
                tracing::warn!(source, error = message, "a scan failed; no catalog is served until one succeeds");
                Some(CatalogState::Failed(failure.error.to_string()))
            }
        }
    }

    /// One line for each new version: what it holds, and what was skipped, source by source.
    fn report(&self, version: u64, state: &CatalogState) {
        let CatalogState::Ready(catalog) = state else { return };
        let labels = self.inner.sources.info.iter().map(|info| info.label.as_str());
        let diagnostics = labels
            .map(|label| {
                let count = catalog.diagnostics.iter().filter(|diagnostic| diagnostic.source == label).count();
                format!("{label}: {count}")
            })
            .collect::<Vec<_>>()
            .join(", ");
        tracing::info!(
            version,
            skills = catalog.skills.len(),
            shadowed = catalog.shadowed.len(),
            diagnostics,
            failing = catalog.error.is_some(),
            "published a new catalog version"
        );
    }

    /// The tags cover each skill's content: sources that read contents to discover them (every
    /// directory and builtin source) give their versions with the scan; any other skill is read
    /// now, a few at a time.
    async fn read_missing_versions(&self, discovery: &mut CompositeDiscovery) {
        let composite = &self.inner.sources.composite;
        let missing = discovery.skills.iter_mut().filter(|sourced| sourced.version.is_none());
        futures_util::stream::iter(missing)
            .for_each_concurrent(CONCURRENT_READS, |sourced| async move {
                let content = composite.load(&sourced.skill).await;
                sourced.version = content.ok().map(|content| ContentVersion::of(&content));
            })
            .await;
    }

    fn watch(&self) -> Option<RootWatcher> {
        let catalog = self.clone();
        let metrics = Arc::clone(&self.inner.metrics);
        let handler = move |event: notify::Result<notify::Event>| match event {
            Ok(event) if event.kind.is_access() => {}
            Ok(event) if event.need_rescan() => {
                // The kernel's event queue overflowed: changes were lost, and folders made
                // meanwhile may have no watch yet.
                metrics.watch_overflow();
                if !catalog.inner.overflow_logged.swap(true, Ordering::AcqRel) {
                    let queue = read_limit("/proc/sys/fs/inotify/max_queued_events");
                    let queue_text = queue.map_or_else(|| "unknown".to_owned(), |queue| queue.to_string());
                    tracing::warn!(
                        max_queued_events = queue_text,
                        fix = format!(
                            "sysctl fs.inotify.max_queued_events={}",
                            queue.map_or(65_536, |queue| (queue * 4).next_power_of_two())
                        ),
                        "the kernel's inotify event queue overflowed (fs.inotify.max_queued_events); \
                         rescanning everything and watching every folder again (logged once; \
                         skillcat_watch_overflows_total counts them)"
                    );
                }
                catalog.inner.rewatch.store(true, Ordering::Release);
                catalog.inner.changes.fetch_add(1, Ordering::AcqRel);
                catalog.request_rescan();
            }
            Ok(event) => {
                catalog.inner.changes.fetch_add(1, Ordering::AcqRel);
                catalog.request_rescan_of(event.paths);
            }
            Err(error) if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) => {
                // A folder made while running could not be watched; the next refresh accounts
                // for it (and logs it, once).
                metrics.watcher_error();
                metrics.watch_limit_reached();
                lock(&catalog.inner.unwatched).extend(error.paths);
                catalog.inner.changes.fetch_add(1, Ordering::AcqRel);
                catalog.request_rescan();
            }
            Err(error) => {
                // Events may have been lost: no read is trusted to stay current any more.
                catalog.inner.watch_failed.store(true, Ordering::Release);
                catalog.inner.changes.fetch_add(1, Ordering::AcqRel);
                metrics.watcher_error();
                tracing::warn!(%error, "file watcher error; rescanning");
                catalog.request_rescan();
            }
        };
        // Creations, removals and modifications only: the scans' own opens of every folder and
        // `SKILL.md` would otherwise each queue an event, overflow the kernel's queue on a large
        // tree, and make every full rescan cause the next.
        let config =
            notify::Config::default().with_follow_symlinks(false).with_event_kinds(notify::EventKindMask::CORE);
        match RecommendedWatcher::new(handler, config) {
            Ok(watcher) => {
                let roots = (self.inner.sources.info.iter().enumerate())
                    .flat_map(|(source, info)| info.roots.iter().map(move |root| (source, root.clone())))
                    .collect();
                Some(RootWatcher { watcher, roots, watched: Vec::new(), partial: Vec::new() })
            }
            Err(error) => {
                self.inner.metrics.watcher_error();
                tracing::error!(%error, "cannot watch the skill directories; only periodic rescans will see changes");
                None
            }
        }
    }
}

/// Whether two scans give the same catalog (or fail the same way).
fn same_discovery(a: &Result<CompositeDiscovery, SourceError>, b: &Result<CompositeDiscovery, SourceError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => a.index == b.index && a.to_string() == b.to_string(),
        _ => false,
    }
}

/// Names the skills the well-known indexes leave out, and why, when a new version changes that
/// (the first one included). `GET /skills` never says it: it stays nagents' catalog.
fn report_left_out(previous: &Snapshot, published: &Snapshot) {
    let CatalogState::Ready(catalog) = &published.state else { return };
    let unchanged = match &previous.state {
        CatalogState::Ready(previous) => !left_out_differs(previous, catalog),
        _ => wellknown::left_out(catalog).is_empty(),
    };
    if unchanged {
        return;
    }
    let now = wellknown::left_out(catalog);
    let version = published.version;
    if now.is_empty() {
        tracing::info!(version, "the well-known indexes publish every skill");
        return;
    }
    let skills = now.iter().map(|(skill, why)| format!("{}: {why}", skill.skill.name())).collect::<Vec<_>>().join("; ");
    tracing::warn!(version, count = now.len(), skills, "skills left out of the well-known indexes");
}

/// Whether two catalogs leave different skills out of the well-known indexes, or for different
/// reasons. A skill shared by both (unchanged) is left out of both or neither, so only the
/// skills that changed are looked at: a new version of a large catalog costs its changes.
fn left_out_differs(a: &Catalog, b: &Catalog) -> bool {
    let reason = |skill: &CatalogSkill| wellknown::published_in_legacy(skill).err();
    let (mut a, mut b) = (a.skills.iter().peekable(), b.skills.iter().peekable());
    loop {
        let (x, y) = match (a.peek(), b.peek()) {
            (None, None) => return false,
            (Some(x), Some(y)) if x.skill.name() == y.skill.name() => (a.next(), b.next()),
            (Some(x), Some(y)) if x.skill.name() < y.skill.name() => (a.next(), None),
            (Some(_), None) => (a.next(), None),
            _ => (None, b.next()),
        };
        match (x, y) {
            (Some(x), Some(y)) if Arc::ptr_eq(x, y) => {}
            (Some(x), Some(y)) => {
                if reason(x) != reason(y) {
                    return true;
                }
            }
            (Some(only), None) | (None, Some(only)) => {
                if reason(only).is_some() {
                    return true;
                }
            }
            (None, None) => return false,
        }
    }
}

/// The watches on the roots. Each root is watched recursively at the directory it resolves to
/// now, and the directory holding a root that is a symlink or does not exist yet, and the one
/// holding each symlink the root passes through, are watched too, so a flip of a link (git-sync)
/// or the root's creation is seen.
/// A refresh moves the watches when a root resolves elsewhere or was replaced by another directory.
struct RootWatcher {
    watcher: RecommendedWatcher,
    /// Each root and the index of its source.
    roots: Vec<(usize, PathBuf)>,
    /// What is watched now (a recursive watch that met the limit on watches included).
    watched: Vec<WatchedDir>,
    /// Recursive watches that met the kernel's limit on watches: the folders they did not reach,
    /// and when to try placing them again.
    partial: Vec<PartialWatch>,
}

/// A recursive watch some of whose folders could not be watched.
struct PartialWatch {
    watch: WatchedDir,
    retry_at: Instant,
    /// The gap as measured when it was found.
    gap: WatchGap,
}

/// Folders that could not be watched because the kernel's limit on inotify watches was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WatchGap {
    /// The sources with a folder left unwatched.
    sources: Vec<usize>,
    /// The limit in force: `fs.inotify.max_user_watches`, or a user namespace's lower limit.
    limit: Option<u64>,
    /// Folders beneath the roots whose watches met the limit: each needs a watch.
    folders: u64,
}

impl WatchGap {
    /// A limit that leaves this tree's folders room next to the watches counted now.
    fn suggested_limit(&self) -> u64 {
        (self.limit.unwrap_or(8_192) + self.folders).next_power_of_two()
    }

    fn merge(&mut self, other: &WatchGap) {
        for source in &other.sources {
            if !self.sources.contains(source) {
                self.sources.push(*source);
            }
        }
        self.sources.sort_unstable();
        self.limit = self.limit.or(other.limit);
        self.folders += other.folders;
    }

    /// The catalog diagnostic of each source with an unwatched folder.
    fn diagnostics(&self, period: Duration) -> impl Iterator<Item = SourcedDiagnostic> + '_ {
        let limit = self.limit.map_or_else(|| "its".to_owned(), |limit| limit.to_string());
        let message = format!(
            "file watch incomplete: the kernel's limit of {limit} inotify watches is reached ({} folders to \
             watch); changes are seen by rescans every {} s; raise it with sysctl fs.inotify.max_user_watches={}",
            self.folders,
            period.as_secs_f64(),
            self.suggested_limit()
        );
        self.sources.iter().map(move |&source| SourcedDiagnostic { source, message: message.clone() })
    }
}

/// One watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WatchedDir {
    /// The path given to the watcher. For a root it is the resolved directory: notify does not
    /// treat a symlink as a directory, so watching a symlinked root through the link would watch
    /// only its subfolders, never the root itself (a new top-level skill would go unseen).
    path: PathBuf,
    mode: RecursiveMode,
    /// The directory's device and inode when it was watched: a directory replaced under the same
    /// path (moved away and another moved in) must be watched again, since inotify watches inodes.
    identity: Option<(u64, u64)>,
    /// The source whose root this is.
    source: usize,
}

impl WatchedDir {
    fn new(path: PathBuf, mode: RecursiveMode, source: usize) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let identity = std::fs::metadata(&path).ok().map(|metadata| (metadata.dev(), metadata.ino()));
        WatchedDir { path, mode, identity, source }
    }
}

impl RootWatcher {
    /// Moves the watches, and places again those that met the limit on watches (when their retry
    /// is due, or at once after a queue overflow: `rewatch`). `unwatched` are folders made since
    /// the last refresh that the watcher could not watch. Gives whether every wanted directory is
    /// watched now, and what is not.
    fn refresh(&mut self, metrics: &Metrics, unwatched: &[PathBuf], rewatch: bool) -> (bool, Option<WatchGap>) {
        let mut recursive: Vec<WatchedDir> = Vec::new();
        let mut parents: Vec<WatchedDir> = Vec::new();
        for (source, root) in &self.roots {
            let resolved = std::fs::canonicalize(root).ok();
            if resolved.as_deref() != Some(root.as_path()) {
                // A symlinked (or missing) root: watch the directory holding the link as well,
                // and the one holding each symlinked ancestor (`/git/current/skills` flips with
                // `/git/current`).
                let links = root.ancestors().skip(1).filter(|ancestor| ancestor.is_symlink());
                for holder in std::iter::once(root.as_path()).chain(links).filter_map(Path::parent) {
                    parents.push(WatchedDir::new(holder.to_path_buf(), RecursiveMode::NonRecursive, *source));
                }
            }
            if let Some(resolved) = resolved {
                recursive.push(WatchedDir::new(resolved, RecursiveMode::Recursive, *source));
            }
        }
        // A folder inside a recursively watched tree is already watched; watching it again
        // non-recursively would make notify forget that its subfolders are to be watched.
        parents.retain(|parent| !recursive.iter().any(|tree| parent.path.starts_with(&tree.path)));
        let mut wanted: Vec<WatchedDir> = Vec::new();
        for watch in recursive.into_iter().chain(parents) {
            if !wanted.contains(&watch) {
                wanted.push(watch);
            }
        }
        let stale: Vec<WatchedDir> = self.watched.iter().filter(|watch| !wanted.contains(watch)).cloned().collect();
        for watch in stale {
            // May fail harmlessly: notify drops the watches of a deleted directory by itself.
            let _ = self.watcher.unwatch(&watch.path);
            self.watched.retain(|watched| *watched != watch);
            self.partial.retain(|partial| partial.watch != watch);
        }
        // Folders made while running that met the limit: their tree's watch is partial now.
        for path in unwatched {
            let Some(tree) = self
                .watched
                .iter()
                .find(|watch| watch.mode == RecursiveMode::Recursive && path.starts_with(&watch.path))
            else {
                continue;
            };
            if !self.partial.iter().any(|partial| partial.watch == *tree) {
                let gap = measure_gap(tree);
                self.partial.push(PartialWatch { watch: tree.clone(), retry_at: Instant::now() + WATCH_RETRY, gap });
            }
        }
        let now = Instant::now();
        let mut complete = true;
        for watch in wanted {
            let due =
                self.partial.iter().position(|partial| partial.watch == watch && (rewatch || partial.retry_at <= now));
            if let Some(due) = due {
                self.partial.remove(due);
            } else if self.watched.contains(&watch) {
                if rewatch && watch.mode == RecursiveMode::Recursive {
                    // After an overflow: notify adds the folders it missed (the others are
                    // already watched and stay so).
                    self.place(&watch, metrics);
                }
                continue;
            }
            if !self.place(&watch, metrics) {
                complete = false;
            }
        }
        let mut gap: Option<WatchGap> = None;
        for partial in &self.partial {
            complete = false;
            match &mut gap {
                Some(gap) => gap.merge(&partial.gap),
                None => gap = Some(partial.gap.clone()),
            }
        }
        (complete, gap)
    }

    /// Places one watch; whether the directory (and, for a recursive one, every folder beneath)
    /// is watched now. A recursive watch that met the kernel's limit stays in place as far as it
    /// reached and is tried again later.
    fn place(&mut self, watch: &WatchedDir, metrics: &Metrics) -> bool {
        match self.watcher.watch(Path::new(&watch.path), watch.mode) {
            Ok(()) => {
                if !self.watched.contains(watch) {
                    self.watched.push(watch.clone());
                }
                true
            }
            Err(error) if matches!(error.kind, notify::ErrorKind::MaxFilesWatch) => {
                metrics.watcher_error();
                metrics.watch_limit_reached();
                if !self.watched.contains(watch) {
                    self.watched.push(watch.clone());
                }
                let gap = measure_gap(watch);
                self.partial.push(PartialWatch { watch: watch.clone(), retry_at: Instant::now() + WATCH_RETRY, gap });
                false
            }
            Err(error) => {
                metrics.watcher_error();
                tracing::warn!(path = %watch.path.display(), %error, "cannot watch; relying on periodic rescans");
                false
            }
        }
    }
}

/// The gap a recursive watch that met the limit leaves: the limit, and the folders it wants.
fn measure_gap(watch: &WatchedDir) -> WatchGap {
    // `/proc/sys/user/max_inotify_watches` is the limit of this user namespace; in the initial
    // one it is `fs.inotify.max_user_watches`. The lower one applies.
    let limit = ["/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"]
        .into_iter()
        .filter_map(read_limit)
        .min();
    WatchGap { sources: vec![watch.source], limit, folders: count_folders(&watch.path) }
}

/// A number in a `/proc/sys` file.
fn read_limit(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The folders in the tree at `root`, itself included, without following symlinks: what a
/// recursive watch of it needs, one watch each.
fn count_folders(root: &Path) -> u64 {
    let mut count = 0;
    let mut pending = vec![root.to_path_buf()];
    while let Some(folder) = pending.pop() {
        count += 1;
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    count
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
