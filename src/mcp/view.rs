//! The catalog as MCP serves it (SEP-2640): the entries of the skills the catalog publishes
//! (`crate::catalog::publish` decides which), their `skill://` URIs and their folders. A skill's
//! entries are made once per skill version and kept in its views; the view of a catalog version,
//! in its views, puts them in name order (which is URI order).

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::model::{
    DIRECTORY_MIME_TYPE, Resource, ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use skillcat_core::{SKILL_MD, SkillFile, SpecName};

use crate::catalog::{
    CatalogError, CatalogSkill, LiveCatalog, Published, PublishedView, Snapshot, made_in_task, media_type,
};

/// The scheme of every skill URI.
pub const SCHEME: &str = "skill://";

/// What a path segment keeps unencoded in a URI: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The published skills of one catalog version with their MCP answers, in name order.
pub struct View {
    published: Arc<PublishedView>,
    /// The answers of `published.skills`, at the same positions.
    answers: Vec<Arc<McpSkill>>,
}

/// A published skill: the catalog's skill of this version, and its MCP answers.
#[derive(Clone, Copy)]
pub struct ServedSkill<'a> {
    pub catalog: &'a Arc<CatalogSkill>,
    pub mcp: &'a McpSkill,
}

/// What MCP answers for one version of a skill.
pub struct McpSkill {
    /// The `skills/list` entry.
    pub entry: Skill,
    /// The `SKILL.md` resource, as `resources/list` gives it.
    pub listed: Resource,
    /// Every folder (`""` for the skill's own) and its direct children.
    pub directories: BTreeMap<String, Vec<Resource>>,
}

impl View {
    /// The view of `snapshot`'s catalog version, made once per version.
    pub async fn of(live: &LiveCatalog, snapshot: &Arc<Snapshot>) -> Result<Arc<View>, CatalogError> {
        let cell = snapshot.ready()?.views.of::<View>();
        let (live, snapshot) = (live.clone(), Arc::clone(snapshot));
        made_in_task(cell, async move {
            let published = live.published(&snapshot).await?;
            let answers = (published.skills.iter())
                .map(|(catalog, published)| {
                    let made = catalog.views.of::<McpSkill>();
                    match made.get() {
                        Some(mcp) => Arc::clone(mcp),
                        None => {
                            let mcp = Arc::new(McpSkill::of(catalog, published));
                            let _ = made.set(Arc::clone(&mcp));
                            mcp
                        }
                    }
                })
                .collect();
            Ok(View { published, answers })
        })
        .await
    }

    fn at(&self, position: usize) -> ServedSkill<'_> {
        ServedSkill { catalog: &self.published.skills[position].0, mcp: &self.answers[position] }
    }

    pub fn get(&self, name: &SpecName) -> Option<ServedSkill<'_>> {
        self.published.position(name).map(|position| self.at(position))
    }

    /// The served skills after `cursor` (a skill name; `None`: from the first), at most `page`,
    /// and the cursor of the next page.
    pub fn page(
        &self,
        cursor: Option<&SpecName>,
        page: usize,
    ) -> (impl Iterator<Item = ServedSkill<'_>>, Option<String>) {
        let (positions, next) = self.published.page(cursor, page);
        (positions.map(|position| self.at(position)), next.map(|name| name.to_string()))
    }

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
        // A folder may be named with a trailing slash (`skill://pdf/references/`), as its own is.
        let folder = path.strip_suffix('/').unwrap_or(&path);
        skill.mcp.directories.contains_key(folder).then(|| Target::Directory(skill, folder.to_owned()))
    }
}

/// What a `skill://` URI names.
pub enum Target<'a> {
    /// A listed file of a served skill.
    File(ServedSkill<'a>, &'a SkillFile),
    /// A folder of a served skill (`""`: the skill's own).
    Directory(ServedSkill<'a>, String),
}

impl McpSkill {
    /// The answers for a published skill.
    fn of(skill: &CatalogSkill, published: &Published) -> McpSkill {
        let name = published.name.as_str();
        let files = skill.files().map(|(_, files)| files).unwrap_or_default();
        let mut frontmatter = SkillFrontmatter::new(name, published.description.clone());
        frontmatter.extra = published.fields.clone();
        let skill_md_uri = uri(name, SKILL_MD);
        let resources = files
            .iter()
            .map(|file| SkillResource::new(uri(name, file.path.as_str()), file.digest.to_string(), file.size));
        let entry = Skill::new(&skill_md_uri, frontmatter, SkillResources::Files(resources.collect()));
        debug_assert!(entry.validate().is_ok(), "a published skill's entry keeps SEP-2640's rules");
        let listed = Resource::new(&skill_md_uri, name)
            .with_description(published.description.clone())
            .with_mime_type(mime_type(&published.skill_md))
            .with_size(published.skill_md.size);
        McpSkill { entry, listed, directories: directories(name, files) }
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

/// Whether a file of this type is sent as text when its bytes are UTF-8 (otherwise, and for
/// images, audio, video and fonts, as a base64 blob).
fn textual(mime: &str) -> bool {
    !matches!(mime.split('/').next(), Some("image" | "audio" | "video" | "font"))
}

/// A file's bytes as a resource's contents: text when they can be, a base64 blob otherwise.
pub fn contents(uri: &str, bytes: Vec<u8>, mime: &str) -> ResourceContents {
    let bytes = if textual(mime) {
        match String::from_utf8(bytes) {
            Ok(text) => return ResourceContents::text(text, uri),
            Err(error) => error.into_bytes(),
        }
    } else {
        bytes
    };
    ResourceContents::blob(base64::prelude::BASE64_STANDARD.encode(bytes), uri)
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
