//! The agentskills.io rules of `skillcat check --spec`: each rule as a table, the naming rule the
//! well-known index and MCP rely on, the command as a user runs it, and agreement with the
//! reference validator, skills-ref 0.1.1, on skills from the public collections and on our own
//! cases (tests/data/collections; what skills-ref said is recorded there by
//! scripts/compare-skills-ref, so this needs no Python).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proptest::prelude::*;
use serde_json::{Value, json};
use skillcat::spec::{self, Finding, Rule, Severity};
use skillcat_core::SkillName;
use skillcat_core::{NameProblem, SpecName};

use crate::support::skills::write_skill;

fn skillcat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillcat"))
        .args(args)
        .env_remove("SKILLCAT_CONFIG")
        .output()
        .expect("run skillcat")
}

fn collections() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/collections")
}

/// The findings as (rule, severity) pairs.
fn rules(findings: &[Finding]) -> Vec<(Rule, Severity)> {
    findings.iter().map(|finding| (finding.rule, finding.severity)).collect()
}

const E: Severity = Severity::Error;
const A: Severity = Severity::Advisory;

/// The findings a case expects: rule, severity and a part of the message, in order.
type Expected<'a> = &'a [(Rule, Severity, &'a str)];

fn assert_findings(findings: &[Finding], expected: Expected<'_>, case: &str) {
    let wanted: Vec<(Rule, Severity)> = expected.iter().map(|(rule, severity, _)| (*rule, *severity)).collect();
    assert_eq!(rules(findings), wanted, "{case}: {findings:#?}");
    for (finding, (_, _, part)) in findings.iter().zip(expected) {
        assert!(finding.message.contains(part), "{case}: {:?} lacks {part:?}", finding.message);
    }
}

/// `---`, the lines, `---`, a body.
fn with_frontmatter(lines: &str) -> String {
    format!("---\n{lines}---\n# Body\n")
}

#[test]
fn each_rule() {
    let ok = "name: pdf-tools\ndescription: Fills PDF forms. Use for PDFs.\n";
    // (frontmatter lines after name and description, findings: rule, severity, a part of the message)
    let cases: &[(&str, Expected<'_>)] = &[
        ("", &[]),
        ("license: Apache-2.0\ncompatibility: Requires git\nallowed-tools: Bash(git:*) Read\n", &[]),
        ("metadata:\n  author: example-org\n  version: \"1.0\"\n", &[]),
        // compatibility: 1-500 characters when present.
        ("compatibility: \"\"\n", &[(Rule::Compatibility, E, "compatibility is empty")]),
        (&format!("compatibility: {}\n", "c".repeat(500)), &[]),
        (&format!("compatibility: {}\n", "é".repeat(501)), &[(Rule::Compatibility, E, "has 501 characters")]),
        ("compatibility: [a, b]\n", &[(Rule::Compatibility, E, "compatibility is a list, not a string")]),
        ("compatibility: 3\n", &[(Rule::Compatibility, E, "is a number (3), not a string")]),
        // metadata: a map from strings to strings (advisory).
        ("metadata: author\n", &[(Rule::Metadata, A, "metadata is a string")]),
        ("metadata:\n", &[(Rule::Metadata, A, "metadata is empty (null)")]),
        ("metadata:\n  version: 1.0\n", &[(Rule::Metadata, A, "metadata.version is a number (1.0)")]),
        ("metadata:\n  beta: yes\n  stable: false\n", &[(Rule::Metadata, A, "metadata.stable is a boolean (false)")]),
        ("metadata:\n  tags: [a, b]\n", &[(Rule::Metadata, A, "metadata.tags is a list")]),
        ("metadata:\n  owner: {team: x}\n", &[(Rule::Metadata, A, "metadata.owner is a mapping")]),
        ("metadata:\n  1: one\n", &[(Rule::Metadata, A, "a key that is a number (1)")]),
        // allowed-tools: one space-separated string (advisory).
        ("allowed-tools:\n  - Read\n", &[(Rule::AllowedTools, A, "allowed-tools is a list")]),
        // Keys beyond the six (advisory), each named, in the file's order.
        (
            "version: 1.0\nAuthor: x\n",
            &[(Rule::UnknownKey, A, "unknown key 'version'"), (Rule::UnknownKey, A, "unknown key 'Author'")],
        ),
        // Many of one kind: the first ten, then how many more.
        (
            &(0..12).map(|n| format!("k{n}: x\n")).collect::<String>(),
            &[
                (Rule::UnknownKey, A, "'k0'"),
                (Rule::UnknownKey, A, "'k1'"),
                (Rule::UnknownKey, A, "'k2'"),
                (Rule::UnknownKey, A, "'k3'"),
                (Rule::UnknownKey, A, "'k4'"),
                (Rule::UnknownKey, A, "'k5'"),
                (Rule::UnknownKey, A, "'k6'"),
                (Rule::UnknownKey, A, "'k7'"),
                (Rule::UnknownKey, A, "'k8'"),
                (Rule::UnknownKey, A, "'k9'"),
                (Rule::UnknownKey, A, "and 2 more unknown keys like these"),
            ],
        ),
        // A frontmatter that is not YAML, or not a mapping (error).
        ("license: [MIT\n", &[(Rule::Frontmatter, E, "not valid YAML")]),
        (
            "license: MIT\nlicense: X\n",
            &[(Rule::Frontmatter, E, "the key 'license' is given twice (line 5 of SKILL.md)")],
        ),
        ("metadata:\n  a: 1\n  a: 2\n", &[(Rule::Frontmatter, E, "the key 'a' is given twice")]),
        ("\tlicense: MIT\n", &[(Rule::Frontmatter, E, "not valid YAML")]),
    ];
    for (extra, expected) in cases {
        let content = with_frontmatter(&format!("{ok}{extra}"));
        assert_findings(&spec::check_skill_md(&content, "pdf-tools"), expected, &format!("{extra:?}"));
    }
}

#[test]
fn name_and_description() {
    let cases: &[(&str, &str, Expected<'_>)] = &[
        ("name: pdf-tools\ndescription: d\n", "pdf-tools", &[]),
        ("name: \"pdf-tools\"\ndescription: 'd'\n", "pdf-tools", &[]),
        ("description: d\n", "pdf-tools", &[(Rule::Name, E, "no name")]),
        ("name: pdf-tools\n", "pdf-tools", &[(Rule::Description, E, "no description")]),
        (
            "name: pdf-tools\ndescription:\n",
            "pdf-tools",
            &[(Rule::Description, E, "description is empty (null), not a string")],
        ),
        ("name: pdf-tools\ndescription: '  '\n", "pdf-tools", &[(Rule::Description, E, "description is empty")]),
        ("name: pdf-tools\ndescription: [a]\n", "pdf-tools", &[(Rule::Description, E, "description is a list")]),
        ("name: pdf-tools\ndescription: 2024\n", "pdf-tools", &[(Rule::Description, E, "a number (2024)")]),
        // The name, then the folder: both are said when both are wrong.
        ("name: PDF\ndescription: d\n", "PDF", &[(Rule::Name, E, "'PDF' holds 'P'")]),
        (
            "name: Pdf\ndescription: d\n",
            "pdf",
            &[(Rule::Name, E, "holds 'P'"), (Rule::NameFolder, E, "name 'Pdf' is not the name of its folder, 'pdf'")],
        ),
        ("name: pdf\ndescription: d\n", "pdf-tools", &[(Rule::NameFolder, E, "its folder, 'pdf-tools'")]),
        ("name: 2048\ndescription: d\n", "2048", &[(Rule::Name, E, "name is a number (2048), not a string")]),
        ("name: '2048'\ndescription: d\n", "2048", &[]),
        ("name: [a]\ndescription: d\n", "a", &[(Rule::Name, E, "name is a list")]),
        ("name: -pdf\ndescription: d\n", "-pdf", &[(Rule::Name, E, "starts or ends with a hyphen")]),
        ("name: pdf--tools\ndescription: d\n", "pdf--tools", &[(Rule::Name, E, "two hyphens in a row")]),
        ("name: ' pdf'\ndescription: d\n", " pdf", &[(Rule::Name, E, "holds ' '")]),
        // A folded description is measured as YAML folds it.
        (&format!("name: x\ndescription: >-\n  {}\n  {}\n", "d".repeat(600), "d".repeat(423)), "x", &[]),
        (
            &format!("name: x\ndescription: >-\n  {}\n  {}\n", "d".repeat(600), "d".repeat(424)),
            "x",
            &[(Rule::Description, E, "has 1025 characters: at most 1024")],
        ),
    ];
    for (lines, folder, expected) in cases {
        let findings = spec::check_skill_md(&with_frontmatter(lines), folder);
        assert_findings(&findings, expected, &format!("{lines:?} in {folder:?}"));
    }
}

#[test]
fn where_the_frontmatter_is_and_how_long_the_file_is() {
    let lines = |n: usize| "line\n".repeat(n);
    let frontmatter = "---\nname: x\ndescription: d\n---\n";
    let cases: Vec<(String, Vec<(Rule, &str)>)> = vec![
        ("# Plain Markdown\n".to_owned(), vec![(Rule::Frontmatter, "no YAML frontmatter")]),
        (String::new(), vec![(Rule::Frontmatter, "no YAML frontmatter")]),
        ("---\nname: x\n".to_owned(), vec![(Rule::Frontmatter, "no closing `---` line")]),
        ("---\n---\n".to_owned(), vec![(Rule::Frontmatter, "the frontmatter is empty")]),
        ("---\n# only a comment\n---\n".to_owned(), vec![(Rule::Frontmatter, "the frontmatter is empty")]),
        ("---\n- a\n---\n".to_owned(), vec![(Rule::Frontmatter, "is a list, not a mapping")]),
        ("---\njust text\n---\n".to_owned(), vec![(Rule::Frontmatter, "is a string, not a mapping")]),
        // Found as nagents finds it: surrounding blanks on the first line, trailing ones on the
        // last, Python's line breaks.
        ("  ---  \r\nname: x\r\ndescription: d\r\n---   \r\n".to_owned(), vec![]),
        ("---\u{2028}name: x\u{2028}description: d\u{2028}---\u{2028}".to_owned(), vec![]),
        // A `---` inside a value does not end the frontmatter; only a line of its own does.
        ("---\nname: x\ndescription: \"a --- b\"\n---\n".to_owned(), vec![]),
        // A YAML error is placed on the line of the file where it is (the unclosed quote, line 4).
        (
            "---\nname: x\ndescription: d\nlicense: 'MIT\n---\n".to_owned(),
            vec![(Rule::Frontmatter, "line 4 of SKILL.md")],
        ),
        // Over 500 lines is advisory; 500 is not over.
        (format!("{frontmatter}{}", lines(496)), vec![]),
        (format!("{frontmatter}{}", lines(497)), vec![(Rule::Lines, "SKILL.md has 501 lines")]),
        (format!("# Plain\n{}", lines(600)), vec![(Rule::Frontmatter, ""), (Rule::Lines, "601 lines")]),
    ];
    for (content, expected) in cases {
        let findings = spec::check_skill_md(&content, "x");
        let found: Vec<Rule> = findings.iter().map(|finding| finding.rule).collect();
        assert_eq!(found, expected.iter().map(|(rule, _)| *rule).collect::<Vec<_>>(), "{content:?}: {findings:#?}");
        for (finding, (_, part)) in findings.iter().zip(&expected) {
            assert!(finding.message.contains(part), "{content:?}: {:?} lacks {part:?}", finding.message);
        }
    }
}

#[test]
fn each_rule_has_one_severity() {
    let errors = [Rule::Frontmatter, Rule::Name, Rule::NameFolder, Rule::Description, Rule::Compatibility, Rule::Read];
    let advisories = [Rule::Metadata, Rule::AllowedTools, Rule::UnknownKey, Rule::Lines];
    for rule in errors {
        assert_eq!(rule.severity(), Severity::Error, "{rule:?}");
    }
    for rule in advisories {
        assert_eq!(rule.severity(), Severity::Advisory, "{rule:?}");
    }
    assert_eq!(
        serde_json::to_value(Finding::new(Rule::NameFolder, "m")).unwrap(),
        json!({
            "rule": "name-folder", "severity": "error", "message": "m"
        })
    );
}

#[test]
fn the_naming_rule() {
    for name in ["a", "pdf", "pdf-tools", "a1-b2-c3", "2048", &"a".repeat(64)] {
        assert!(spec::is_valid_name(name), "{name}");
        assert_eq!(SpecName::parse(name).unwrap().as_str(), name);
    }
    let long = "a".repeat(65);
    let cases = [
        ("", NameProblem::Empty, "'' is empty"),
        (long.as_str(), NameProblem::TooLong { chars: 65 }, "is 65 characters long: at most 64 are allowed"),
        (
            "Pdf",
            NameProblem::Character { found: 'P' },
            "'Pdf' holds 'P': only lowercase letters a-z, digits and hyphens",
        ),
        ("pdf_tools", NameProblem::Character { found: '_' }, "holds '_'"),
        ("pdf tools", NameProblem::Character { found: ' ' }, "holds ' '"),
        // The specification's letters are a-z: other lowercase letters are refused.
        ("café", NameProblem::Character { found: 'é' }, "holds 'é'"),
        ("ǆ", NameProblem::Character { found: 'ǆ' }, "holds 'ǆ'"),
        ("-pdf", NameProblem::EdgeHyphen, "'-pdf' starts or ends with a hyphen"),
        ("pdf-", NameProblem::EdgeHyphen, "starts or ends with a hyphen"),
        ("-", NameProblem::EdgeHyphen, "starts or ends with a hyphen"),
        ("pdf--tools", NameProblem::DoubleHyphen, "'pdf--tools' has two hyphens in a row"),
    ];
    for (name, problem, message) in cases {
        assert!(!spec::is_valid_name(name), "{name}");
        let error = SpecName::parse(name).unwrap_err();
        assert_eq!(error.problem(), &problem, "{name}");
        assert!(error.to_string().contains(message), "{name}: {error}");
    }
    // Deserialized, a name is checked too.
    assert_eq!(serde_json::from_value::<SpecName>(json!("pdf-tools")).unwrap().as_str(), "pdf-tools");
    assert_eq!(serde_json::to_value(SpecName::parse("pdf-tools").unwrap()).unwrap(), json!("pdf-tools"));
    let error = serde_json::from_value::<SpecName>(json!("PDF")).unwrap_err().to_string();
    assert!(error.contains("'PDF' holds 'P'"), "{error}");
    // A name of any length is cut in the message.
    let error = SpecName::parse(&"A".repeat(10_000)).unwrap_err();
    assert!(error.to_string().chars().count() < 200, "{error}");
}

proptest! {
    /// Every name the well-known index and MCP publish is one nagents serves too.
    #[test]
    fn spec_names_are_catalog_names(name in "[a-z0-9-]{1,70}|\\PC{0,8}") {
        if let Ok(spec_name) = SpecName::parse(&name) {
            prop_assert!(SkillName::parse(spec_name.as_str()).is_ok());
        }
    }

    /// Any frontmatter text gives findings, never a panic.
    #[test]
    fn any_frontmatter_is_checked(text in "[-a-z:{}\\[\\]&*!|>'\" \n\t#,.0-9]{0,200}") {
        let findings = spec::check_skill_md(&format!("---\n{text}\n---\n"), "x");
        prop_assert!(findings.iter().all(|finding| !finding.message.is_empty()));
    }
}

/// `check --spec --json` over one folder of skills: the report.
fn check_spec_json(dir: &Path) -> (Value, Option<i32>) {
    let output = skillcat(&["check", "--spec", "--json", "--no-builtin", "--dir", dir.to_str().expect("UTF-8 path")]);
    let report = serde_json::from_slice(&output.stdout).expect("JSON");
    (report, output.status.code())
}

/// The recorded expectations: skills-ref 0.1.1's findings as rules (all errors), with the known
/// differences applied. `None`: skillcat's catalog does not hold the skill.
fn expected_rules(entry: &Value) -> Option<BTreeMap<String, String>> {
    let mut rules: BTreeMap<String, String> = entry["skills_ref"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|rule| (rule.as_str().expect("rule").to_owned(), "error".to_owned()))
        .collect();
    for difference in entry["differences"].as_array().expect("differences") {
        assert!(
            difference["why"].as_str().is_some_and(|why| !why.is_empty()),
            "a recorded difference without an explanation: {difference}"
        );
        let rule = difference["rule"].as_str().expect("rule");
        if rule == "catalog" {
            return None;
        }
        match difference["skillcat"].as_str() {
            Some(severity) => rules.insert(rule.to_owned(), severity.to_owned()),
            None => rules.remove(rule),
        };
    }
    Some(rules)
}

#[test]
fn skillcat_agrees_with_skills_ref_but_for_the_explained_differences() {
    let root = collections();
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("skills-ref.json")).expect("skills-ref.json"))
            .expect("JSON");
    assert_eq!(recorded["skills_ref_version"], "0.1.1");
    let mut by_collection: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for entry in recorded["skills"].as_array().expect("skills") {
        by_collection.entry(entry["collection"].as_str().expect("collection")).or_default().push(entry);
    }
    // Every collection folder is recorded (a new one needs the script run).
    let folders: Vec<String> = std::fs::read_dir(&root)
        .expect("collections")
        .map(|entry| entry.expect("entry"))
        .filter(|entry| entry.file_type().expect("type").is_dir())
        .map(|entry| entry.file_name().into_string().expect("UTF-8"))
        .collect();
    let mut folders = folders;
    folders.sort();
    assert_eq!(folders, by_collection.keys().copied().collect::<Vec<_>>());

    let mut checked = 0;
    for (collection, entries) in &by_collection {
        let dir = root.join(collection);
        let (report, code) = check_spec_json(&dir);
        assert_eq!(report["error"], Value::Null, "{collection}");
        let mut served: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut any_error = false;
        for skill in report["skills"].as_array().expect("skills") {
            let location = skill["location"].as_str().expect("location");
            let folder = Path::new(location).parent().expect("folder").strip_prefix(&dir).expect("beneath");
            let mut rules = BTreeMap::new();
            for finding in skill["spec"].as_array().expect("spec") {
                let severity = finding["severity"].as_str().expect("severity").to_owned();
                any_error |= severity == "error";
                // A rule reported as an error and as an advisory counts as an error.
                let rule = rules.entry(finding["rule"].as_str().expect("rule").to_owned()).or_insert(severity.clone());
                if severity == "error" {
                    *rule = severity;
                }
            }
            served.insert(folder.to_str().expect("UTF-8").to_owned(), rules);
        }
        let diagnostics = report["diagnostics"].as_array().expect("diagnostics");
        for entry in entries {
            let folder = entry["folder"].as_str().expect("folder");
            match expected_rules(entry) {
                Some(rules) => {
                    assert_eq!(served.remove(folder).as_ref(), Some(&rules), "{collection}/{folder}");
                    checked += 1;
                }
                None => {
                    assert!(!served.contains_key(folder), "{collection}/{folder} is served");
                    let file = dir.join(folder).join("SKILL.md");
                    let file = file.to_str().expect("UTF-8");
                    assert!(
                        diagnostics.iter().any(|d| d["message"].as_str().expect("message").contains(file)),
                        "{collection}/{folder}: no diagnostic: {diagnostics:?}"
                    );
                }
            }
        }
        assert!(served.is_empty(), "{collection}: skills without a recorded expectation: {served:?}");
        let clean = diagnostics.is_empty() && !any_error;
        assert_eq!(code, Some(if clean { 0 } else { 1 }), "{collection}");
    }
    assert!(checked >= 25, "{checked}");
}

/// skills-ref measured claude-api's description (a `|-` block, which nagents does not read, so
/// the catalog skips the skill): the same YAML reading gives the same length.
#[test]
fn a_block_description_is_measured_as_skills_ref_measures_it() {
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(collections().join("skills-ref.json")).expect("skills-ref.json"))
            .expect("JSON");
    let entry = recorded["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .find(|entry| entry["folder"] == "skills/claude-api")
        .expect("claude-api");
    let said = entry["skills_ref"]["messages"][0].as_str().expect("message");
    assert!(said.starts_with("Description exceeds 1024 character limit (1068 chars)"), "{said}");
    let content =
        std::fs::read_to_string(collections().join("anthropics-skills/skills/claude-api/SKILL.md")).expect("SKILL.md");
    let findings = spec::check_skill_md(&content, "claude-api");
    let description = findings.iter().find(|finding| finding.rule == Rule::Description).expect("a description finding");
    assert!(description.message.contains("has 1068 characters"), "{description:?}");
}

#[test]
fn check_spec_as_a_user_runs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_str().expect("UTF-8");
    let good = "---\nname: pdf-tools\ndescription: Fills PDF forms.\n---\n# PDF\n";
    write_skill(&dir.path().join("pdf-tools"), good);
    write_skill(
        &dir.path().join("notes"),
        "---\nname: notes\ndescription: Takes notes.\nauthor: me\nmetadata:\n  version: 2\n---\n# Notes\n",
    );

    // Advisories alone do not fail the check.
    let output = skillcat(&["check", "--spec", "--no-builtin", "--dir", root]);
    let table = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(output.status.code(), Some(0), "{table}");
    assert!(
        table.contains("agentskills.io specification:\n  notes\n    advisory  metadata     metadata.version"),
        "{table}"
    );
    assert!(table.contains("    advisory  unknown-key  unknown key 'author'"), "{table}");
    assert!(
        table.contains("2 skills checked against the agentskills.io specification: 0 with errors, 1 with advisories only, 1 following every rule"),
        "{table}"
    );

    // Without --spec the output is what it was: no section, no `spec` field.
    let output = skillcat(&["check", "--no-builtin", "--dir", root]);
    assert!(!String::from_utf8(output.stdout).expect("UTF-8").contains("agentskills.io"));
    let output = skillcat(&["check", "--json", "--no-builtin", "--dir", root]);
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(report["skills"].as_array().expect("skills").iter().all(|skill| skill.get("spec").is_none()), "{report}");

    // An error fails it, and the catalog is the one `check --json` gives, findings aside.
    write_skill(&dir.path().join("pdf"), "---\nname: pdf-kit\ndescription: Merges PDFs.\n---\n");
    let (mut report, code) = check_spec_json(dir.path());
    assert_eq!(code, Some(1));
    let pdf = report["skills"].as_array().expect("skills").iter().find(|skill| skill["name"] == "pdf-kit");
    assert_eq!(
        pdf.expect("pdf-kit")["spec"],
        json!([{"rule": "name-folder", "severity": "error", "message": "name 'pdf-kit' is not the name of its folder, 'pdf'"}])
    );
    for skill in report["skills"].as_array_mut().expect("skills") {
        skill.as_object_mut().expect("object").remove("spec");
    }
    let output = skillcat(&["check", "--json", "--no-builtin", "--dir", root]);
    assert_eq!(report, serde_json::from_slice::<Value>(&output.stdout).expect("JSON"));
}

#[test]
fn the_builtin_skills_follow_every_rule() {
    let output = skillcat(&["check", "--spec", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    for skill in report["skills"].as_array().expect("skills") {
        assert_eq!(skill["spec"], json!([]), "{}", skill["name"]);
    }
}

#[test]
fn a_folder_over_the_bounds_on_files_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big");
    std::fs::create_dir_all(big.join("data")).expect("folder");
    std::fs::write(big.join("SKILL.md"), with_frontmatter("name: big\ndescription: Too many files.\n")).expect("write");
    for index in 0..skillcat_core::MAX_SKILL_FILES {
        std::fs::write(big.join(format!("data/{index:04}.txt")), "x").expect("write");
    }
    let (report, code) = check_spec_json(dir.path());
    assert_eq!(code, Some(1), "{report}");
    let findings = &report["skills"][0]["spec"];
    let files = findings.as_array().expect("findings").iter().find(|finding| finding["rule"] == "files");
    let files = files.unwrap_or_else(|| panic!("no files finding: {findings}"));
    assert_eq!(files["severity"], "error");
    assert!(files["message"].as_str().expect("message").contains("512"), "{files}");
    // Within the bound, no such finding.
    std::fs::remove_file(big.join("data/0000.txt")).expect("remove");
    let (report, code) = check_spec_json(dir.path());
    assert_eq!(code, Some(0), "{report}");
}
