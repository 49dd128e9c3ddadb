//! Several sources as one catalog: the first source to name a skill owns it.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::discover::{Discovery, SkillDiscoverer, SkillError, skill_catalog};
use crate::skill::{Skill, SkillName};

/// A descriptor and the index of the source that gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcedSkill {
    pub skill: Skill,
    pub source: usize,
}

/// A diagnostic and the index of the source that reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcedDiagnostic {
    pub source: usize,
    pub message: String,
}

/// One scan of every source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompositeDiscovery {
    /// The catalog, in name order.
    pub skills: Vec<SourcedSkill>,
    /// Descriptors hidden by an earlier source's skill of the same name, source by source in name
    /// order: users need to see collisions.
    pub shadowed: Vec<SourcedSkill>,
    pub diagnostics: Vec<SourcedDiagnostic>,
}

/// Combines sources in order with first-source precedence. Every discovery replaces the whole
/// catalog (nothing stale accumulates); a duplicate name inside one source fails it. A load goes
/// to the skill's owner and is refused for a descriptor that is not the current one.
pub struct CompositeSkillDiscoverer {
    sources: Vec<Arc<dyn SkillDiscoverer>>,
    owners: Mutex<Arc<BTreeMap<SkillName, SourcedSkill>>>,
}

impl CompositeSkillDiscoverer {
    pub fn new(sources: impl IntoIterator<Item = Arc<dyn SkillDiscoverer>>) -> Self {
        CompositeSkillDiscoverer { sources: sources.into_iter().collect(), owners: Mutex::default() }
    }

    pub fn sources(&self) -> &[Arc<dyn SkillDiscoverer>] {
        &self.sources
    }

    /// Scans every source in order, keeping who owns each skill and what it shadows.
    pub async fn scan_sources(&self) -> Result<CompositeDiscovery, SkillError> {
        let mut owners: BTreeMap<SkillName, SourcedSkill> = BTreeMap::new();
        let mut shadowed = Vec::new();
        let mut diagnostics = Vec::new();
        for (source, discoverer) in self.sources.iter().enumerate() {
            let discovery = discoverer.scan().await?;
            diagnostics.extend(discovery.diagnostics.into_iter().map(|message| SourcedDiagnostic { source, message }));
            for (name, skill) in skill_catalog(discovery.skills)? {
                let entry = SourcedSkill { skill, source };
                match owners.entry(name) {
                    Entry::Occupied(_) => shadowed.push(entry),
                    Entry::Vacant(vacant) => {
                        vacant.insert(entry);
                    }
                }
            }
        }
        let skills = owners.values().cloned().collect();
        *self.owners.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(owners);
        Ok(CompositeDiscovery { skills, shadowed, diagnostics })
    }
}

impl std::fmt::Debug for CompositeSkillDiscoverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeSkillDiscoverer").field("sources", &self.sources.len()).finish_non_exhaustive()
    }
}

#[async_trait]
impl SkillDiscoverer for CompositeSkillDiscoverer {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        let discovery = self.scan_sources().await?;
        Ok(Discovery {
            skills: discovery.skills.into_iter().map(|entry| entry.skill).collect(),
            diagnostics: discovery.diagnostics.into_iter().map(|entry| entry.message).collect(),
        })
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        let owners = Arc::clone(&self.owners.lock().unwrap_or_else(PoisonError::into_inner));
        match owners.get(skill.name()) {
            Some(owner) if owner.skill == *skill => self.sources[owner.source].load(skill).await,
            _ => Err(SkillError::NotInCatalog { name: skill.name().clone(), catalog: "composite" }),
        }
    }
}
