//! `skillcat check`: what the catalog holds, what it hides and what it skipped.

use std::io::{self, Write};

use serde::Serialize;

use skillcat_core::{CompositeDiscovery, SourceError};

use crate::sources::Sources;

/// What `check` prints, borrowing from one scan of the sources.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub skills: Vec<SkillRow<'a>>,
    pub shadowed: Vec<ShadowedRow<'a>>,
    pub diagnostics: Vec<DiagnosticRow<'a>>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SkillRow<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub location: &'a str,
    pub source: &'a str,
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
}

impl<'a> Report<'a> {
    pub fn new(sources: &'a Sources, scan: &'a Result<CompositeDiscovery, SourceError>) -> Self {
        match scan {
            Ok(discovery) => Report {
                skills: discovery
                    .skills
                    .iter()
                    .map(|entry| SkillRow {
                        name: entry.skill.name().as_str(),
                        description: entry.skill.description(),
                        location: entry.skill.location(),
                        source: sources.label(entry.source),
                    })
                    .collect(),
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
                    .map(|entry| DiagnosticRow { source: sources.label(entry.source), message: &entry.message })
                    .collect(),
                error: None,
            },
            Err(error) => Report {
                skills: Vec::new(),
                shadowed: Vec::new(),
                diagnostics: Vec::new(),
                error: Some(error.to_string()),
            },
        }
    }

    pub fn is_clean(&self) -> bool {
        self.error.is_none() && self.diagnostics.is_empty()
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
        for row in &self.skills {
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
            for row in &self.diagnostics {
                writeln!(out, "  [{}] {}", row.source, row.message)?;
            }
        }
        writeln!(
            out,
            "\n{} skills, {} shadowed, {} diagnostics",
            self.skills.len(),
            self.shadowed.len(),
            self.diagnostics.len()
        )
    }
}

/// The description on one line, cut for a terminal.
fn summary(description: &str) -> String {
    const WIDTH: usize = 72;
    let line: String = description.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if line.chars().count() <= WIDTH { line } else { line.chars().take(WIDTH - 1).chain(['…']).collect() }
}
