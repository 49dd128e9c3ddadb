//! One immutable version of the catalog: its skills with their entries, what they shadow, what
//! was skipped, and the bodies every surface answers alike, prepared once, so a request does no
//! discovery, serialization or hashing.

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use skillcat_core::{
    CompositeDiscovery, ContentVersion, Digest, FileListing, SharedText, Skill, SkillFile, SkillFilePath, SkillName,
    SourcedSkill, render_skill_manifest,
};

use super::CatalogError;
use super::body::{ETag, PreparedBody};
use super::files::SkillFiles;
use super::views::Views;
use crate::parallel;

/// The tag of one version of a skill: its source, descriptor and content version (`None`: the
/// content could not be read).
fn skill_etag(source: &str, skill: &Skill, version: Option<ContentVersion>, files: Option<&FileListing>) -> ETag {
    let version = version.map(|version| version.get().to_be_bytes());
    ETag::of(&[
        source.as_bytes(),
        skill.name().as_str().as_bytes(),
        skill.description().as_bytes(),
        skill.location().as_bytes(),
        version.as_ref().map_or(b"unreadable".as_slice(), |bytes| bytes.as_slice()),
        &super::files::fingerprint(files),
    ])
}

/// A skill as `GET /skills` lists it.
// Its texts are shared with the skill's descriptor and its source's label, not copied.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SkillEntry {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: SkillName,
    #[schema(value_type = String)]
    pub description: SharedText,
    #[schema(value_type = String)]
    pub location: SharedText,
    /// The label of the source that owns the skill.
    #[serde(serialize_with = "shared_text")]
    #[schema(value_type = String)]
    pub source: Arc<str>,
    /// Changes whenever the skill's content, descriptor or source does.
    pub etag: ETag,
    /// The digest of the skill's folder: SHA-256 of one line `<mode> <sha256 hex> <path>\n` per
    /// file of its archive, in code-point path order (mode `644`, or `755` when executable);
    /// `null` when its files are not served (over a bound).
    #[schema(value_type = Option<String>, example = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", pattern = "^sha256:[0-9a-f]{64}$")]
    pub version: Option<Digest>,
}

fn shared_text<S: serde::Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

/// A descriptor hidden by an earlier source's skill of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ShadowedEntry {
    #[schema(value_type = String)]
    pub name: SkillName,
    pub location: String,
    pub source: String,
}

/// A file a source skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DiagnosticEntry {
    pub source: String,
    pub message: String,
}

/// Why the catalog served is not what the files say now: a scan failed after a good catalog,
/// which is served until a scan succeeds again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CatalogFailure {
    /// The label of the source that failed.
    pub source: String,
    /// nagents' message (for a name listed twice, followed by where the other one is).
    pub message: String,
    /// When the scans started failing this way (RFC 3339, UTC).
    #[schema(example = "2026-12-01T09:30:00Z")]
    pub since: String,
}

/// One configured source, in precedence order: what kind it is, and what it serves when it has
/// revisions (the commit of a git source).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SourceEntry {
    /// The label its skills and diagnostics carry as `source`.
    pub label: String,
    /// `directory`, `builtin` or `git`.
    #[schema(example = "git")]
    pub kind: &'static str,
    /// The commit a git source's skills are read from (40 hex digits); `null` for other kinds.
    #[schema(example = "4b825dc642cb6eb9a060e54bf8d69288fbee4904")]
    pub commit: Option<String>,
}

/// The body of `GET /skills`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CatalogBody<'a> {
    /// The same tag as the `ETag` header of the identity representation (the gzip one's has
    /// `-gzip` inside the quotes).
    #[schema(value_type = ETag)]
    pub etag: &'a ETag,
    #[schema(value_type = Vec<SkillEntry>)]
    pub skills: &'a [SkillEntry],
    #[schema(value_type = Vec<ShadowedEntry>)]
    pub shadowed: &'a [ShadowedEntry],
    #[schema(value_type = Vec<DiagnosticEntry>)]
    pub diagnostics: &'a [DiagnosticEntry],
    /// Every configured source, in precedence order, with the commit a git source serves.
    #[schema(value_type = Vec<SourceEntry>)]
    pub sources: &'a [SourceEntry],
    /// Present only while the last scan failed: the catalog is the last good one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<CatalogFailure>)]
    pub error: Option<&'a CatalogFailure>,
}

/// The body of `GET /skills` without its `etag` field: what the tag is the hash of. (Made by
/// splicing prepared entries; this serialization is what the splice must equal.)
#[cfg(test)]
#[derive(Serialize)]
struct Untagged<'a> {
    skills: Entries<'a>,
    shadowed: &'a [ShadowedEntry],
    diagnostics: &'a [DiagnosticEntry],
    sources: &'a [SourceEntry],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a CatalogFailure>,
}

/// The entries of the catalog's skills, serialized in place.
#[cfg(test)]
struct Entries<'a>(&'a [Arc<CatalogSkill>]);

#[cfg(test)]
impl Serialize for Entries<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|skill| &*skill.entry))
    }
}

/// The start of `GET /skills` before its untagged part: `{"etag":` and the tag, which is always
/// a quoted 32-digit hex string (38 bytes as JSON), then `,`.
const TAG_FIELD: usize = b"{\"etag\":".len() + 38 + 1;

/// Where each skill's entry lies in a listing body (start, end), in the order of its skills.
type Spans = Vec<(u32, u32)>;

/// Skills per piece of the listing's gzip form, on average: about 40 KiB of entries, most of
/// deflate's window, so the pieces compress nearly as well as the whole.
const SKILLS_PER_PIECE: usize = 128;

/// A run of skills none of whose names starts a piece is cut after this many.
const MAX_SKILLS_PER_PIECE: usize = 4 * SKILLS_PER_PIECE;

/// Below this many skills to make for each core, one thread makes them all (a thread costs less
/// than making a few skills, but a rescan makes few).
const SKILLS_PER_THREAD: usize = 2_000;
/// As [`SKILLS_PER_THREAD`], for the entries of a listing to serialize.
const ENTRIES_PER_THREAD: usize = 2_000;

/// Whether a piece of the listing's gzip form starts at the skill `name`: one name in
/// [`SKILLS_PER_PIECE`], chosen by the name alone (FNV-1a), so the choice never moves.
fn starts_a_piece(name: &SkillName) -> bool {
    let hash = name
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    hash % SKILLS_PER_PIECE as u64 == 0
}

/// Where the entries of a listing's skills come from: a listing made before (the skills it shares
/// with this one are copied from it, not serialized again) and, for each skill, its index there.
struct Earlier<'a> {
    listing: &'a [u8],
    spans: &'a [(u32, u32)],
    /// For each skill of the new listing, its index in the earlier one, if it is listed there.
    index: Vec<Option<usize>>,
}

/// `GET /skills`, tagged with the hash of its content, and where each skill's entry lies in it.
/// The entries of skills an earlier listing holds are copied from it, not serialized again (a
/// catalog of 100,000 skills changes by a few entries, not by 100,000). The body is made in one
/// buffer: the untagged body is written after room for the tag field, hashed where it lies, and
/// the tag written in front of it (its `{` becomes the field's `,`), so a large listing is not
/// copied a second time.
fn listing(
    skills: &[Arc<CatalogSkill>],
    earlier: Option<&Earlier<'_>>,
    shadowed: &[ShadowedEntry],
    diagnostics: &[DiagnosticEntry],
    sources: &[SourceEntry],
    error: Option<&CatalogFailure>,
) -> (PreparedBody, Spans) {
    let copied = |index: usize| {
        let earlier = earlier?;
        let (start, end) = earlier.spans[earlier.index[index]?];
        Some(&earlier.listing[start as usize..end as usize])
    };
    let entries: usize = (0..skills.len()).map(|index| copied(index).map_or(512, <[u8]>::len) + 1).sum();
    let mut body = Vec::with_capacity(TAG_FIELD + entries + 64 + 256 * (shadowed.len() + diagnostics.len()));
    let mut spans = Vec::with_capacity(skills.len());
    body.resize(TAG_FIELD - 1, b' ');
    body.extend_from_slice(b"{\"skills\":[");
    let offset = |at: usize| u32::try_from(at).expect("a listing is smaller than 4 GiB");
    // The entries of `indexes`, separated by commas, at the end of `out`; and where each lies.
    let write = |out: &mut Vec<u8>, spans: &mut Spans, indexes: &mut dyn Iterator<Item = usize>| {
        for (nth, index) in indexes.enumerate() {
            if nth > 0 {
                out.push(b',');
            }
            let start = out.len();
            match copied(index) {
                Some(entry) => out.extend_from_slice(entry),
                None => serde_json::to_writer(&mut *out, &*skills[index].entry).expect("entries serialize"),
            }
            spans.push((offset(start), offset(out.len())));
        }
    };
    let fresh = (0..skills.len()).filter(|&index| copied(index).is_none()).count();
    if fresh < 2 * ENTRIES_PER_THREAD {
        write(&mut body, &mut spans, &mut (0..skills.len()));
    } else {
        // Many entries to serialize (a first catalog): in pieces, on every core, then joined.
        let indexes: Vec<usize> = (0..skills.len()).collect();
        let pieces = parallel::in_chunks(&indexes, ENTRIES_PER_THREAD, |indexes| {
            let mut piece = Vec::with_capacity(indexes.len() * 512);
            let mut spans = Vec::with_capacity(indexes.len());
            write(&mut piece, &mut spans, &mut indexes.iter().copied());
            (piece, spans)
        });
        for (piece, within) in pieces {
            if !spans.is_empty() {
                body.push(b',');
            }
            let base = body.len();
            body.extend_from_slice(&piece);
            spans.extend(
                within.iter().map(|&(start, end)| (offset(base + start as usize), offset(base + end as usize))),
            );
        }
    }
    body.extend_from_slice(b"],\"shadowed\":");
    serde_json::to_writer(&mut body, shadowed).expect("entries serialize");
    body.extend_from_slice(b",\"diagnostics\":");
    serde_json::to_writer(&mut body, diagnostics).expect("entries serialize");
    body.extend_from_slice(b",\"sources\":");
    serde_json::to_writer(&mut body, sources).expect("entries serialize");
    if let Some(error) = error {
        body.extend_from_slice(b",\"error\":");
        serde_json::to_writer(&mut body, error).expect("failures serialize");
    }
    body.push(b'}');
    let etag = ETag::of(&[&body[TAG_FIELD - 1..]]);
    let tag = serde_json::to_string(&etag).expect("tags serialize");
    let field = [b"{\"etag\":".as_slice(), tag.as_bytes(), b","].concat();
    assert_eq!(field.len(), TAG_FIELD, "a tag is 32 hex digits, quoted");
    body[..TAG_FIELD].copy_from_slice(&field);
    // The room guessed for entries not copied is given back.
    body.shrink_to_fit();
    (PreparedBody::new(body, etag), spans)
}

/// A skill's `GET /skills/{name}` body: its entry, serialized on first use (most skills of a large
/// catalog are only ever listed, and the listing holds their entries already). Derefs to the
/// prepared body.
#[derive(Debug)]
pub struct EntryBody {
    entry: Arc<SkillEntry>,
    prepared: OnceLock<Box<PreparedBody>>,
}

impl EntryBody {
    fn new(entry: Arc<SkillEntry>) -> Self {
        EntryBody { entry, prepared: OnceLock::new() }
    }
}

impl std::ops::Deref for EntryBody {
    type Target = PreparedBody;

    fn deref(&self) -> &PreparedBody {
        self.prepared.get_or_init(|| {
            let body = PreparedBody::new(
                serde_json::to_vec(&*self.entry).expect("entries serialize"),
                self.entry.etag.clone(),
            );
            body.compress();
            Box::new(body)
        })
    }
}

/// A skill of the catalog and its prepared answers.
#[derive(Debug)]
pub struct CatalogSkill {
    pub skill: Skill,
    /// Index of the owning source.
    pub(super) source: usize,
    /// What reads a pinned version's files (the owning source reads a current skill's).
    pub(super) reader: Option<Reader>,
    /// The content version the tag covers (`None`: it could not be read).
    pub(super) version: Option<ContentVersion>,
    /// The files of the skill's folder, which the tag covers too (`None`: the source does not
    /// list files).
    pub files: Option<SkillFiles>,
    pub entry: Arc<SkillEntry>,
    /// `GET /skills/{name}`, made on first use; its tag is the skill's.
    pub body: EntryBody,
    /// What is made from this version of the skill on first use: its search document, its
    /// publication decision, the surfaces' encodings.
    pub views: Views,
}

impl CatalogSkill {
    /// The skill `sourced` of the source labelled `label`, its entry and body prepared.
    pub(super) fn new(sourced: &SourcedSkill, label: &Arc<str>) -> Self {
        let (skill, version) = (&sourced.skill, &sourced.version);
        let etag = skill_etag(label, skill, *version, sourced.files.as_deref());
        let entry = Arc::new(SkillEntry {
            name: skill.name().clone(),
            description: skill.shared_description(),
            location: skill.shared_location(),
            source: Arc::clone(label),
            etag,
            version: sourced.files.as_deref().and_then(FileListing::version),
        });
        let body = EntryBody::new(Arc::clone(&entry));
        CatalogSkill {
            skill: skill.clone(),
            source: sourced.source,
            reader: None,
            version: *version,
            files: sourced.files.clone().map(SkillFiles::new),
            entry,
            body,
            views: Views::default(),
        }
    }

    /// The files of the skill, or why they are not served.
    pub fn files(&self) -> Result<(&SkillFiles, &[SkillFile]), CatalogError> {
        let unavailable = |reason: String| CatalogError::FilesUnavailable { name: self.skill.name().clone(), reason };
        let files = self.files.as_ref().ok_or_else(|| unavailable("its source lists no files".to_owned()))?;
        let listed = files.listing.files().map_err(|reason| unavailable(reason.to_string()))?;
        Ok((files, listed))
    }

    /// The listed file at `path`.
    pub fn file(&self, path: &str) -> Result<&SkillFile, CatalogError> {
        let (files, _) = self.files()?;
        let unknown = || CatalogError::UnknownFile { name: self.skill.name().clone(), path: path.to_owned() };
        let path = SkillFilePath::parse(path).map_err(|_| unknown())?;
        files.listing.get(&path).ok_or_else(unknown)
    }
}

/// The source of one pinned version of a skill.
#[derive(Clone)]
pub struct Reader(pub Arc<dyn crate::sources::Source>);

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Reader").field(&self.0.label()).finish()
    }
}

/// A successfully discovered catalog.
#[derive(Debug)]
pub struct Catalog {
    /// In name order. Shared with the next catalog where unchanged.
    pub skills: Vec<Arc<CatalogSkill>>,
    pub shadowed: Vec<ShadowedEntry>,
    pub diagnostics: Vec<DiagnosticEntry>,
    pub sources: Vec<SourceEntry>,
    /// Set while the last scan failed (this catalog is then the last good one).
    pub error: Option<CatalogFailure>,
    /// `GET /skills`.
    pub listing: PreparedBody,
    /// Where each skill's entry lies in `listing`, for the next version's listing to copy.
    spans: Spans,
    /// `GET /manifest`.
    pub manifest: PreparedBody,
    /// What is made from this version on first use: the search index, the publication
    /// decisions, the surfaces' encodings.
    pub views: Views,
}

impl Catalog {
    /// Prepares every answer of one discovery (whose skills' tags cover their content versions),
    /// reusing the prepared answers of `previous` for every skill that did not change. Gives
    /// `None` when nothing changed at all: a rescan that finds nothing new costs no serialization
    /// and no second copy of the catalog.
    pub(super) fn rebuild(
        previous: Option<&Catalog>,
        discovery: &CompositeDiscovery,
        sources: &[SourceEntry],
    ) -> Option<Self> {
        let label = |source: usize| sources.get(source).map(|source| source.label.clone()).unwrap_or_default();
        // Each source's label once, shared by the entries of its skills made now.
        let labels: Vec<Arc<str>> = sources.iter().map(|source| Arc::from(source.label.as_str())).collect();
        // Both in name order: one pass over the two. The same descriptor and content from the
        // same source: the same answers (the tag is a function of them, so it is not even hashed
        // again).
        let mut known_skills = previous.map(|previous| previous.skills.iter().enumerate().peekable());
        let known: Vec<Option<(usize, &Arc<CatalogSkill>)>> = discovery
            .skills
            .iter()
            .map(|sourced| {
                let (index, known) = known_skills.as_mut().and_then(|known| {
                    while known.next_if(|(_, known)| known.skill.name() < sourced.skill.name()).is_some() {}
                    known.next_if(|(_, known)| known.skill.name() == sourced.skill.name())
                })?;
                (known.version == sourced.version
                    && known.source == sourced.source
                    && known.skill == sourced.skill
                    && known.files.as_ref().map(|files| &files.listing) == sourced.files.as_ref())
                .then_some((index, known))
            })
            .collect();
        let reused: Vec<Option<usize>> = known.iter().map(|known| known.map(|(index, _)| index)).collect();
        // The others are made now, on every core when they are many (a first catalog).
        type Pair<'a> = (&'a SourcedSkill, Option<(usize, &'a Arc<CatalogSkill>)>);
        let pairs: Vec<Pair<'_>> = discovery.skills.iter().zip(known).collect();
        let make = |pairs: &[Pair<'_>]| -> Vec<Arc<CatalogSkill>> {
            (pairs.iter())
                .map(|(sourced, known)| match known {
                    Some((_, known)) => Arc::clone(known),
                    None => {
                        let source = labels.get(sourced.source).cloned().unwrap_or_else(|| Arc::from(""));
                        Arc::new(CatalogSkill::new(sourced, &source))
                    }
                })
                .collect()
        };
        let fresh = reused.iter().filter(|reused| reused.is_none()).count();
        let skills: Vec<Arc<CatalogSkill>> = if fresh < 2 * SKILLS_PER_THREAD {
            make(&pairs)
        } else {
            parallel::in_chunks(&pairs, SKILLS_PER_THREAD, make).into_iter().flatten().collect()
        };
        let shadowed: Vec<ShadowedEntry> = discovery
            .shadowed
            .iter()
            .map(|sourced| ShadowedEntry {
                name: sourced.skill.name().clone(),
                location: sourced.skill.location().to_owned(),
                source: label(sourced.source),
            })
            .collect();
        let diagnostics: Vec<DiagnosticEntry> = discovery
            .diagnostics
            .iter()
            .map(|diagnostic| DiagnosticEntry { source: label(diagnostic.source), message: diagnostic.message.clone() })
            .collect();
        if let Some(previous) = previous
            && previous.error.is_none()
            && previous.skills.len() == skills.len()
            && previous.skills.iter().zip(&skills).all(|(a, b)| Arc::ptr_eq(a, b))
            && previous.shadowed == shadowed
            && previous.diagnostics == diagnostics
            && previous.sources == sources
        {
            return None;
        }
        let earlier = previous.map(|previous| Earlier {
            listing: &previous.listing.bytes,
            spans: &previous.spans,
            index: reused,
        });
        let (listing, spans) = listing(&skills, earlier.as_ref(), &shadowed, &diagnostics, sources, None);
        let manifest = render_skill_manifest(skills.iter().map(|skill| &skill.skill));
        let manifest_etag = ETag::of(&[manifest.as_bytes()]);
        Some(Catalog {
            skills,
            shadowed,
            diagnostics,
            sources: sources.to_vec(),
            error: None,
            listing,
            spans,
            manifest: PreparedBody::new(manifest.into_bytes(), manifest_etag),
            views: Views::default(),
        })
    }

    /// This catalog, served on while a scan fails: the same skills and manifest, and a listing
    /// that carries the failure (and so a new tag, which tells clients and event streams).
    pub(super) fn failing(&self, error: CatalogFailure) -> Self {
        let earlier = Earlier {
            listing: &self.listing.bytes,
            spans: &self.spans,
            index: (0..self.skills.len()).map(Some).collect(),
        };
        let (listing, spans) =
            listing(&self.skills, Some(&earlier), &self.shadowed, &self.diagnostics, &self.sources, Some(&error));
        Catalog {
            skills: self.skills.clone(),
            shadowed: self.shadowed.clone(),
            diagnostics: self.diagnostics.clone(),
            sources: self.sources.clone(),
            listing,
            spans,
            error: Some(error),
            manifest: self.manifest.clone(),
            // The same skills: the same views of them.
            views: self.views.carried(),
        }
    }

    /// Prepares the gzip form of every body large enough for it, taking what is unchanged from
    /// `earlier` (the version before, if it was compressed). Run off the request path: a catalog
    /// is published first and compressed after, answering with identity bodies until then.
    pub fn compress(&self, earlier: Option<&Catalog>) {
        // A skill's own body is compressed when it is made, on first use.
        self.listing.compress_in_pieces(&self.listing_cuts(), earlier.map(|earlier| &earlier.listing));
        self.manifest.compress();
    }

    /// Where the listing's pieces start for its gzip form: at its first skill, after its last,
    /// and at each skill whose name starts one ([`starts_a_piece`]). The cuts go with the skills,
    /// not with offsets, so a skill added or removed changes one piece and leaves the others'
    /// bytes as they were.
    fn listing_cuts(&self) -> Vec<usize> {
        let mut cuts = Vec::with_capacity(self.skills.len() / SKILLS_PER_PIECE + 2);
        let mut since = 0;
        for (index, (skill, &(start, _))) in self.skills.iter().zip(&self.spans).enumerate() {
            since += 1;
            if index == 0 || since > MAX_SKILLS_PER_PIECE || starts_a_piece(skill.skill.name()) {
                cuts.push(start as usize);
                since = 0;
            }
        }
        cuts.extend(self.spans.last().map(|&(_, end)| end as usize));
        cuts
    }

    pub fn get(&self, name: &SkillName) -> Option<&Arc<CatalogSkill>> {
        self.skills.binary_search_by(|skill| skill.skill.name().cmp(name)).ok().map(|index| &self.skills[index])
    }

    /// The skill named `name`, or why there is none.
    pub fn skill(&self, name: &SkillName) -> Result<&CatalogSkill, CatalogError> {
        self.get(name).map(|skill| &**skill).ok_or_else(|| CatalogError::UnknownSkill(name.clone()))
    }

    /// The skill a client names with `name` (not yet known to be a skill name), or why there is none.
    pub fn skill_named(&self, name: &str) -> Result<&CatalogSkill, CatalogError> {
        let name = SkillName::parse(name).map_err(|_| CatalogError::InvalidName)?;
        self.skill(&name)
    }
}

/// What the server can say about the catalog right now.
#[derive(Debug)]
pub enum CatalogState {
    /// The first discovery has not finished.
    Starting,
    Ready(Box<Catalog>),
    /// A source failed (for example two skills of one name inside one source): nagents' message.
    Failed(String),
}

/// One published version of the catalog.
#[derive(Debug)]
pub struct Snapshot {
    /// Increases with every publication.
    pub version: u64,
    pub state: CatalogState,
}

impl Snapshot {
    pub fn starting() -> Self {
        Snapshot { version: 0, state: CatalogState::Starting }
    }

    /// The catalog, or why there is none.
    pub fn ready(&self) -> Result<&Catalog, CatalogError> {
        match &self.state {
            CatalogState::Ready(catalog) => Ok(catalog),
            CatalogState::Starting => Err(CatalogError::NotReady),
            CatalogState::Failed(message) => Err(CatalogError::Unavailable(message.clone())),
        }
    }

    /// The tag clients watch for changes: the catalog's, or none while it is unavailable.
    pub fn etag(&self) -> Option<&ETag> {
        match &self.state {
            CatalogState::Ready(catalog) => Some(&catalog.listing.etag),
            _ => None,
        }
    }

    /// Whether this state answers requests the same way as `other` (nothing to publish).
    pub fn same_as(&self, other: &CatalogState) -> bool {
        match (&self.state, other) {
            (CatalogState::Ready(a), CatalogState::Ready(b)) => {
                a.listing.etag == b.listing.etag && a.manifest.etag == b.manifest.etag
            }
            (CatalogState::Failed(a), CatalogState::Failed(b)) => a == b,
            (CatalogState::Starting, CatalogState::Starting) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spliced_listing_is_the_serialized_catalog_body() {
        let catalog_skill = |name: &str, description: &str| {
            let skill = Skill::new(name, description, format!("/srv/{name}/SKILL.md")).unwrap();
            Arc::new(CatalogSkill::new(
                &SourcedSkill { skill, source: 0, version: None, files: None },
                &Arc::from("/srv"),
            ))
        };
        let skills = [catalog_skill("alpha", "Say \"hi\" <now>"), catalog_skill("beta", "Tab\there \u{2028}")];
        let entry = (*skills[0].entry).clone();
        let shadowed = [ShadowedEntry { name: entry.name.clone(), location: "/b".into(), source: "b".into() }];
        let diagnostics = [DiagnosticEntry { source: "/srv".into(), message: "x: \u{2028} bad".into() }];
        let failure =
            CatalogFailure { source: "/srv".into(), message: "m".into(), since: "2026-12-01T00:00:00Z".into() };
        let entries = [entry, (*skills[1].entry).clone()];
        let sources = [
            SourceEntry { label: "/srv".into(), kind: "directory", commit: None },
            SourceEntry { label: "https://h/r.git".into(), kind: "git", commit: Some("ab".repeat(20)) },
        ];
        for error in [None, Some(&failure)] {
            let (listing, spans) = listing(&skills, None, &shadowed, &diagnostics, &sources, error);
            // Each span is the skill's entry, as its own body serializes it.
            for (skill, &(start, end)) in skills.iter().zip(&spans) {
                assert_eq!(&listing.bytes[start as usize..end as usize], &skill.body.bytes[..]);
                assert_eq!(skill.body.etag, skill.entry.etag);
            }
            // A listing that copies its entries from an earlier one (here in another order, one
            // of them not listed there) is the listing made afresh.
            let reversed = [Arc::clone(&skills[1]), Arc::clone(&skills[0])];
            let earlier = Earlier { listing: &listing.bytes, spans: &spans, index: vec![None, Some(0)] };
            let (copied, _) = super::listing(&reversed, Some(&earlier), &shadowed, &diagnostics, &sources, error);
            let (fresh, _) = super::listing(&reversed, None, &shadowed, &diagnostics, &sources, error);
            assert_eq!(copied.bytes, fresh.bytes);
            assert_eq!(copied.etag, fresh.etag);
            let expected = serde_json::to_vec(&CatalogBody {
                etag: &listing.etag,
                skills: &entries,
                shadowed: &shadowed,
                diagnostics: &diagnostics,
                sources: &sources,
                error,
            })
            .unwrap();
            assert_eq!(String::from_utf8(listing.bytes.to_vec()).unwrap(), String::from_utf8(expected).unwrap());
            let untagged = serde_json::to_vec(&Untagged {
                skills: Entries(&skills),
                shadowed: &shadowed,
                diagnostics: &diagnostics,
                sources: &sources,
                error,
            })
            .unwrap();
            assert_eq!(listing.etag, ETag::of(&[&untagged]), "the tag is the hash of the rest");
        }
    }

    #[test]
    fn the_listing_compressed_from_the_version_before_is_the_listing() {
        let discovery = |names: &[String]| CompositeDiscovery {
            skills: names
                .iter()
                .map(|name| SourcedSkill {
                    skill: Skill::new(name.as_str(), format!("Does {name}."), format!("/srv/{name}/SKILL.md")).unwrap(),
                    source: 0,
                    version: None,
                    files: None,
                })
                .collect(),
            shadowed: Vec::new(),
            diagnostics: Vec::new(),
        };
        let sources = [SourceEntry { label: "/srv".into(), kind: "directory", commit: None }];
        let gunzip = |catalog: &Catalog| {
            let gzip = catalog.listing.gzip().expect("compressed");
            let mut plain = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gzip.bytes[..]), &mut plain).unwrap();
            plain
        };
        // Enough skills for a first catalog to be made and serialized on several threads.
        let count = 2 * SKILLS_PER_THREAD.max(ENTRIES_PER_THREAD) + 500;
        let mut names: Vec<String> = (0..count).map(|n| format!("skill-{n:04}")).collect();
        let first = Catalog::rebuild(None, &discovery(&names), &sources).expect("a catalog");
        first.compress(None);
        assert_eq!(gunzip(&first), first.listing.bytes);
        let cuts = first.listing_cuts();
        let expected = count / SKILLS_PER_PIECE;
        assert!((expected / 2..=expected * 2).contains(&cuts.len()), "{} pieces for {count} skills", cuts.len());
        // Made in chunks, the skills keep the discovery's order, and each span is its entry.
        let names_made: Vec<&str> = first.skills.iter().map(|skill| skill.skill.name().as_str()).collect();
        assert_eq!(names_made, names);
        for (skill, &(start, end)) in first.skills.iter().zip(&first.spans) {
            assert_eq!(&first.listing.bytes[start as usize..end as usize], &skill.body.bytes[..]);
        }
        // A skill removed, one added, one edited: compressed from the version before, the same
        // bytes as compressed afresh, and the listing.
        names.remove(700);
        names.push("skill-new".into());
        let mut changed = discovery(&names);
        changed.skills[1500].skill = Skill::new("skill-1501", "Edited.", "/srv/skill-1501/SKILL.md").unwrap();
        let second = Catalog::rebuild(Some(&first), &changed, &sources).expect("a new catalog");
        second.compress(Some(&first));
        assert_eq!(gunzip(&second), second.listing.bytes);
        let afresh = Catalog::rebuild(None, &changed, &sources).expect("a catalog");
        afresh.compress(None);
        assert_eq!(second.listing.gzip().unwrap().bytes, afresh.listing.gzip().unwrap().bytes);
        // Copied from the version before on one thread, or serialized afresh on several: the same.
        assert_eq!(second.listing.bytes, afresh.listing.bytes);
        assert_eq!(second.spans, afresh.spans);
        let kept = (second.skills.iter()).filter(|skill| first.skills.iter().any(|known| Arc::ptr_eq(known, skill)));
        assert_eq!(kept.count(), count - 2, "all but the removed and the edited skill are reused");
    }
}
