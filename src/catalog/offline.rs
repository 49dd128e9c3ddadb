//! The catalog of one scan, for the command line: what `check`, `manifest` and `load` print, with
//! nagents' semantics and the live catalog's errors. Nothing is prepared beyond what a command
//! asks for (no entries serialized, no tags hashed): a command answers once and exits. Its
//! sources are made for it (`Sources::for_command`): directory sources scan in nagents' view
//! alone, listing and hashing no skill's files unless the command asks for them (`check --spec`).

use skillcat_core::{CompositeDiscovery, SkillLoadResult, SkillName, SourceError, SourcedSkill, TokenLimit};

use super::CatalogError;
use crate::sources::Sources;

/// One scan of the sources, composed.
pub struct OfflineCatalog {
    sources: Sources,
    scan: Result<CompositeDiscovery, SourceError>,
}

impl OfflineCatalog {
    /// Scans every source once.
    pub async fn scan(sources: Sources) -> Self {
        let scan = sources.scan(None).await;
        OfflineCatalog { sources, scan }
    }

    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    /// The scan as it came out: a source's failure is nagents' message, as `check --json` prints it.
    pub fn scan_outcome(&self) -> &Result<CompositeDiscovery, SourceError> {
        &self.scan
    }

    /// The catalog, or the failure of a source (nagents' message, then where the other skill of a
    /// name listed twice is).
    pub fn discovery(&self) -> Result<&CompositeDiscovery, CatalogError> {
        self.scan.as_ref().map_err(|failure| CatalogError::Unavailable(failure.error.explanation()))
    }

    /// nagents' prompt manifest of the catalog.
    pub fn manifest(&self) -> Result<String, CatalogError> {
        let discovery = self.discovery()?;
        Ok(skillcat_core::render_skill_manifest(discovery.skills.iter().map(|sourced| &sourced.skill)))
    }

    /// The `SKILL.md` of a skill of the catalog, read again through the source that owns it.
    pub async fn text(&self, skill: &SourcedSkill) -> Result<String, CatalogError> {
        let name = skill.skill.name();
        self.sources.get(skill.source).load(&skill.skill).await.map_err(|source| match source.is_stale() {
            true => CatalogError::Changed(name.clone()),
            false => CatalogError::Read { name: name.clone(), source },
        })
    }

    /// nagents' budgeted load of the skill named `name`.
    pub async fn load(&self, name: &SkillName, limit: TokenLimit) -> Result<SkillLoadResult, CatalogError> {
        let discovery = self.discovery()?;
        let skill = (discovery.skills.iter())
            .find(|sourced| sourced.skill.name() == name)
            .ok_or_else(|| CatalogError::UnknownSkill(name.clone()))?;
        let content = self.text(skill).await?;
        Ok(skillcat_core::budget_skill_content(&skill.skill, &content, limit))
    }
}
