//! The live catalog under churn, against live nagents: random sequences of changes (adds, edits,
//! renames, deletes, symlink flips, bursts of many changes at once) are made to a tree while a
//! server with its file watcher serves it; then the server's `/skills`, `/manifest` and budgeted
//! loads must equal nagents' answers for the final tree, and its whole `/skills` body (every
//! skill's tag, so every file's digest) and every file listing must equal those of a server
//! started fresh on that tree (a full walk). The first source's bounds are drawn small, so that
//! the entry or depth bound cuts the walk and a change early in walk order moves the bound for
//! everything after it. The server is run without the periodic rescan: only the rescans of the
//! changes the watcher named bring it there.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use skillcat::catalog::LiveOptions;

use crate::reference::run_reference;
use crate::support::conformance::{case_sources, describe_difference};
use crate::support::nagents;
use crate::support::server::TestApp;
use crate::support::tree::CaseRoot;

/// A small deterministic generator (xorshift64*), so a failing sequence reproduces from its seed.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % bound
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Where skills live: every leaf name once, so that a root never holds two skills of one name
/// (which nagents reports as a failed source); the same position under the other root shadows.
const FOLDERS: [&str; 10] = ["s1", "s2", "s3", "g", "g/s4", "g/s5", "g/h", "g/h/s6", "m", "m/s7"];

const TEXTS: [&str; 6] = [
    "---\ndescription: First version.\n---\nBody one.\n",
    "---\ndescription: Second version, longer.\n---\n# Heading\n\nBody two with more words in it.\n",
    "---\ndescription: \"Quoted: yes\"\n---\nBody three.\n",
    "No frontmatter at all; the fallback description applies.\n",
    "---\nname: not valid!\n---\nInvalid name.\n",
    "---\ndescription: Version with a $other reference.\n---\nSee $s1 and $g.\n",
];

/// What is at a path relative to the case root `T`.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Folder,
    Text(String),
    Link(String),
}

/// The tree as the changes left it, mirrored on disk.
struct Tree<'a> {
    root: &'a CaseRoot,
    nodes: BTreeMap<String, Node>,
}

impl Tree<'_> {
    fn disk(&self, relative: &str) -> std::path::PathBuf {
        Path::new(&self.root.root_path(relative)).to_path_buf()
    }

    fn make_folders(&mut self, relative: &str) {
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

    fn write(&mut self, relative: &str, text: &str) {
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
        let on_disk = target.replace("$T", self.root.path_str());
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
    fn change(&mut self, random: &mut Random) {
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
    fn entries(&self) -> Vec<Value> {
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

/// A skill entry of `GET /skills` as nagents' triple.
fn triple(entry: &Value) -> Value {
    json!([entry["name"], entry["description"], entry["location"]])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_random_churn_the_live_catalog_equals_nagents_and_a_full_walk() {
    let Some(python) = nagents::python("churn::after_random_churn_the_live_catalog_equals_nagents_and_a_full_walk")
    else {
        return;
    };
    let mut cases = Vec::new();
    let mut answers = Vec::new();
    let mut incremental = 0;
    for seed in 1..=10u64 {
        let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let root = CaseRoot::new().expect("case root");
        let mut tree = Tree { root: &root, nodes: BTreeMap::new() };
        tree.make_folders("r0");
        tree.make_folders("r1");
        for _ in 0..8 {
            tree.change(&mut random);
        }
        let first = json!({"roots": ["r0"], "max_entries": *random.pick(&[6u64, 11, 18, 10_000]), "max_depth": *random.pick(&[1u64, 2, 16])});
        let case_shape = json!({"entries": [], "sources": [first, {"roots": ["r1"]}], "token_limits": [3]});
        let sources = case_sources(&root, &case_shape);
        let live = TestApp::spawn_with(sources.clone(), |options| {
            options.live = LiveOptions { rescan_interval: None, watch: true };
        })
        .await;
        for _ in 0..6 {
            for _ in 0..=random.below(5) {
                tree.change(&mut random);
            }
            // Sometimes a pause, so that rescans run between the bursts and not only after.
            tokio::time::sleep(Duration::from_millis(*random.pick(&[0u64, 0, 3, 20]))).await;
        }
        let mut case = case_shape.clone();
        case["entries"] = json!(tree.entries());
        // The server settles on the final tree: wait until a full walk's answer is served, then
        // for quiet (no rescan for a while).
        let fresh = TestApp::spawn_with(sources, |options| {
            options.live = LiveOptions { rescan_interval: None, watch: false };
        })
        .await;
        let expected_body = fresh.skills().await.text().await.expect("body");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut body = String::new();
        while tokio::time::Instant::now() < deadline {
            body = live.skills().await.text().await.expect("body");
            if body == expected_body {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut answer = json!({"seed": seed});
        answer["body"] = json!(body);
        answer["fresh_body"] = json!(expected_body);
        let listed: Value = serde_json::from_str(&body).expect("a catalog");
        answer["skills"] = json!(listed["skills"].as_array().into_iter().flatten().map(triple).collect::<Vec<_>>());
        answer["shadowed"] = listed["shadowed"].clone();
        answer["diagnostics"] = listed["diagnostics"].clone();
        answer["manifest"] = json!(live.manifest().await.text().await.expect("manifest"));
        let mut loads = Vec::new();
        let mut files = Vec::new();
        for entry in listed["skills"].as_array().into_iter().flatten() {
            let name = entry["name"].as_str().expect("name");
            for limit in [10_000, 3] {
                let load: Value =
                    live.load(name, Some(json!({"token_limit": limit}))).await.json().await.expect("load");
                loads.push(json!({"name": name, "token_limit": limit, "result": load}));
            }
            let path = format!("/skills/{name}/files");
            let mine = live.get(&path).send().await.expect("files").text().await.expect("text");
            let theirs = fresh.get(&path).send().await.expect("files").text().await.expect("text");
            files.push((name.to_owned(), mine, theirs));
        }
        answer["loads"] = json!(loads);
        answer["files"] = json!(files);
        incremental += live.metric("skillcat_directory_scans_total{kind=\"incremental\"}").await;
        assert_eq!(live.metric("skillcat_rescan_disagreements_total").await, 0);
        cases.push(case);
        answers.push(root.relative(answer));
        live.shutdown().await.expect("clean shutdown");
        fresh.shutdown().await.expect("clean shutdown");
    }
    assert!(incremental >= 30, "the changes were rescanned from the picture ({incremental} rescans)");
    let reference = run_reference(&python, "cases", &json!(cases));
    let mut failures = Vec::new();
    let mut skills_seen = 0;
    let mut diagnostics_seen = 0;
    for (index, (answer, expected)) in answers.iter().zip(reference.as_array().expect("results")).enumerate() {
        let seed = &answer["seed"];
        let mut differences = Vec::new();
        let at = |what: &str| format!("seed {seed}: {what}");
        if answer["body"] != answer["fresh_body"] {
            differences.push(at("GET /skills differs from a full walk's"));
        }
        for (name, mine, theirs) in
            serde_json::from_value::<Vec<(String, String, String)>>(answer["files"].clone()).expect("file listings")
        {
            if mine != theirs {
                differences.push(at(&format!("the files of {name} differ from a full walk's")));
            }
        }
        assert!(expected["composite"]["error"].is_null(), "seed {seed}: nagents failed: {}", expected["composite"]);
        describe_difference(&expected["composite"]["skills"], &answer["skills"], &at("skills"), &mut differences);
        let shadowed: Vec<Value> = expected["composite"]["shadowed"]
            .as_array()
            .expect("shadowed")
            .iter()
            .map(|entry| json!({"name": entry[0], "location": entry[1], "source": format!("$T/r{}", entry[2])}))
            .collect();
        describe_difference(&json!(shadowed), &answer["shadowed"], &at("shadowed"), &mut differences);
        let diagnostics: Vec<Value> = expected["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .enumerate()
            .flat_map(|(source, result)| {
                result["diagnostics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |message| json!({"source": format!("$T/r{source}"), "message": message}))
            })
            .collect();
        describe_difference(&json!(diagnostics), &answer["diagnostics"], &at("diagnostics"), &mut differences);
        describe_difference(&expected["manifest"], &answer["manifest"], &at("manifest"), &mut differences);
        describe_difference(&expected["loads"], &answer["loads"], &at("loads"), &mut differences);
        skills_seen += answer["skills"].as_array().map_or(0, Vec::len);
        diagnostics_seen += diagnostics.len();
        if !differences.is_empty() {
            failures.push(format!("case {index}:\n{}\n  case: {}", differences.join("\n"), cases[index]));
        }
    }
    eprintln!("churn: {skills_seen} skills, {diagnostics_seen} diagnostics, {incremental} rescans from the picture");
    assert!(skills_seen >= 30 && diagnostics_seen >= 5, "the churn exercises too little");
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n\n"));
}

/// Two sources over the same two roots, in the two orders: every skill of the second is shadowed
/// by the first, and a name under both roots is a duplicate inside each, so that many states of
/// the churn fail (nagents' `skill_catalog`) and the rescans after them must still see every
/// change since the last good one. After random churn the live catalog equals a fresh server's (a
/// full walk) — or, when the final tree itself fails, serves its last good catalog with that
/// failure. It never keeps a skill that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sources_after_churn_equal_a_full_walk() {
    let mut failures = Vec::new();
    let (mut good, mut failing) = (0, 0);
    for seed in 1..=16u64 {
        let mut random = Random(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
        let root = CaseRoot::new().expect("case root");
        let mut tree = Tree { root: &root, nodes: BTreeMap::new() };
        tree.make_folders("r0");
        tree.make_folders("r1");
        for _ in 0..8 {
            tree.change(&mut random);
        }
        let case = json!({"sources": [{"roots": ["r0", "r1"]}, {"roots": ["r1", "r0"]}]});
        let sources = case_sources(&root, &case);
        let live = TestApp::spawn_with(sources.clone(), |options| {
            options.live = LiveOptions { rescan_interval: None, watch: true };
        })
        .await;
        for _ in 0..40 {
            tree.change(&mut random);
            tokio::time::sleep(Duration::from_millis(*random.pick(&[0u64, 0, 2, 10]))).await;
        }
        let fresh = TestApp::spawn_with(sources, |options| {
            options.live = LiveOptions { rescan_interval: None, watch: false };
        })
        .await;
        let expected = fresh.skills().await;
        let expected_status = expected.status().as_u16();
        let expected_body = expected.text().await.expect("body");
        let fails = expected_status != 200;
        let detail = if fails {
            let problem: Value = serde_json::from_str(&expected_body).expect("a problem");
            problem["detail"].as_str().expect("detail").to_owned()
        } else {
            String::new()
        };
        let settled = |body: &str| {
            if !fails {
                return body == expected_body;
            }
            // The last good catalog, carrying the failure; or no catalog at all yet.
            let listed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let message = listed["error"]["message"].as_str().or(listed["detail"].as_str());
            message.is_some_and(|message| message.starts_with(&detail))
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut body = String::new();
        while tokio::time::Instant::now() < deadline {
            body = live.skills().await.text().await.expect("body");
            if settled(&body) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if fails {
            failing += 1;
        } else {
            good += 1;
        }
        if !settled(&body) {
            failures.push(format!(
                "seed {seed}: the live catalog is not a full walk's{}\n  live:  {body}\n  fresh: {expected_body}",
                if fails { " failure" } else { "" }
            ));
        }
        live.shutdown().await.expect("clean shutdown");
        fresh.shutdown().await.expect("clean shutdown");
    }
    eprintln!("overlapping churn: {good} final trees with a catalog, {failing} failing");
    assert!(good >= 4, "too few final trees give a catalog ({good})");
    assert!(failures.is_empty(), "{} of 16 differ:\n{}", failures.len(), failures.join("\n"));
}
