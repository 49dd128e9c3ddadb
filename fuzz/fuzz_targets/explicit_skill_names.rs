//! `explicit_skill_names` against a backtracking reading of nagents' reference pattern
//! `(?<![\w$\\])\$([A-Za-z0-9_-]{1,64})(?![\w-])`.
//!
//! Input: the text, decoded as UTF-8 with invalid bytes replaced.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skillcat_core::{SkillName, explicit_skill_names, pystr};
use skillcat_fuzz::{is_valid_name, nagents_explicit_skill_names, py_isspace};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for c in text.chars() {
        if c.is_ascii() {
            assert_eq!(pystr::is_word(c), c.is_ascii_alphanumeric() || c == '_', "\\w {c:?}");
        }
        assert!(!(py_isspace(c) && pystr::is_word(c)), "{c:?} is both \\w and space");
    }

    let names = explicit_skill_names(&text);
    assert_eq!(names, explicit_skill_names(&text), "not deterministic");
    let names: Vec<&str> = names.iter().map(SkillName::as_str).collect();
    assert_eq!(names, nagents_explicit_skill_names(&text, pystr::is_word));
    for (index, name) in names.iter().enumerate() {
        assert!(is_valid_name(name), "{name:?}");
        assert!(text.contains(&format!("${name}")));
        assert!(!names[..index].contains(name), "{name:?} repeated");
    }
});
