//! The live catalog: the published snapshot, kept current by rescans (`rescan`) that file events
//! (`watching`) and a periodic timer ask for, and the reads of what the snapshot lists — contents,
//! files, archives — each checked against it.

mod rescan;
mod verified;
mod versions;
mod watching;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use skillcat_core::{ContentVersion, Digest, Skill, SkillError, SkillFile, SkillName};
use tokio::sync::{Notify, watch};

pub use self::verified::VerifiedFile;
use self::versions::PinnedSkills;
pub use self::versions::{VersionEntry, Versions};
use self::watching::WatchState;
use super::CatalogError;
use super::body::PreparedBody;
use super::contents::{Content, ContentCache};
use super::snapshot::{CatalogSkill, CatalogState, Reader, Snapshot};
use super::views::{Views, blocking};
use crate::observability::Metrics;
use crate::sources::{Source, Sources};

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

/// The catalog as the server sees it: the published snapshot, the reads checked against it, and
/// a way to ask for a rescan. Clones share it.
#[derive(Clone)]
pub struct LiveCatalog {
    inner: Arc<Inner>,
}

struct Inner {
    sources: Sources,
    snapshots: watch::Sender<Arc<Snapshot>>,
    metrics: Arc<Metrics>,
    requests: Requests,
    watching: WatchState,
    contents: ContentCache,
    /// What is kept for the life of the catalog rather than of a version.
    kept: Views,
    /// Skills as they were at versions asked for.
    pinned: PinnedSkills,
}

/// What the next rescan is asked to do.
#[derive(Default)]
struct Requests {
    /// Signalled for every request; requests made while a rescan runs collapse into one more.
    notify: Notify,
    /// The paths file events named since the last rescan began: a rescan lists again only what
    /// they may have changed.
    changed: Mutex<Vec<PathBuf>>,
    /// Set when the next rescan must walk everything: a reason other than a named change asked for
    /// it (a stale read, the periodic timer, lost events). Set at start.
    full: AtomicBool,
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
        let requests = Requests { full: AtomicBool::new(true), ..Requests::default() };
        let inner = Arc::new(Inner {
            sources,
            snapshots,
            metrics,
            requests,
            watching: WatchState::new(options.rescan_interval),
            contents: ContentCache::default(),
            kept: Views::default(),
            pinned: PinnedSkills::default(),
        });
        let catalog = LiveCatalog { inner };
        // A source that changes by itself (a git fetch) asks for a rescan; only the catalog's own
        // tasks hold it strongly.
        let weak = Arc::downgrade(&catalog.inner);
        let changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(inner) = weak.upgrade() {
                inner.requests.notify.notify_one();
            }
        });
        catalog.inner.sources.start(&changed, &shutdown);
        let roots = if options.watch { catalog.watch() } else { None };
        tokio::spawn(catalog.clone().run(options, roots, shutdown));
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

    /// Waits until the first discovery has been published.
    pub async fn ready(&self) {
        let mut snapshots = self.subscribe();
        let _ = snapshots.wait_for(|snapshot| !matches!(snapshot.state, CatalogState::Starting)).await;
    }

    /// The content of `skill` (a skill of a published snapshot) now, refused unless it is exactly
    /// the version the snapshot lists; then the snapshot is stale, and a rescan is requested.
    /// A content read earlier is reused while no file event arrived since (see `ContentCache`).
    pub async fn content(&self, skill: &CatalogSkill) -> Result<Arc<Content>, CatalogError> {
        // Taken before reading: an event during the read makes the next request read again.
        let stamp = self.inner.watching.stamp();
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
        let text = match self.source(skill).load(&skill.skill).await {
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
        let read = self.source(skill).read_file(&skill.skill, &file.path, file.size).await;
        self.verified(&skill.skill, file, read)
    }

    /// The zip of `skill`'s files, made once per skill version from files each checked against
    /// the listing.
    pub async fn archive(&self, skill: &CatalogSkill) -> Result<Arc<PreparedBody>, CatalogError> {
        let (files, _) = skill.files()?;
        let answers = files.answers();
        answers.archive.get_or_try_init(|| async { Ok(Arc::new(self.build_archive(skill).await?.0)) }).await.cloned()
    }

    /// The digest of `skill`'s archive, found once per skill version. The archive made to find it
    /// is not kept: the discovery index needs every skill's digest, and keeping every archive
    /// would keep a compressed copy of every file in memory. The same files make the same bytes,
    /// so the archive made again when it is asked for has this digest (or is refused as changed).
    pub async fn archive_digest(&self, skill: &CatalogSkill) -> Result<Digest, CatalogError> {
        let (files, _) = skill.files()?;
        let answers = files.answers();
        answers
            .archive_digest
            .get_or_try_init(|| async {
                // An archive already made: its tag is its digest, quoted.
                let made = (answers.archive.get())
                    .and_then(|archive| Digest::parse(archive.etag.as_str().trim_matches('"')).ok());
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
        let (catalog, source, descriptor, listed) =
            (self.clone(), Arc::clone(self.source(skill)), skill.skill.clone(), listed.to_vec());
        blocking(move || {
            super::files::archive(&listed, |file| {
                let read = source.read_file_blocking(&descriptor, &file.path, file.size);
                catalog.verified(&descriptor, file, read)
            })
        })
        .await?
    }

    /// The source that reads `skill`: its owner, or the reader of its pinned version.
    fn source<'a>(&'a self, skill: &'a CatalogSkill) -> &'a Arc<dyn Source> {
        match &skill.reader {
            Some(Reader(reader)) => reader,
            None => self.inner.sources.get(skill.source),
        }
    }

    /// `read` if it gave exactly the listed bytes of `file`; otherwise the snapshot is stale.
    fn verified(
        &self,
        skill: &Skill,
        file: &SkillFile,
        read: Result<Vec<u8>, SkillError>,
    ) -> Result<Vec<u8>, CatalogError> {
        let changed = || self.changed(skill.name());
        match read {
            Ok(bytes) if Digest::of(&bytes) == file.digest => Ok(bytes),
            Ok(_) => Err(changed()),
            Err(error) if error.is_stale() => Err(changed()),
            Err(source) => Err(CatalogError::Read { name: skill.name().clone(), source }),
        }
    }

    /// The snapshot no longer tells what `name` holds: a rescan is asked for.
    fn changed(&self, name: &SkillName) -> CatalogError {
        self.request_rescan();
        CatalogError::Changed(name.clone())
    }

    /// Asks for a full rescan; requests made while one runs collapse into one more.
    fn request_rescan(&self) {
        self.inner.requests.full.store(true, Ordering::Release);
        self.inner.requests.notify.notify_one();
    }

    /// Asks for a rescan of what changed at `paths`.
    fn request_rescan_of(&self, paths: Vec<PathBuf>) {
        lock(&self.inner.requests.changed).extend(paths);
        self.inner.requests.notify.notify_one();
    }

    /// A webhook named `repositories` (any, when empty): the sources fetched from them fetch now.
    /// Their labels.
    pub fn fetch_for(&self, repositories: &[String]) -> Vec<String> {
        self.inner.sources.fetch_for(repositories)
    }

    /// The views kept for the life of the catalog (what the last version reported, say), beside
    /// those of each version.
    pub(super) fn kept(&self) -> &Views {
        &self.inner.kept
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
