//! A git source's history: the catalog at every commit of its ref's first-parent history (at
//! most `history` commits), kept as the changes of each skill name from one commit to the next,
//! not as a catalog per commit. Each commit's catalog is core's walk of its tree with a memo of the
//! folders walked before, so a commit costs the folders it changed. Versions (the digest of a
//! skill's folder) are found when a skill's versions are asked for, once per folder.
//!
//! Built after a scan serves a new commit (extending the last history when the new commit
//! descends from it), and by the first request that needs it before that has finished.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use gix::ObjectId;
use skillcat_core::{ContentVersion, Digest, FileListing, Skill, SkillName, TreeSkill, WalkMemo, list_tree};

use super::Inner;
use super::store::ObjectStore;
use crate::sources::{HistoryEntry, Opened, PinError, Source, VersionSpec, run_blocking};

/// How many skills' folders (with their listings) are kept once found.
const KEPT_FOLDERS: usize = 4096;
/// The most skill versions a history keeps: this many per skill of its head's catalog, and this
/// many more. A history that would keep more starts at a later commit.
const MAX_STATES_PER_SKILL: usize = 8;
const MIN_STATES: usize = 10_000;

/// One commit of the history.
struct Commit {
    id: ObjectId,
    time: i64,
}

/// From commit `from` (an index into the history's commits, oldest first) on, until the next
/// run, what the catalog holds under one name: a skill, or nothing.
struct Run {
    from: usize,
    state: Option<Arc<TreeSkill<ObjectId>>>,
}

/// A skill's folder at some commit, listed: its listing and version, and each file's blob.
pub(super) struct Listed {
    pub listing: Arc<FileListing>,
    pub version: Option<Digest>,
    pub blobs: Arc<BTreeMap<skillcat_core::SkillFilePath, ObjectId>>,
    pub skill_md: ObjectId,
}

/// A skill pinned: as it was at the commit read, and its folder listed.
pub(super) struct PinnedAt {
    pub skill: Arc<TreeSkill<ObjectId>>,
    pub commit: ObjectId,
    pub listed: Arc<Listed>,
}

/// The history of one commit (its head).
pub(super) struct History {
    pub head: ObjectId,
    /// Oldest first; the newest is the head. Those before `start` are past the bound (left from
    /// extending an older history) and never answered.
    commits: Vec<Commit>,
    start: usize,
    index: HashMap<ObjectId, usize>,
    runs: HashMap<SkillName, Vec<Run>>,
    /// How many runs hold a skill.
    states: usize,
    /// The head's catalog, by name: what a history extended from this one starts from.
    newest: HashMap<SkillName, Arc<TreeSkill<ObjectId>>>,
    /// Tags, by commit, sorted; and each tag's commit.
    tags: HashMap<ObjectId, Vec<String>>,
    tagged: HashMap<String, ObjectId>,
    /// The skills' folders listed so far, by tree.
    listed: Mutex<HashMap<ObjectId, Arc<Listed>>>,
}

impl History {
    /// The history of `head`: `previous` extended when `head` descends from its head within the
    /// bound, built afresh otherwise.
    pub fn build(inner: &Inner, head: ObjectId, previous: Option<&History>) -> Result<History, String> {
        let repo = inner.repository()?;
        let bound = inner.config.history.get();
        let unreadable = |error: &dyn std::fmt::Display| format!("cannot read the history of {head}: {error}");
        // The first-parent chain down from the head, newest first, until the previous head.
        let mut chain = Vec::new();
        let mut next = Some(head);
        while let Some(id) = next.take() {
            if previous.is_some_and(|previous| previous.head == id) || chain.len() == bound {
                next = Some(id);
                break;
            }
            let commit = repo.find_commit(id).map_err(|error| unreadable(&error))?;
            let time = commit.time().map_err(|error| unreadable(&error))?.seconds;
            next = commit.parent_ids().next().map(|parent| parent.detach());
            chain.push(Commit { id, time });
        }
        chain.reverse();
        let extended = previous.filter(|previous| next == Some(previous.head));
        let mut history = match extended {
            Some(previous) if previous.commits.len() + chain.len() <= 2 * bound => History {
                head,
                commits: previous.commits.iter().map(|commit| Commit { id: commit.id, time: commit.time }).collect(),
                start: 0,
                index: previous.index.clone(),
                runs: previous
                    .runs
                    .iter()
                    .map(|(name, runs)| {
                        let runs = runs.iter().map(|run| Run { from: run.from, state: run.state.clone() }).collect();
                        (name.clone(), runs)
                    })
                    .collect(),
                states: previous.states,
                newest: previous.newest.clone(),
                tags: HashMap::new(),
                tagged: HashMap::new(),
                listed: Mutex::new(lock(&previous.listed).clone()),
            },
            // A history that grew to twice its bound is built again from its head.
            Some(_) => return History::build(inner, head, None),
            None => History {
                head,
                commits: Vec::new(),
                start: 0,
                index: HashMap::new(),
                runs: HashMap::new(),
                states: 0,
                newest: HashMap::new(),
                tags: HashMap::new(),
                tagged: HashMap::new(),
                listed: Mutex::default(),
            },
        };
        let store = ObjectStore { repo: &repo, digests: &inner.digests };
        let mut memo = WalkMemo::default();
        let mut last_root = None;
        for commit in chain {
            let at = history.commits.len();
            let tree = repo
                .find_commit(commit.id)
                .and_then(|found| found.tree_id().map(gix::Id::detach))
                .map_err(|error| unreadable(&error))?;
            let root = inner.root_folder(&store, tree).map_err(|error| error.0)?;
            // The same folder as the commit before: the same catalog.
            let same = last_root.as_ref() == Some(&root) && at > 0;
            last_root = Some(root.clone());
            history.index.insert(commit.id, at);
            history.commits.push(commit);
            if same {
                continue;
            }
            let found = inner.walk_memo(&store, root, &mut memo).map_err(|error| error.0)?;
            let mut catalog = HashMap::with_capacity(found.len());
            for skill in found {
                // A name found twice fails the commit's scan: it has no catalog.
                if catalog.insert(skill.skill.name().clone(), skill).is_some() {
                    catalog.clear();
                    break;
                }
            }
            history.change_to(catalog, at);
            // Commits that rewrite every skill would keep a copy of the catalog each: past a few
            // catalogs' worth of versions the history starts later instead.
            if history.states > MAX_STATES_PER_SKILL * history.newest.len() + MIN_STATES {
                history.trim(at);
            }
        }
        history.trim(history.commits.len().saturating_sub(bound));
        history.tag(&repo);
        Ok(history)
    }

    /// Records the names whose skill differs in `catalog` (the catalog at commit `at`) from the
    /// newest catalog, which it then becomes.
    fn change_to(&mut self, catalog: HashMap<SkillName, Arc<TreeSkill<ObjectId>>>, at: usize) {
        for (name, skill) in &catalog {
            let same = self.newest.get(name).is_some_and(|known| Arc::ptr_eq(known, skill) || same_skill(known, skill));
            if !same {
                self.runs.entry(name.clone()).or_default().push(Run { from: at, state: Some(Arc::clone(skill)) });
                self.states += 1;
            }
        }
        for name in self.newest.keys() {
            if !catalog.contains_key(name) {
                self.runs.get_mut(name).expect("a name seen before").push(Run { from: at, state: None });
            }
        }
        self.newest = catalog;
    }

    /// Starts the history at commit `start`: what only older commits had is forgotten.
    fn trim(&mut self, start: usize) {
        if start <= self.start {
            return;
        }
        self.start = start;
        let mut states = 0;
        self.runs.retain(|_, runs| {
            // The run in force at `start` begins there; those before it go.
            let first = runs.partition_point(|run| run.from <= start).saturating_sub(1);
            runs.drain(..first);
            if let Some(run) = runs.first_mut() {
                run.from = run.from.max(start);
            }
            states += runs.iter().filter(|run| run.state.is_some()).count();
            runs.iter().any(|run| run.state.is_some())
        });
        self.states = states;
    }

    /// The tags of the repository, by commit (tags of objects other than commits are left out).
    fn tag(&mut self, repo: &gix::Repository) {
        let Ok(references) = repo.references() else { return };
        let Ok(tags) = references.tags() else { return };
        for mut reference in tags.flatten() {
            let name = reference.name().shorten().to_string();
            if let Ok(commit) = reference.peel_to_commit() {
                self.tags.entry(commit.id).or_default().push(name.clone());
                self.tagged.insert(name, commit.id);
            }
        }
        for names in self.tags.values_mut() {
            names.sort();
        }
    }

    /// The commits answered: `start..commits.len()`.
    fn window(&self) -> std::ops::Range<usize> {
        self.start..self.commits.len()
    }

    /// `name`'s skill at each stretch of commits of the window where it is one skill, oldest
    /// first.
    fn stretches(&self, name: &SkillName) -> Vec<(std::ops::Range<usize>, &Arc<TreeSkill<ObjectId>>)> {
        let Some(runs) = self.runs.get(name) else { return Vec::new() };
        let window = self.window();
        runs.iter()
            .enumerate()
            .filter_map(|(at, run)| {
                let end = runs.get(at + 1).map_or(window.end, |next| next.from);
                let range = run.from.max(window.start)..end;
                let skill = run.state.as_ref()?;
                (!range.is_empty()).then_some((range, skill))
            })
            .collect()
    }

    /// `name`'s skill at commit `at`.
    fn at(&self, name: &SkillName, at: usize) -> Option<&Arc<TreeSkill<ObjectId>>> {
        let runs = self.runs.get(name)?;
        let index = runs.partition_point(|run| run.from <= at).checked_sub(1)?;
        runs[index].state.as_ref()
    }

    /// The folder of `skill`, listed (once).
    pub fn listed(&self, inner: &Inner, skill: &TreeSkill<ObjectId>) -> Result<Arc<Listed>, PinError> {
        if let Some(listed) = lock(&self.listed).get(&skill.folder) {
            return Ok(Arc::clone(listed));
        }
        let repo = inner.repository().map_err(PinError::Unreadable)?;
        let store = ObjectStore { repo: &repo, digests: &inner.digests };
        let tree = list_tree(&store, &skill.folder).map_err(|error| PinError::Unreadable(error.0))?;
        let skill_md = skillcat_core::SkillFilePath::parse(skillcat_core::SKILL_MD).expect("a valid path");
        let skill_md = match tree.blobs.get(&skill_md) {
            Some(id) => *id,
            None => super::find_blob(&store, &skill.folder, skillcat_core::SKILL_MD.as_bytes())
                .map_err(|error| PinError::Unreadable(error.0))?,
        };
        let listed = Arc::new(Listed {
            version: tree.listing.version(),
            listing: Arc::new(tree.listing),
            blobs: Arc::new(tree.blobs),
            skill_md,
        });
        let mut kept = lock(&self.listed);
        if kept.len() >= KEPT_FOLDERS {
            kept.clear();
        }
        kept.insert(skill.folder, Arc::clone(&listed));
        Ok(listed)
    }

    /// The versions of `name`, newest first (a version whose files are over a bound has no
    /// digest, and is left out).
    pub fn versions(&self, inner: &Inner, name: &SkillName) -> Result<Vec<HistoryEntry>, PinError> {
        let mut versions: Vec<(HistoryEntry, usize)> = Vec::new();
        for (range, skill) in self.stretches(name).into_iter().rev() {
            let Some(version) = self.listed(inner, skill)?.version else { continue };
            let newest = range.end - 1;
            let tags = range.clone().flat_map(|at| self.tags.get(&self.commits[at].id).into_iter().flatten());
            match versions.iter_mut().find(|(entry, _)| entry.version == version) {
                Some((entry, _)) => entry.tags.extend(tags.cloned()),
                None => {
                    let commit = &self.commits[newest];
                    let entry = HistoryEntry {
                        version,
                        commit: commit.id.to_string(),
                        committed_at: commit.time,
                        tags: tags.cloned().collect(),
                    };
                    versions.push((entry, newest));
                }
            }
        }
        Ok(versions
            .into_iter()
            .map(|(mut entry, _)| {
                entry.tags.sort();
                entry.tags.dedup();
                entry
            })
            .collect())
    }

    /// `name` at `spec`: its skill, the commit read, and its folder listed.
    pub fn pinned(&self, inner: &Inner, name: &SkillName, spec: &VersionSpec) -> Result<PinnedAt, PinError> {
        let at = match spec {
            VersionSpec::Digest(digest) => {
                for (range, skill) in self.stretches(name).into_iter().rev() {
                    let listed = self.listed(inner, skill)?;
                    if listed.version == Some(*digest) {
                        return Ok(PinnedAt {
                            skill: Arc::clone(skill),
                            commit: self.commits[range.end - 1].id,
                            listed,
                        });
                    }
                }
                return Err(PinError::NotFound(format!(
                    "no commit of the last {} of {} has it",
                    self.window().len(),
                    inner.label
                )));
            }
            VersionSpec::Tag(tag) => self.tagged_commit(inner, tag)?,
            VersionSpec::Commit(prefix) => match self.tagged.contains_key(prefix.as_str()) {
                true => self.tagged_commit(inner, prefix)?,
                false => {
                    let window = self.window();
                    match matching(&self.commits[window.clone()], prefix) {
                        Ok(at) => window.start + at,
                        Err(0) => {
                            return Err(PinError::NotFound(format!(
                                "no commit {prefix} in the last {} of {}",
                                window.len(),
                                inner.label
                            )));
                        }
                        Err(count) => return Err(PinError::Ambiguous { prefix: prefix.clone(), count }),
                    }
                }
            },
        };
        let commit = self.commits[at].id;
        let skill = self
            .at(name, at)
            .ok_or_else(|| PinError::NotFound(format!("the skill does not exist at commit {commit}")))?;
        let listed = self.listed(inner, skill)?;
        if listed.version.is_none() {
            return Err(PinError::NotFound(format!("its files at commit {commit} are over a bound")));
        }
        Ok(PinnedAt { skill: Arc::clone(skill), commit, listed })
    }

    /// The index of the commit `tag` points at, if the window has it.
    fn tagged_commit(&self, inner: &Inner, tag: &str) -> Result<usize, PinError> {
        let commit = self.tagged.get(tag).ok_or_else(|| match VersionSpec::tag_name(tag) {
            true => PinError::NotFound(format!("no tag {tag} in {}", inner.label)),
            false => PinError::NotFound(format!("{tag:?} is not a version digest, a commit id or a tag name")),
        })?;
        self.index
            .get(commit)
            .copied()
            .filter(|at| self.window().contains(at))
            .ok_or_else(|| PinError::NotFound(format!("the tag {tag} is not on the history of {}", inner.label)))
    }
}

/// The index of the one commit of `commits` whose id begins with `prefix` (lowercase hex), or
/// how many do (0 or several).
fn matching(commits: &[Commit], prefix: &str) -> Result<usize, usize> {
    let mut found = commits.iter().enumerate().filter(|(_, commit)| commit.id.to_string().starts_with(prefix));
    match (found.next(), found.count()) {
        (Some((at, _)), 0) => Ok(at),
        (None, _) => Err(0),
        (Some(_), more) => Err(more + 1),
    }
}

/// The same skill at two commits: the same folder (so the same files) and descriptor.
fn same_skill(a: &TreeSkill<ObjectId>, b: &TreeSkill<ObjectId>) -> bool {
    a.folder == b.folder && a.folder_path == b.folder_path && a.skill == b.skill
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A pinned skill as a source of its own: its `SKILL.md` and files are blobs of the commit it
/// was read from, whatever the source serves now.
pub(super) struct PinnedReader {
    pub inner: Arc<Inner>,
    pub skill: Skill,
    pub content: ContentVersion,
    pub listed: Arc<Listed>,
}

impl PinnedReader {
    fn blob(&self, skill: &Skill, path: &skillcat_core::SkillFilePath) -> Result<ObjectId, skillcat_core::SkillError> {
        if *skill != self.skill {
            return Err(skillcat_core::SkillError::NotInCatalog { name: skill.name().clone(), catalog: "git" });
        }
        self.listed.blobs.get(path).copied().ok_or_else(|| skillcat_core::SkillError::Io {
            context: format!("{} of {}", path, skill.name()),
            source: std::io::ErrorKind::NotFound.into(),
        })
    }
}

#[async_trait::async_trait]
impl skillcat_core::SkillDiscoverer for PinnedReader {
    async fn scan(&self) -> Result<skillcat_core::Discovery, skillcat_core::SkillError> {
        Ok(skillcat_core::Discovery {
            skills: vec![self.skill.clone()],
            versions: vec![self.content],
            files: vec![Arc::clone(&self.listed.listing)],
            ..skillcat_core::Discovery::default()
        })
    }

    async fn load(&self, skill: &Skill) -> Result<String, skillcat_core::SkillError> {
        if *skill != self.skill {
            return Err(skillcat_core::SkillError::NotInCatalog { name: skill.name().clone(), catalog: "git" });
        }
        let (inner, blob) = (Arc::clone(&self.inner), self.listed.skill_md);
        let bytes = run_blocking(move || inner.read_blob(blob, skillcat_core::MAX_FILE_BYTES as u64)).await?;
        String::from_utf8(bytes).map_err(|_| skillcat_core::SkillError::Changed { name: skill.name().clone() })
    }
}

#[async_trait::async_trait]
impl Source for PinnedReader {
    fn label(&self) -> &str {
        &self.inner.label
    }

    fn kind(&self) -> &'static str {
        "git"
    }

    fn read_file_blocking(
        &self,
        skill: &Skill,
        path: &skillcat_core::SkillFilePath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, skillcat_core::SkillError> {
        self.inner.read_blob(self.blob(skill, path)?, max_bytes)
    }

    async fn read_file(
        &self,
        skill: &Skill,
        path: &skillcat_core::SkillFilePath,
        max_bytes: u64,
    ) -> Result<Vec<u8>, skillcat_core::SkillError> {
        let (inner, blob) = (Arc::clone(&self.inner), self.blob(skill, path)?);
        run_blocking(move || inner.read_blob(blob, max_bytes)).await
    }

    async fn open_file(
        &self,
        skill: &Skill,
        path: &skillcat_core::SkillFilePath,
    ) -> Result<Opened, skillcat_core::SkillError> {
        self.inner.open_blob(self.blob(skill, path)?).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_prefix_names_one_commit_or_says_how_many_it_matches() {
        let commit = |hex: &str| Commit { id: ObjectId::from_hex(hex.as_bytes()).expect("hex"), time: 0 };
        let commits = [
            commit("abcdef0123456789abcdef0123456789abcdef01"),
            commit("abcdef0fffffffffffffffffffffffffffffffff"),
            commit("abcdef1123456789abcdef0123456789abcdef01"),
        ];
        assert_eq!(matching(&commits, "abcdef0"), Err(2));
        assert_eq!(matching(&commits, "abcdef01"), Ok(0));
        assert_eq!(matching(&commits, "abcdef1"), Ok(2));
        assert_eq!(matching(&commits, "abcdef0fffffffffffffffffffffffffffffffff"), Ok(1));
        assert_eq!(matching(&commits, "0000000"), Err(0));
    }
}
