//! The offline commands, run as a user runs them: the real binary on real trees.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::conformance::{case_tree, recorded};

fn skillcat(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args(args)
        .current_dir(cwd)
        .env_remove("SKILLCAT_CONFIG")
        .output()
        .expect("run skillcat")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn builtin_skills_are_served_by_default_and_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = skillcat(&["check", "--json"], dir.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    let names: Vec<&str> =
        report["skills"].as_array().expect("skills").iter().map(|s| s["name"].as_str().expect("name")).collect();
    assert!(names.contains(&"skillcat-authoring") && names.contains(&"skillcat-consuming"), "{names:?}");
    for skill in report["skills"].as_array().expect("skills") {
        let name = skill["name"].as_str().expect("name");
        // The Agent Skills spec: lowercase letters, digits and hyphens, equal to the folder.
        assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{name}");
        assert_eq!(skill["location"], format!("builtin:{name}/SKILL.md"));
        assert_eq!(skill["source"], "builtin");
    }
    assert_eq!(report["diagnostics"], json!([]));
    assert_eq!(report["error"], Value::Null);
}

#[test]
fn manifest_and_load_are_nagents_bytes() {
    let (root, case) = case_tree("budget-multibyte-cuts");
    let expected = recorded("budget-multibyte-cuts");
    let source = root.path_str().to_owned() + "/" + case["sources"][0]["roots"][0].as_str().expect("root");
    let output = skillcat(&["manifest", "--no-builtin", "--dir", &source], Path::new("/"));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(root.relative(json!(stdout(&output))), expected["manifest"]);
    for load in expected["loads"].as_array().expect("loads") {
        let (name, limit) = (load["name"].as_str().expect("name"), load["token_limit"].to_string());
        let output =
            skillcat(&["load", name, "--token-limit", &limit, "--no-builtin", "--dir", &source], Path::new("/"));
        assert!(output.status.success(), "{}", stderr(&output));
        let result: Value = serde_json::from_str(&stdout(&output)).expect("json");
        assert_eq!(root.relative(result), load["result"], "load {name} {limit}");
    }
}

#[test]
fn check_reports_shadowed_and_diagnostics_and_fails() {
    let (root, _) = case_tree("dup-across-sources");
    let expected = recorded("dup-across-sources");
    let base = root.path_str();
    let args = ["check", "--json", "--no-builtin", "--dir", "a", "--dir", "b", "--dir", "c"];
    let output = skillcat(&args, Path::new(base));
    let report: Value = root.relative(serde_json::from_str(&stdout(&output)).expect("json"));
    let names: Vec<Value> = report["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| json!([s["name"], s["description"], s["location"]]))
        .collect();
    assert_eq!(json!(names), expected["composite"]["skills"]);
    let shadowed: Vec<Value> =
        report["shadowed"].as_array().expect("shadowed").iter().map(|s| json!([s["name"], s["location"]])).collect();
    let wanted: Vec<Value> =
        expected["composite"]["shadowed"].as_array().expect("shadowed").iter().map(|s| json!([s[0], s[1]])).collect();
    assert_eq!(shadowed, wanted);
    assert!(!shadowed.is_empty());
    let clean = report["diagnostics"].as_array().expect("diagnostics").is_empty();
    assert_eq!(output.status.success(), clean);

    let table = skillcat(&args[..1].iter().chain(&args[2..]).copied().collect::<Vec<_>>(), Path::new(base));
    let text = stdout(&table);
    assert!(text.contains("shadowed") && text.contains("SKILL"), "{text}");
}

#[test]
fn a_diagnostic_fails_check() {
    let (root, _) = case_tree("file-size-limit");
    let output = skillcat(&["check", "--no-builtin", "--dir", "s"], Path::new(root.path_str()));
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("SKILL.md exceeds 4000000 bytes"), "{}", stdout(&output));
}

#[test]
fn a_source_error_prints_nagents_message_and_exits_1() {
    let (root, _) = case_tree("dup-same-source");
    let message =
        recorded("dup-same-source")["sources"][0]["error"].as_str().expect("error").replace("$T", root.path_str());
    let cwd = Path::new(root.path_str());
    let check = skillcat(&["check", "--json", "--no-builtin", "--dir", "s"], cwd);
    assert_eq!(check.status.code(), Some(1));
    let report: Value = serde_json::from_str(&stdout(&check)).expect("json");
    assert_eq!(report["error"], json!(message));
    for args in [&["manifest", "--no-builtin", "--dir", "s"][..], &["load", "anything", "--no-builtin", "--dir", "s"]] {
        let output = skillcat(args, cwd);
        assert_eq!(output.status.code(), Some(1));
        assert!(stderr(&output).contains(&message), "{}", stderr(&output));
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn config_file_sources_replace_flags() {
    let (root, _) = case_tree("dup-across-sources");
    let base = Path::new(root.path_str());
    std::fs::write(
        base.join("skillcat.toml"),
        "[[sources]]\nkind = \"directory\"\nname = \"second\"\nroots = [\"b\"]\n\n[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\nmax_entries = 50\nmax_depth = 4\n",
    )
    .expect("config");
    // Relative roots in a config file are relative to the file, not to the working directory.
    let output =
        skillcat(&["check", "--json", "--config", base.join("skillcat.toml").to_str().expect("path")], Path::new("/"));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    assert_eq!(report["error"], Value::Null, "{report}");
    let sources: Vec<&str> =
        report["skills"].as_array().expect("skills").iter().map(|s| s["source"].as_str().expect("source")).collect();
    assert!(sources.contains(&"second"), "{sources:?}");
    assert!(report["skills"].as_array().expect("skills").iter().all(|s| s["source"] != "builtin"));

    let conflict = skillcat(&["check", "--config", "skillcat.toml", "--dir", "a"], base);
    assert_eq!(conflict.status.code(), Some(1));
    assert!(stderr(&conflict).contains("cannot be combined"), "{}", stderr(&conflict));
}

#[test]
fn bad_invocations_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: &[(&[&str], i32, &str)] = &[
        (&["load", "bad name"], 2, "Skill name must contain"),
        (&["load", "skillcat-authoring", "--token-limit", "0"], 1, "between 1 and 100000"),
        (&["load", "skillcat-authoring", "--token-limit", "100001"], 1, "between 1 and 100000"),
        (&["load", "skillcat-authoring", "--token-limit", "1.5"], 2, "invalid value"),
        (&["load", "no-such-skill"], 1, "no skill named 'no-such-skill'"),
        (&["check", "--config", "missing.toml"], 1, "cannot read config file"),
        (&["frobnicate"], 2, "unrecognized subcommand"),
    ];
    for (args, code, message) in cases {
        let output = skillcat(args, dir.path());
        assert_eq!(output.status.code(), Some(*code), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(message), "{args:?}: {}", stderr(&output));
    }
    std::fs::write(
        dir.path().join("bad.toml"),
        "[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\nmax_entries = 0\n",
    )
    .expect("write");
    let output = skillcat(&["check", "--config", "bad.toml"], dir.path());
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("invalid config file"), "{}", stderr(&output));
}
