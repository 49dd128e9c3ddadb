//! The sources of the live catalog, behind one seam: a [`Source`] is scanned (or rescanned from
//! the changes a file watcher named), loads its skills' `SKILL.md`, reads a file beneath a
//! skill, and says which folders a live catalog must watch for it. [`Sources`] holds the
//! configured ones, in precedence order, and scans them; their catalogs are composed with core's
//! rules ([`skillcat_core::compose`]: the first source to name a skill owns it).
//!
//! Adding a kind of source: a module here with a type that implements [`Source`], its
//! `[[sources]]` table in `config.rs`, and its arm in [`Sources::build`].

mod builtin;
mod directory;
pub mod git;
mod versions;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use skillcat_core::{
    CompositeDiscovery, Discovery, Skill, SkillDiscoverer, SkillError, SkillFilePath, SkillName, SourceError,
};
use tokio::sync::watch;

pub use self::builtin::{BuiltinSkills, BuiltinSource};
pub use self::directory::DirectorySource;
pub use self::git::GitSource;
pub use self::versions::{HistoryEntry, InvalidVersion, PinError, Pinned, VersionSpec};
use crate::config::SourceConfig;
use crate::observability::Metrics;

/// A source of skills for the live catalog: the discoverer protocol (scan, load), and what a live
/// catalog needs beyond it.
#[async_trait]
pub trait Source: SkillDiscoverer {
    /// The label its skills and diagnostics carry (their `source` in every answer).
    fn label(&self) -> &str;

    /// Its kind, as configured (`directory`, `builtin`, `git`).
    fn kind(&self) -> &'static str;

    /// What its last successful scan read, when the source has revisions (a git commit).
    fn revision(&self) -> Option<String> {
        None
    }

    /// Starts what keeps the source current beyond file events (a git source's fetches), until
    /// `shutdown`; `changed` asks for a rescan. Called once, by the live catalog.
    fn start(&self, _changed: Arc<dyn Fn() + Send + Sync>, _shutdown: watch::Receiver<bool>) {}

    /// A webhook named these repositories (none: any): a source fetched from one of them fetches
    /// now and says so.
    fn fetch_for(&self, _repositories: &[String]) -> bool {
        false
    }

    /// Whether the source keeps a history (answers [`history`](Self::history) and
    /// [`pinned`](Self::pinned)).
    fn keeps_history(&self) -> bool {
        false
    }

    /// The versions `name` had in the source's history, newest first (empty: none); `None` when
    /// the source keeps no history (its only version is the current one).
    async fn history(&self, _name: &SkillName) -> Option<Result<Vec<HistoryEntry>, PinError>> {
        None
    }

    /// `name` as it was at `version`; `None` when the source keeps no history.
    async fn pinned(&self, _name: &SkillName, _version: &VersionSpec) -> Option<Result<Pinned, PinError>> {
        None
    }

    /// Whether [`observe_next_walk`](Self::observe_next_walk) is heard: its scans walk folders.
    fn observes_walks(&self) -> bool {
        false
    }

    /// Tells `observer` of each folder the next full scan's walk opens (see
    /// [`FolderObserver`](skillcat_core::FolderObserver)).
    fn observe_next_walk(&self, _observer: Arc<dyn skillcat_core::FolderObserver>) {}

    /// The folders on disk the source reads, made absolute: a live catalog watches them, and
    /// gives what changed beneath them to [`rescan`](Self::rescan).
    fn folders(&self) -> &[PathBuf] {
        &[]
    }

    /// Whether a change at `path` can be given to [`rescan`](Self::rescan).
    fn covers(&self, _path: &Path) -> bool {
        false
    }

    /// A scan after changes at `changed` (absolute paths, as a file watcher reports them) that
    /// reads only what they may have touched, with exactly a full scan's outcome; `None` when
    /// only a full scan can tell.
    async fn rescan(&self, _changed: &Arc<Vec<PathBuf>>) -> Option<Result<Discovery, SkillError>> {
        None
    }

    /// The bytes of `path`, a listed file of `skill` (a current descriptor of this source), at
    /// most `max_bytes`; the caller checks them against the listed digest.
    fn read_file_blocking(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError>;

    /// As [`read_file_blocking`](Self::read_file_blocking), off the async workers where it
    /// touches disk.
    async fn read_file(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError>;

    /// `path`, a listed file of `skill` (a current descriptor of this source), opened for the
    /// caller to read (and check against the listed digest) as it sends it, off the async
    /// workers where it touches disk.
    async fn open_file(&self, skill: &Skill, path: &SkillFilePath) -> Result<Opened, SkillError>;
}

/// A file opened for reading.
pub enum Opened {
    /// Its bytes, held by the source (shared, not copied).
    Memory(bytes::Bytes),
    /// A regular file opened beneath its skill's folder, and its size when opened.
    File { file: std::fs::File, size: u64 },
}

/// The configured sources, in precedence order, each held once.
pub struct Sources {
    sources: Vec<Arc<dyn Source>>,
    /// Per source: whether its next scan must be a full one, because a scan of all of them
    /// stopped at a failing source before it, so the changes since were never given to it.
    missed: Vec<AtomicBool>,
}

impl Sources {
    /// The sources `configs` describe; git sources keep their mirrors under `state_dir`. Scans
    /// count into `metrics`.
    pub fn build(configs: &[SourceConfig], state_dir: &Path, metrics: &Arc<Metrics>) -> std::io::Result<Self> {
        Self::build_with(configs, state_dir, metrics, true)
    }

    /// The sources of a command that answers once from one scan. Without `folder_view` their
    /// scans are nagents' view alone: directory sources list no files, hash nothing and keep
    /// nothing for rescans (`check`, `manifest` and `load` need none of it; `check --spec` asks
    /// for the files).
    pub fn for_command(configs: &[SourceConfig], state_dir: &Path, folder_view: bool) -> std::io::Result<Self> {
        Self::build_with(configs, state_dir, &Arc::new(Metrics::default()), folder_view)
    }

    fn build_with(
        configs: &[SourceConfig],
        state_dir: &Path,
        metrics: &Arc<Metrics>,
        folder_view: bool,
    ) -> std::io::Result<Self> {
        let sources: Vec<Arc<dyn Source>> = configs
            .iter()
            .map(|config| -> std::io::Result<Arc<dyn Source>> {
                Ok(match config {
                    SourceConfig::Directory { name, roots, max_entries, max_depth } => {
                        let source =
                            DirectorySource::new(name.clone(), roots, *max_entries, *max_depth, Arc::clone(metrics))?;
                        Arc::new(if folder_view { source } else { source.descriptors_only() })
                    }
                    SourceConfig::Builtin { name } => Arc::new(BuiltinSource::new(name.clone())),
                    SourceConfig::Git(config) => Arc::new(
                        GitSource::new(config.clone(), state_dir, Arc::clone(metrics))
                            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?,
                    ),
                })
            })
            .collect::<Result<_, _>>()?;
        let missed = sources.iter().map(|_| AtomicBool::new(false)).collect();
        Ok(Sources { sources, missed })
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Source `index`, in precedence order.
    pub fn get(&self, index: usize) -> &Arc<dyn Source> {
        &self.sources[index]
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Source>> {
        self.sources.iter()
    }

    pub fn label(&self, index: usize) -> &str {
        self.sources[index].label()
    }

    /// Starts every source's own upkeep (see [`Source::start`]).
    pub fn start(&self, changed: &Arc<dyn Fn() + Send + Sync>, shutdown: &watch::Receiver<bool>) {
        for source in &self.sources {
            source.start(Arc::clone(changed), shutdown.clone());
        }
    }

    /// Asks the sources fetched from `repositories` (any, when empty) to fetch now; their labels.
    pub fn fetch_for(&self, repositories: &[String]) -> Vec<String> {
        self.sources
            .iter()
            .filter(|source| source.fetch_for(repositories))
            .map(|source| source.label().to_owned())
            .collect()
    }

    /// Whether every change at `paths` can be rescanned from changes alone by the source it lies
    /// beneath.
    pub fn cover(&self, paths: &[PathBuf]) -> bool {
        paths.iter().all(|path| self.sources.iter().any(|source| source.covers(path)))
    }

    /// One scan of every source, in order, composed: with `changed`, each source that can rescans
    /// from those changes (the others scan fully). Stops at the first source that fails; the ones
    /// after it, which never saw the changes, scan fully the next time.
    pub async fn scan(&self, changed: Option<&Arc<Vec<PathBuf>>>) -> Result<CompositeDiscovery, SourceError> {
        let mut scans = Vec::with_capacity(self.sources.len());
        for (index, source) in self.sources.iter().enumerate() {
            let missed = self.missed[index].swap(false, Ordering::AcqRel);
            let rescanned = match changed {
                Some(changed) if !missed => source.rescan(changed).await,
                _ => None,
            };
            let scan = match rescanned {
                Some(scan) => scan,
                None => source.scan().await,
            };
            let failed = scan.is_err();
            scans.push(scan);
            if failed {
                for later in &self.missed[index + 1..] {
                    later.store(true, Ordering::Release);
                }
                break;
            }
        }
        skillcat_core::compose(scans)
    }
}

/// The value of a blocking task, its panic resumed; a task the runtime cancelled (it is shutting
/// down) is an I/O error.
async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SkillError> + Send + 'static,
) -> Result<T, SkillError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => {
            Err(SkillError::Io { context: "the scan was cancelled".to_owned(), source: std::io::Error::other(error) })
        }
    }
}
