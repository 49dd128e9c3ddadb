//! Several sources as one catalog: the first source to name a skill owns it.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::discover::{ContentVersion, Discovery, SkillDiscoverer, SkillError, sorted_catalog};
use crate::files::FileListing;
use crate::skill::Skill;

/// A descriptor, the index of the source that gave it, the version of its content if the
/// source's scan read it, and its files if the source listed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcedSkill {
    pub skill: Skill,
    pub source: usize,
    pub version: Option<ContentVersion>,
    pub files: Option<Arc<FileListing>>,
}

/// A diagnostic and the index of the source that reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcedDiagnostic {
    pub source: usize,
    pub message: String,
}

/// A source that failed a scan, and which one it was (its index).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct SourceError {
    pub index: usize,
    pub error: SkillError,
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
    /// The last discovery's catalog in name order, for loads.
    owners: Mutex<Arc<Vec<SourcedSkill>>>,
}

impl CompositeSkillDiscoverer {
    pub fn new(sources: impl IntoIterator<Item = Arc<dyn SkillDiscoverer>>) -> Self {
        CompositeSkillDiscoverer { sources: sources.into_iter().collect(), owners: Mutex::default() }
    }

    pub fn sources(&self) -> &[Arc<dyn SkillDiscoverer>] {
        &self.sources
    }

    /// Scans every source in order, keeping who owns each skill and what it shadows.
    pub async fn scan_sources(&self) -> Result<CompositeDiscovery, SourceError> {
        let mut scans = Vec::with_capacity(self.sources.len());
        for discoverer in &self.sources {
            let scan = discoverer.scan().await;
            let failed = scan.is_err();
            scans.push(scan);
            if failed {
                break;
            }
        }
        let discovery = compose(scans)?;
        *self.owners.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(discovery.skills.clone());
        Ok(discovery)
    }
}

/// The catalog of several sources from one scan of each, in precedence order: the first source
/// to name a skill owns it, and a later source's skill of the same name is shadowed; a name listed
/// twice inside one source fails that source (nagents' `skill_catalog`). Fails with the first
/// failed scan, so a caller may stop scanning at it.
pub fn compose(
    scans: impl IntoIterator<Item = Result<Discovery, SkillError>>,
) -> Result<CompositeDiscovery, SourceError> {
    let mut owners: Vec<SourcedSkill> = Vec::new();
    let mut shadowed = Vec::new();
    let mut diagnostics = Vec::new();
    for (source, scan) in scans.into_iter().enumerate() {
        let failed = |error| SourceError { index: source, error };
        let Discovery { skills, versions, files, diagnostics: skipped } = scan.map_err(failed)?;
        diagnostics.extend(skipped.into_iter().map(|message| SourcedDiagnostic { source, message }));
        let versions = versions.into_iter().map(Some).chain(std::iter::repeat(None));
        let files = files.into_iter().map(Some).chain(std::iter::repeat_with(|| None));
        let skills = skills.into_iter().zip(versions).zip(files).map(|((skill, version), files)| SourcedSkill {
            skill,
            source,
            version,
            files,
        });
        let skills = sorted_catalog(skills.collect(), |sourced| &sourced.skill).map_err(failed)?;
        // The first source's catalog is the composite's so far, as it is.
        owners = if owners.is_empty() { skills } else { merge(owners, skills.into_iter(), &mut shadowed) };
    }
    Ok(CompositeDiscovery { skills: owners, shadowed, diagnostics })
}

/// Merges a later source's catalog (in name order) into the owners so far (in name order): a name
/// already owned stays with its owner and the later descriptor is shadowed.
fn merge(
    owners: Vec<SourcedSkill>,
    later: impl Iterator<Item = SourcedSkill>,
    shadowed: &mut Vec<SourcedSkill>,
) -> Vec<SourcedSkill> {
    let mut merged = Vec::with_capacity(owners.len() + later.size_hint().0);
    let mut owners = owners.into_iter().peekable();
    for entry in later {
        while let Some(owner) = owners.next_if(|owner| owner.skill.name() < entry.skill.name()) {
            merged.push(owner);
        }
        match owners.next_if(|owner| owner.skill.name() == entry.skill.name()) {
            Some(owner) => {
                merged.push(owner);
                shadowed.push(entry);
            }
            None => merged.push(entry),
        }
    }
    merged.extend(owners);
    merged
}

impl std::fmt::Debug for CompositeSkillDiscoverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeSkillDiscoverer").field("sources", &self.sources.len()).finish_non_exhaustive()
    }
}

#[async_trait]
impl SkillDiscoverer for CompositeSkillDiscoverer {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        let discovery = self.scan_sources().await.map_err(|failure| failure.error)?;
        // Versions and files are kept only when every owner's source read or listed them.
        let versions: Option<Vec<ContentVersion>> = discovery.skills.iter().map(|entry| entry.version).collect();
        let files: Option<Vec<Arc<FileListing>>> = discovery.skills.iter().map(|entry| entry.files.clone()).collect();
        Ok(Discovery {
            skills: discovery.skills.into_iter().map(|entry| entry.skill).collect(),
            versions: versions.unwrap_or_default(),
            files: files.unwrap_or_default(),
            diagnostics: discovery.diagnostics.into_iter().map(|entry| entry.message).collect(),
        })
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        let owners = Arc::clone(&self.owners.lock().unwrap_or_else(PoisonError::into_inner));
        let owner =
            owners.binary_search_by(|owner| owner.skill.name().cmp(skill.name())).ok().map(|index| &owners[index]);
        match owner {
            Some(owner) if owner.skill == *skill => self.sources[owner.source].load(skill).await,
            _ => Err(SkillError::NotInCatalog { name: skill.name().clone(), catalog: "composite" }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::DirectorySkillDiscoverer;

    /// A source that lists no files, as a remote catalog.
    struct Remote(Vec<Skill>);

    #[async_trait]
    impl SkillDiscoverer for Remote {
        async fn scan(&self) -> Result<Discovery, SkillError> {
            Ok(Discovery { skills: self.0.clone(), ..Discovery::default() })
        }

        async fn load(&self, _: &Skill) -> Result<String, SkillError> {
            Ok(String::new())
        }
    }

    fn write_skill(root: &std::path::Path, name: &str, extra: &str) {
        std::fs::create_dir_all(root.join(name)).unwrap();
        std::fs::write(root.join(name).join("SKILL.md"), format!("---\nname: {name}\ndescription: d\n---\n")).unwrap();
        std::fs::write(root.join(name).join(extra), extra).unwrap();
    }

    #[tokio::test]
    async fn each_owner_brings_its_sources_files() {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write_skill(first.path(), "a", "first.md");
        write_skill(second.path(), "a", "second.md");
        write_skill(second.path(), "b", "b.md");
        let sources: Vec<Arc<dyn SkillDiscoverer>> = vec![
            Arc::new(DirectorySkillDiscoverer::new([first.path()]).unwrap()),
            Arc::new(DirectorySkillDiscoverer::new([second.path()]).unwrap()),
        ];
        let composite = CompositeSkillDiscoverer::new(sources.clone());
        let discovery = composite.scan_sources().await.unwrap();
        let paths = |entry: &SourcedSkill| -> Vec<String> {
            let files = entry.files.as_ref().expect("a directory source lists files");
            files.files().unwrap().iter().map(|file| file.path.to_string()).collect()
        };
        assert_eq!(paths(&discovery.skills[0]), ["SKILL.md", "first.md"]);
        assert_eq!(paths(&discovery.skills[1]), ["SKILL.md", "b.md"]);
        assert_eq!(paths(&discovery.shadowed[0]), ["SKILL.md", "second.md"]);
        let flat = composite.scan().await.unwrap();
        assert_eq!(flat.files.len(), 2);
        assert_eq!(flat.files[0], *discovery.skills[0].files.as_ref().unwrap());

        // One owner whose source lists no files: none are kept in the flat discovery.
        let remote = Remote(vec![Skill::new("c", "d", "remote:c").unwrap()]);
        let composite =
            CompositeSkillDiscoverer::new([sources[0].clone(), Arc::new(remote) as Arc<dyn SkillDiscoverer>]);
        let discovery = composite.scan_sources().await.unwrap();
        assert!(discovery.skills[0].files.is_some() && discovery.skills[1].files.is_none());
        assert!(composite.scan().await.unwrap().files.is_empty());
    }
}
