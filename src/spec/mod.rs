//! The agentskills.io specification's rules for a skill's `SKILL.md`, as `skillcat check --spec`
//! reports them, and the reading of its whole YAML frontmatter that the catalog's publication rule
//! and the pages use. (The naming rule itself is core's `SpecName`.)
//!
//! The rules are those of <https://agentskills.io/specification> (docs/specification.mdx of
//! agentskills/agentskills, as of its main branch at 69ef37e, August 2026). Its MUSTs are errors: YAML frontmatter, a `name` of 1-64 lowercase
//! letters, digits and single inner hyphens equal to its folder's name, a `description` of
//! 1-1024 characters, a `compatibility` of 1-500. What it describes or recommends without a MUST
//! is advisory: `metadata` a map of strings to strings, `allowed-tools` one space-separated
//! string, no keys beyond the six it defines, `SKILL.md` under 500 lines.
//!
//! This is a second reading of the file beside nagents' (which reads single-line `name` and
//! `description` and nothing else, and decides the catalog): it reads the whole frontmatter as
//! YAML, and it never changes what the catalog holds.

mod json;
mod yaml;

use serde::Serialize;
use skillcat_core::{SpecName, pystr};

pub use self::json::frontmatter_json;
use self::yaml::{Entries, Node, ScalarKind};

/// A description's length bound, in characters (Unicode scalar values, as Python's `len`).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// The specification recommends keeping `SKILL.md` under this many lines.
pub const RECOMMENDED_MAX_LINES: usize = 500;
/// The frontmatter keys the specification defines.
pub const FIELDS: [&str; 6] = ["name", "description", "license", "compatibility", "metadata", "allowed-tools"];

/// Whether `name` follows the specification's naming rule (see [`SpecName`]).
pub fn is_valid_name(name: &str) -> bool {
    SpecName::parse(name).is_ok()
}

/// How much a finding says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The specification's MUST is broken: `check --spec` exits 1.
    Error,
    /// Something the specification describes or recommends without a MUST.
    Advisory,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Advisory => "advisory",
        }
    }
}

/// The rule a finding is about. Each rule has one severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// YAML frontmatter that parses as one mapping (error).
    Frontmatter,
    /// `name` present and following the naming rule (error).
    Name,
    /// `name` equal to the name of the folder holding `SKILL.md` (error).
    NameFolder,
    /// `description` present, 1-1024 characters (error).
    Description,
    /// `compatibility`, when present, 1-500 characters (error).
    Compatibility,
    /// `metadata` a map from strings to strings (advisory).
    Metadata,
    /// `allowed-tools` one space-separated string (advisory; the field is experimental).
    AllowedTools,
    /// A top-level key the specification does not define (advisory).
    UnknownKey,
    /// `SKILL.md` over 500 lines (advisory).
    Lines,
    /// `SKILL.md` could not be read again for these rules, e.g. it changed since the scan
    /// (error: nothing was checked).
    Read,
    /// The skill's folder within the bounds on files (512 files, 16 MiB in all) that the MCP
    /// skills extension and skillcat serve (error: its files are not served).
    Files,
}

impl Rule {
    pub fn severity(self) -> Severity {
        match self {
            Rule::Frontmatter
            | Rule::Name
            | Rule::NameFolder
            | Rule::Description
            | Rule::Compatibility
            | Rule::Read
            | Rule::Files => Severity::Error,
            Rule::Metadata | Rule::AllowedTools | Rule::UnknownKey | Rule::Lines => Severity::Advisory,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Frontmatter => "frontmatter",
            Rule::Name => "name",
            Rule::NameFolder => "name-folder",
            Rule::Description => "description",
            Rule::Compatibility => "compatibility",
            Rule::Metadata => "metadata",
            Rule::AllowedTools => "allowed-tools",
            Rule::UnknownKey => "unknown-key",
            Rule::Lines => "lines",
            Rule::Read => "read",
            Rule::Files => "files",
        }
    }
}

/// One thing a `SKILL.md` does against the specification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: Rule,
    pub severity: Severity,
    pub message: String,
}

impl Finding {
    pub fn new(rule: Rule, message: impl Into<String>) -> Finding {
        Finding { rule, severity: rule.severity(), message: message.into() }
    }
}

/// Checks one `SKILL.md`: `content` is the file, `folder` the name of the folder that holds it.
/// Findings come in the order of the rules above, unknown keys in the file's order.
pub fn check_skill_md(content: &str, folder: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    match frontmatter(content) {
        Ok(fields) => check_fields(&fields, folder, &mut findings),
        Err(message) => findings.push(Finding::new(Rule::Frontmatter, message)),
    }
    let lines = pystr::splitlines(content).count();
    if lines > RECOMMENDED_MAX_LINES {
        findings.push(Finding::new(
            Rule::Lines,
            format!(
                "SKILL.md has {lines} lines: the specification recommends under {RECOMMENDED_MAX_LINES}, with \
                 detail moved into files it refers to"
            ),
        ));
    }
    findings
}

/// The text of a `SKILL.md` after its frontmatter (the frontmatter found as nagents finds it: a
/// first line `---`, closed by the next line `---`); all of it when it has none.
pub fn body_after_frontmatter(content: &str) -> &str {
    let mut lines = pystr::splitlines(content);
    if lines.next().is_none_or(|first| pystr::strip(first) != "---") {
        return content;
    }
    for line in lines {
        if pystr::rstrip(line) == "---" {
            // The line is a slice of `content`: the body starts after it and its line break.
            let end = line.as_ptr() as usize - content.as_ptr() as usize + line.len();
            let rest = &content[end..];
            let after_break = rest.strip_prefix("\r\n").unwrap_or_else(|| {
                let mut chars = rest.chars();
                chars.next();
                chars.as_str()
            });
            return after_break;
        }
    }
    content
}

/// The frontmatter's top-level fields as text, for showing: each key and its value (a scalar as
/// written, a list's items joined with ", ", a mapping's entries as `key: value`), in the file's
/// order; or why there is no frontmatter to show.
pub fn frontmatter_fields(content: &str) -> Result<Vec<(String, String)>, String> {
    fn show(node: &Node) -> String {
        match node {
            Node::Scalar(scalar) => scalar.text.to_string(),
            Node::Sequence(items) => items.iter().map(|item| show(item)).collect::<Vec<_>>().join(", "),
            Node::Mapping(entries) => entries
                .iter()
                .map(|(key, value)| format!("{}: {}", key.key_text(), show(value)))
                .collect::<Vec<_>>()
                .join("; "),
            Node::Collapsed(_) => format!("({})", node.describe()),
        }
    }
    Ok(frontmatter(content)?.iter().map(|(key, value)| (key.key_text(), show(value))).collect())
}

/// The frontmatter's top-level entries. It is found as nagents finds it (a first line `---`,
/// closed by the next line `---`, Python's line breaks), so both readings agree on where it is.
fn frontmatter(content: &str) -> Result<Entries, String> {
    let text = frontmatter_text(content)?;
    let root = yaml::parse(&text).map_err(|error| {
        // The YAML's first line is the file's second.
        format!("the frontmatter is not valid YAML: {} (line {} of SKILL.md)", error.reason, error.line + 1)
    })?;
    match root.as_deref() {
        Some(Node::Mapping(entries)) => Ok(entries.clone()),
        Some(other) => Err(format!("the frontmatter is {}, not a mapping of fields", other.describe())),
        None => Err("the frontmatter is empty: it needs at least name and description".to_owned()),
    }
}

/// The frontmatter's YAML text, found as nagents finds it.
fn frontmatter_text(content: &str) -> Result<String, String> {
    let mut lines = pystr::splitlines(content);
    if lines.next().is_none_or(|first| pystr::strip(first) != "---") {
        return Err("SKILL.md has no YAML frontmatter: the specification requires one, between two `---` lines, \
                    with at least name and description"
            .to_owned());
    }
    let mut text = String::new();
    loop {
        match lines.next() {
            Some(line) if pystr::rstrip(line) == "---" => break,
            Some(line) => {
                text.push_str(line);
                text.push('\n');
            }
            None => return Err("the frontmatter has no closing `---` line".to_owned()),
        }
    }
    Ok(text)
}

fn check_fields(fields: &Entries, folder: &str, findings: &mut Vec<Finding>) {
    let field = |key: &str| fields.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, value)| &**value);

    match field("name") {
        None => findings.push(Finding::new(Rule::Name, "no name: the specification requires one")),
        Some(value) => match value.as_str() {
            None => findings.push(Finding::new(Rule::Name, format!("name is {}, not a string", value.describe()))),
            Some(name) => {
                if let Err(error) = SpecName::parse(name) {
                    findings.push(Finding::new(Rule::Name, format!("name {error}")));
                }
                if name != folder {
                    findings.push(Finding::new(
                        Rule::NameFolder,
                        format!("name '{}' is not the name of its folder, '{}'", shown(name), shown(folder)),
                    ));
                }
            }
        },
    }

    match field("description") {
        None => findings.push(Finding::new(
            Rule::Description,
            "no description: the specification requires one, saying what the skill does and when to use it",
        )),
        Some(value) => {
            if let Some(problem) = text_problem(value, MAX_DESCRIPTION_CHARS) {
                findings.push(Finding::new(Rule::Description, format!("description {problem}")));
            }
        }
    }

    if let Some(value) = field("compatibility")
        && let Some(problem) = text_problem(value, MAX_COMPATIBILITY_CHARS)
    {
        findings.push(Finding::new(Rule::Compatibility, format!("compatibility {problem}")));
    }

    if let Some(value) = field("metadata") {
        match value {
            Node::Mapping(entries) => {
                let problems = entries.iter().filter_map(|(key, value)| {
                    if key.as_str().is_none() {
                        Some(format!("metadata has a key that is {}: keys are strings", key.describe()))
                    } else {
                        value.as_str().is_none().then(|| {
                            format!(
                                "metadata.{} is {}: the specification maps keys to string values{}",
                                shown(&key.key_text()),
                                value.describe(),
                                quote_hint(value)
                            )
                        })
                    }
                });
                push_some(findings, Rule::Metadata, problems, "metadata entries");
            }
            other => findings.push(Finding::new(
                Rule::Metadata,
                format!(
                    "metadata is {}: the specification makes it a map from string keys to string values",
                    other.describe()
                ),
            )),
        }
    }

    if let Some(value) = field("allowed-tools")
        && value.as_str().is_none()
    {
        findings.push(Finding::new(
            Rule::AllowedTools,
            format!(
                "allowed-tools is {}: the specification makes it one space-separated string, such as \
                 `Bash(git:*) Read`",
                value.describe()
            ),
        ));
    }

    let unknown =
        fields.iter().filter(|(key, _)| !key.as_str().is_some_and(|key| FIELDS.contains(&key))).map(|(key, _)| {
            format!(
                "unknown key '{}': the specification defines name, description, license, compatibility, metadata \
             and allowed-tools; other properties belong under metadata",
                shown(&key.key_text())
            )
        });
    push_some(findings, Rule::UnknownKey, unknown, "unknown keys");
}

/// Findings of one rule that can come once per key: the first few, then how many more. A file
/// with thousands of them needs the pattern pointed out, not every line.
fn push_some(findings: &mut Vec<Finding>, rule: Rule, messages: impl Iterator<Item = String>, what: &str) {
    const SHOWN: usize = 10;
    let mut more = 0;
    for (index, message) in messages.enumerate() {
        if index < SHOWN {
            findings.push(Finding::new(rule, message));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        findings.push(Finding::new(rule, format!("and {more} more {what} like these")));
    }
}

/// What is wrong with a text field bounded to `max` characters, as "is ..." / "has ...".
fn text_problem(value: &Node, max: usize) -> Option<String> {
    let Some(text) = value.as_str() else {
        return Some(format!("is {}, not a string", value.describe()));
    };
    if pystr::strip(text).is_empty() {
        return Some("is empty".to_owned());
    }
    let chars = text.chars().count();
    (chars > max).then(|| format!("has {chars} characters: at most {max} are allowed"))
}

/// For a scalar YAML typed as something else than a string: quoting makes it one.
fn quote_hint(value: &Node) -> &'static str {
    match value {
        Node::Scalar(scalar) if scalar.kind != ScalarKind::String => " (quote it)",
        _ => "",
    }
}

/// Text from the file as a message shows it: on one line, and cut.
fn shown(text: &str) -> String {
    const WIDTH: usize = 80;
    let line: String = text.chars().take(WIDTH + 1).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if line.chars().count() <= WIDTH { line } else { line.chars().take(WIDTH - 1).chain(['…']).collect() }
}

#[cfg(test)]
mod tests {
    use super::body_after_frontmatter;

    #[test]
    fn the_body_starts_after_the_frontmatter_s_closing_line() {
        assert_eq!(body_after_frontmatter("---\nname: a\n---\n# Body\n"), "# Body\n");
        assert_eq!(body_after_frontmatter("---\r\nname: a\r\n---  \r\nBody"), "Body");
        assert_eq!(body_after_frontmatter(" --- \nname: a\n---\u{2028}Body"), "Body");
        assert_eq!(body_after_frontmatter("---\nname: a\n---"), "");
        // Without a frontmatter, or without its closing line, the whole text is the body.
        assert_eq!(body_after_frontmatter("# Just text\n---\n"), "# Just text\n---\n");
        assert_eq!(body_after_frontmatter("---\nname: a\n"), "---\nname: a\n");
    }
}
