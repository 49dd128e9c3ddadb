//! The discoverer protocol: any source of skills, local or remote.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::skill::{Skill, SkillName};

/// Why a source could not discover or load.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// One source listed two descriptors with the same name; the second is named.
    #[error("Duplicate skill name '{name}' at {location}")]
    DuplicateName { name: SkillName, location: String },
    /// The descriptor is not the source's current one (unknown, replaced or from another source).
    #[error("Skill '{name}' is not in this {catalog} catalog; refresh discovery")]
    NotInCatalog { name: SkillName, catalog: &'static str },
    /// The skill's file changed or vanished since discovery.
    #[error("Skill '{name}' changed; refresh discovery and retry")]
    Changed { name: SkillName },
    /// A source's own content is not a valid skill (e.g. a builtin skill with bad metadata).
    #[error("{0}")]
    Metadata(#[from] crate::metadata::MetadataError),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    /// Any other source's failure, such as a remote catalog's.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
}

impl SkillError {
    /// Whether discovering again and retrying may succeed: the caller's descriptor is stale.
    pub fn is_stale(&self) -> bool {
        matches!(self, SkillError::NotInCatalog { .. } | SkillError::Changed { .. })
    }
}

/// One complete scan of a source: its descriptors and what it skipped, with reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    pub skills: Vec<Skill>,
    pub diagnostics: Vec<String>,
}

/// A digest of a skill's content as its source last read it (64-bit FNV-1a): cheap change
/// detection, so a catalog can tag each skill's version without reading every file twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentVersion(u64);

impl ContentVersion {
    pub fn of(content: &str) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &byte in content.as_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        ContentVersion(hash)
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

/// A source of skills. Object safe: composites hold `Arc<dyn SkillDiscoverer>`.
#[async_trait]
pub trait SkillDiscoverer: Send + Sync {
    /// The source's complete current catalog.
    async fn discover(&self) -> Result<Vec<Skill>, SkillError> {
        Ok(self.scan().await?.skills)
    }

    /// The catalog together with the diagnostics of the same scan.
    async fn scan(&self) -> Result<Discovery, SkillError>;

    /// The full content of `skill`, which must be this source's current descriptor.
    async fn load(&self, skill: &Skill) -> Result<String, SkillError>;

    /// The version of `skill`'s content read by the last discovery, when the source keeps it
    /// (otherwise callers load the content to learn it).
    fn content_version(&self, _skill: &Skill) -> Option<ContentVersion> {
        None
    }
}

#[async_trait]
impl<T: SkillDiscoverer + ?Sized> SkillDiscoverer for Arc<T> {
    async fn discover(&self) -> Result<Vec<Skill>, SkillError> {
        (**self).discover().await
    }

    async fn scan(&self) -> Result<Discovery, SkillError> {
        (**self).scan().await
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        (**self).load(skill).await
    }

    fn content_version(&self, skill: &Skill) -> Option<ContentVersion> {
        (**self).content_version(skill)
    }
}

/// Validates one source's complete snapshot, as nagents' `skill_catalog`: a name listed twice is
/// an error naming the second descriptor. The catalog is in name order.
pub fn skill_catalog(skills: impl IntoIterator<Item = Skill>) -> Result<BTreeMap<SkillName, Skill>, SkillError> {
    let skills = sorted_catalog(skills.into_iter().collect(), |skill| skill)?;
    Ok(skills.into_iter().map(|skill| (skill.name().clone(), skill)).collect())
}

/// `items` in name order, validated as [`skill_catalog`] validates: when names repeat, the error
/// names the repeat met first in the given order. Already-sorted input costs one pass.
pub(crate) fn sorted_catalog<T>(mut items: Vec<T>, skill: impl Fn(&T) -> &Skill) -> Result<Vec<T>, SkillError> {
    let name = |index: usize| skill(&items[index]).name();
    if (1..items.len()).all(|index| name(index - 1) < name(index)) {
        return Ok(items);
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| name(a).cmp(name(b)).then(a.cmp(&b)));
    let repeat = order.windows(2).filter(|pair| name(pair[0]) == name(pair[1])).map(|pair| pair[1]).min();
    if let Some(index) = repeat {
        let skill = skill(&items[index]);
        return Err(SkillError::DuplicateName { name: skill.name().clone(), location: skill.location().to_owned() });
    }
    items.sort_by(|a, b| skill(a).name().cmp(skill(b).name()));
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_versions_are_fnv_1a() {
        assert_eq!(ContentVersion::of("").get(), 0xcbf2_9ce4_8422_2325);
        assert_eq!(ContentVersion::of("a").get(), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(ContentVersion::of("ab"), ContentVersion::of("ba"));
    }

    #[test]
    fn the_first_repeat_in_source_order_is_named() {
        let skill = |name: &str, location: &str| Skill::new(name, "d", location).unwrap();
        let skills = vec![skill("b", "1"), skill("a", "2"), skill("c", "3"), skill("a", "4"), skill("b", "5")];
        let error = skill_catalog(skills).unwrap_err();
        assert_eq!(error.to_string(), "Duplicate skill name 'a' at 4");
        let sorted = skill_catalog(vec![skill("b", "1"), skill("a", "2")]).unwrap();
        assert_eq!(sorted.keys().map(SkillName::as_str).collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn duplicate_names_the_second() {
        let a = Skill::new("a", "d", "/x/a/SKILL.md").unwrap();
        let b = Skill::new("a", "d", "/y/a/SKILL.md").unwrap();
        let error = skill_catalog([a, b]).unwrap_err();
        assert_eq!(error.to_string(), "Duplicate skill name 'a' at /y/a/SKILL.md");
    }
}
