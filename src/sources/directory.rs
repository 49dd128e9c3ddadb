//! A source of folders on disk: core's [`DirectorySkillDiscoverer`] (nagents' walk, never
//! following a symlink beneath a root), rescanning from a file watcher's changes where it can.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use skillcat_core::{DirectorySkillDiscoverer, Discovery, Skill, SkillDiscoverer, SkillError, SkillFilePath};

use super::{Opened, Source, run_blocking};
use crate::observability::Metrics;

/// One `--dir` (or `[[sources]] kind = "directory"`, with several roots).
pub struct DirectorySource {
    discoverer: DirectorySkillDiscoverer,
    label: String,
    /// The roots, made absolute.
    folders: Vec<PathBuf>,
    metrics: Arc<Metrics>,
}

impl DirectorySource {
    /// The source of `roots` (made absolute lexically), labelled `name` or else by its roots.
    pub fn new(
        name: Option<String>,
        roots: &[PathBuf],
        max_entries: NonZeroUsize,
        max_depth: usize,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Self> {
        let discoverer = DirectorySkillDiscoverer::with_limits(roots, max_entries, max_depth)?;
        let folders: Vec<PathBuf> =
            discoverer.roots().iter().map(|root| root.clone().into_os_string().into()).collect();
        let label = name.unwrap_or_else(|| {
            discoverer.roots().iter().map(|root| root.display().to_string()).collect::<Vec<_>>().join(", ")
        });
        Ok(DirectorySource { discoverer, label, folders, metrics })
    }

    /// This source in nagents' view alone: no files listed, nothing kept for rescans (see
    /// [`DirectorySkillDiscoverer::descriptors_only`]).
    pub fn descriptors_only(self) -> Self {
        DirectorySource { discoverer: self.discoverer.descriptors_only(), ..self }
    }
}

#[async_trait]
impl SkillDiscoverer for DirectorySource {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        let discoverer = self.discoverer.clone();
        let scan = run_blocking(move || discoverer.scan_blocking()).await;
        self.metrics.rescanned(false);
        scan
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        self.discoverer.load(skill).await
    }
}

#[async_trait]
impl Source for DirectorySource {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> &'static str {
        "directory"
    }

    fn observes_walks(&self) -> bool {
        true
    }

    fn observe_next_walk(&self, observer: Arc<dyn skillcat_core::FolderObserver>) {
        self.discoverer.observe_next_walk(observer);
    }

    fn folders(&self) -> &[PathBuf] {
        &self.folders
    }

    fn covers(&self, path: &Path) -> bool {
        self.discoverer.covers(path)
    }

    async fn rescan(&self, changed: &Arc<Vec<PathBuf>>) -> Option<Result<Discovery, SkillError>> {
        let (discoverer, changed) = (self.discoverer.clone(), Arc::clone(changed));
        // `None` from the walk (only a full scan can tell) is carried out of the blocking task.
        let rescanned = match run_blocking(move || Ok(discoverer.rescan_blocking(&changed))).await {
            Ok(rescanned) => rescanned?,
            Err(cancelled) => Err(cancelled),
        };
        self.metrics.rescanned(true);
        Some(rescanned)
    }

    fn read_file_blocking(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        self.discoverer.read_file_blocking(skill, path, max_bytes)
    }

    async fn read_file(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        self.discoverer.read_file(skill, path, max_bytes).await
    }

    async fn open_file(&self, skill: &Skill, path: &SkillFilePath) -> Result<Opened, SkillError> {
        let (discoverer, skill, path) = (self.discoverer.clone(), skill.clone(), path.clone());
        let (file, size) = run_blocking(move || discoverer.open_file_blocking(&skill, &path)).await?;
        Ok(Opened::File { file, size })
    }
}
