//! Skills in an immutable tree of folders read from an object store (a git commit), found as
//! nagents' `DirectorySkillDiscoverer` finds them in a checkout of that tree: the same order, the
//! same entry and depth bounds, the same diagnostics. A symlink is counted and never followed, a
//! submodule is an empty folder, and only a regular file (a blob) named `SKILL.md` is read.
//!
//! The store is anything that lists a folder and reads a blob ([`TreeStore`]); the walk never
//! touches a file system, so a hostile tree can only cost what its bounds allow: the walk visits
//! at most `max_entries` entries, `max_depth` deep (without recursion), and reads no `SKILL.md`
//! over [`MAX_FILE_BYTES`] and no file of a listing over [`MAX_SKILL_BYTES`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use crate::directory::MAX_FILE_BYTES;
use crate::directory::guarded::ReadError;
use crate::directory::listing::{Diagnostic, skill_of};
use crate::discover::ContentVersion;
use crate::files::{
    Digest, FileListing, FilesUnavailable, InvalidFilePath, MAX_FILE_PATH_BYTES, MAX_SKILL_BYTES, MAX_SKILL_DEPTH,
    MAX_SKILL_ENTRIES, MAX_SKILL_FILES, SkillFile, SkillFilePath, SkipReason, SkippedEntry, check_segment,
};
use crate::pystr;
use crate::skill::Skill;

const MAX_DIAGNOSTICS: usize = 20;
/// The most skills a folder kept in a [`WalkMemo`] may hold.
const MEMO_MAX_SKILLS: usize = 32;
const ENTRY_LIMIT: &str = "discovery entry limit reached; increase max_entries";
const DEPTH_LIMIT: &str = "discovery depth/entry limit reached";

/// What an entry of a folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeEntryKind {
    Folder,
    /// A regular file; `executable` for git's mode 100755.
    File {
        executable: bool,
    },
    /// A symbolic link: counted, never followed, never served.
    Symlink,
    /// A submodule's commit: an empty folder, as a checkout without submodules has it.
    Submodule,
}

/// One entry of a folder: its name (bytes, as stored), what it is, and its object.
#[derive(Debug, Clone)]
pub struct TreeEntry<Id> {
    pub name: Vec<u8>,
    pub kind: TreeEntryKind,
    pub id: Id,
}

/// Why a store could not answer: the tree is incomplete or corrupt, and the scan fails as a
/// whole (a partial catalog is never published).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TreeError(pub String);

/// An object store that holds folders and blobs.
pub trait TreeStore {
    type Id: Clone + Eq + Hash + Ord + Debug;

    /// The entries of the folder `id`, in any order.
    fn folder(&self, id: &Self::Id) -> Result<Vec<TreeEntry<Self::Id>>, TreeError>;

    /// The size of the blob `id`, without reading it.
    fn size(&self, id: &Self::Id) -> Result<u64, TreeError>;

    /// The bytes of the blob `id`.
    fn read(&self, id: &Self::Id) -> Result<Vec<u8>, TreeError>;

    /// The SHA-256 of the blob `id` (a store may remember digests across scans).
    fn digest(&self, id: &Self::Id) -> Result<Digest, TreeError> {
        Ok(Digest::of(&self.read(id)?))
    }
}

/// Where the walk starts and how its paths are shown.
pub struct TreeRoot<'a, Id> {
    /// The root folder; `None` when the configured path does not exist in the tree, or `Err`
    /// with nagents' message when it is not a folder.
    pub folder: Result<Id, String>,
    /// The root's path in the tree (`""` for the top), `/`-separated.
    pub path: &'a str,
    /// Shows a path of the tree (`""` for the top) as locations and diagnostics name it.
    pub display: &'a dyn Fn(&[u8]) -> Vec<u8>,
    /// The name of the top folder, the default name of a `SKILL.md` found there (a checkout's
    /// folder name).
    pub top_name: &'a str,
}

/// A skill found in the tree.
#[derive(Debug, Clone)]
pub struct TreeSkill<Id> {
    pub skill: Skill,
    pub version: ContentVersion,
    /// The folder holding its `SKILL.md`, and that folder's path in the tree.
    pub folder: Id,
    pub folder_path: String,
}

/// What a walk found: skills in walk order (the caller validates names), and nagents'
/// diagnostics, at most 20.
#[derive(Debug)]
pub struct TreeWalk<Id> {
    pub found: Vec<TreeSkill<Id>>,
    pub diagnostics: Vec<String>,
}

/// One folder on the walk's stack: its path, depth, and sorted entries still to visit; where its
/// skills begin in the walk's, and the entries left before it was entered (what a memo records).
struct Frame<Id> {
    id: Id,
    path: Vec<u8>,
    depth: usize,
    entries: std::vec::IntoIter<TreeEntry<Id>>,
    first_found: usize,
    remaining_before: usize,
}

/// Folders walked before, by object: what the walk found beneath each and how many entries it
/// counted there. A folder's walk depends only on its object, its path and the entries left, so a
/// walk of many similar trees (the commits of a history) walks again only what changed. Kept by
/// the caller for one root and one set of bounds.
pub struct WalkMemo<Id> {
    walked: HashMap<Id, Walked<Id>>,
}

struct Walked<Id> {
    path: Vec<u8>,
    found: Vec<Arc<TreeSkill<Id>>>,
    entries: usize,
}

impl<Id> Default for WalkMemo<Id> {
    fn default() -> Self {
        WalkMemo { walked: HashMap::new() }
    }
}

/// Walks `root` in `store` as nagents walks a checkout of it.
pub fn walk_tree<S: TreeStore>(
    store: &S,
    root: &TreeRoot<'_, S::Id>,
    max_entries: usize,
    max_depth: usize,
) -> Result<TreeWalk<S::Id>, TreeError> {
    let (found, diagnostics) = walk(store, root, max_entries, max_depth, None)?;
    let found =
        found.into_iter().map(|found| Arc::try_unwrap(found).unwrap_or_else(|found| (*found).clone())).collect();
    Ok(TreeWalk { found, diagnostics })
}

/// The skills [`walk_tree`] finds, in walk order, walking again only the folders `memo` has not
/// seen (its diagnostics are not kept: a folder taken from the memo reports none).
pub fn walk_tree_memo<S: TreeStore>(
    store: &S,
    root: &TreeRoot<'_, S::Id>,
    max_entries: usize,
    max_depth: usize,
    memo: &mut WalkMemo<S::Id>,
) -> Result<Vec<Arc<TreeSkill<S::Id>>>, TreeError> {
    Ok(walk(store, root, max_entries, max_depth, Some(memo))?.0)
}

type Found<Id> = Vec<Arc<TreeSkill<Id>>>;

fn walk<S: TreeStore>(
    store: &S,
    root: &TreeRoot<'_, S::Id>,
    max_entries: usize,
    max_depth: usize,
    mut memo: Option<&mut WalkMemo<S::Id>>,
) -> Result<(Found<S::Id>, Vec<String>), TreeError> {
    let mut found: Found<S::Id> = Vec::new();
    let mut diagnostics: Vec<String> = Vec::new();
    let diagnose = |diagnostics: &mut Vec<String>, path: &[u8], message: &[u8]| {
        if diagnostics.len() < MAX_DIAGNOSTICS {
            diagnostics.push(Diagnostic::new(&(root.display)(path), message).render());
        }
    };
    let folder = match &root.folder {
        Ok(folder) => folder.clone(),
        Err(message) => {
            diagnose(&mut diagnostics, root.path.as_bytes(), message.as_bytes());
            return Ok((found, diagnostics));
        }
    };
    let mut remaining = max_entries;
    // Set once the entry bound cut the walk short: what follows is not what a folder holds.
    let mut limited = false;
    let mut stack: Vec<Frame<S::Id>> = Vec::new();
    // Enters a folder: counts its entries, or reports that they do not fit and ends the walk.
    let enter = |store: &S,
                 id: &S::Id,
                 path: Vec<u8>,
                 depth: usize,
                 remaining: &mut usize,
                 diagnostics: &mut Vec<String>,
                 first_found: usize| {
        let mut entries: Vec<TreeEntry<S::Id>> =
            store.folder(id)?.into_iter().filter(|entry| checked_out(&entry.name)).collect();
        if entries.len() > *remaining {
            diagnose(diagnostics, &path, ENTRY_LIMIT.as_bytes());
            *remaining = 0;
            return Ok::<_, TreeError>(None);
        }
        let remaining_before = *remaining;
        *remaining -= entries.len();
        entries.sort_by(|a, b| pystr::cmp_units(&a.name, &b.name));
        Ok(Some(Frame { id: id.clone(), path, depth, entries: entries.into_iter(), first_found, remaining_before }))
    };
    match enter(store, &folder, root.path.as_bytes().to_vec(), 0, &mut remaining, &mut diagnostics, 0)? {
        Some(frame) => stack.push(frame),
        None => limited = true,
    }
    while let Some(frame) = stack.last_mut() {
        let Some(entry) = frame.entries.next() else {
            let frame = stack.pop().expect("a frame");
            // The root changes with every tree: only folders beneath it are worth keeping; and
            // only folders of a few skills: a folder of many (a repository's `skills/`) changes
            // with any of them, and a copy of its list per tree would be a catalog per commit.
            if let Some(memo) = memo.as_deref_mut()
                && !limited
                && !stack.is_empty()
                && found.len() - frame.first_found <= MEMO_MAX_SKILLS
            {
                let walked = Walked {
                    found: found[frame.first_found..].to_vec(),
                    entries: frame.remaining_before - remaining,
                    path: frame.path,
                };
                memo.walked.insert(frame.id, walked);
            }
            continue;
        };
        let path = join(&frame.path, &entry.name);
        let depth = frame.depth;
        match entry.kind {
            TreeEntryKind::Folder | TreeEntryKind::Submodule => {
                if depth < max_depth && remaining > 0 {
                    if let Some(walked) = memo.as_deref().and_then(|memo| memo.walked.get(&entry.id))
                        && walked.path == path
                        && walked.entries <= remaining
                    {
                        found.extend(walked.found.iter().cloned());
                        remaining -= walked.entries;
                        continue;
                    }
                    let frame = if entry.kind == TreeEntryKind::Submodule {
                        Some(Frame {
                            id: entry.id,
                            path,
                            depth: depth + 1,
                            entries: Vec::new().into_iter(),
                            first_found: found.len(),
                            remaining_before: remaining,
                        })
                    } else {
                        let first_found = found.len();
                        let entered =
                            enter(store, &entry.id, path, depth + 1, &mut remaining, &mut diagnostics, first_found)?;
                        limited |= entered.is_none();
                        entered
                    };
                    stack.extend(frame);
                } else {
                    // Within the depth, the entry bound ran out before this folder: the walk is
                    // cut short, and what the folders open now hold is not theirs to remember.
                    limited |= depth < max_depth;
                    diagnose(&mut diagnostics, &path, DEPTH_LIMIT.as_bytes());
                }
            }
            TreeEntryKind::File { .. } if entry.name == crate::SKILL_MD.as_bytes() => {
                let (folder_id, folder_path) = (frame.id.clone(), frame.path.clone());
                let location = (root.display)(&path);
                let folder_name = match folder_path.iter().rposition(|&b| b == b'/') {
                    Some(slash) => &folder_path[slash + 1..],
                    None if folder_path.is_empty() => root.top_name.as_bytes(),
                    None => &folder_path[..],
                };
                let content = read_skill_md(store, &entry.id)?;
                let content = match &content {
                    Ok(bytes) => std::str::from_utf8(bytes)
                        .map_err(|error| ReadError::NotUtf8(pystr::utf8_error_message(bytes, &error))),
                    Err(()) => Err(ReadError::TooLarge),
                };
                match skill_of(content, &location, folder_name) {
                    Ok((skill, version)) => found.push(Arc::new(TreeSkill {
                        skill,
                        version,
                        folder: folder_id,
                        folder_path: String::from_utf8_lossy(&folder_path).into_owned(),
                    })),
                    Err(diagnostic) => {
                        if diagnostics.len() < MAX_DIAGNOSTICS {
                            diagnostics.push(diagnostic.render());
                        }
                    }
                }
            }
            TreeEntryKind::File { .. } | TreeEntryKind::Symlink => {}
        }
    }
    Ok((found, diagnostics))
}

/// A `SKILL.md` blob's bytes, or `Err(())` when it exceeds [`MAX_FILE_BYTES`] (not read).
fn read_skill_md<S: TreeStore>(store: &S, id: &S::Id) -> Result<Result<Vec<u8>, ()>, TreeError> {
    if store.size(id)? > MAX_FILE_BYTES as u64 {
        return Ok(Err(()));
    }
    Ok(Ok(store.read(id)?))
}

/// Whether git would check out an entry of this name: never an empty name, `.`, `..`, `.git`
/// (any case) or one holding a `/` or NUL (a corrupt or hostile tree); such entries are not
/// in a checkout, so the walk does not see them either.
fn checked_out(name: &[u8]) -> bool {
    !(name.is_empty()
        || name == b"."
        || name == b".."
        || name.eq_ignore_ascii_case(b".git")
        || name.contains(&b'/')
        || name.contains(&0))
}

fn join(folder: &[u8], name: &[u8]) -> Vec<u8> {
    if folder.is_empty() {
        return name.to_vec();
    }
    let mut path = Vec::with_capacity(folder.len() + 1 + name.len());
    path.extend_from_slice(folder);
    path.push(b'/');
    path.extend_from_slice(name);
    path
}

/// A skill's files, listed from its folder in the store, and the blob of each listed path.
#[derive(Debug)]
pub struct ListedTree<Id> {
    pub listing: FileListing,
    pub blobs: BTreeMap<SkillFilePath, Id>,
}

/// Lists the files beneath the folder `id` of a skill with the bounds and rules of a directory
/// source: hidden names left out, symlinks skipped, submodules empty, at most
/// [`MAX_SKILL_ENTRIES`] entries and [`MAX_SKILL_DEPTH`] folders deep, and a listing over
/// [`MAX_SKILL_FILES`] or [`MAX_SKILL_BYTES`] none at all (no blob beyond the bound is read).
pub fn list_tree<S: TreeStore>(store: &S, id: &S::Id) -> Result<ListedTree<S::Id>, TreeError> {
    let mut lister =
        TreeLister { files: Vec::new(), skipped: Vec::new(), blobs: BTreeMap::new(), entries: 0, bytes: 0 };
    match lister.folder(store, id, "", 0)? {
        Ok(()) => Ok(ListedTree { listing: FileListing::new(lister.files, lister.skipped), blobs: lister.blobs }),
        Err(bound) => Ok(ListedTree { listing: FileListing::unavailable(bound), blobs: BTreeMap::new() }),
    }
}

struct TreeLister<Id> {
    files: Vec<SkillFile>,
    skipped: Vec<SkippedEntry>,
    blobs: BTreeMap<SkillFilePath, Id>,
    entries: usize,
    bytes: u64,
}

impl<Id: Clone + Ord> TreeLister<Id> {
    fn folder<S: TreeStore<Id = Id>>(
        &mut self,
        store: &S,
        id: &Id,
        path: &str,
        depth: usize,
    ) -> Result<Result<(), FilesUnavailable>, TreeError> {
        let mut entries = store.folder(id)?;
        if self.entries + entries.len() > MAX_SKILL_ENTRIES {
            let counted = MAX_SKILL_ENTRIES + 1;
            return Ok(Err(FilesUnavailable::TooManyEntries { counted }));
        }
        self.entries += entries.len();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            if entry.name.starts_with(b".") || !checked_out(&entry.name) {
                continue;
            }
            let Ok(name) = std::str::from_utf8(&entry.name) else {
                let child = join_text(path, &String::from_utf8_lossy(&entry.name));
                self.skipped.push(SkippedEntry { path: child, reason: SkipReason::NotUtf8 });
                continue;
            };
            let child = join_text(path, name);
            if let Err(invalid) = check_segment(name) {
                self.skipped.push(SkippedEntry { path: child, reason: SkipReason::InvalidPath(invalid) });
                continue;
            }
            if child.len() > MAX_FILE_PATH_BYTES {
                self.skipped
                    .push(SkippedEntry { path: child, reason: SkipReason::InvalidPath(InvalidFilePath::TooLong) });
                continue;
            }
            match entry.kind {
                TreeEntryKind::Folder | TreeEntryKind::Submodule if depth + 1 > MAX_SKILL_DEPTH => {
                    return Ok(Err(FilesUnavailable::TooDeep { path: child }));
                }
                TreeEntryKind::Folder => {
                    if let Err(bound) = self.folder(store, &entry.id, &child, depth + 1)? {
                        return Ok(Err(bound));
                    }
                }
                TreeEntryKind::Submodule => {}
                TreeEntryKind::Symlink => self.skipped.push(SkippedEntry { path: child, reason: SkipReason::Symlink }),
                TreeEntryKind::File { executable } => {
                    if self.files.len() == MAX_SKILL_FILES {
                        return Ok(Err(FilesUnavailable::TooManyFiles { counted: MAX_SKILL_FILES + 1 }));
                    }
                    let size = store.size(&entry.id)?;
                    let counted = self.bytes.saturating_add(size);
                    if counted > MAX_SKILL_BYTES {
                        return Ok(Err(FilesUnavailable::TooLarge { counted, path: child, size }));
                    }
                    self.bytes = counted;
                    let file_path = SkillFilePath::parse(&child).map_err(|error| TreeError(error.to_string()))?;
                    let digest = store.digest(&entry.id)?;
                    self.blobs.insert(file_path.clone(), entry.id.clone());
                    self.files.push(SkillFile { path: file_path, size, digest, executable });
                }
            }
        }
        Ok(Ok(()))
    }
}

fn join_text(folder: &str, name: &str) -> String {
    if folder.is_empty() { name.to_owned() } else { format!("{folder}/{name}") }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::DirectorySkillDiscoverer;
    use crate::directory::tests::{apply, change, outcome};
    use crate::discover::{Discovery, SkillError, skill_catalog};

    /// A folder on disk read as a tree: folders, regular files (executable by the owner's bit),
    /// symlinks; nothing followed.
    struct DiskTree;

    impl TreeStore for DiskTree {
        type Id = PathBuf;

        fn folder(&self, id: &PathBuf) -> Result<Vec<TreeEntry<PathBuf>>, TreeError> {
            let entries = std::fs::read_dir(id).map_err(|error| TreeError(error.to_string()))?;
            let mut listed = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|error| TreeError(error.to_string()))?;
                let metadata = std::fs::symlink_metadata(entry.path()).map_err(|error| TreeError(error.to_string()))?;
                let kind = if metadata.file_type().is_symlink() {
                    TreeEntryKind::Symlink
                } else if metadata.is_dir() {
                    TreeEntryKind::Folder
                } else {
                    TreeEntryKind::File { executable: metadata.permissions().mode() & 0o100 != 0 }
                };
                listed.push(TreeEntry { name: entry.file_name().as_bytes().to_vec(), kind, id: entry.path() });
            }
            Ok(listed)
        }

        fn size(&self, id: &PathBuf) -> Result<u64, TreeError> {
            Ok(std::fs::symlink_metadata(id).map_err(|error| TreeError(error.to_string()))?.len())
        }

        fn read(&self, id: &PathBuf) -> Result<Vec<u8>, TreeError> {
            std::fs::read(id).map_err(|error| TreeError(error.to_string()))
        }
    }

    /// A scan of `root` by the tree walk and the tree listing, shaped as a directory source's
    /// scan: locations are the paths on disk, so the two compare byte for byte.
    fn tree_scan(root: &Path, max_entries: usize, max_depth: usize) -> Result<Discovery, SkillError> {
        let prefix = root.as_os_str().as_bytes().to_vec();
        let display = |path: &[u8]| {
            if path.is_empty() { prefix.clone() } else { [&prefix[..], b"/", path].concat() }
        };
        let top_name = root.file_name().unwrap().to_string_lossy().into_owned();
        let tree = TreeRoot { folder: Ok(root.to_path_buf()), path: "", display: &display, top_name: &top_name };
        let walk = walk_tree(&DiskTree, &tree, max_entries, max_depth).unwrap();
        skill_catalog(walk.found.iter().map(|found| found.skill.clone()))?;
        let mut found = walk.found;
        found.sort_by(|a, b| a.skill.name().cmp(b.skill.name()));
        let mut discovery = Discovery { diagnostics: walk.diagnostics, ..Discovery::default() };
        for found in found {
            discovery.files.push(std::sync::Arc::new(list_tree(&DiskTree, &found.folder).unwrap().listing));
            discovery.skills.push(found.skill);
            discovery.versions.push(found.version);
        }
        Ok(discovery)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// The tree walk and listing give exactly what the directory source gives for the same
        /// folders (which the conformance tests hold to nagents): skills, content versions, file
        /// listings with digests and modes, and diagnostics, also where a bound cuts the walk.
        #[test]
        fn a_tree_walk_equals_the_directory_walk(
            changes in proptest::collection::vec(change(), 1..24),
            max_entries in proptest::sample::select(vec![5usize, 9, 14, 10_000]),
            max_depth in proptest::sample::select(vec![0usize, 1, 2, 16]),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap().join("root");
            std::fs::create_dir(&root).unwrap();
            for change in &changes {
                apply(&root, change);
            }
            let entries = NonZeroUsize::new(max_entries).unwrap();
            let directory = DirectorySkillDiscoverer::with_limits([&root], entries, max_depth).unwrap();
            proptest::prop_assert_eq!(
                outcome(tree_scan(&root, max_entries, max_depth)),
                outcome(directory.scan_blocking()),
                "after {:?}", changes
            );
        }
    }

    /// A folder on disk copied into a content-addressed store (as git keeps trees): the same
    /// content has the same id, so a memo keyed by ids sees what did not change.
    #[derive(Default)]
    struct Objects(std::collections::HashMap<Digest, Result<Vec<TreeEntry<Digest>>, Vec<u8>>>);

    impl Objects {
        fn import(&mut self, path: &Path) -> Digest {
            let mut entries = DiskTree.folder(&path.to_path_buf()).unwrap();
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let mut listed = Vec::new();
            let mut text = Vec::new();
            for entry in entries {
                let id = match entry.kind {
                    TreeEntryKind::Folder => self.import(&entry.id),
                    TreeEntryKind::Symlink => self.blob(std::fs::read_link(&entry.id).unwrap().as_os_str().as_bytes()),
                    _ => self.blob(&std::fs::read(&entry.id).unwrap()),
                };
                text.extend_from_slice(format!("{:?} {id} ", entry.kind).as_bytes());
                text.extend_from_slice(&entry.name);
                text.push(0);
                listed.push(TreeEntry { name: entry.name, kind: entry.kind, id });
            }
            let id = Digest::of(&text);
            self.0.insert(id, Ok(listed));
            id
        }

        fn blob(&mut self, bytes: &[u8]) -> Digest {
            let id = Digest::of(&[b"blob ", bytes].concat());
            self.0.insert(id, Err(bytes.to_vec()));
            id
        }
    }

    impl TreeStore for Objects {
        type Id = Digest;

        fn folder(&self, id: &Digest) -> Result<Vec<TreeEntry<Digest>>, TreeError> {
            self.0[id].clone().map_err(|_| TreeError("a blob".into()))
        }

        fn size(&self, id: &Digest) -> Result<u64, TreeError> {
            Ok(self.read(id)?.len() as u64)
        }

        fn read(&self, id: &Digest) -> Result<Vec<u8>, TreeError> {
            self.0[id].clone().err().ok_or_else(|| TreeError("a folder".into()))
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

        /// Walking a history of trees with one memo finds, at every tree, exactly the skills a
        /// walk without it finds, also where a bound cuts the walk.
        #[test]
        fn a_memo_walk_of_a_history_equals_fresh_walks(
            history in proptest::collection::vec(proptest::collection::vec(change(), 1..6), 1..8),
            max_entries in proptest::sample::select(vec![5usize, 9, 14, 10_000]),
            max_depth in proptest::sample::select(vec![0usize, 1, 2, 16]),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("root");
            std::fs::create_dir(&root).unwrap();
            let (mut objects, mut memo) = (Objects::default(), WalkMemo::default());
            let display = |path: &[u8]| path.to_vec();
            for changes in &history {
                for change in changes {
                    apply(&root, change);
                }
                let top = objects.import(&root);
                let tree = TreeRoot { folder: Ok(top), path: "", display: &display, top_name: "root" };
                let shown = |found: &TreeSkill<Digest>| format!("{:?} {} {}", found.skill, found.folder, found.folder_path);
                let fresh: Vec<String> =
                    walk_tree(&objects, &tree, max_entries, max_depth).unwrap().found.iter().map(shown).collect();
                let memoized: Vec<String> = walk_tree_memo(&objects, &tree, max_entries, max_depth, &mut memo)
                    .unwrap()
                    .iter()
                    .map(|found| shown(found))
                    .collect();
                proptest::prop_assert_eq!(memoized, fresh, "after {:?}", history);
            }
        }
    }

    #[test]
    fn odd_and_oversized_entries_are_never_read_or_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("top");
        std::fs::create_dir_all(root.join("big")).unwrap();
        std::fs::write(root.join("big/SKILL.md"), vec![b'a'; MAX_FILE_BYTES + 1]).unwrap();
        std::fs::create_dir_all(root.join("bad")).unwrap();
        std::fs::write(root.join("bad/SKILL.md"), b"---\nname: bad\n---\n\xff").unwrap();
        std::fs::write(root.join("SKILL.md"), "no frontmatter\n").unwrap();
        let walk = tree_scan(&root, 100, 16).unwrap();
        let top = root.display();
        assert_eq!(walk.skills.len(), 1, "{walk:?}");
        assert_eq!(walk.skills[0].name().as_str(), "top", "a SKILL.md at the top is named after the top folder");
        assert_eq!(
            walk.diagnostics,
            [
                format!("{top}/bad/SKILL.md: 'utf-8' codec can't decode byte 0xff in position 18: invalid start byte"),
                format!("{top}/big/SKILL.md: SKILL.md exceeds 4000000 bytes"),
            ]
        );
        // Names a checkout never has are not seen at all.
        for name in [&b""[..], b".", b"..", b".git", b".GIT", b"a/b", b"a\0b"] {
            assert!(!checked_out(name), "{name:?}");
        }
        assert!(checked_out(b".hidden") && checked_out(b"SKILL.md"));
    }
}
