//! `skillcat check`: what the catalog holds, what it hides and what it skipped; with `--spec`,
//! how each skill it serves meets the agentskills.io specification.

use std::io::{self, Write};
use std::path::PathBuf;

use serde::{Serialize, Serializer};
use skillcat_core::SourcedSkill;

use crate::catalog::{CatalogError, OfflineCatalog};
use crate::sources::Sources;
use crate::spec::{self, Finding, Rule, Severity};

/// What `check` prints, borrowing from one scan of the sources. Its serialization is the shape of
/// `check --json`, which [`Report::write_json`] writes.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub skills: SkillRows<'a>,
    pub shadowed: Vec<ShadowedRow<'a>>,
    pub diagnostics: Vec<DiagnosticRow<'a>>,
    pub error: Option<String>,
}

/// The skills of a report, each made into its row as the row is written: a large catalog's rows
/// are never all held at once.
pub struct SkillRows<'a> {
    skills: &'a [SourcedSkill],
    sources: &'a Sources,
    /// Each skill's agentskills.io findings, in the order of `skills`, with `--spec`.
    spec: Option<Vec<Vec<Finding>>>,
}

impl<'a> SkillRows<'a> {
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = SkillRow<'_>> {
        self.skills.iter().enumerate().map(|(index, entry)| SkillRow {
            name: entry.skill.name().as_str(),
            description: entry.skill.description(),
            location: entry.skill.location(),
            source: self.sources.label(entry.source),
            spec: self.spec.as_ref().map(|spec| spec[index].as_slice()),
        })
    }
}

impl Serialize for SkillRows<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl std::fmt::Debug for SkillRows<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[derive(Debug, Serialize)]
pub struct SkillRow<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub location: &'a str,
    pub source: &'a str,
    /// The agentskills.io findings, with `--spec` (absent without it, so `--json` stays as it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<&'a [Finding]>,
}

impl SkillRow<'_> {
    /// The row as its serialization, fields in their order (see [`Report::write_json`]).
    fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(b"{\"name\":")?;
        json_string(out, self.name)?;
        out.write_all(b",\"description\":")?;
        json_string(out, self.description)?;
        out.write_all(b",\"location\":")?;
        json_string(out, self.location)?;
        out.write_all(b",\"source\":")?;
        json_string(out, self.source)?;
        if let Some(spec) = self.spec {
            out.write_all(b",\"spec\":")?;
            serde_json::to_writer(&mut *out, spec)?;
        }
        out.write_all(b"}")
    }
}

/// `text` as a JSON string: copied between quotes when nothing in it is escaped, else as
/// serde_json writes it.
fn json_string(out: &mut impl Write, text: &str) -> io::Result<()> {
    if needs_escape(text.as_bytes()) {
        return Ok(serde_json::to_writer(out, text)?);
    }
    out.write_all(b"\"")?;
    out.write_all(text.as_bytes())?;
    out.write_all(b"\"")
}

/// Whether JSON escapes any of `bytes`: a control character (below 0x20), `"` or `\`. Eight bytes
/// at a time (`pystr::any_byte_below`, `pystr::any_byte_is`).
fn needs_escape(bytes: &[u8]) -> bool {
    use skillcat_core::pystr::{any_byte_below, any_byte_is};
    let mut chunks = bytes.chunks_exact(8);
    let escaped = |word: u64| any_byte_below(word, 0x20) || any_byte_is(word, b'"') || any_byte_is(word, b'\\');
    if chunks.by_ref().any(|chunk| escaped(u64::from_le_bytes(chunk.try_into().expect("eight bytes")))) {
        return true;
    }
    chunks.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

#[derive(Debug, Serialize)]
pub struct ShadowedRow<'a> {
    pub name: &'a str,
    pub location: &'a str,
    pub source: &'a str,
}

#[derive(Debug, Serialize)]
pub struct DiagnosticRow<'a> {
    pub source: &'a str,
    pub message: &'a str,
    /// The source's roots, to say paths relative to them in the table.
    #[serde(skip)]
    pub roots: &'a [PathBuf],
}

impl<'a> Report<'a> {
    pub fn new(catalog: &'a OfflineCatalog) -> Self {
        let sources = catalog.sources();
        match catalog.scan_outcome() {
            Ok(discovery) => Report {
                skills: SkillRows { skills: &discovery.skills, sources, spec: None },
                shadowed: discovery
                    .shadowed
                    .iter()
                    .map(|entry| ShadowedRow {
                        name: entry.skill.name().as_str(),
                        location: entry.skill.location(),
                        source: sources.label(entry.source),
                    })
                    .collect(),
                diagnostics: discovery
                    .diagnostics
                    .iter()
                    .map(|entry| DiagnosticRow {
                        source: sources.label(entry.source),
                        message: &entry.message,
                        roots: sources.get(entry.source).folders(),
                    })
                    .collect(),
                error: None,
            },
            Err(error) => Report {
                skills: SkillRows { skills: &[], sources, spec: None },
                shadowed: Vec::new(),
                diagnostics: Vec::new(),
                // nagents' message, then the other skill of the name, as `manifest` and `serve` say it.
                error: Some(error.error.explanation()),
            },
        }
    }

    /// Checks every skill of the catalog against the agentskills.io rules (`--spec`). Shadowed
    /// skills are not served, so they are not checked. Each `SKILL.md` is read again through the
    /// source that owns it, the same guarded way a load reads it; the catalog is not touched.
    pub async fn check_spec(&mut self, catalog: &OfflineCatalog) {
        let mut checked = Vec::with_capacity(self.skills.len());
        for entry in self.skills.skills {
            let mut findings = match catalog.text(entry).await {
                Ok(content) => spec::check_skill_md(&content, folder_name(entry.skill.location())),
                Err(error) => {
                    let why = match error {
                        CatalogError::Read { source, .. } => source.explanation(),
                        other => other.to_string(),
                    };
                    vec![Finding::new(Rule::Read, format!("SKILL.md could not be read again: {why}"))]
                }
            };
            if let Some(Err(unavailable)) = entry.files.as_deref().map(|listing| listing.files()) {
                findings.push(Finding::new(Rule::Files, format!("the files are not served: {unavailable}")));
            }
            checked.push(findings);
        }
        self.skills.spec = Some(checked);
    }

    /// `check --json`: the report's serialization, byte for byte, with each skill's row written
    /// directly. serde_json escapes a string one byte at a time, the largest part of what `check`
    /// did after its scan (docs/BENCHMARKS.md); a string with nothing to escape, as names,
    /// descriptions and paths nearly always are, is copied as it is here.
    pub fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(b"{\"skills\":[")?;
        for (index, row) in self.skills.iter().enumerate() {
            if index > 0 {
                out.write_all(b",")?;
            }
            row.write_json(out)?;
        }
        out.write_all(b"],\"shadowed\":")?;
        serde_json::to_writer(&mut *out, &self.shadowed)?;
        out.write_all(b",\"diagnostics\":")?;
        serde_json::to_writer(&mut *out, &self.diagnostics)?;
        out.write_all(b",\"error\":")?;
        serde_json::to_writer(&mut *out, &self.error)?;
        out.write_all(b"}")
    }

    /// No diagnostic, no source error, and (with `--spec`) no skill breaking a MUST of the
    /// specification. Advisories do not count.
    pub fn is_clean(&self) -> bool {
        self.error.is_none() && self.diagnostics.is_empty() && self.spec_count(Severity::Error) == 0
    }

    /// How many skills have a finding of this severity.
    fn spec_count(&self, severity: Severity) -> usize {
        let has = |row: &SkillRow<'_>| row.spec.into_iter().flatten().any(|finding| finding.severity == severity);
        self.skills.iter().filter(has).count()
    }

    /// The `--spec` section of the table: each skill with findings, then a count.
    pub fn write_spec_table(&self, out: &mut impl Write) -> io::Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        let checked: Vec<SkillRow<'_>> = self.skills.iter().filter(|row| row.spec.is_some()).collect();
        let rule_width = checked
            .iter()
            .flat_map(|row| row.spec.into_iter().flatten())
            .map(|finding| finding.rule.as_str().len())
            .max()
            .unwrap_or(0);
        let noted: Vec<(&str, &[Finding])> = checked
            .iter()
            .filter_map(|row| Some((row.name, row.spec.filter(|findings| !findings.is_empty())?)))
            .collect();
        if !noted.is_empty() {
            writeln!(out, "\nagentskills.io specification:")?;
        }
        for (name, findings) in &noted {
            writeln!(out, "  {name}")?;
            for finding in *findings {
                let severity = finding.severity.as_str();
                writeln!(out, "    {severity:8}  {:rule_width$}  {}", finding.rule.as_str(), finding.message)?;
            }
        }
        let errors = self.spec_count(Severity::Error);
        writeln!(
            out,
            "\n{} checked against the agentskills.io specification: {errors} with errors, {} with advisories \
             only, {} following every rule",
            count(checked.len(), "skill", "skills"),
            noted.len() - errors,
            checked.len() - noted.len()
        )
    }

    pub fn write_table(&self, out: &mut impl Write) -> io::Result<()> {
        if let Some(error) = &self.error {
            writeln!(out, "error: {error}")?;
            return Ok(());
        }
        let name_width = self.skills.iter().map(|row| row.name.len()).max().unwrap_or(0).max("SKILL".len());
        let source_width =
            self.skills.iter().map(|row| row.source.chars().count()).max().unwrap_or(0).max("SOURCE".len());
        writeln!(out, "{:name_width$}  {:source_width$}  DESCRIPTION", "SKILL", "SOURCE")?;
        for row in self.skills.iter() {
            let source_pad = source_width - row.source.chars().count() + row.source.len();
            writeln!(out, "{:name_width$}  {:source_pad$}  {}", row.name, row.source, summary(row.description))?;
        }
        if !self.shadowed.is_empty() {
            writeln!(out, "\nshadowed (an earlier source has a skill of the same name):")?;
            for row in &self.shadowed {
                writeln!(out, "  {}  {}  [{}]", row.name, row.location, row.source)?;
            }
        }
        if !self.diagnostics.is_empty() {
            writeln!(out, "\ndiagnostics (skipped):")?;
            let mut heading = None;
            for row in &self.diagnostics {
                if heading != Some(row.source) {
                    writeln!(out, "  {}", row.source)?;
                    heading = Some(row.source);
                }
                writeln!(out, "    {}", row.for_table())?;
            }
        }
        writeln!(
            out,
            "\n{}, {} shadowed, {}",
            count(self.skills.len(), "skill", "skills"),
            self.shadowed.len(),
            count(self.diagnostics.len(), "diagnostic", "diagnostics")
        )
    }
}

impl DiagnosticRow<'_> {
    /// The message under its source's heading: the location said once, and relative to the
    /// source's folder when the heading is that folder (as it is for `--dir`). `--json` and the
    /// API keep nagents' message as it is.
    fn for_table(&self) -> String {
        let message = without_repeated_location(self.message);
        let [root] = self.roots else { return message };
        let Some(root) = root.to_str().filter(|root| *root == self.source) else { return message };
        if let Some(reason) = message.strip_prefix(root).and_then(|rest| rest.strip_prefix(": ")) {
            return reason.to_owned();
        }
        let beneath = if root.ends_with('/') { root.to_owned() } else { format!("{root}/") };
        match message.strip_prefix(&beneath) {
            Some(relative) => relative.to_owned(),
            None => message,
        }
    }
}

/// nagents' message for invalid metadata names the file twice, `{path}: {path}: {reason}`
/// (the walk's location, then the parser's): `{path}: {reason}`.
fn without_repeated_location(message: &str) -> String {
    for (at, _) in message.match_indices(": ") {
        let (location, rest) = (&message[..at], &message[at + 2..]);
        if let Some(reason) = rest.strip_prefix(location).and_then(|rest| rest.strip_prefix(": ")) {
            return format!("{location}: {reason}");
        }
    }
    message.to_owned()
}

/// The name of the folder holding a skill's `SKILL.md`, from its location: `/root/a/b/SKILL.md`
/// (directory sources, always absolute) or `builtin:b/SKILL.md`.
fn folder_name(location: &str) -> &str {
    let folder = location.strip_suffix("/SKILL.md").unwrap_or(location);
    match folder.strip_prefix("builtin:") {
        Some(builtin) => builtin,
        None => folder.rsplit_once('/').map_or(folder, |(_, last)| last),
    }
}

/// `1 skill`, `2 skills`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The description on one line, cut for a terminal.
fn summary(description: &str) -> String {
    const WIDTH: usize = 72;
    let line: String = description.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if line.chars().count() <= WIDTH { line } else { line.chars().take(WIDTH - 1).chain(['…']).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings JSON escapes and strings it does not, at every offset of the eight-byte steps.
    fn hostile_strings() -> Vec<String> {
        let mut texts = vec![String::new(), "plain".to_owned(), "é ü 中 \u{2028} \u{7f} 😀".to_owned()];
        for special in ['"', '\\', '\n', '\t', '\u{0}', '\u{1f}', '\u{7f}', 'é', ' '] {
            for at in 0..18 {
                let mut text = "x".repeat(17);
                text.insert(at, special);
                texts.push(text);
            }
        }
        texts
    }

    #[test]
    fn needs_escape_is_what_serde_json_escapes() {
        for text in hostile_strings() {
            let escaped = serde_json::to_string(&text).unwrap() != format!("\"{text}\"");
            assert_eq!(needs_escape(text.as_bytes()), escaped, "{text:?}");
        }
        for byte in 0..=0x7f_u8 {
            let text = format!("abcdefgh{}ij", char::from(byte));
            let escaped = serde_json::to_string(&text).unwrap() != format!("\"{text}\"");
            assert_eq!(needs_escape(text.as_bytes()), escaped, "byte {byte:#x}");
        }
    }

    #[test]
    fn a_json_row_is_the_row_s_serialization() {
        let findings = [Finding::new(Rule::Read, "a \"quoted\" reason\n")];
        for text in hostile_strings() {
            for spec in [None, Some(&findings[..])] {
                let row = SkillRow { name: &text, description: &text, location: &text, source: &text, spec };
                let mut written = Vec::new();
                row.write_json(&mut written).unwrap();
                assert_eq!(String::from_utf8(written).unwrap(), serde_json::to_string(&row).unwrap());
            }
        }
    }

    /// The whole report, from a real scan: skills, a shadowed one and diagnostics; and a failed
    /// scan's report.
    #[tokio::test]
    async fn check_json_is_the_report_s_serialization() {
        use crate::config::SourceConfig;
        let dir = tempfile::tempdir().unwrap();
        let write = |folder: &str, text: &str| {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(dir.path().join(folder).join("SKILL.md"), text).unwrap();
        };
        write("a/one", "---\nname: one\ndescription: says \"hi\" and \\ back\n---\n");
        write("a/two", "---\nname: two\ndescription: plain\n---\n");
        write("a/bad", "---\nname: bad name\ndescription: d\n---\n");
        write("b/one", "---\nname: one\ndescription: shadowed\n---\n");
        write("c/x", "---\nname: twin\ndescription: d\n---\n");
        write("c/y", "---\nname: twin\ndescription: d\n---\n");
        let state = tempfile::tempdir().unwrap();
        let scan = |roots: &[&str]| {
            let configs: Vec<_> = roots.iter().map(|root| SourceConfig::directory(dir.path().join(root))).collect();
            OfflineCatalog::scan(Sources::for_command(&configs, state.path(), false).unwrap())
        };
        for catalog in [scan(&["a", "b"]).await, scan(&["c"]).await] {
            let report = Report::new(&catalog);
            let mut written = Vec::new();
            report.write_json(&mut written).unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), serde_json::to_string(&report).unwrap());
        }
    }

    fn row<'a>(source: &'a str, message: &'a str, roots: &'a [PathBuf]) -> String {
        DiagnosticRow { source, message, roots }.for_table()
    }

    #[test]
    fn the_folder_of_a_skill() {
        assert_eq!(folder_name("/srv/skills/team/pdf-tools/SKILL.md"), "pdf-tools");
        assert_eq!(folder_name("/SKILL.md"), "");
        assert_eq!(folder_name("builtin:skillcat-authoring/SKILL.md"), "skillcat-authoring");
        assert_eq!(folder_name("/srv/builtin:x/SKILL.md"), "builtin:x");
    }

    #[test]
    fn table_rows_say_the_location_once() {
        let root = [PathBuf::from("/srv/s")];
        let cases = [
            (
                "/srv/s/a/SKILL.md: /srv/s/a/SKILL.md: unclosed description quote",
                "a/SKILL.md: unclosed description quote",
            ),
            ("/srv/s/b/SKILL.md: SKILL.md exceeds 4000000 bytes", "b/SKILL.md: SKILL.md exceeds 4000000 bytes"),
            ("/srv/s: [Errno 2] No such file or directory: 's'", "[Errno 2] No such file or directory: 's'"),
            ("/srv/sx/SKILL.md: odd", "/srv/sx/SKILL.md: odd"),
        ];
        for (message, shown) in cases {
            assert_eq!(row("/srv/s", message, &root), shown, "{message}");
        }
        // Under a label that is not the folder (a named source, several roots), paths stay whole.
        let message = "/srv/s/a/SKILL.md: /srv/s/a/SKILL.md: unclosed description quote";
        assert_eq!(row("team", message, &root), "/srv/s/a/SKILL.md: unclosed description quote");
        let roots = [PathBuf::from("/srv/s"), PathBuf::from("/srv/t")];
        assert_eq!(row("/srv/s, /srv/t", message, &roots), "/srv/s/a/SKILL.md: unclosed description quote");
        assert_eq!(row("/", "/a/SKILL.md: bad", &[PathBuf::from("/")]), "a/SKILL.md: bad");
        // A path holding ": " is still found.
        assert_eq!(without_repeated_location("/x: y/SKILL.md: /x: y/SKILL.md: bad"), "/x: y/SKILL.md: bad");
    }
}
