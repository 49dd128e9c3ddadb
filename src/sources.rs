//! The configured sources, built into one composite discoverer.

use std::sync::Arc;

use rust_embed::RustEmbed;
use skillcat_core::{BuiltinSkillDiscoverer, CompositeSkillDiscoverer, DirectorySkillDiscoverer, SkillDiscoverer};

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
}

impl Sources {
    pub fn build(configs: &[SourceConfig]) -> std::io::Result<Self> {
        let mut discoverers: Vec<Arc<dyn SkillDiscoverer>> = Vec::with_capacity(configs.len());
        let mut info = Vec::with_capacity(configs.len());
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
                    discoverers.push(Arc::new(discoverer));
                }
                SourceConfig::Builtin { name } => {
                    let label = name.clone().unwrap_or_else(|| "builtin".to_owned());
                    info.push(SourceInfo { label, roots: Vec::new() });
                    discoverers.push(Arc::new(BuiltinSkillDiscoverer::<BuiltinSkills>::new()));
                }
            }
        }
        Ok(Sources { composite: CompositeSkillDiscoverer::new(discoverers), info })
    }

    pub fn label(&self, source: usize) -> &str {
        &self.info[source].label
    }
}
