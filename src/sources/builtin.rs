//! The skills embedded in the binary from `skills/` (core's [`BuiltinSkillDiscoverer`]).

use async_trait::async_trait;
use rust_embed::RustEmbed;
use skillcat_core::{BuiltinSkillDiscoverer, Discovery, Skill, SkillDiscoverer, SkillError, SkillFilePath};

use super::{Opened, Source};

/// The builtin skills, compiled in from `skills/`.
#[derive(RustEmbed)]
#[folder = "skills/"]
pub struct BuiltinSkills;

/// The builtin source: in memory, never changing while the process runs.
pub struct BuiltinSource {
    discoverer: BuiltinSkillDiscoverer<BuiltinSkills>,
    label: String,
}

impl BuiltinSource {
    /// The builtin skills, labelled `name` or else `builtin`.
    pub fn new(name: Option<String>) -> Self {
        BuiltinSource { discoverer: BuiltinSkillDiscoverer::new(), label: name.unwrap_or_else(|| "builtin".to_owned()) }
    }
}

#[async_trait]
impl SkillDiscoverer for BuiltinSource {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        self.discoverer.scan().await
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        self.discoverer.load(skill).await
    }
}

#[async_trait]
impl Source for BuiltinSource {
    fn label(&self) -> &str {
        &self.label
    }

    fn kind(&self) -> &'static str {
        "builtin"
    }

    fn read_file_blocking(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        self.discoverer.read_file_blocking(skill, path, max_bytes)
    }

    async fn read_file(&self, skill: &Skill, path: &SkillFilePath, max_bytes: u64) -> Result<Vec<u8>, SkillError> {
        self.discoverer.read_file_blocking(skill, path, max_bytes)
    }

    async fn open_file(&self, skill: &Skill, path: &SkillFilePath) -> Result<Opened, SkillError> {
        Ok(Opened::Memory(match self.discoverer.file_bytes(skill, path)? {
            std::borrow::Cow::Borrowed(data) => bytes::Bytes::from_static(data),
            std::borrow::Cow::Owned(data) => bytes::Bytes::from(data),
        }))
    }
}
