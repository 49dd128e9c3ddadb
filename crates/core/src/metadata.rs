//! `SKILL.md` metadata, read exactly as nagents' `parse_skill_metadata` reads it.

use crate::pystr;
use crate::skill::{InvalidSkill, MAX_DESCRIPTION_CHARS, Skill};

/// The description of a skill whose file says nothing usable about itself.
pub const FALLBACK_DESCRIPTION: &str = "Load with skill(name) for instructions.";

/// Why a `SKILL.md` yields no descriptor. The message starts with the location, as nagents'.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.kind.message(&self.location))]
pub struct MetadataError {
    location: String,
    kind: MetadataErrorKind,
}

impl MetadataError {
    pub fn kind(&self) -> &MetadataErrorKind {
        &self.kind
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataErrorKind {
    UnterminatedFrontmatter,
    NotSingleLine { key: &'static str },
    UnclosedQuote { key: &'static str },
    Invalid(InvalidSkill),
}

impl MetadataErrorKind {
    /// The nagents message for a file at `location` (which may be any printable form of it).
    pub fn message(&self, location: &str) -> String {
        match self {
            MetadataErrorKind::UnterminatedFrontmatter => format!("{location}: unterminated skill frontmatter"),
            MetadataErrorKind::NotSingleLine { key } => format!("{location}: use one single-line {key} value"),
            MetadataErrorKind::UnclosedQuote { key } => format!("{location}: unclosed {key} quote"),
            MetadataErrorKind::Invalid(error) => error.to_string(),
        }
    }
}

/// Reads optional single-line `name`/`description` frontmatter without executing it.
///
/// Plain Markdown takes `default_name` (the containing folder's name) and its first non-heading
/// line. Only unindented `name`/`description` keys are read; multi-line values and YAML objects
/// are refused, everything else is ignored.
pub fn parse_skill_metadata(content: &str, location: &str, default_name: &str) -> Result<Skill, MetadataError> {
    let (name, description) =
        parse_fields(content, default_name).map_err(|kind| MetadataError { location: location.to_owned(), kind })?;
    Skill::new(name, description, location)
        .map_err(|error| MetadataError { location: location.to_owned(), kind: MetadataErrorKind::Invalid(error) })
}

/// The name and description `content` declares, before they are validated as a descriptor.
pub(crate) fn parse_fields<'a>(
    content: &'a str,
    default_name: &'a str,
) -> Result<(&'a str, &'a str), MetadataErrorKind> {
    let mut name = default_name;
    let mut description = "";
    let mut lines = pystr::splitlines(content).peekable();
    if lines.next_if(|first| pystr::strip(first) == "---").is_some() {
        // Lines are read as they come; an unterminated frontmatter is reported before anything
        // wrong within it, so the first such error waits for the closing line.
        let mut refused = None;
        let mut seen_name = false;
        let mut seen_description = false;
        loop {
            let line = match lines.next() {
                Some(line) if pystr::rstrip(line) == "---" => break,
                Some(line) => line,
                None => return Err(MetadataErrorKind::UnterminatedFrontmatter),
            };
            if refused.is_some() || line.chars().next().is_none_or(pystr::is_space) {
                continue;
            }
            let (key, value) = match line.split_once(':') {
                Some((key, value)) => (key, Some(value)),
                None => (line, None),
            };
            let (key, seen): (&'static str, &mut bool) = match pystr::strip(key) {
                "name" => ("name", &mut seen_name),
                "description" => ("description", &mut seen_description),
                _ => continue,
            };
            match field_value(pystr::strip(value.unwrap_or("")), key, seen) {
                Ok(value) if key == "name" => name = value,
                Ok(value) => description = value,
                Err(error) => refused = Some(error),
            }
        }
        if let Some(error) = refused {
            return Err(error);
        }
    }
    if description.is_empty() {
        description = lines
            .map(|line| (line, pystr::strip(line)))
            .find(|(line, stripped)| !stripped.is_empty() && !line.starts_with('#'))
            .map_or("", |(_, stripped)| stripped);
    }
    if description.is_empty() {
        description = FALLBACK_DESCRIPTION;
    }
    Ok((name, pystr::take_chars(description, MAX_DESCRIPTION_CHARS)))
}

/// A frontmatter field's value once stripped, without its quotes; a second value for the same
/// key (`seen`), an empty one, a block or flow value, an anchor, alias or tag is refused.
fn field_value<'a>(value: &'a str, key: &'static str, seen: &mut bool) -> Result<&'a str, MetadataErrorKind> {
    if *seen || value.is_empty() || value.starts_with(['|', '>', '{', '[', '&', '*', '!']) {
        return Err(MetadataErrorKind::NotSingleLine { key });
    }
    *seen = true;
    match value.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            if value.len() < 2 || !value.ends_with(quote) {
                return Err(MetadataErrorKind::UnclosedQuote { key });
            }
            Ok(&value[1..value.len() - 1])
        }
        _ => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(content: &str) -> Result<Skill, String> {
        parse_skill_metadata(content, "/s/demo/SKILL.md", "demo").map_err(|error| error.to_string())
    }

    #[test]
    fn plain_markdown_uses_folder_and_first_paragraph() {
        let skill = parse("# Title\n\n  Does things.  \nMore.").unwrap();
        assert_eq!((skill.name().as_str(), skill.description()), ("demo", "Does things."));
        assert_eq!(parse("# Only a heading\n").unwrap().description(), FALLBACK_DESCRIPTION);
        assert_eq!(parse("  # indented\n").unwrap().description(), "# indented");
    }

    #[test]
    fn frontmatter_fields() {
        let skill = parse("---\nname: 'other'\ndescription: \"Say: hi\"\n  name: ignored\nx: y\n---\nbody").unwrap();
        assert_eq!((skill.name().as_str(), skill.description()), ("other", "Say: hi"));
        let skill = parse("---  \r\ndescription:   \r\n---").unwrap_err();
        assert_eq!(skill, "/s/demo/SKILL.md: use one single-line description value");
    }

    #[test]
    fn frontmatter_errors_carry_the_location() {
        assert_eq!(parse("---\nname: a\n").unwrap_err(), "/s/demo/SKILL.md: unterminated skill frontmatter");
        // Unterminated is said before anything wrong within, and the first of those before later ones.
        assert_eq!(parse("---\nname: |\n").unwrap_err(), "/s/demo/SKILL.md: unterminated skill frontmatter");
        assert_eq!(parse("---\nname: 'a\ndescription: |\n---").unwrap_err(), "/s/demo/SKILL.md: unclosed name quote");
        assert_eq!(parse("---\nname: \"a\n---").unwrap_err(), "/s/demo/SKILL.md: unclosed name quote");
        assert_eq!(parse("---\nname: '\n---").unwrap_err(), "/s/demo/SKILL.md: unclosed name quote");
        assert_eq!(
            parse("---\nname: a\nname: a\n---").unwrap_err(),
            "/s/demo/SKILL.md: use one single-line name value"
        );
        assert_eq!(parse("---\nname: |\n---").unwrap_err(), "/s/demo/SKILL.md: use one single-line name value");
        assert_eq!(parse("---\nname\n---").unwrap_err(), "/s/demo/SKILL.md: use one single-line name value");
        assert_eq!(
            parse("---\nname: \"\"\n---").unwrap_err(),
            "Skill name must contain 1-64 ASCII letters, digits, underscores or hyphens"
        );
    }

    #[test]
    fn description_is_cut_at_1000_code_points() {
        let long = format!("{}😀😀", "a".repeat(999));
        let skill = parse(&long).unwrap();
        assert_eq!(skill.description(), format!("{}😀", "a".repeat(999)));
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #[test]
        fn parsing_never_panics_and_bounds_descriptions(
            content in proptest::collection::vec(
                proptest::sample::select(vec!["---", "\n", "\r\n", "\r", "\u{2028}", "\u{1c}", "\u{85}", " ", "\u{1f}",
                    "name", "description", ":", "'", "\"", "|", "#", "x", "é", "😀"]),
                0..60,
            ).prop_map(|parts| parts.concat())
        ) {
            match parse_skill_metadata(&content, "/s/demo/SKILL.md", "demo") {
                Ok(skill) => {
                    proptest::prop_assert!(skill.description().chars().count() <= 1000);
                    proptest::prop_assert!(!crate::pystr::strip(skill.description()).is_empty());
                }
                Err(error) => {
                    let message = error.to_string();
                    let located = message.starts_with("/s/demo/SKILL.md: ");
                    proptest::prop_assert!(located || message.starts_with("Skill "), "{}", message);
                }
            }
        }

        #[test]
        fn splitlines_joined_back_is_the_text_without_breaks(text in "[a\n\r\u{b}\u{c}\u{1c}-\u{1f}\u{85}\u{2028}\u{2029}é]{0,40}") {
            let lines: Vec<&str> = crate::pystr::splitlines(&text).collect();
            let breaks = ['\n', '\r', '\u{b}', '\u{c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}'];
            let kept: String = text.chars().filter(|c| !breaks.contains(c)).collect();
            proptest::prop_assert_eq!(lines.concat(), kept);
            proptest::prop_assert!(lines.iter().all(|line| !line.contains(breaks)));
        }
    }
}
