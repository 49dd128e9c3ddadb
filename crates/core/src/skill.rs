//! Skill descriptors and the names skills go by, valid by construction: nagents' name rule for
//! the catalog ([`SkillName`]), and the agentskills.io rule for what the well-known indexes and
//! MCP publish ([`SpecName`]).

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::pystr;

/// Longest description, in code points.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// Longest location, in code points.
pub const MAX_LOCATION_CHARS: usize = 4096;

/// Why a descriptor was refused; the messages are nagents' `ValueError` texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSkill {
    #[error("Skill name must contain 1-64 ASCII letters, digits, underscores or hyphens")]
    Name,
    #[error("Skill description must be nonblank text of at most 1000 characters")]
    Description,
    #[error("Skill location must be nonblank text of at most 4096 characters")]
    Location,
}

/// A skill name: 1 to 64 ASCII letters, digits, `_` or `-`. Clones share the text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SkillName(Arc<str>);

impl SkillName {
    pub fn parse(name: impl AsRef<str>) -> Result<Self, InvalidSkill> {
        let name = name.as_ref();
        let valid =
            (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if valid { Ok(SkillName(Arc::from(name))) } else { Err(InvalidSkill::Name) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SkillName {
    type Error = InvalidSkill;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        SkillName::parse(name)
    }
}

impl std::str::FromStr for SkillName {
    type Err = InvalidSkill;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        SkillName::parse(name)
    }
}

impl From<SkillName> for String {
    fn from(name: SkillName) -> Self {
        String::from(&*name.0)
    }
}

impl AsRef<str> for SkillName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SkillName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SkillName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A skill name that follows the agentskills.io naming rule: 1-64 characters, lowercase letters
/// `a-z`, digits and hyphens, no hyphen first, last or next to another. The catalog's names follow
/// nagents' wider rule ([`SkillName`]); only skills whose names follow this one are published to
/// installers and MCP hosts. Deserializing one checks it too.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct SpecName(Box<str>);

/// A [`SpecName`]'s length bound, in characters.
pub const MAX_SPEC_NAME_CHARS: usize = 64;

impl SpecName {
    pub fn parse(name: &str) -> Result<SpecName, InvalidSpecName> {
        let problem = if name.is_empty() {
            Some(NameProblem::Empty)
        } else if let Some(found) = name.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '-')) {
            Some(NameProblem::Character { found })
        } else if name.len() > MAX_SPEC_NAME_CHARS {
            // Only ASCII remains here, so bytes are characters.
            Some(NameProblem::TooLong { chars: name.len() })
        } else if name.starts_with('-') || name.ends_with('-') {
            Some(NameProblem::EdgeHyphen)
        } else if name.contains("--") {
            Some(NameProblem::DoubleHyphen)
        } else {
            None
        };
        match problem {
            None => Ok(SpecName(name.into())),
            Some(problem) => Err(InvalidSpecName { name: shown(name), problem }),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for SpecName {
    type Error = InvalidSpecName;

    fn try_from(name: &str) -> Result<Self, Self::Error> {
        SpecName::parse(name)
    }
}

impl TryFrom<String> for SpecName {
    type Error = InvalidSpecName;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        SpecName::parse(&name)
    }
}

impl From<SpecName> for String {
    fn from(name: SpecName) -> String {
        name.0.into()
    }
}

impl AsRef<str> for SpecName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SpecName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a name does not follow the agentskills.io naming rule; it reads "'Name' holds 'N': only ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{name}' {problem}")]
pub struct InvalidSpecName {
    /// The name, cut to a length a message can carry.
    name: String,
    problem: NameProblem,
}

impl InvalidSpecName {
    pub fn problem(&self) -> &NameProblem {
        &self.problem
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameProblem {
    #[error("is empty")]
    Empty,
    #[error("holds {found:?}: only lowercase letters a-z, digits and hyphens are allowed")]
    Character { found: char },
    #[error("is {chars} characters long: at most {MAX_SPEC_NAME_CHARS} are allowed")]
    TooLong { chars: usize },
    #[error("starts or ends with a hyphen")]
    EdgeHyphen,
    #[error("has two hyphens in a row")]
    DoubleHyphen,
}

/// `text` as one line of at most 80 characters, for a message.
fn shown(text: &str) -> String {
    const WIDTH: usize = 80;
    let line: String = text.chars().take(WIDTH + 1).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if line.chars().count() <= WIDTH { line } else { line.chars().take(WIDTH - 1).chain(['…']).collect() }
}

/// Immutable discovery metadata. `location` is an opaque identifier owned by the source.
///
/// Equal descriptors are the same version of a skill: loads compare the caller's descriptor
/// with the source's current one and refuse a stale one. Clones share the text (a clone is one
/// reference count: catalogs are handed out as `Vec<Skill>` often).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawSkill", into = "RawSkill")]
pub struct Skill(Arc<Fields>);

#[derive(PartialEq, Eq, Hash)]
struct Fields {
    name: SkillName,
    description: Arc<str>,
    location: Arc<str>,
}

impl fmt::Debug for Skill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skill")
            .field("name", &self.0.name)
            .field("description", &self.0.description)
            .field("location", &self.0.location)
            .finish()
    }
}

impl Skill {
    /// Validates like nagents' `Skill.__post_init__`: the name first, then the description
    /// (nonblank, at most 1000 code points), then the location (nonblank, at most 4096).
    pub fn new(
        name: impl AsRef<str>,
        description: impl AsRef<str>,
        location: impl AsRef<str>,
    ) -> Result<Self, InvalidSkill> {
        let name = SkillName::parse(name)?;
        let description = description.as_ref();
        if !is_bounded_text(description, MAX_DESCRIPTION_CHARS) {
            return Err(InvalidSkill::Description);
        }
        let location = location.as_ref();
        if !is_bounded_text(location, MAX_LOCATION_CHARS) {
            return Err(InvalidSkill::Location);
        }
        Ok(Skill(Arc::new(Fields { name, description: description.into(), location: location.into() })))
    }

    pub fn name(&self) -> &SkillName {
        &self.0.name
    }

    pub fn description(&self) -> &str {
        &self.0.description
    }

    pub fn location(&self) -> &str {
        &self.0.location
    }

    /// The description, for a holder that keeps it beside the skill (a clone is a reference
    /// count, not a copy).
    pub fn shared_description(&self) -> &Arc<str> {
        &self.0.description
    }

    /// The location, shared as [`shared_description`](Self::shared_description) is.
    pub fn shared_location(&self) -> &Arc<str> {
        &self.0.location
    }
}

fn is_bounded_text(text: &str, max_chars: usize) -> bool {
    // At most `max_chars` bytes are at most as many code points.
    !pystr::strip(text).is_empty() && (text.len() <= max_chars || pystr::char_len(text) <= max_chars)
}

#[derive(Serialize, Deserialize)]
struct RawSkill {
    name: String,
    description: String,
    location: String,
}

impl TryFrom<RawSkill> for Skill {
    type Error = InvalidSkill;

    fn try_from(raw: RawSkill) -> Result<Self, Self::Error> {
        Skill::new(raw.name, raw.description, raw.location)
    }
}

impl From<Skill> for RawSkill {
    fn from(skill: Skill) -> Self {
        RawSkill {
            name: skill.name().to_string(),
            description: skill.description().to_owned(),
            location: skill.location().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_nagents() {
        assert!(SkillName::parse("a").is_ok());
        assert!(SkillName::parse("A_b-9".repeat(12) + "abcd").is_ok());
        assert_eq!(SkillName::parse("x".repeat(65)), Err(InvalidSkill::Name));
        for bad in ["", "a b", "é", "a.b", "a\n"] {
            assert_eq!(SkillName::parse(bad), Err(InvalidSkill::Name), "{bad:?}");
        }
    }

    #[test]
    fn text_bounds_count_code_points_and_python_whitespace() {
        assert!(Skill::new("a", "é".repeat(1000), "x").is_ok());
        assert_eq!(Skill::new("a", "é".repeat(1001), "x"), Err(InvalidSkill::Description));
        assert_eq!(Skill::new("a", "\u{1f}\u{3000}", "x"), Err(InvalidSkill::Description));
        assert_eq!(Skill::new("a", "d", " "), Err(InvalidSkill::Location));
        assert_eq!(Skill::new("a b", "", ""), Err(InvalidSkill::Name));
    }

    #[test]
    fn serde_validates() {
        let skill: Result<Skill, _> = serde_json::from_str(r#"{"name":"a b","description":"d","location":"l"}"#);
        assert!(skill.is_err());
    }
}
