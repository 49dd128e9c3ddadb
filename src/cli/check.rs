//! `skillcat check`: what the catalog holds, what it hides and what it skipped.

use std::io::{self, Write};

use serde::Serialize;

use crate::sources::Sources;

#[derive(Debug, Serialize)]
pub struct Report {
    pub skills: Vec<SkillRow>,
    pub shadowed: Vec<ShadowedRow>,
    pub diagnostics: Vec<DiagnosticRow>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SkillRow {
    pub name: String,
    pub description: String,
    pub location: String,
    pub source: String,
}

#[derive(Debug, Serialize)]
pub struct ShadowedRow {
    pub name: String,
    pub location: String,
    pub source: String,
}

#[derive(Debug, Serialize)]
pub struct DiagnosticRow {
    pub source: String,
    pub message: String,
}

impl Report {
    pub async fn collect(sources: &Sources) -> Self {
        match sources.composite.scan_sources().await {
            Ok(discovery) => Report {
                skills: discovery
                    .skills
                    .into_iter()
                    .map(|entry| SkillRow {
                        name: entry.skill.name().to_string(),
                        description: entry.skill.description().to_owned(),
                        location: entry.skill.location().to_owned(),
                        source: sources.label(entry.source).to_owned(),
                    })
                    .collect(),
                shadowed: discovery
                    .shadowed
                    .into_iter()
                    .map(|entry| ShadowedRow {
                        name: entry.skill.name().to_string(),
                        location: entry.skill.location().to_owned(),
                        source: sources.label(entry.source).to_owned(),
                    })
                    .collect(),
                diagnostics: discovery
                    .diagnostics
                    .into_iter()
                    .map(|entry| DiagnosticRow {
                        source: sources.label(entry.source).to_owned(),
                        message: entry.message,
                    })
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
            writeln!(out, "{:name_width$}  {:source_pad$}  {}", row.name, row.source, summary(&row.description))?;
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
