//! The churn generator: random changes to a tree of skills (adds, edits, renames, deletes,
//! symlink flips, bursts of many changes at once), each mirrored on disk and kept as a picture of
//! what is where. The churn tests apply them to a served folder; the git tests commit them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

/// A small deterministic generator (xorshift64*), so a failing sequence reproduces from its seed.
pub struct Random(pub u64);

impl Random {
    pub fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % bound
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Where skills live: every leaf name once, so that a root never holds two skills of one name
/// (which nagents reports as a failed source); the same position under the other root shadows.
pub const FOLDERS: [&str; 10] = ["s1", "s2", "s3", "g", "g/s4", "g/s5", "g/h", "g/h/s6", "m", "m/s7"];

pub const TEXTS: [&str; 6] = [
    "---\ndescription: First version.\n---\nBody one.\n",
    "---\ndescription: Second version, longer.\n---\n# Heading\n\nBody two with more words in it.\n",
    "---\ndescription: \"Quoted: yes\"\n---\nBody three.\n",
    "No frontmatter at all; the fallback description applies.\n",
    "---\nname: not valid!\n---\nInvalid name.\n",
    "---\ndescription: Version with a $other reference.\n---\nSee $s1 and $g.\n",
];

/// What is at a path relative to the case root `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Folder,
    Text(String),
    Link(String),
}

/// The tree as the changes left it, mirrored on disk under `root` (the `$T` of link targets).
pub struct Tree {
    root: PathBuf,
    nodes: BTreeMap<String, Node>,
}

impl Tree {
    /// An empty tree at `root`, an existing folder.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Tree { root: root.into(), nodes: BTreeMap::new() }
    }

    fn disk(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub fn make_folders(&mut self, relative: &str) {
        let mut path = String::new();
        for part in relative.split('/') {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(part);
            if self.nodes.get(&path) != Some(&Node::Folder) {
                self.remove(&path);
                std::fs::create_dir(self.disk(&path)).expect("create a folder");
                self.nodes.insert(path.clone(), Node::Folder);
            }
        }
    }

    fn remove(&mut self, relative: &str) {
        let disk = self.disk(relative);
        match self.nodes.get(relative) {
            Some(Node::Folder) => std::fs::remove_dir_all(&disk).expect("remove a folder"),
            Some(_) => std::fs::remove_file(&disk).expect("remove a file"),
            None => return,
        }
        let prefix = format!("{relative}/");
        self.nodes.retain(|path, _| path != relative && !path.starts_with(&prefix));
    }

    pub fn write(&mut self, relative: &str, text: &str) {
        let (folder, _) = relative.rsplit_once('/').expect("beneath a root");
        self.make_folders(folder);
        if matches!(self.nodes.get(relative), Some(Node::Folder | Node::Link(_))) {
            self.remove(relative);
        }
        // As editors and deploy tools write: a temporary file renamed over the old one.
        let temporary = self.disk(&format!("{folder}/.tmp-write"));
        std::fs::write(&temporary, text).expect("write");
        std::fs::rename(&temporary, self.disk(relative)).expect("rename into place");
        self.nodes.insert(relative.to_owned(), Node::Text(text.to_owned()));
    }

    /// Points a symlink at `relative` to `target` (`$T/...` or relative), replacing what is there
    /// atomically when it is a link already (as git-sync flips its link).
    fn link(&mut self, relative: &str, target: &str) {
        let (folder, _) = relative.rsplit_once('/').expect("beneath a root");
        self.make_folders(folder);
        if matches!(self.nodes.get(relative), Some(Node::Folder | Node::Text(_))) {
            self.remove(relative);
        }
        let on_disk = target.replace("$T", self.root.to_str().expect("a UTF-8 root"));
        let temporary = self.disk(&format!("{folder}/.tmp-link"));
        std::os::unix::fs::symlink(&on_disk, &temporary).expect("symlink");
        std::fs::rename(&temporary, self.disk(relative)).expect("flip the link");
        self.nodes.insert(relative.to_owned(), Node::Link(target.to_owned()));
    }

    fn rename(&mut self, from: &str, to: &str) {
        if !self.nodes.contains_key(from) || self.nodes.contains_key(to) || to.starts_with(&format!("{from}/")) {
            return;
        }
        let (folder, _) = to.rsplit_once('/').expect("beneath a root");
        self.make_folders(folder);
        std::fs::rename(self.disk(from), self.disk(to)).expect("rename");
        let prefix = format!("{from}/");
        let moved: Vec<(String, Node)> = self
            .nodes
            .iter()
            .filter(|(path, _)| *path == from || path.starts_with(&prefix))
            .map(|(path, node)| (format!("{to}{}", &path[from.len()..]), node.clone()))
            .collect();
        self.nodes.retain(|path, _| path != from && !path.starts_with(&prefix));
        self.nodes.extend(moved);
    }

    /// One random change.
    pub fn change(&mut self, random: &mut Random) {
        let root = *random.pick(&["r0", "r1"]);
        let other = if root == "r0" { "r1" } else { "r0" };
        let folder = format!("{root}/{}", random.pick(&FOLDERS));
        match random.below(10) {
            0..=2 => {
                let text = *random.pick(&TEXTS);
                self.write(&format!("{folder}/SKILL.md"), text);
            }
            3 => {
                let name = *random.pick(&["notes.md", "data.json", ".hidden"]);
                let text = *random.pick(&["a", "bb", "ccc\n"]);
                self.write(&format!("{folder}/references/{name}"), text);
            }
            4 => self.make_folders(&folder),
            5 => self.remove(&folder),
            6 => self.remove(&format!("{folder}/SKILL.md")),
            7 => {
                // The same position under the other root, or another position under this one
                // (then the folder's skills keep their names: still one of each per root).
                let to = if random.below(2) == 0 {
                    format!("{other}/{}", &folder[3..])
                } else {
                    format!("{root}/{}", random.pick(&FOLDERS))
                };
                let clashes = |tree: &Self| {
                    tree.nodes.keys().filter(|path| path.starts_with(&format!("{from}/", from = folder))).any(|path| {
                        let leaf = path.rsplit('/').nth(1).unwrap_or_default();
                        tree.nodes.keys().any(|other| {
                            other.starts_with(&format!("{}/", &to[..2]))
                                && other.ends_with(&format!("/{leaf}/SKILL.md"))
                        })
                    })
                };
                if to.starts_with(root) || !clashes(self) {
                    self.rename(&folder, &to);
                }
            }
            8 => {
                let target = *random.pick(&["$T/r1/s1", "$T/r0/g", "SKILL.md", "../s2", "missing"]);
                let at = if random.below(2) == 0 { format!("{folder}/SKILL.md") } else { folder.clone() };
                self.link(&at, target);
            }
            _ => {
                // A burst: many files at once in one folder, then most of them gone again.
                self.make_folders(&format!("{folder}/burst"));
                for index in 0..200 {
                    self.write(&format!("{folder}/burst/f{index:03}.md"), "x");
                }
                for index in 0..190 {
                    self.remove(&format!("{folder}/burst/f{index:03}.md"));
                }
            }
        }
    }

    /// The tree as a case's `entries` (folders, texts, links; parents are made implicitly).
    pub fn entries(&self) -> Vec<Value> {
        self.nodes
            .iter()
            .map(|(path, node)| match node {
                Node::Folder => json!({"path": path, "dir": true}),
                Node::Text(text) => json!({"path": path, "text": text}),
                Node::Link(target) => json!({"path": path, "symlink": target}),
            })
            .collect()
    }
}
