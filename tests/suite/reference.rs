//! skillcat against live nagents on generated inputs: random `SKILL.md` texts through the pure
//! functions, and random trees through the discoverers.
//!
//! These tests need a Python with nagents 0.25.2: `SKILLCAT_NAGENTS_PYTHON`, else `.venv/bin/python`
//! in the repository (scripts/setup-reference makes it). Without one each prints a `skipped:` line
//! and passes, unless `SKILLCAT_REQUIRE_NAGENTS=1` (scripts/test sets it), where a missing nagents
//! fails them.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use skillcat_core::{
    Skill, TokenLimit, budget_skill_content, explicit_skill_names, parse_skill_metadata, render_skill_manifest,
};

use crate::support::conformance::{conformance_dir, describe_difference, evaluate};
use crate::support::nagents;

pub(crate) fn run_reference(python: &PathBuf, mode: &str, input: &Value) -> Value {
    let script = conformance_dir().join("nagents_reference.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the nagents reference");
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write the request");
    let output = child.wait_with_output().expect("nagents reference output");
    assert!(output.status.success(), "nagents reference failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("nagents reference JSON")
}

/// Draws `count` values from `strategy` with a fixed seed, so a failure reproduces.
fn sample<S: Strategy>(strategy: S, count: usize, seed: u8) -> Vec<S::Value> {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    (0..count).map(|_| strategy.new_tree(&mut runner).expect("value").current()).collect()
}

/// Fragments that exercise every rule of the parser: delimiters, keys, quotes, indicators, every
/// Python line break, Python-only whitespace, headings and multi-byte text.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "---",
        "---",
        "--- ",
        " ---",
        "\n",
        "\n",
        "\n",
        "\r\n",
        "\r",
        "\u{b}",
        "\u{c}",
        "\u{1c}",
        "\u{1d}",
        "\u{1e}",
        "\u{1f}",
        "\u{85}",
        "\u{2028}",
        "\u{2029}",
        " ",
        "\t",
        "\u{a0}",
        "\u{3000}",
        "\u{2003}",
        "\u{feff}",
        "name",
        "name",
        "description",
        "description",
        ":",
        ":",
        ": ",
        "'",
        "\"",
        "|",
        ">",
        "{",
        "[",
        "&",
        "*",
        "!",
        "#",
        "# ",
        "x",
        "skill-a",
        "Does things.",
        "é",
        "😀",
        "中",
        "$",
        "\\",
        "a_b",
        "é$x",
        "$skill-a",
        "-",
    ])
}

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..40).prop_map(|parts| parts.concat())
}

fn long_text() -> impl Strategy<Value = String> {
    (0usize..1100, prop::sample::select(vec!["a", "é", "😀", "中 "]))
        .prop_map(|(count, unit)| format!("---\ndescription: {}\n---\n", unit.repeat(count)))
}

#[test]
fn pure_functions_match_live_nagents() {
    let Some(python) = nagents::python("reference::pure_functions_match_live_nagents") else { return };
    let texts: Vec<String> = sample(prop_oneof![4 => markdown(), 1 => long_text()], 400, 7).into_iter().collect();
    let names = sample(
        prop::sample::select(vec!["dir", "bad name", "", "x".repeat(64).leak() as &str, "a-b_c"]),
        texts.len(),
        8,
    );
    let limits = sample(prop_oneof![1u64..12, 1u64..100_001], texts.len(), 9);
    let catalogs = sample(
        prop::collection::vec(
            ("[a-z]{1,3}", prop::collection::vec(fragment(), 1..6), prop::sample::select(vec![1usize, 100, 300, 950])),
            0..80,
        ),
        40,
        10,
    );
    let catalogs: Vec<Vec<Skill>> = catalogs
        .into_iter()
        .map(|entries| {
            let mut seen = std::collections::BTreeSet::new();
            entries
                .into_iter()
                .filter(|(name, _, _)| seen.insert(name.clone()))
                .filter_map(|(name, parts, width)| {
                    let description: String = parts.concat().chars().cycle().take(width).collect();
                    Skill::new(name.clone(), description, format!("/r/{name}&'\"<>/SKILL.md")).ok()
                })
                .collect()
        })
        .collect();
    let request = json!({
        "parse": texts.iter().zip(&names).map(|(text, name)| json!([text, "/r/x/SKILL.md", name])).collect::<Vec<_>>(),
        "budget": texts.iter().zip(&limits).map(|(text, limit)| json!([text, limit])).collect::<Vec<_>>(),
        "manifest": catalogs.iter().map(|skills| skills.iter().map(|s| json!([s.name().as_str(), s.description(), s.location()])).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "references": texts,
    });
    let reference = run_reference(&python, "pure", &request);
    let outcome = |result: Result<Value, String>| match result {
        Ok(value) => json!({"ok": value}),
        Err(message) => json!({"error": message}),
    };
    let skill = Skill::new("s", "d", "loc").expect("skill");
    let mut failures = Vec::new();
    for (index, (text, name)) in texts.iter().zip(&names).enumerate() {
        let parsed = parse_skill_metadata(text, "/r/x/SKILL.md", name)
            .map(|s| json!([s.name().as_str(), s.description(), s.location()]))
            .map_err(|error| error.to_string());
        describe_difference(
            &reference["parse"][index],
            &outcome(parsed),
            &format!("parse {text:?} {name:?}"),
            &mut failures,
        );
        let budget = budget_skill_content(&skill, text, TokenLimit::new(limits[index]).expect("limit"));
        let budget = outcome(Ok(serde_json::to_value(budget).expect("json")));
        describe_difference(
            &reference["budget"][index],
            &budget,
            &format!("budget {text:?} {}", limits[index]),
            &mut failures,
        );
        let references: Vec<String> = explicit_skill_names(text).into_iter().map(String::from).collect();
        describe_difference(
            &reference["references"][index],
            &outcome(Ok(json!(references))),
            &format!("references {text:?}"),
            &mut failures,
        );
    }
    for (index, skills) in catalogs.iter().enumerate() {
        let manifest = outcome(Ok(json!(render_skill_manifest(skills))));
        describe_difference(&reference["manifest"][index], &manifest, &format!("manifest #{index}"), &mut failures);
    }
    assert!(failures.is_empty(), "{} difference(s) from nagents:\n{}", failures.len(), failures.join("\n"));
}

/// A random tree under roots `r0` and `r1`: folders, `SKILL.md` files from the fragments above,
/// other files, symlinks (inside, outside, dangling, to folders and to files) and FIFOs.
fn tree_case() -> impl Strategy<Value = Value> {
    let segment = prop::sample::select(vec!["a", "b", "B", "é", "😀", "x y", "a-b", "Zz", "_", "SKILL.md"]);
    let leaf = prop_oneof![3 => Just("SKILL.md"), 1 => prop::sample::select(vec!["skill.md", "a", "b", "README.md"])];
    let path = (prop::sample::select(vec!["r0", "r1"]), prop::collection::vec(segment, 0..3), leaf);
    let kind = prop_oneof![
        6 => markdown().prop_map(|text| json!({"text": text})),
        2 => Just(json!({"dir": true})),
        1 => prop::sample::select(vec!["$T/r1", "$T/r0/a", "../a", "SKILL.md", "missing", "/"]).prop_map(|target| json!({"symlink": target})),
        1 => Just(json!({"fifo": true})),
    ];
    let entry = (path, kind);
    let source = (
        prop::sample::select(vec![vec!["r0"], vec!["r1"], vec!["r0", "r1"], vec!["r1", "r0"], vec!["r0", "r0"]]),
        prop::option::of(1u64..40),
        prop::option::of(0u64..4),
    )
        .prop_map(|(roots, max_entries, max_depth)| {
            let mut source = json!({"roots": roots});
            if let Some(max_entries) = max_entries {
                source["max_entries"] = json!(max_entries);
            }
            if let Some(max_depth) = max_depth {
                source["max_depth"] = json!(max_depth);
            }
            source
        });
    (prop::collection::vec(entry, 0..24), prop::collection::vec(source, 1..3), prop::collection::vec(1u64..20, 0..3))
        .prop_map(|(entries, sources, token_limits)| {
            let mut made: Vec<(String, bool)> = vec![("r0".into(), true), ("r1".into(), true)];
            let mut list = vec![json!({"path": "r0", "dir": true}), json!({"path": "r1", "dir": true})];
            for ((root, folders, leaf), mut kind) in entries {
                let path = std::iter::once(root).chain(folders).chain([leaf]).collect::<Vec<_>>().join("/");
                let is_folder = kind.get("dir").is_some();
                // Each path once; nothing beneath a non-folder; no non-folder where folders are.
                let clash = made.iter().any(|(other, other_is_folder)| {
                    other == &path
                        || (!other_is_folder && path.starts_with(&format!("{other}/")))
                        || (!is_folder && other.starts_with(&format!("{path}/")))
                });
                if clash {
                    continue;
                }
                // Parents are made implicitly, as folders.
                let mut parent = path.as_str();
                while let Some((head, _)) = parent.rsplit_once('/') {
                    made.push((head.to_owned(), true));
                    parent = head;
                }
                kind["path"] = json!(path);
                made.push((path, is_folder));
                list.push(kind);
            }
            json!({"entries": list, "sources": sources, "token_limits": token_limits})
        })
}

#[test]
fn random_trees_match_live_nagents() {
    let Some(python) = nagents::python("reference::random_trees_match_live_nagents") else { return };
    let cases = sample(tree_case(), 96, 11);
    let reference = run_reference(&python, "cases", &json!(cases));
    // The sample must exercise discovery, skipping and source failure, or it proves little.
    let count = |pick: &dyn Fn(&Value) -> usize| reference.as_array().expect("results").iter().map(pick).sum::<usize>();
    let skills = count(&|result| result["composite"]["skills"].as_array().map_or(0, Vec::len));
    let diagnostics = count(&|result| {
        result["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| s["diagnostics"].as_array().map_or(0, Vec::len))
            .sum()
    });
    let errors = count(&|result| usize::from(!result["composite"]["error"].is_null()));
    eprintln!("random trees: {skills} skills, {diagnostics} diagnostics, {errors} failed composites");
    assert!(skills >= 40 && diagnostics >= 40 && errors >= 1, "the random trees exercise too little");
    let mut failures = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let actual = evaluate(case);
        let mut differences = Vec::new();
        describe_difference(&reference[index], &actual, &format!("tree #{index}"), &mut differences);
        if !differences.is_empty() {
            failures.push(format!("{}\n  case: {case}", differences.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{} tree(s) differ from nagents:\n{}", failures.len(), failures.join("\n\n"));
}
