//! `$name` references in text, found as nagents' `explicit_skill_names` finds them.

use crate::pystr::is_word;
use crate::skill::SkillName;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Distinct `$name` references in order of first appearance.
///
/// A reference is `$` then 1 to 64 name characters, not preceded by a word character, `$` or
/// `\` (so `\$name` and `$$name` are not references) and not followed by a word character or
/// `-` (so a longer run is no reference at all). Word characters are Python's `\w`.
pub fn explicit_skill_names(text: &str) -> Vec<SkillName> {
    let mut names: Vec<SkillName> = Vec::new();
    let mut previous: Option<char> = None;
    for (at, c) in text.char_indices() {
        let before = previous;
        previous = Some(c);
        if c != '$' || before.is_some_and(|p| is_word(p) || p == '$' || p == '\\') {
            continue;
        }
        let rest = &text[at + 1..];
        let run = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        let followed_by_word = rest[run..].chars().next().is_some_and(is_word);
        if (1..=64).contains(&run)
            && !followed_by_word
            && let Ok(name) = SkillName::parse(&rest[..run])
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        explicit_skill_names(text).into_iter().map(String::from).collect()
    }

    #[test]
    fn finds_distinct_references_in_order() {
        assert_eq!(names("use $b then $a, and $b again."), ["b", "a"]);
        assert_eq!(names("$x-y_z9"), ["x-y_z9"]);
    }

    #[test]
    fn ignores_escaped_embedded_and_overlong() {
        assert!(names(r"\$a a$b $$c é$d").is_empty());
        assert!(names(&format!("${}", "a".repeat(65))).is_empty());
        assert_eq!(names(&format!("${}.", "a".repeat(64))).len(), 1);
        assert!(names("$abcé").is_empty());
        assert_eq!(names("$a$b"), ["a"]);
    }
}
