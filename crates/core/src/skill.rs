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

/// A skill name: 1 to 64 ASCII letters, digits, `_` or `-`. Clones share the text; a skill's
/// name shares the skill's (see [`Skill`]).
#[derive(Clone, Deserialize)]
#[serde(try_from = "String")]
pub struct SkillName {
    /// The name, and for a skill's name the skill's description and location too (see
    /// [`HEADER`]).
    text: Arc<str>,
}

/// The longest name, in bytes (ASCII: characters).
const MAX_NAME_LEN: usize = 64;

/// How a name, or a skill with its name, is kept: in one allocation, a header of `HEADER`
/// ASCII bytes, then the name, the description and the location, back to back (a name alone has
/// an empty description and location). The header says where the name ends (one byte) and where
/// the description ends (two bytes of seven bits each, high first), counted from the text's
/// start. ASCII keeps the header valid UTF-8; the bounds keep the offsets within it.
const HEADER: usize = 3;

/// The text of a name, or of a skill (see [`HEADER`]).
fn text(name: &str, description: &str, location: &str) -> Arc<str> {
    let name_end = HEADER + name.len();
    let description_end = name_end + description.len();
    // Within seven bits for the name, fourteen for the description: see the assertions.
    let header = [name_end as u8, (description_end >> 7) as u8, (description_end & 0x7f) as u8];
    TEXT.with_borrow_mut(|text| {
        text.clear();
        text.extend(header.map(char::from));
        text.push_str(name);
        text.push_str(description);
        text.push_str(location);
        Arc::<str>::from(text.as_str())
    })
}

fn name_end(text: &str) -> usize {
    usize::from(text.as_bytes()[0])
}

fn description_end(text: &str) -> usize {
    let bytes = text.as_bytes();
    usize::from(bytes[1]) << 7 | usize::from(bytes[2])
}

// The offsets fit in the header's ASCII: the name ends within seven bits, the description
// (at most 1000 code points, 4,000 bytes) within fourteen.
const _: () = assert!(HEADER + MAX_NAME_LEN < 1 << 7);
const _: () = assert!(HEADER + MAX_NAME_LEN + 4 * MAX_DESCRIPTION_CHARS < 1 << 14);
// A name, and a skill, is one pointer to its text (with the text's length).
const _: () = assert!(std::mem::size_of::<SkillName>() == 2 * std::mem::size_of::<usize>());
const _: () = assert!(std::mem::size_of::<Skill>() == 2 * std::mem::size_of::<usize>());

thread_local! {
    /// Where a text is put together before it is copied into its allocation.
    static TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl SkillName {
    pub fn parse(name: impl AsRef<str>) -> Result<Self, InvalidSkill> {
        let name = name.as_ref();
        check_name(name)?;
        Ok(SkillName { text: text(name, "", "") })
    }

    pub fn as_str(&self) -> &str {
        &self.text[HEADER..name_end(&self.text)]
    }
}

/// Whether `name` is a valid skill name.
fn check_name(name: &str) -> Result<(), InvalidSkill> {
    let valid = (1..=MAX_NAME_LEN).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid { Ok(()) } else { Err(InvalidSkill::Name) }
}

// Names compare, order and hash as their text, as `Borrow<str>` requires.
impl PartialEq for SkillName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SkillName {}

impl PartialOrd for SkillName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SkillName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for SkillName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for SkillName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SkillName").field(&self.as_str()).finish()
    }
}

impl Serialize for SkillName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
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
        String::from(name.as_str())
    }
}

impl AsRef<str> for SkillName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SkillName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for SkillName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
/// with the source's current one and refuse a stale one. The name, description and location
/// are one text in one allocation, which the skill's name shares; a clone is one reference
/// count (catalogs are handed out as `Vec<Skill>` often), and a catalog of many skills costs
/// one allocation for each.
#[derive(Clone, Deserialize)]
#[serde(try_from = "RawSkill")]
pub struct Skill {
    /// Its name, whose text holds the description and location too.
    name: SkillName,
}

impl PartialEq for Skill {
    fn eq(&self, other: &Self) -> bool {
        // The texts' headers hold where each part ends.
        let (a, b) = (&self.name.text, &other.name.text);
        Arc::ptr_eq(a, b) || a == b
    }
}

impl Eq for Skill {}

impl std::hash::Hash for Skill {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.text.hash(state);
    }
}

impl fmt::Debug for Skill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skill")
            .field("name", &self.name())
            .field("description", &self.description())
            .field("location", &self.location())
            .finish()
    }
}

impl Serialize for Skill {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut fields = serializer.serialize_struct("Skill", 3)?;
        fields.serialize_field("name", self.name.as_str())?;
        fields.serialize_field("description", self.description())?;
        fields.serialize_field("location", self.location())?;
        fields.end()
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
        let name = name.as_ref();
        check_name(name)?;
        let description = description.as_ref();
        if !is_bounded_text(description, MAX_DESCRIPTION_CHARS) {
            return Err(InvalidSkill::Description);
        }
        let location = location.as_ref();
        if !is_bounded_text(location, MAX_LOCATION_CHARS) {
            return Err(InvalidSkill::Location);
        }
        Ok(Skill { name: SkillName { text: text(name, description, location) } })
    }

    /// Its name, which shares the skill's text.
    pub fn name(&self) -> &SkillName {
        &self.name
    }

    pub fn description(&self) -> &str {
        let text = &self.name.text;
        &text[name_end(text)..description_end(text)]
    }

    pub fn location(&self) -> &str {
        let text = &self.name.text;
        &text[description_end(text)..]
    }

    /// The description, for a holder that keeps it beside the skill (it shares the skill's
    /// text, not a copy).
    pub fn shared_description(&self) -> SharedText {
        let text = &self.name.text;
        SharedText::new(text, name_end(text), description_end(text))
    }

    /// The location, shared as [`shared_description`](Self::shared_description) is.
    pub fn shared_location(&self) -> SharedText {
        let text = &self.name.text;
        SharedText::new(text, description_end(text), text.len())
    }
}

/// Part of a text shared with others, as a skill's description and location are: a clone is
/// one reference count.
#[derive(Clone)]
pub struct SharedText {
    text: Arc<str>,
    start: u32,
    end: u32,
}

impl SharedText {
    /// `text[start..end]`; the bounds are those of a skill's text, far below `u32::MAX`.
    fn new(text: &Arc<str>, start: usize, end: usize) -> Self {
        debug_assert!(text.get(start..end).is_some());
        SharedText { text: Arc::clone(text), start: start as u32, end: end as u32 }
    }

    pub fn as_str(&self) -> &str {
        &self.text[self.start as usize..self.end as usize]
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedText {}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SharedText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

fn is_bounded_text(text: &str, max_chars: usize) -> bool {
    // At most `max_chars` bytes are at most as many code points.
    !pystr::strip(text).is_empty() && (text.len() <= max_chars || pystr::char_len(text) <= max_chars)
}

#[derive(Deserialize)]
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
    fn a_skill_s_parts_share_one_text_and_compare_as_the_parts() {
        let skill = Skill::new("ab", "cd", "/x/SKILL.md").unwrap();
        assert_eq!((skill.name().as_str(), skill.description(), skill.location()), ("ab", "cd", "/x/SKILL.md"));
        assert_eq!((&*skill.shared_description(), &*skill.shared_location()), ("cd", "/x/SKILL.md"));
        // The same text split elsewhere is another skill.
        let moved = Skill::new("ab", "c", "d/x/SKILL.md").unwrap();
        assert_ne!(skill, moved);
        assert_ne!(Skill::new("abc", "d", "/x/SKILL.md").unwrap(), skill);
        assert_eq!(Skill::new("ab", "cd", "/x/SKILL.md").unwrap(), skill);
        // A skill's name is the name alone, however it was made.
        let alone = SkillName::parse("ab").unwrap();
        assert_eq!(skill.name(), &alone);
        assert_eq!(skill.name().cmp(&alone), std::cmp::Ordering::Equal);
        let hash = |name: &dyn Fn(&mut std::hash::DefaultHasher)| {
            let mut hasher = std::hash::DefaultHasher::new();
            name(&mut hasher);
            std::hash::Hasher::finish(&hasher)
        };
        use std::hash::Hash as _;
        assert_eq!(hash(&|h| skill.name().hash(h)), hash(&|h| alone.hash(h)));
        assert_eq!(hash(&|h| skill.name().hash(h)), hash(&|h| "ab".hash(h)));
        assert_ne!(hash(&|h| skill.hash(h)), hash(&|h| moved.hash(h)));
        let names: std::collections::HashSet<SkillName> = [skill.name().clone()].into();
        assert!(names.contains("ab") && names.contains(&alone));
        assert_eq!(format!("{:?}", skill.name()), r#"SkillName("ab")"#);
        assert_eq!(String::from(skill.name().clone()), "ab");
    }

    #[test]
    fn a_skill_at_its_bounds_keeps_its_parts() {
        let name = "n".repeat(64);
        // The longest description in bytes: the header's offsets at their largest.
        let description = "😀".repeat(1000);
        let location = "ø".repeat(4096);
        let skill = Skill::new(&name, &description, &location).unwrap();
        assert_eq!((skill.name().as_str(), skill.description(), skill.location()), (&*name, &*description, &*location));
    }

    #[test]
    fn a_skill_serializes_as_its_three_parts() {
        let skill = Skill::new("a", "d \"q\"", "l").unwrap();
        let json = serde_json::to_string(&skill).unwrap();
        assert_eq!(json, r#"{"name":"a","description":"d \"q\"","location":"l"}"#);
        assert_eq!(serde_json::from_str::<Skill>(&json).unwrap(), skill);
        assert_eq!(serde_json::to_string(skill.name()).unwrap(), r#""a""#);
        assert_eq!(serde_json::to_string(&skill.shared_location()).unwrap(), r#""l""#);
        assert!(serde_json::from_str::<SkillName>(r#""a b""#).is_err());
    }

    #[test]
    fn serde_validates() {
        let skill: Result<Skill, _> = serde_json::from_str(r#"{"name":"a b","description":"d","location":"l"}"#);
        assert!(skill.is_err());
    }
}
