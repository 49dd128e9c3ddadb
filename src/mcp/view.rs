//! The catalog as MCP serves it (SEP-2640): which skills are served, their entries, and their
//! folders, made once per catalog version from the snapshot (and once per skill version: an
//! unchanged skill keeps what was made for it).
//!
//! A skill is served when SEP-2640 allows it: its name follows the agentskills.io rule, its
//! `SKILL.md` frontmatter has that `name` and a non-empty `description`, and its files are listed
//! (within the bounds of 512 files and 16 MiB). Every other skill of the catalog is left out,
//! with why; the tools still reach it, as the REST API does.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use futures_util::StreamExt as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::model::{DIRECTORY_MIME_TYPE, Resource, Skill, SkillFrontmatter, SkillResource, SkillResources};
use serde_json::Value;
use skillcat_core::SkillFile;

use crate::catalog::{CatalogError, CatalogSkill, ETag, LiveCatalog, Snapshot, media_type};
use crate::spec::{SpecName, frontmatter_json};

/// The scheme of every skill URI.
pub const SCHEME: &str = "skill://";

/// The file every skill folder holds at its top.
const SKILL_MD: &str = "SKILL.md";

/// What a path segment keeps unencoded in a URI: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `SKILL.md` files read at once while making a view.
const CONCURRENT_READS: usize = 16;

/// The catalog version's served skills, in name order (which is URI order), and the others.
pub struct View {
    pub version: u64,
    pub skills: Vec<ServedSkill>,
    index: HashMap<SpecName, usize>,
    /// The catalog's skills not served, with why, in name order.
    pub left_out: Vec<(String, String)>,
}

/// A served skill: the catalog's skill of this version, and its MCP answers.
#[derive(Clone)]
pub struct ServedSkill {
    pub catalog: Arc<CatalogSkill>,
    pub mcp: Arc<McpSkill>,
}

/// What MCP answers for one version of a skill.
pub struct McpSkill {
    pub name: SpecName,
    /// The `skills/list` entry.
    pub entry: Skill,
    /// The `SKILL.md` resource, as `resources/list` gives it.
    pub listed: Resource,
    /// Every folder (`""` for the skill's own) and its direct children.
    pub directories: BTreeMap<String, Vec<Resource>>,
}

impl View {
    pub fn get(&self, name: &SpecName) -> Option<&ServedSkill> {
        self.index.get(name).map(|&index| &self.skills[index])
    }

    /// The served skills after `cursor` (a skill name; `None`: from the first), at most `page`.
    /// A name that no longer exists still places the page: names are ordered.
    pub fn page(&self, cursor: Option<&SpecName>, page: usize) -> (&[ServedSkill], Option<String>) {
        let start = cursor.map_or(0, |cursor| self.skills.partition_point(|skill| skill.mcp.name <= *cursor));
        let end = self.skills.len().min(start + page);
        let next = (end < self.skills.len()).then(|| self.skills[end - 1].mcp.name.to_string());
        (&self.skills[start..end], next)
    }
}

/// What a `skill://` URI names.
pub enum Target<'a> {
    /// A listed file of a served skill.
    File(&'a ServedSkill, &'a SkillFile),
    /// A folder of a served skill (`""`: the skill's own).
    Directory(&'a ServedSkill, String),
}

impl View {
    /// Finds what `uri` names: its first segment is a served skill's name, the rest a path
    /// (percent-decoded once) looked up in that skill's listing, never joined onto a folder.
    pub fn resolve(&self, uri: &str) -> Option<Target<'_>> {
        let rest = uri.strip_prefix(SCHEME)?;
        let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
        let skill = self.get(&SpecName::parse(name).ok()?)?;
        let path = percent_decode_str(path).decode_utf8().ok()?;
        if let Ok(file) = skill.catalog.file(&path) {
            return Some(Target::File(skill, file));
        }
        skill.mcp.directories.contains_key(&*path).then(|| Target::Directory(skill, path.into_owned()))
    }
}

/// The URI of a skill's file or folder (`path` `""`: the skill's folder).
pub fn uri(name: &str, path: &str) -> String {
    let mut uri = format!("{SCHEME}{name}");
    for segment in path.split('/').filter(|segment| !segment.is_empty()) {
        uri.push('/');
        uri.extend(utf8_percent_encode(segment, SEGMENT));
    }
    uri
}

/// The media type MCP gives a file: its essence (`text/markdown`), without parameters.
pub fn mime_type(file: &SkillFile) -> String {
    let full = media_type(&file.path);
    full.split(';').next().unwrap_or(&full).trim().to_owned()
}

/// A skill of the catalog and its answers, or why MCP does not serve it.
type Made = (Arc<CatalogSkill>, Result<Arc<McpSkill>, String>);

/// The views of the catalog versions, made once each, and the skills' answers, kept while their
/// version is current.
#[derive(Default)]
pub struct Views {
    /// The last view made: what requests read, without waiting.
    current: RwLock<Option<Arc<View>>>,
    /// Held while a view is made, so that one is made at a time.
    making: tokio::sync::Mutex<()>,
    skills: Mutex<HashMap<ETag, Arc<McpSkill>>>,
}

impl Views {
    /// The view of `snapshot`, made now if it is newer than the last one made. It is made in a
    /// task of its own, which goes on when the request that started it ends (the first view of a
    /// large catalog reads every `SKILL.md`), so the next request finds it made or waits for it.
    pub async fn of(self: &Arc<Self>, live: &LiveCatalog, snapshot: Arc<Snapshot>) -> Result<Arc<View>, CatalogError> {
        snapshot.ready()?;
        if let Some(view) = self.made(snapshot.version) {
            return Ok(view);
        }
        let (views, live) = (Arc::clone(self), live.clone());
        match tokio::spawn(async move { views.make(&live, &snapshot).await }).await {
            Ok(view) => view,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(CatalogError::NotReady),
        }
    }

    /// The last view made, if it is of `version` or newer.
    fn made(&self, version: u64) -> Option<Arc<View>> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().filter(|view| view.version >= version).cloned()
    }

    async fn make(&self, live: &LiveCatalog, snapshot: &Snapshot) -> Result<Arc<View>, CatalogError> {
        let catalog = snapshot.ready()?;
        let _making = self.making.lock().await;
        if let Some(view) = self.made(snapshot.version) {
            return Ok(view);
        }
        let known: HashMap<ETag, Arc<McpSkill>> = self.skills.lock().expect("skill answers").clone();
        let made: Vec<Made> = futures_util::stream::iter(catalog.skills.iter().cloned())
            .map(|skill| {
                let known = known.get(&skill.entry.etag).cloned();
                async move {
                    let made = match known {
                        Some(made) => Ok(made),
                        None => McpSkill::make(live, &skill).await.map(Arc::new),
                    };
                    (skill, made)
                }
            })
            .buffered(CONCURRENT_READS)
            .collect()
            .await;
        let mut skills = Vec::new();
        let mut left_out = Vec::new();
        let mut kept = HashMap::new();
        for (catalog, made) in made {
            match made {
                Ok(mcp) => {
                    kept.insert(catalog.entry.etag.clone(), Arc::clone(&mcp));
                    skills.push(ServedSkill { catalog, mcp });
                }
                Err(reason) => left_out.push((catalog.skill.name().to_string(), reason)),
            }
        }
        *self.skills.lock().expect("skill answers") = kept;
        let index = skills.iter().enumerate().map(|(index, skill)| (skill.mcp.name.clone(), index)).collect();
        let view = Arc::new(View { version: snapshot.version, skills, index, left_out });
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        report_left_out(current.as_deref(), &view);
        *current = Some(Arc::clone(&view));
        Ok(view)
    }
}

/// Logs the skills MCP leaves out, and why, when a new view changes that (the first included).
fn report_left_out(previous: Option<&View>, view: &View) {
    if previous.is_some_and(|previous| previous.left_out == view.left_out) {
        return;
    }
    if view.left_out.is_empty() {
        tracing::info!(version = view.version, "MCP serves every skill");
        return;
    }
    let skills = view.left_out.iter().map(|(name, why)| format!("{name}: {why}")).collect::<Vec<_>>().join("; ");
    tracing::warn!(version = view.version, count = view.left_out.len(), skills, "skills left out of MCP");
}

impl McpSkill {
    /// The answers for `skill`, or why MCP does not serve it.
    async fn make(live: &LiveCatalog, skill: &CatalogSkill) -> Result<McpSkill, String> {
        let name = SpecName::parse(skill.skill.name().as_str())
            .map_err(|error| format!("its name does not follow the agentskills.io naming rule: {error}"))?;
        let (_, files) = skill.files().map_err(|error| match error {
            CatalogError::FilesUnavailable { reason, .. } => format!("its files are not listed: {reason}"),
            other => other.to_string(),
        })?;
        let skill_md = files
            .iter()
            .find(|file| file.path.as_str() == SKILL_MD)
            .ok_or("its listing has no SKILL.md at the top of its folder")?;
        let bytes =
            live.file(skill, skill_md).await.map_err(|error| format!("its SKILL.md cannot be read: {error}"))?;
        let text = std::str::from_utf8(&bytes).map_err(|_| "its SKILL.md is not UTF-8")?;
        let mut fields = frontmatter_json(text).map_err(|error| format!("its frontmatter: {error}"))?;
        match fields.get("name") {
            Some(Value::String(declared)) if declared == name.as_str() => {}
            Some(Value::String(declared)) => {
                return Err(format!("its frontmatter name '{declared}' is not its catalog name '{name}'"));
            }
            Some(_) => return Err("its frontmatter name is not a string".to_owned()),
            None => return Err("its frontmatter has no name (SEP-2640 requires name and description)".to_owned()),
        }
        let description = match fields.remove("description") {
            Some(Value::String(description)) if !description.trim().is_empty() => description,
            _ => return Err("its frontmatter has no description (SEP-2640 requires name and description)".to_owned()),
        };
        fields.remove("name");
        let mut frontmatter = SkillFrontmatter::new(name.as_str(), description.clone());
        frontmatter.extra = fields;

        let skill_md_uri = uri(name.as_str(), SKILL_MD);
        let resources = files
            .iter()
            .map(|file| SkillResource::new(uri(name.as_str(), file.path.as_str()), file.digest.to_string(), file.size));
        let entry = Skill::new(&skill_md_uri, frontmatter, SkillResources::Files(resources.collect()));
        entry.validate().map_err(|error| format!("its entry breaks a rule of SEP-2640: {error}"))?;
        let listed = Resource::new(&skill_md_uri, name.as_str())
            .with_description(description)
            .with_mime_type(mime_type(skill_md))
            .with_size(skill_md.size);
        let directories = directories(name.as_str(), files);
        Ok(McpSkill { name, entry, listed, directories })
    }
}

/// Every folder of a skill's listing and its direct children (files, and folders as
/// `inode/directory`), in code-point order.
fn directories(name: &str, files: &[SkillFile]) -> BTreeMap<String, Vec<Resource>> {
    let mut children: BTreeMap<String, BTreeMap<String, Resource>> = BTreeMap::new();
    children.insert(String::new(), BTreeMap::new());
    for file in files {
        let path = file.path.as_str();
        let mut folder = String::new();
        let mut segments = path.split('/').peekable();
        while let Some(segment) = segments.next() {
            let child = if folder.is_empty() { segment.to_owned() } else { format!("{folder}/{segment}") };
            let resource = if segments.peek().is_some() {
                children.entry(child.clone()).or_default();
                Resource::new(uri(name, &child), segment).with_mime_type(DIRECTORY_MIME_TYPE)
            } else {
                Resource::new(uri(name, &child), segment).with_mime_type(mime_type(file)).with_size(file.size)
            };
            children.entry(folder.clone()).or_default().entry(segment.to_owned()).or_insert(resource);
            folder = child;
        }
    }
    children.into_iter().map(|(folder, entries)| (folder, entries.into_values().collect())).collect()
}

#[cfg(test)]
mod tests {
    use skillcat_core::{Digest, SkillFilePath};

    use super::*;

    fn file(path: &str) -> SkillFile {
        SkillFile { path: SkillFilePath::parse(path).unwrap(), size: 3, digest: Digest::of(b"abc"), executable: false }
    }

    #[test]
    fn uris_encode_each_segment() {
        assert_eq!(uri("pdf", ""), "skill://pdf");
        assert_eq!(uri("pdf", "SKILL.md"), "skill://pdf/SKILL.md");
        assert_eq!(uri("pdf", "a b/c%d?.md"), "skill://pdf/a%20b/c%25d%3F.md");
        assert_eq!(uri("pdf", "é/x~y"), "skill://pdf/%C3%A9/x~y");
    }

    #[test]
    fn folders_list_their_direct_children() {
        let files = [file("SKILL.md"), file("templates/a.md"), file("templates/regional/eu.md"), file("z.py")];
        let folders = directories("pdf", &files);
        let listed = |folder: &str| -> Vec<(String, Option<String>)> {
            folders[folder].iter().map(|resource| (resource.uri.clone(), resource.mime_type.clone())).collect()
        };
        assert_eq!(folders.keys().collect::<Vec<_>>(), ["", "templates", "templates/regional"]);
        assert_eq!(
            listed(""),
            [
                ("skill://pdf/SKILL.md".to_owned(), Some("text/markdown".to_owned())),
                ("skill://pdf/templates".to_owned(), Some("inode/directory".to_owned())),
                ("skill://pdf/z.py".to_owned(), Some("text/plain".to_owned())),
            ]
        );
        assert_eq!(listed("templates").len(), 2);
        assert_eq!(listed("templates/regional")[0].0, "skill://pdf/templates/regional/eu.md");
    }
}
