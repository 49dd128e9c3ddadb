//! Fixture trees described as in `tests/conformance/FORMAT.md`, and skillcat's results on them in
//! the shape of `expected.json`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use skillcat::config::SourceConfig;
use skillcat_core::{
    CompositeSkillDiscoverer, DEFAULT_SKILL_TOKEN_LIMIT, DirectorySkillDiscoverer, Skill, SkillDiscoverer, TokenLimit,
    budget_skill_content, render_skill_manifest,
};

use super::tree::{self, CaseRoot};

pub fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// `tests/conformance/<name>`, parsed.
pub fn read_json(name: &str) -> Value {
    let path = conformance_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// A conformance case's tree (`tests/conformance/cases.json`), built in a fresh case root.
pub fn case_tree(name: &str) -> (CaseRoot, Value) {
    let cases = read_json("cases.json");
    let case = cases["cases"].as_array().expect("cases").iter().find(|case| case["name"] == name).expect("case");
    let root = CaseRoot::new().expect("case root");
    tree::build(&root, case["entries"].as_array().expect("entries")).expect("tree");
    (root, case.clone())
}

/// nagents' recorded result for a case (`tests/conformance/expected.json`).
pub fn recorded(name: &str) -> Value {
    let expected = read_json("expected.json");
    assert_eq!(expected["nagents"], "0.25.2", "expected.json must be recorded with nagents 0.25.2");
    expected["cases"][name].clone()
}

/// The skills of a catalog (or of `check --json`'s report) as nagents' results record them:
/// `[name, description, location]` each.
pub fn skill_triples(listing: &Value) -> Value {
    let skills = listing["skills"].as_array().expect("skills");
    skills.iter().map(|skill| json!([skill["name"], skill["description"], skill["location"]])).collect()
}

fn triple(skill: &Skill) -> Value {
    json!([skill.name().as_str(), skill.description(), skill.location()])
}

/// The message nagents raises for bounds its constructor refuses; skillcat's types cannot hold them.
const INVALID_LIMITS: &str = "max_entries must be positive and max_depth nonnegative";

/// Builds the source a case describes, or nagents' constructor error for impossible bounds.
fn directory_source(root: &CaseRoot, source: &Value) -> Result<DirectorySkillDiscoverer, String> {
    let roots: Vec<std::ffi::OsString> = source["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|relative| root.root_path(relative.as_str().expect("root is a string")))
        .collect();
    let max_entries = source.get("max_entries").map_or(Some(10_000), |value| value.as_u64().filter(|n| *n >= 1));
    let max_depth = source.get("max_depth").map_or(Some(16), Value::as_u64);
    match (max_entries.and_then(|n| std::num::NonZeroUsize::new(n as usize)), max_depth) {
        (Some(max_entries), Some(max_depth)) => {
            Ok(DirectorySkillDiscoverer::with_limits(roots, max_entries, max_depth as usize).expect("absolute roots"))
        }
        _ => Err(INVALID_LIMITS.to_owned()),
    }
}

/// skillcat's result for a case, in the shape of one value of `expected.json`'s `cases`.
pub async fn run_case(root: &CaseRoot, case: &Value) -> Value {
    let sources = case["sources"].as_array().cloned().unwrap_or_default();
    let mut per_source = Vec::new();
    let mut discoverers: Vec<Result<DirectorySkillDiscoverer, String>> = Vec::new();
    for source in &sources {
        let result = match directory_source(root, source) {
            Ok(discoverer) => match discoverer.scan().await {
                Ok(discovery) => json!({
                    "skills": discovery.skills.iter().map(triple).collect::<Vec<_>>(),
                    "diagnostics": discovery.diagnostics,
                    "error": null,
                }),
                Err(error) => json!({"skills": [], "diagnostics": [], "error": error.to_string()}),
            },
            Err(error) => json!({"skills": [], "diagnostics": [], "error": error}),
        };
        per_source.push(result);
        discoverers.push(directory_source(root, source));
    }
    let failure = |error: String, per_source: Vec<Value>| {
        json!({
            "sources": per_source,
            "composite": {"skills": [], "shadowed": [], "error": error},
            "manifest": null,
            "loads": [],
        })
    };
    let mut composite_sources: Vec<Arc<dyn SkillDiscoverer>> = Vec::new();
    for discoverer in discoverers {
        match discoverer {
            Ok(discoverer) => composite_sources.push(Arc::new(discoverer)),
            Err(error) => return root.relative(failure(error, per_source)),
        }
    }
    let composite = CompositeSkillDiscoverer::new(composite_sources);
    let discovery = match composite.scan_sources().await {
        Ok(discovery) => discovery,
        Err(error) => return root.relative(failure(error.to_string(), per_source)),
    };
    let skills: Vec<&Skill> = discovery.skills.iter().map(|entry| &entry.skill).collect();
    let mut limits = vec![u64::from(DEFAULT_SKILL_TOKEN_LIMIT)];
    limits.extend(case["token_limits"].as_array().into_iter().flatten().map(|limit| limit.as_u64().expect("limit")));
    let mut loads = Vec::new();
    for skill in &skills {
        for &limit in &limits {
            let content = composite.load(skill).await.expect("a discovered skill loads");
            let result = budget_skill_content(skill, &content, TokenLimit::new(limit).expect("valid limit"));
            loads.push(json!({"name": skill.name().as_str(), "token_limit": limit, "result": result}));
        }
    }
    root.relative(json!({
        "sources": per_source,
        "composite": {
            "skills": skills.iter().map(|skill| triple(skill)).collect::<Vec<_>>(),
            "shadowed": discovery.shadowed.iter().map(|entry| json!([entry.skill.name().as_str(), entry.skill.location(), entry.source])).collect::<Vec<_>>(),
            "error": null,
        },
        "manifest": render_skill_manifest(skills.iter().copied()),
        "loads": loads,
    }))
}

/// Builds a case's tree in a fresh case root and runs skillcat on it.
pub fn evaluate(case: &Value) -> Value {
    let root = CaseRoot::new().expect("case root");
    tree::build(&root, case["entries"].as_array().map(Vec::as_slice).unwrap_or_default()).expect("build the case tree");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(run_case(&root, case))
}

/// A readable account of where two JSON values differ.
pub fn describe_difference(expected: &Value, actual: &Value, at: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|key| !a.contains_key(*key))) {
                let (x, y) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                describe_difference(x, y, &format!("{at}.{key}"), out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                describe_difference(x, y, &format!("{at}[{index}]"), out);
            }
        }
        (x, y) if x != y => {
            let show = |value: &Value| {
                let text = value.to_string();
                if text.len() > 600 { format!("{}…", &text[..text.floor_char_boundary(600)]) } else { text }
            };
            out.push(format!("{at}:\n    nagents:  {}\n    skillcat: {}", show(x), show(y)));
        }
        _ => {}
    }
}

/// A case's sources, in order, as the server's configuration.
pub fn case_sources(root: &CaseRoot, case: &Value) -> Vec<SourceConfig> {
    case["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|source| SourceConfig::Directory {
            name: None,
            roots: source["roots"]
                .as_array()
                .expect("roots")
                .iter()
                .map(|relative| root.root_path(relative.as_str().expect("root")).into())
                .collect(),
            max_entries: std::num::NonZeroUsize::new(source["max_entries"].as_u64().unwrap_or(10_000) as usize)
                .expect("positive"),
            max_depth: source["max_depth"].as_u64().unwrap_or(16) as usize,
        })
        .collect()
}
