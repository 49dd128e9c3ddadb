//! Skills compiled into the binary from a `rust-embed` folder.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rust_embed::RustEmbed;

use crate::discover::{ContentVersion, Discovery, SkillDiscoverer, SkillError, skill_catalog};
use crate::metadata::parse_skill_metadata;
use crate::skill::{Skill, SkillName};

/// Discovers `<folder>/SKILL.md` for every top-level folder of the embedded tree `E`, in folder
/// name order. Locations are `builtin:<folder>/SKILL.md`. Invalid metadata is an error, not a
/// diagnostic: builtin skills ship with the binary and must all be valid.
pub struct BuiltinSkillDiscoverer<E> {
    catalog: Mutex<Arc<BTreeMap<SkillName, (Skill, String)>>>,
    embed: PhantomData<fn() -> E>,
}

impl<E: RustEmbed> BuiltinSkillDiscoverer<E> {
    pub fn new() -> Self {
        BuiltinSkillDiscoverer { catalog: Mutex::default(), embed: PhantomData }
    }

    fn read(path: &str) -> Result<String, SkillError> {
        let file = E::get(path).ok_or_else(|| SkillError::Io {
            context: format!("builtin:{path}"),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        String::from_utf8(file.data.into_owned()).map_err(|error| SkillError::Io {
            context: format!("builtin:{path}"),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, error.utf8_error()),
        })
    }
}

impl<E: RustEmbed> Default for BuiltinSkillDiscoverer<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> std::fmt::Debug for BuiltinSkillDiscoverer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinSkillDiscoverer").finish_non_exhaustive()
    }
}

#[async_trait]
impl<E: RustEmbed> SkillDiscoverer for BuiltinSkillDiscoverer<E> {
    async fn scan(&self) -> Result<Discovery, SkillError> {
        let mut folders: Vec<String> = E::iter()
            .filter_map(|path| path.strip_suffix("/SKILL.md").filter(|folder| !folder.contains('/')).map(str::to_owned))
            .collect();
        folders.sort();
        let mut found = Vec::with_capacity(folders.len());
        let mut read = BTreeMap::new();
        for folder in folders {
            let path = format!("{folder}/SKILL.md");
            let content = Self::read(&path)?;
            let skill = parse_skill_metadata(&content, &format!("builtin:{path}"), &folder)?;
            read.insert(skill.name().clone(), (path, ContentVersion::of(&content)));
            found.push(skill);
        }
        let catalog = skill_catalog(found)?;
        let versions = catalog.keys().map(|name| read[name].1).collect();
        let owners =
            catalog.values().map(|skill| (skill.name().clone(), (skill.clone(), read[skill.name()].0.clone())));
        *self.catalog.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(owners.collect());
        Ok(Discovery { skills: catalog.into_values().collect(), versions, diagnostics: Vec::new() })
    }

    async fn load(&self, skill: &Skill) -> Result<String, SkillError> {
        let catalog = Arc::clone(&self.catalog.lock().unwrap_or_else(PoisonError::into_inner));
        match catalog.get(skill.name()) {
            Some((current, path)) if current == skill => Self::read(path),
            _ => Err(SkillError::NotInCatalog { name: skill.name().clone(), catalog: "builtin" }),
        }
    }
}
