//! `parse_skill_metadata` against nagents' reading of a `SKILL.md`.
//!
//! Input: one selector byte (bits 0-2 pick the default name, bits 3-5 the location, each from a
//! table of edge cases), then the file content, decoded as UTF-8 with invalid bytes replaced.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skillcat_core::{FALLBACK_DESCRIPTION, MetadataErrorKind, Skill, parse_skill_metadata, pystr};
use skillcat_fuzz::{
    Input, is_bounded_text, is_valid_name, nagents_parse_skill_metadata, py_is_line_break, py_isspace, py_prefix,
    py_rstrip, py_splitlines, py_strip,
};

fn default_name(selector: u8) -> String {
    match selector & 7 {
        0 => "demo".into(),
        1 => String::new(),
        2 => "a b".into(),
        3 => "n".repeat(64),
        4 => "n".repeat(65),
        5 => "é".into(),
        6 => "A_b-9".into(),
        _ => "SKILL.md".into(),
    }
}

fn location(selector: u8) -> String {
    match (selector >> 3) & 7 {
        0 => "/s/demo/SKILL.md".into(),
        1 => String::new(),
        2 => " \u{3000}\u{1c}".into(),
        3 => "l".repeat(4096),
        4 => "l".repeat(4097),
        5 => "é".repeat(4096),
        6 => "/r/a&b<c>\"'/SKILL.md".into(),
        _ => "not a path: \"quoted\"".into(),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let selector = input.u8();
    let content = String::from_utf8_lossy(input.rest());
    let (default_name, location) = (default_name(selector), location(selector));

    // The Python string rules the parser is built on.
    for c in content.chars() {
        assert_eq!(pystr::is_space(c), py_isspace(c), "isspace({c:?})");
    }
    assert!(pystr::splitlines(&content).eq(py_splitlines(&content)), "splitlines");
    assert_eq!(pystr::strip(&content), py_strip(&content));
    assert_eq!(pystr::rstrip(&content), py_rstrip(&content));
    assert_eq!(pystr::take_chars(&content, 1000), py_prefix(&content, 1000));

    let parsed = parse_skill_metadata(&content, &location, &default_name);
    assert_eq!(parsed, parse_skill_metadata(&content, &location, &default_name), "not deterministic");
    let expected = nagents_parse_skill_metadata(&content, &location, &default_name);
    let frontmatter = py_splitlines(&content).first().is_some_and(|first| py_strip(first) == "---");

    match parsed {
        Ok(skill) => {
            let (name, description) = (skill.name().as_str(), skill.description());
            assert_eq!(Ok((name.to_owned(), description.to_owned(), location.clone())), expected);
            assert!(is_valid_name(name), "{name:?}");
            assert!(is_bounded_text(description, 1000), "{description:?}");
            assert_eq!(skill.location(), location);
            // Both fields are read from single lines of the file (or are the defaults).
            assert!(name == default_name || content.contains(name));
            assert!(description == FALLBACK_DESCRIPTION || content.contains(description));
            assert!(!description.contains(py_is_line_break));
            assert!(frontmatter || name == default_name);
            assert_eq!(Skill::new(name, description, &location), Ok(skill.clone()));
        }
        Err(error) => {
            let message = error.to_string();
            assert_eq!(Err(message.clone()), expected);
            assert_eq!(error.kind().message(&location), message);
            match error.kind() {
                MetadataErrorKind::Invalid(invalid) => assert_eq!(invalid.to_string(), message),
                _ => {
                    assert!(frontmatter, "a frontmatter error without frontmatter: {message}");
                    assert!(message.starts_with(&format!("{location}: ")));
                }
            }
        }
    }
});
