//! The configured sources, built into one composite discoverer.

use std::sync::Arc;

use rust_embed::RustEmbed;
use skillcat_core::{
    BuiltinSkillDiscoverer, CompositeSkillDiscoverer, DirectorySkillDiscoverer, Skill, SkillDiscoverer, SkillError,
    SkillFilePath,
};

use crate::config::SourceConfig;

/// The builtin skills, compiled in from `skills/`.
#[derive(RustEmbed)]
#[folder = "skills/"]
pub struct BuiltinSkills;

/// One configured source and the label its skills and diagnostics carry.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    pub label: String,
    /// The directories a live catalog must watch (empty for builtin).
    pub roots: Vec<std::path::PathBuf>,
}

/// The composite of the configured sources and what each one is.
pub struct Sources {
    pub composite: CompositeSkillDiscoverer,
    pub info: Vec<SourceInfo>,
    /// Each source's own handle, for what the discoverer protocol does not cover: its files.
    readers: Vec<FileReader>,
}

/// Reads the files of one source's skills.
#[derive(Clone)]
pub enum FileReader {
    Directory(DirectorySkillDiscoverer),
    Builtin(Arc<BuiltinSkillDiscoverer<BuiltinSkills>>),
}

impl FileReader {
    /// The bytes of `path` of `skill` (a current descriptor of this source), at most `max_bytes`;
    /// the caller checks them against the listed digest.
    pub fn read_blocking(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        match self {
            FileReader::Directory(source) => source.read_file_blocking(skill, path, max_bytes),
            FileReader::Builtin(source) => source.read_file_blocking(skill, path, max_bytes),
        }
    }

    /// As [`read_blocking`](Self::read_blocking), off the async workers where it touches disk.
    pub async fn read(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        match self {
            FileReader::Directory(source) => source.read_file(skill, path, max_bytes).await,
            FileReader::Builtin(source) => source.read_file(skill, path, max_bytes).await,
        }
    }
}

impl Sources {
    pub fn build(configs: &[SourceConfig]) -> std::io::Result<Self> {
        let mut discoverers: Vec<Arc<dyn SkillDiscoverer>> = Vec::with_capacity(configs.len());
        let mut info = Vec::with_capacity(configs.len());
        let mut readers = Vec::with_capacity(configs.len());
        for config in configs {
            match config {
                SourceConfig::Directory { name, roots, max_entries, max_depth } => {
                    let discoverer = DirectorySkillDiscoverer::with_limits(roots, *max_entries, *max_depth)?;
                    let absolute: Vec<_> =
                        discoverer.roots().iter().map(|root| root.clone().into_os_string().into()).collect();
                    let label = name.clone().unwrap_or_else(|| {
                        discoverer.roots().iter().map(|root| root.display()).collect::<Vec<_>>().join(", ")
                    });
                    info.push(SourceInfo { label, roots: absolute });
                    readers.push(FileReader::Directory(discoverer.clone()));
                    discoverers.push(Arc::new(discoverer));
                }
                SourceConfig::Builtin { name } => {
                    let label = name.clone().unwrap_or_else(|| "builtin".to_owned());
                    info.push(SourceInfo { label, roots: Vec::new() });
                    let discoverer = Arc::new(BuiltinSkillDiscoverer::<BuiltinSkills>::new());
                    readers.push(FileReader::Builtin(Arc::clone(&discoverer)));
                    discoverers.push(discoverer);
                }
            }
        }
        Ok(Sources { composite: CompositeSkillDiscoverer::new(discoverers), info, readers })
    }

    pub fn label(&self, source: usize) -> &str {
        &self.info[source].label
    }

    /// Source `source` if it is a directory source.
    pub fn directory(&self, source: usize) -> Option<&DirectorySkillDiscoverer> {
        match &self.readers[source] {
            FileReader::Directory(directory) => Some(directory),
            FileReader::Builtin(_) => None,
        }
    }

    /// The file reader of source `source`.
    pub fn reader(&self, source: usize) -> &FileReader {
        &self.readers[source]
    }
}
