//! Oracles for the fuzz targets: nagents 0.25.2 (`nagents/skills/types.py`) restated over plain
//! Rust strings, written from the Python source and not from skillcat-core, so that a target
//! compares two independent readings of the same rules.
//!
//! Python's `\w` is the one rule taken from skillcat-core (`pystr::is_word`): its table is
//! generated from Python's `re`, and restating 734 ranges here would only copy it.

/// Python's `str.isspace()` for one character: Unicode White_Space, which is what
/// `char::is_whitespace` tests, plus the information separators U+001C..=U+001F.
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// Python's `str.rstrip()`.
pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(py_isspace)
}

/// The characters at which Python's `str.splitlines()` breaks a line.
pub fn py_is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\u{b}' | '\u{c}' | '\r' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Python's `str.splitlines()`: `\r\n` is one break, and a final break opens no empty line.
pub fn py_splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if py_is_line_break(c) {
            lines.push(&s[start..at]);
            start = at + c.len_utf8();
            if c == '\r' && chars.next_if(|&(_, next)| next == '\n').is_some() {
                start += 1;
            }
        }
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// Python's `s[:n]`.
pub fn py_prefix(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Python's `html.escape(s, quote=True)`.
pub fn py_html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#x27;")
}

/// The characters of nagents' name pattern `[A-Za-z0-9_-]`.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `_NAME.fullmatch(name)`: `[A-Za-z0-9_-]{1,64}`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.chars().count()) && name.chars().all(is_name_char)
}

/// The nonblank-and-bounded check of `Skill.__post_init__` for description and location.
pub fn is_bounded_text(text: &str, max_chars: usize) -> bool {
    !py_strip(text).is_empty() && text.chars().count() <= max_chars
}

/// nagents' `Skill(name, description, location)`: the descriptor, or the `ValueError` message.
pub fn nagents_skill(name: &str, description: &str, location: &str) -> Result<(String, String, String), String> {
    if !is_valid_name(name) {
        return Err("Skill name must contain 1-64 ASCII letters, digits, underscores or hyphens".into());
    }
    for (field, value, limit) in [("description", description, 1000), ("location", location, 4096)] {
        if !is_bounded_text(value, limit) {
            return Err(format!("Skill {field} must be nonblank text of at most {limit} characters"));
        }
    }
    Ok((name.into(), description.into(), location.into()))
}

/// nagents' `parse_skill_metadata`, line for line: the descriptor or the error message.
pub fn nagents_parse_skill_metadata(
    content: &str,
    location: &str,
    default_name: &str,
) -> Result<(String, String, String), String> {
    let mut name = default_name.to_owned();
    let mut description = String::new();
    let mut lines = py_splitlines(content);
    if lines.first().is_some_and(|first| py_strip(first) == "---") {
        let Some(end) = (1..lines.len()).find(|&index| py_rstrip(lines[index]) == "---") else {
            return Err(format!("{location}: unterminated skill frontmatter"));
        };
        let mut seen: Vec<&str> = Vec::new();
        for line in &lines[1..end] {
            if line.chars().next().is_none_or(py_isspace) {
                continue;
            }
            // line.partition(":")
            let (key, separator, value) = match line.find(':') {
                Some(at) => (&line[..at], true, &line[at + 1..]),
                None => (&line[..], false, ""),
            };
            let key = py_strip(key);
            if key != "name" && key != "description" {
                continue;
            }
            let value: Vec<char> = py_strip(value).chars().collect();
            if seen.contains(&key) || !separator || value.is_empty() || "|>{[&*!".contains(value[0]) {
                return Err(format!("{location}: use one single-line {key} value"));
            }
            seen.push(key);
            let mut value: &[char] = &value;
            if "\"'".contains(value[0]) {
                if value.len() < 2 || value[value.len() - 1] != value[0] {
                    return Err(format!("{location}: unclosed {key} quote"));
                }
                value = &value[1..value.len() - 1];
            }
            if key == "name" {
                name = value.iter().collect();
            } else {
                description = value.iter().collect();
            }
        }
        lines = lines.split_off(end + 1);
    }
    if description.is_empty() {
        description = lines
            .iter()
            .find(|line| !py_strip(line).is_empty() && !line.starts_with('#'))
            .map_or_else(String::new, |line| py_strip(line).to_owned());
    }
    if description.is_empty() {
        description = "Load with skill(name) for instructions.".to_owned();
    }
    nagents_skill(&name, &py_prefix(&description, 1000), location)
}

/// nagents' `explicit_skill_names`: the matches of
/// `(?<![\w$\\])\$([A-Za-z0-9_-]{1,64})(?![\w-])` in `finditer` order, without repeats.
/// The quantifier backtracks as a regex engine would: every length from 64 down to 1 is tried.
pub fn nagents_explicit_skill_names(text: &str, is_word: impl Fn(char) -> bool) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut names: Vec<String> = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let behind_ok = || at == 0 || !(is_word(chars[at - 1]) || chars[at - 1] == '$' || chars[at - 1] == '\\');
        let matched = if chars[at] == '$' && behind_ok() {
            let run = chars[at + 1..].iter().take(64).take_while(|&&c| is_name_char(c)).count();
            (1..=run).rev().find(|&len| chars.get(at + 1 + len).is_none_or(|&next| !is_word(next) && next != '-'))
        } else {
            None
        };
        match matched {
            Some(len) => {
                let name: String = chars[at + 1..at + 1 + len].iter().collect();
                if !names.contains(&name) {
                    names.push(name);
                }
                at += 1 + len;
            }
            None => at += 1,
        }
    }
    names
}

/// A cursor over fuzz input that reads from the front only, so seeds are easy to write by hand
/// (each target describes its layout at the top). Reads past the end yield what is left.
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { rest: data }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.rest.split_at(n.min(self.rest.len()));
        self.rest = rest;
        head
    }

    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    /// Up to eight little-endian bytes.
    pub fn uint(&mut self, width: usize) -> u64 {
        let mut buf = [0u8; 8];
        let bytes = self.bytes(width.min(8));
        buf[..bytes.len()].copy_from_slice(bytes);
        u64::from_le_bytes(buf)
    }

    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.rest.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_as_python() {
        assert_eq!(py_splitlines(""), Vec::<&str>::new());
        assert_eq!(py_splitlines("\n"), [""]);
        assert_eq!(py_splitlines("a\r\nb\rc\u{2028}\u{85}"), ["a", "b", "c", ""]);
        assert_eq!(py_splitlines("a\n\nb"), ["a", "", "b"]);
    }

    #[test]
    fn parse_model_follows_nagents() {
        let ok = |name: &str, description: &str| Ok((name.into(), description.into(), "/l".into()));
        assert_eq!(nagents_parse_skill_metadata("# T\n\n x \n", "/l", "d"), ok("d", "x"));
        assert_eq!(nagents_parse_skill_metadata("---\nname: 'n'\n---\n", "/l", "d"), ok("n", FALLBACK));
        assert_eq!(
            nagents_parse_skill_metadata("---\nname: \"\n---", "/l", "d"),
            Err("/l: unclosed name quote".into())
        );
        assert_eq!(nagents_parse_skill_metadata("---\n", "/l", "d"), Err("/l: unterminated skill frontmatter".into()));
    }

    #[test]
    fn reference_model_backtracks() {
        let ascii_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        assert_eq!(nagents_explicit_skill_names("$a $b. $a \\$c $$d x$e $f-", ascii_word), ["a", "b", "f-"]);
        assert_eq!(nagents_explicit_skill_names(&format!("${}", "a".repeat(65)), ascii_word), Vec::<String>::new());
    }

    const FALLBACK: &str = "Load with skill(name) for instructions.";
}
