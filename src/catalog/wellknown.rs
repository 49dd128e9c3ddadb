//! The well-known indexes installers read: the agentskills.io discovery index (format 0.2.0,
//! `/.well-known/agent-skills/index.json`) and the older index that lists each skill's files
//! (`/.well-known/skills/index.json`). Which skills they publish, and their bodies.
//!
//! Both publish only skills whose names follow the agentskills.io naming rule and whose files are
//! listed; the older one also leaves out a skill with a file path that a client cannot append to
//! a URL as it is. What is left out is logged (`LiveCatalog` does, once per catalog version that
//! changes it), never added to `GET /skills`, which stays nagents' catalog.

use serde::Serialize;
use skillcat_core::{Digest, SkillFile, SkillFilePath};

use super::snapshot::{Catalog, CatalogSkill, ETag, PreparedBody};
use crate::spec::{InvalidSpecName, SpecName};

/// The `$schema` of the discovery index: the format 0.2.0 of agentskills.io's well-known URI
/// page, which clients match exactly.
pub const DISCOVERY_SCHEMA: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";

/// The name of the file every skill folder holds at its top.
const SKILL_MD: &str = "SKILL.md";

/// Why a skill of the catalog is not in a well-known index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeftOut {
    #[error("its name does not follow the agentskills.io naming rule: {0}")]
    Name(InvalidSpecName),
    /// Over a bound on its files, or from a source that lists none.
    #[error("its files are not listed: {0}")]
    Files(String),
    #[error("its listing has no SKILL.md at the top of its folder")]
    NoSkillMd,
    /// The older index only. Its clients append each listed path to the skill's URL unencoded:
    /// a `%` would be decoded by the server, a `?`, `#` or space would end the path or break the
    /// URL, and the `skills` installer refuses the whole index when any path holds `..`.
    #[error(
        "the older index leaves it out: its file path {0:?} cannot be appended to a URL as it is (printable \
         ASCII without space, '%', '?', '#', '[', ']' or '..')"
    )]
    Path(String),
    /// The discovery index only: its archive could not be built (an I/O error, not a change).
    #[error("the discovery index leaves it out: its archive could not be read: {0}")]
    Archive(String),
}

/// A skill the well-known indexes publish: its name under the agentskills.io rule, its files,
/// and its `SKILL.md` among them.
pub(super) struct Published<'a> {
    pub skill: &'a CatalogSkill,
    pub name: SpecName,
    pub files: &'a [SkillFile],
    pub skill_md: &'a SkillFile,
}

impl Published<'_> {
    /// Whether the skill is its `SKILL.md` alone (`"type": "skill-md"`; otherwise an archive).
    pub fn is_skill_md_only(&self) -> bool {
        self.files.len() == 1
    }
}

/// The skill as the discovery index publishes it, or why it does not.
pub(super) fn published(skill: &CatalogSkill) -> Result<Published<'_>, LeftOut> {
    let name = SpecName::parse(skill.skill.name().as_str()).map_err(LeftOut::Name)?;
    let (_, files) = skill.files().map_err(|error| LeftOut::Files(files_reason(&error)))?;
    let skill_md = files.iter().find(|file| file.path.as_str() == SKILL_MD).ok_or(LeftOut::NoSkillMd)?;
    Ok(Published { skill, name, files, skill_md })
}

/// The reason alone, without the "files of skill 'x' are not served" around it.
fn files_reason(error: &super::CatalogError) -> String {
    match error {
        super::CatalogError::FilesUnavailable { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// The skill as the older index publishes it, or why it does not.
pub(super) fn published_in_legacy(skill: &CatalogSkill) -> Result<Published<'_>, LeftOut> {
    let published = published(skill)?;
    match published.files.iter().find(|file| !appendable_to_url(&file.path)) {
        Some(file) => Err(LeftOut::Path(file.path.to_string())),
        None => Ok(published),
    }
}

/// Whether the discovery index publishes `skill` (so installers find it), or why not.
pub fn in_discovery_index(skill: &CatalogSkill) -> Result<(), LeftOut> {
    published(skill).map(|_| ())
}

/// Whether the older index publishes `skill` (and so serves its files beneath
/// `/.well-known/skills/`), or why not.
pub fn in_legacy_index(skill: &CatalogSkill) -> Result<(), LeftOut> {
    published_in_legacy(skill).map(|_| ())
}

/// Whether a client of the older index can append `path` to a URL as it is and reach this very
/// file. The draft that defined that index allows printable ASCII but `\`, `?`, `#`, `[` and `]`
/// in paths; a space is left out too (a client may send it raw), and so are `%` (the server
/// decodes a path once, so `a%41` would name `aA`) and `..` anywhere (`skills` 1.7 refuses an
/// index with any path that holds it, which would hide every other skill from it too).
fn appendable_to_url(path: &SkillFilePath) -> bool {
    let path = path.as_str();
    path.bytes().all(|byte| byte.is_ascii_graphic() && !matches!(byte, b'%' | b'?' | b'#' | b'[' | b']'))
        && !path.contains("..")
}

/// Every skill of `catalog` that one of the indexes leaves out, with why, in name order.
pub fn left_out(catalog: &Catalog) -> Vec<(&CatalogSkill, LeftOut)> {
    catalog
        .skills
        .iter()
        .filter_map(|skill| published_in_legacy(skill).err().map(|reason| (&**skill, reason)))
        .collect()
}

/// What the `url` of a discovery index entry gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactType {
    /// The skill's `SKILL.md`, which is all its folder holds.
    SkillMd,
    /// The zip of the skill's folder, `SKILL.md` at its root.
    Archive,
}

/// One entry of the discovery index.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DiscoveryEntry {
    #[schema(example = "pdf-processing", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$", max_length = 64)]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ArtifactType,
    pub description: String,
    /// Path-absolute, resolved against the index's URL: the files route for a `skill-md`
    /// entry, the archive route for an `archive` one.
    #[schema(example = "/skills/pdf-processing/archive")]
    pub url: String,
    /// The SHA-256 of exactly the bytes at `url`.
    #[schema(
        value_type = String,
        pattern = "^sha256:[0-9a-f]{64}$",
        example = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    )]
    pub digest: Digest,
}

impl DiscoveryEntry {
    /// The entry of a skill that is its `SKILL.md` alone.
    pub(super) fn skill_md(published: &Published<'_>) -> Self {
        DiscoveryEntry {
            name: published.name.to_string(),
            kind: ArtifactType::SkillMd,
            description: published.skill.skill.description().to_owned(),
            url: format!("/skills/{}/files/{SKILL_MD}", published.name),
            digest: published.skill_md.digest,
        }
    }

    /// The entry of a skill served as an archive whose digest is `digest`.
    pub(super) fn archive(published: &Published<'_>, digest: Digest) -> Self {
        DiscoveryEntry {
            name: published.name.to_string(),
            kind: ArtifactType::Archive,
            description: published.skill.skill.description().to_owned(),
            url: format!("/skills/{}/archive", published.name),
            digest,
        }
    }
}

/// The body of `GET /.well-known/agent-skills/index.json`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DiscoveryIndex {
    /// Always `https://schemas.agentskills.io/discovery/0.2.0/schema.json`, which clients match.
    #[serde(rename = "$schema")]
    #[schema(example = "https://schemas.agentskills.io/discovery/0.2.0/schema.json")]
    pub schema: &'static str,
    /// In name order.
    pub skills: Vec<DiscoveryEntry>,
}

/// The discovery index of `entries`, compressed if worth it.
pub(super) fn discovery_body(entries: Vec<DiscoveryEntry>) -> PreparedBody {
    let index = DiscoveryIndex { schema: DISCOVERY_SCHEMA, skills: entries };
    prepare(serde_json::to_vec(&index).expect("indexes serialize"))
}

/// One entry of the older index.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LegacyEntry<'a> {
    #[schema(value_type = String, example = "pdf-processing", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$", max_length = 64)]
    pub name: &'a str,
    #[schema(value_type = String)]
    pub description: &'a str,
    /// Every listed file, `SKILL.md` included, in code-point order; each is served at
    /// `/.well-known/skills/{name}/{path}`.
    #[schema(value_type = Vec<String>, example = json!(["SKILL.md", "scripts/extract.py"]))]
    pub files: Vec<&'a str>,
}

/// The body of `GET /.well-known/skills/index.json`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LegacyIndex<'a> {
    /// In name order.
    #[schema(value_type = Vec<LegacyEntry>)]
    pub skills: Vec<LegacyEntry<'a>>,
}

/// The older index of `catalog`, compressed if worth it.
pub(super) fn legacy_body(catalog: &Catalog) -> PreparedBody {
    let skills = catalog
        .skills
        .iter()
        .filter_map(|skill| published_in_legacy(skill).ok())
        .map(|published| LegacyEntry {
            name: published.skill.skill.name().as_str(),
            description: published.skill.skill.description(),
            files: published.files.iter().map(|file| file.path.as_str()).collect(),
        })
        .collect();
    prepare(serde_json::to_vec(&LegacyIndex { skills }).expect("indexes serialize"))
}

fn prepare(bytes: Vec<u8>) -> PreparedBody {
    let etag = ETag::of(&[&bytes]);
    let body = PreparedBody::new(bytes, etag);
    body.compress();
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_appendable_to_a_url() {
        let appendable = |path: &str| appendable_to_url(&SkillFilePath::parse(path).unwrap());
        for good in ["SKILL.md", "scripts/run.sh", "a-b_c~d!e$f&g'h(i)j*k+l,m;n=o@p:q", "x./y"] {
            assert!(appendable(good), "{good}");
        }
        for bad in ["a b", "a%41", "a?b", "a#b", "a[0]", "a..b", "x/y..", "caf\u{e9}", "tab\there", "del\u{7f}"] {
            assert!(!appendable(bad), "{bad}");
        }
    }
}
