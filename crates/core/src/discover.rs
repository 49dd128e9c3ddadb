//! The discoverer protocol: any source of skills, local or remote.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::files::FileListing;
use crate::skill::{Skill, SkillName};

/// Why a source could not discover or load.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// One source listed two descriptors with the same name. The message is nagents': it names
    /// the second; `other` is where the first is.
    #[error("Duplicate skill name '{name}' at {location}")]
    DuplicateName { name: SkillName, location: String, other: String },
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

    /// The message for a person fixing the files: nagents' message, then what it leaves out
    /// (the first of two skills of one name).
    pub fn explanation(&self) -> String {
        match self {
            SkillError::DuplicateName { other, .. } => format!("{self} (the other is at {other})"),
            _ => self.to_string(),
        }
    }
}

/// One complete scan of a source: its descriptors, the versions of their contents where the scan
/// read them, the files of each skill where the source lists them, and what it skipped, with
/// reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    pub skills: Vec<Skill>,
    /// The version of each skill's content as the scan read it, in the order of `skills`; empty
    /// when the source does not read contents to discover them (a remote catalog).
    pub versions: Vec<ContentVersion>,
    /// The files of each skill as the scan listed them, in the order of `skills`; empty when the
    /// source does not list files (a remote catalog).
    pub files: Vec<Arc<FileListing>>,
    pub diagnostics: Vec<String>,
}

impl Discovery {
    /// The version of the content of `skills[index]`, if the scan read it.
    pub fn version(&self, index: usize) -> Option<ContentVersion> {
        self.versions.get(index).copied()
    }

    /// The files of `skills[index]`, if the scan listed them.
    pub fn listing(&self, index: usize) -> Option<&Arc<FileListing>> {
        self.files.get(index)
    }
}

/// A digest of a skill's content as its source read it (a fast 64-bit hash): cheap change
/// detection, so a catalog can tag each skill's version without reading every file twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentVersion(u64);

impl ContentVersion {
    /// A 64-bit hash of the content: eight bytes at a time, each word mixed by a folded 128-bit
    /// multiply into one of four lanes in turn (four multiplies in flight rather than one after
    /// another), the lanes then folded in order, the words left over and the length last. Not for
    /// adversaries (a writer of the file controls its content anyway), only to tell versions
    /// apart; fast enough to run on every load.
    pub fn of(content: &str) -> Self {
        const K0: u64 = 0xa076_1d64_78bd_642f;
        const K1: u64 = 0xe703_7ed1_a0b4_28db;
        fn mix(a: u64, b: u64) -> u64 {
            let product = u128::from(a) * u128::from(b);
            (product as u64) ^ ((product >> 64) as u64)
        }
        let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("eight bytes"));
        let bytes = content.as_bytes();
        // The lanes start apart and are folded in order: words swapped between lanes change the hash.
        let mut lanes = [K0, K0.rotate_left(16), K0.rotate_left(32), K0.rotate_left(48)];
        let mut blocks = bytes.chunks_exact(32);
        for block in &mut blocks {
            for (lane, bytes) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                *lane = mix(*lane ^ word(bytes), K1);
            }
        }
        let mut hash = K0;
        for lane in lanes {
            hash = mix(hash ^ lane, K1);
        }
        let mut words = blocks.remainder().chunks_exact(8);
        for bytes in &mut words {
            hash = mix(hash ^ word(bytes), K1);
        }
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        hash = mix(hash ^ u64::from_le_bytes(tail), K1);
        ContentVersion(mix(hash ^ bytes.len() as u64, K0 ^ K1))
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
}

/// Validates one source's complete snapshot, as nagents' `skill_catalog`: a name listed twice is
/// an error naming the second descriptor. The catalog is in name order.
pub fn skill_catalog(skills: impl IntoIterator<Item = Skill>) -> Result<BTreeMap<SkillName, Skill>, SkillError> {
    let skills = sorted_catalog(skills.into_iter().collect(), |skill| skill)?;
    Ok(skills.into_iter().map(|skill| (skill.name().clone(), skill)).collect())
}

/// `items` in name order, validated as [`skill_catalog`] validates: when names repeat, the error
/// names the repeat met first in the given order. Already-sorted input costs one pass.
pub(crate) fn sorted_catalog<T>(items: Vec<T>, skill: impl Fn(&T) -> &Skill) -> Result<Vec<T>, SkillError> {
    let name = |index: usize| skill(&items[index]).name();
    if (1..items.len()).all(|index| name(index - 1) < name(index)) {
        return Ok(items);
    }
    // One sort, of positions: by name, and among equal names by position, so that each repeat
    // follows the one before it of the same name. The keys are distinct, so an unstable sort
    // gives the one order.
    let names: Vec<(usize, &[u8])> = (0..items.len()).map(|index| (0, name(index).as_str().as_bytes())).collect();
    let order = crate::order::positions_in_order(&names);
    // The error names the repeat met first.
    let repeat = order.windows(2).filter(|pair| name(pair[0]) == name(pair[1])).min_by_key(|pair| pair[1]);
    if let Some(&[earlier, index]) = repeat {
        let (first, repeat) = (skill(&items[earlier]), skill(&items[index]));
        return Err(SkillError::DuplicateName {
            name: repeat.name().clone(),
            location: repeat.location().to_owned(),
            other: first.location().to_owned(),
        });
    }
    // The items moved into that order (each once).
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    Ok(order.into_iter().map(|index| slots[index].take().expect("each position once")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_versions_tell_contents_apart() {
        // Every one-byte change, every length, trailing zero bytes, swapped words.
        let base = "---\nname: a\ndescription: d\n---\nbody of the skill\n".repeat(3);
        let mut seen = std::collections::HashSet::new();
        for end in 0..=base.len() {
            assert!(seen.insert(ContentVersion::of(&base[..end])), "length {end}");
        }
        for index in 0..base.len() {
            let mut bytes = base.clone().into_bytes();
            bytes[index] ^= 0x01;
            assert!(seen.insert(ContentVersion::of(std::str::from_utf8(&bytes).unwrap())), "byte {index}");
        }
        assert_ne!(ContentVersion::of("a"), ContentVersion::of("a\0"));
        assert_ne!(ContentVersion::of("aaaaaaaabbbbbbbb"), ContentVersion::of("bbbbbbbbaaaaaaaa"));
        // Words swapped between lanes, and between the blocks of one lane.
        let words: Vec<String> = (0..12).map(|i| format!("word{i:04}")).collect();
        for (a, b) in [(0, 1), (0, 4), (3, 7), (1, 9), (8, 10)] {
            let mut swapped = words.clone();
            swapped.swap(a, b);
            assert_ne!(ContentVersion::of(&words.concat()), ContentVersion::of(&swapped.concat()), "{a} {b}");
        }
        assert_eq!(ContentVersion::of(&base), ContentVersion::of(&base.clone()));
    }

    #[test]
    fn the_first_repeat_in_source_order_is_named() {
        let skill = |name: &str, location: &str| Skill::new(name, "d", location).unwrap();
        let skills = vec![skill("b", "1"), skill("a", "2"), skill("c", "3"), skill("a", "4"), skill("b", "5")];
        let error = skill_catalog(skills).unwrap_err();
        assert_eq!(error.to_string(), "Duplicate skill name 'a' at 4");
        assert_eq!(error.explanation(), "Duplicate skill name 'a' at 4 (the other is at 2)");
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
