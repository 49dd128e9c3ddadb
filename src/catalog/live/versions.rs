//! A skill's versions and the skill as it was at one of them. A source with a history (git) gives
//! both; any other source has one version, the current one. A pinned skill is a [`CatalogSkill`]
//! like a current one, read through the pinned version's own reader, so every read of it is
//! checked against its listing as a current skill's is; the ones made are kept (with their views:
//! contents, listings, archives) while pinned requests keep asking for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use skillcat_core::{Digest, SkillError, SkillName, SourcedSkill};

use super::{LiveCatalog, lock};
use crate::catalog::CatalogError;
use crate::catalog::snapshot::{CatalogSkill, Reader};
use crate::sources::{HistoryEntry, PinError, VersionSpec};

/// How many pinned skills are kept at once.
const KEPT_PINNED: usize = 256;

/// A skill's versions, newest first.
#[derive(Debug, Clone)]
pub struct Versions {
    pub name: SkillName,
    pub entries: Vec<VersionEntry>,
}

/// One version of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionEntry {
    pub version: Digest,
    /// The newest commit that has it, for a source with a history.
    pub commit: Option<String>,
    /// That commit's time, in seconds since the epoch.
    pub committed_at: Option<i64>,
    pub tags: Vec<String>,
    /// Whether the current catalog serves it.
    pub current: bool,
}

/// A pinned skill's source, name, version and commit.
type PinnedKey = (usize, SkillName, Digest, String);

/// The pinned skills made.
#[derive(Default)]
pub(super) struct PinnedSkills(Mutex<HashMap<PinnedKey, Arc<CatalogSkill>>>);

/// Where a skill's versions come from.
enum Owner {
    /// A source with a history, by index, and the skill's history in it.
    History(usize, Vec<HistoryEntry>),
    /// The current skill, of a source without one.
    Current(Arc<CatalogSkill>),
}

impl LiveCatalog {
    /// The versions of `name`, newest first: the history of the source that owns it (or, for a
    /// skill the catalog no longer has, of the first source whose history has it), or its current
    /// version alone.
    pub async fn versions(&self, name: &SkillName) -> Result<Versions, CatalogError> {
        let current = self.snapshot().ready()?.get(name).cloned();
        let serving = |version: &Digest, source: usize| {
            current
                .as_ref()
                .is_some_and(|skill| skill.source == source && skill.entry.version.as_ref() == Some(version))
        };
        let entries = match self.owner(name, current.as_ref(), true).await? {
            Owner::History(source, history) => history
                .into_iter()
                .map(|entry| VersionEntry {
                    current: serving(&entry.version, source),
                    version: entry.version,
                    commit: Some(entry.commit),
                    committed_at: Some(entry.committed_at),
                    tags: entry.tags,
                })
                .collect(),
            Owner::Current(skill) => skill
                .entry
                .version
                .map(|version| VersionEntry {
                    version,
                    commit: None,
                    committed_at: None,
                    tags: Vec::new(),
                    current: true,
                })
                .into_iter()
                .collect(),
        };
        Ok(Versions { name: name.clone(), entries })
    }

    /// `name` as it was at `version` (a digest, a commit prefix or a tag): never the current
    /// version in place of another.
    pub async fn pinned(&self, name: &SkillName, version: &str) -> Result<Arc<CatalogSkill>, CatalogError> {
        let spec = VersionSpec::parse(version)?;
        let not_found =
            |detail: String| CatalogError::VersionNotFound { name: name.clone(), version: version.to_owned(), detail };
        let current = self.snapshot().ready()?.get(name).cloned();
        let source = match self.owner(name, current.as_ref(), false).await? {
            Owner::Current(skill) => {
                return match spec {
                    VersionSpec::Digest(digest) if skill.entry.version == Some(digest) => Ok(skill),
                    VersionSpec::Digest(_) => Err(not_found("its source keeps only the current version".to_owned())),
                    _ => Err(not_found("its source has no commits or tags".to_owned())),
                };
            }
            Owner::History(source, _) => source,
        };
        let owner = Arc::clone(self.inner.sources.get(source));
        let pinned = match owner.pinned(name, &spec).await {
            Some(Ok(pinned)) => pinned,
            Some(Err(PinError::NotFound(detail))) => return Err(not_found(detail)),
            Some(Err(PinError::Ambiguous { prefix, count })) => {
                return Err(CatalogError::AmbiguousVersion { name: name.clone(), prefix, count });
            }
            Some(Err(PinError::Unreadable(message))) => return Err(unreadable(name, message)),
            None => return Err(not_found("its source keeps no history".to_owned())),
        };
        let key = (source, name.clone(), pinned.version, pinned.commit.clone());
        if let Some(made) = lock(&self.inner.pinned.0).get(&key) {
            return Ok(Arc::clone(made));
        }
        let sourced =
            SourcedSkill { skill: pinned.skill, source, version: Some(pinned.content), files: Some(pinned.listing) };
        let mut skill = CatalogSkill::new(&sourced, &Arc::from(owner.label()));
        skill.reader = Some(Reader(pinned.reader));
        let skill = Arc::new(skill);
        let mut kept = lock(&self.inner.pinned.0);
        if kept.len() >= KEPT_PINNED {
            kept.clear();
        }
        Ok(Arc::clone(kept.entry(key).or_insert(skill)))
    }

    /// The source whose versions of `name` are answered: the owner of the current skill, else
    /// the first source whose history has the name. `history` says whether its versions are
    /// needed (they are found on the way for a skill the catalog no longer has).
    async fn owner(
        &self,
        name: &SkillName,
        current: Option<&Arc<CatalogSkill>>,
        history: bool,
    ) -> Result<Owner, CatalogError> {
        if let Some(skill) = current {
            let source = self.inner.sources.get(skill.source);
            if !source.keeps_history() {
                return Ok(Owner::Current(Arc::clone(skill)));
            }
            let versions = match history {
                true => source.history(name).await.unwrap_or(Ok(Vec::new())).map_err(|error| from_pin(name, error))?,
                false => Vec::new(),
            };
            return Ok(Owner::History(skill.source, versions));
        }
        for (index, source) in self.inner.sources.iter().enumerate().filter(|(_, source)| source.keeps_history()) {
            if let Some(history) = source.history(name).await {
                let history = history.map_err(|error| from_pin(name, error))?;
                if !history.is_empty() {
                    return Ok(Owner::History(index, history));
                }
            }
        }
        Err(CatalogError::UnknownSkill(name.clone()))
    }
}

fn unreadable(name: &SkillName, message: String) -> CatalogError {
    CatalogError::Read { name: name.clone(), source: SkillError::Source(message.into()) }
}

fn from_pin(name: &SkillName, error: PinError) -> CatalogError {
    match error {
        PinError::Ambiguous { prefix, count } => CatalogError::AmbiguousVersion { name: name.clone(), prefix, count },
        PinError::NotFound(detail) => {
            CatalogError::VersionNotFound { name: name.clone(), version: String::new(), detail }
        }
        PinError::Unreadable(message) => unreadable(name, message),
    }
}
