//! The offline commands, run as a user runs them: the real binary on real trees.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::conformance::{case_tree, recorded, skill_triples};

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
    assert_eq!(skill_triples(&report), expected["composite"]["skills"]);
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
    // nagents' message first (it names the second skill), then the first: every command names both.
    let both = format!("{message} (the other is at {}/s/a/SKILL.md)", root.path_str());
    assert_eq!(report["error"], json!(both));
    let text = skillcat(&["check", "--no-builtin", "--dir", "s"], cwd);
    assert_eq!(text.status.code(), Some(1));
    assert!(stdout(&text).contains(&format!("error: {both}")), "{}", stdout(&text));
    for args in [&["manifest", "--no-builtin", "--dir", "s"][..], &["load", "anything", "--no-builtin", "--dir", "s"]] {
        let output = skillcat(args, cwd);
        assert_eq!(output.status.code(), Some(1));
        assert!(stderr(&output).contains(&both), "{}", stderr(&output));
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
        // The flag is named as the user wrote it, with its range (not nagents' `skill_token_limit`).
        (
            &["load", "skillcat-authoring", "--token-limit", "0"],
            2,
            "for '--token-limit <N>': expected an integer from 1 to 100000",
        ),
        (
            &["load", "skillcat-authoring", "--token-limit", "100001"],
            2,
            "for '--token-limit <N>': expected an integer from 1 to 100000",
        ),
        (
            &["load", "skillcat-authoring", "--token-limit", "1.5"],
            2,
            "for '--token-limit <N>': expected an integer from 1 to 100000",
        ),
        (&["load", "no-such-skill"], 1, "no skill named 'no-such-skill'"),
        (&["check", "--config", "missing.toml"], 1, "cannot read config file missing.toml: No such file or directory"),
        (&["serve", "--listen", "localhost"], 2, "expected IP:PORT, [IPv6]:PORT, HOST:PORT or :PORT"),
        (&["frobnicate"], 2, "unrecognized subcommand"),
    ];
    for (args, code, message) in cases {
        let output = skillcat(args, dir.path());
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(*code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("skill_token_limit"), "{args:?}: {stderr}");
        // Said once: an error that ends with its cause is not followed by the cause again.
        assert!(!stderr.contains("(os error 2): No such file"), "{args:?}: {stderr}");
    }
    // A config file's error points at the line and the key, and is said once.
    let files = [
        ("zero.toml", "max_entries = 0", "line 4, column 15", "expected a nonzero usize"),
        ("typo.toml", "max_entrie = 5", "line 4, column 1", "unknown field `max_entrie`"),
    ];
    for (name, line, place, what) in files {
        let text = format!("[[sources]]\nkind = \"directory\"\nroots = [\"a\"]\n{line}\n");
        std::fs::write(dir.path().join(name), text).expect("write");
        let output = skillcat(&["check", "--config", name], dir.path());
        let stderr = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let first = format!("skillcat: invalid config file {name}: TOML parse error at {place}\n");
        assert!(stderr.starts_with(&first), "{stderr}");
        assert_eq!(stderr.matches(what).count(), 1, "{stderr}");
        assert_eq!(stderr.matches("TOML parse error").count(), 1, "{stderr}");
    }
}

#[test]
fn the_check_table_names_each_path_once_and_counts_in_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let base = base.to_str().expect("UTF-8");
    for (folder, text) in [("s/good", "---\ndescription: Fine.\n---\n"), ("s/bad", "---\ndescription: \"open\n---\n")] {
        std::fs::create_dir_all(dir.path().join(folder)).expect("mkdir");
        std::fs::write(dir.path().join(folder).join("SKILL.md"), text).expect("write");
    }
    let args = ["check", "--no-builtin", "--dir", "s", "--dir", "missing"];
    let output = skillcat(&args, Path::new(base));
    assert_eq!(output.status.code(), Some(1));
    let expected = format!(
        "SKILL  SOURCE{pad}  DESCRIPTION\n\
         good   {base}/s  Fine.\n\
         \n\
         diagnostics (skipped):\n  \
         {base}/s\n    \
         bad/SKILL.md: unclosed description quote\n  \
         {base}/missing\n    \
         [Errno 2] No such file or directory: 'missing'\n\
         \n\
         1 skill, 0 shadowed, 2 diagnostics\n",
        pad = " ".repeat(base.len() + 2 - "SOURCE".len()),
    );
    assert_eq!(stdout(&output), expected);
    // --json keeps nagents' messages exactly, the repeated location included.
    let output = skillcat(&[&["check", "--json"][..], &args[1..]].concat(), Path::new(base));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    let bad = format!("{base}/s/bad/SKILL.md");
    assert_eq!(
        report["diagnostics"][0],
        json!({"source": format!("{base}/s"), "message": format!("{bad}: {bad}: unclosed description quote")})
    );
}

/// `init` writes a skill that passes `check --spec` (with `--full`, its stubs too, the script
/// executable), refuses a name against the specification naming the rule, and never touches an
/// existing folder.
#[test]
fn init_writes_a_skill_that_passes_the_specification() {
    let dir = tempfile::tempdir().expect("tempdir");
    let into = dir.path().join("skills");
    let into_arg = into.to_str().expect("UTF-8");
    let output = skillcat(&["init", "pdf-tools", "--into", into_arg], dir.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let described = "Use when: the user asks about PDFs, 'tables' included";
    let output = skillcat(&["init", "forms", "--full", "--into", into_arg, "--description", described], dir.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let output = skillcat(&["check", "--spec", "--json", "--no-builtin", "--dir", into_arg], dir.path());
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).expect("json");
    let skills = report["skills"].as_array().expect("skills");
    let described_as: Vec<(&str, &str)> =
        skills.iter().map(|s| (s["name"].as_str().expect("name"), s["description"].as_str().expect("d"))).collect();
    assert_eq!(described_as[0], ("forms", described));
    assert_eq!(described_as[1].0, "pdf-tools");
    assert!(skills.iter().all(|skill| skill["spec"] == json!([])), "{report}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(into.join("forms/scripts/example.sh")).expect("the script").permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(into.join("forms/references/REFERENCE.md").is_file());
    assert!(!into.join("pdf-tools/scripts").exists(), "stubs only with --full");
    for (name, rule) in [("PDF", "holds 'P'"), ("a--b", "two hyphens in a row"), ("-a", "hyphen"), ("", "is empty")] {
        let output = skillcat(&["init", "--into", into_arg, "--", name], dir.path());
        assert_eq!(output.status.code(), Some(1), "{name:?}");
        assert!(stderr(&output).contains(rule), "{name:?}: {}", stderr(&output));
    }
    std::fs::write(into.join("pdf-tools/SKILL.md"), "mine").expect("write");
    let output = skillcat(&["init", "pdf-tools", "--into", into_arg], dir.path());
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("already exists"), "{}", stderr(&output));
    assert_eq!(std::fs::read(into.join("pdf-tools/SKILL.md")).expect("read"), b"mine");
    let leftovers: Vec<_> =
        std::fs::read_dir(dir.path()).expect("read").map(|entry| entry.expect("entry").file_name()).collect();
    assert_eq!(leftovers, ["skills"], "no staging folder is left");
}
