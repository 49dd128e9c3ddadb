//! Python's string rules, where nagents' results depend on them.
//!
//! Rust's `char::is_whitespace`, `str::lines` and `str::len` disagree with Python's `str.isspace`,
//! `str.splitlines` and `len` in ways that change parsed skills, so the parser and the manifest use
//! these instead. File names may not be UTF-8: Python decodes them with `surrogateescape`, one
//! lone surrogate per undecodable byte. [`Units`] walks raw bytes the same way, so lengths, cuts
//! and sort orders of such names match Python's.

use std::borrow::Cow;
use std::cmp::Ordering;

mod word_table;

/// Python's `str.isspace()`: Unicode White_Space plus the separators U+001C..=U+001F.
pub fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python's `str.strip()` with no argument.
pub fn strip(s: &str) -> &str {
    rstrip(lstrip(s))
}

/// Python's `str.lstrip()` with no argument. ASCII bytes are looked at as bytes; the first
/// other byte starts a character, which is decoded.
fn lstrip(s: &str) -> &str {
    match s.bytes().position(|b| !is_ascii_space(b)) {
        Some(at) if s.as_bytes()[at].is_ascii() => &s[at..],
        Some(at) => s[at..].trim_start_matches(is_space),
        None => "",
    }
}

/// Python's `str.rstrip()` with no argument, ASCII bytes looked at as [`lstrip`] does.
pub fn rstrip(s: &str) -> &str {
    match s.bytes().rposition(|b| !is_ascii_space(b)) {
        Some(at) if s.as_bytes()[at].is_ascii() => &s[..=at],
        // The last byte of a character: everything after it is ASCII space.
        Some(at) => s[..=at].trim_end_matches(is_space),
        None => "",
    }
}

/// [`is_space`] for an ASCII byte; false for every byte of a multi-byte character.
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | 0x1c..=b' ')
}

/// Python's `str.splitlines()` (without `keepends`): breaks at `\n`, `\r\n`, `\r`, `\v`, `\f`,
/// `\x1c`, `\x1d`, `\x1e`, `\x85`, U+2028 and U+2029, with no empty line after a final break.
pub fn splitlines(s: &str) -> Lines<'_> {
    Lines { rest: s }
}

/// The lines of [`splitlines`], produced lazily.
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        let bytes = self.rest.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            // Eight bytes at a time while none can start a break: every break starts with a
            // control character or with a byte of a multi-byte character.
            if let Some(word) = bytes.get(at..at + 8)
                && !may_start_break(u64::from_le_bytes(word.try_into().expect("eight bytes")))
            {
                at += 8;
                continue;
            }
            // The end of this line and the start of the next, if a break starts at `at`.
            let line_break = match bytes[at] {
                b'\r' if bytes.get(at + 1) == Some(&b'\n') => Some(2),
                b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1e => Some(1),
                0xC2 if bytes.get(at + 1) == Some(&0x85) => Some(2),
                0xE2 if bytes.get(at + 1) == Some(&0x80) && matches!(bytes.get(at + 2), Some(0xA8 | 0xA9)) => Some(3),
                _ => None,
            };
            if let Some(width) = line_break {
                let line = &self.rest[..at];
                self.rest = &self.rest[at + width..];
                return Some(line);
            }
            at += 1;
        }
        let line = self.rest;
        self.rest = "";
        Some(line)
    }
}

/// Whether any of the eight bytes of `word` is below 0x20 or above 0x7F.
fn may_start_break(word: u64) -> bool {
    any_byte_below(word, 0x20) || word & HIGH_BITS != 0
}

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGH_BITS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Whether any of the eight bytes of `word` is below `bound` (at most 0x80), tested without a
/// branch per byte: a byte below `bound` borrows through its high bit when `bound` is taken from
/// it; bytes whose high bit was set already are masked out by `!word`. A borrow can only start at
/// a byte below `bound`, so the answer is exact.
pub fn any_byte_below(word: u64, bound: u8) -> bool {
    debug_assert!(bound <= 0x80);
    word.wrapping_sub(ONES * u64::from(bound)) & !word & HIGH_BITS != 0
}

/// Whether any of the eight bytes of `word` is `byte`: the bytes equal to it are those that
/// become zero when it is taken away, and [`any_byte_below`] 1 finds a zero byte.
pub fn any_byte_is(word: u64, byte: u8) -> bool {
    any_byte_below(word ^ (ONES * u64::from(byte)), 1)
}

/// `bytes` as text, each invalid sequence replaced as `String::from_utf8_lossy` replaces it;
/// borrowed when they are valid UTF-8, which is checked first the fast way.
pub fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Python's `len(s)`: the number of code points.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// Python's `s[:n]`: the first `n` code points.
pub fn take_chars(s: &str, n: usize) -> &str {
    // At most `n` bytes are at most `n` code points.
    if s.len() <= n {
        return s;
    }
    match s.char_indices().nth(n) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// Python's `html.escape(s, quote=True)`.
pub fn html_escape(s: &str) -> Cow<'_, str> {
    if !s.contains(['&', '<', '>', '"', '\'']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether Python's `re` matches `c` with `\w`.
pub fn is_word(c: char) -> bool {
    let code = u32::from(c);
    if code < 0x80 {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    word_table::WORD_RANGES
        .binary_search_by(|&(low, high)| {
            if high < code {
                Ordering::Less
            } else if low > code {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_ok()
}

/// One code point of a Python string decoded from bytes with `surrogateescape`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Char(char),
    /// An undecodable byte, which Python holds as the lone surrogate U+DC00 + byte.
    Escaped(u8),
}

impl Unit {
    /// The code point Python holds for this unit; it orders as Python compares strings.
    pub fn code_point(self) -> u32 {
        match self {
            Unit::Char(c) => u32::from(c),
            Unit::Escaped(b) => 0xDC00 + u32::from(b),
        }
    }
}

/// The units of `bytes` decoded as Python's `bytes.decode("utf-8", "surrogateescape")`, each
/// with the length of the bytes it stands for.
pub struct Units<'a> {
    rest: &'a [u8],
}

impl<'a> Units<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Units { rest: bytes }
    }
}

impl Iterator for Units<'_> {
    type Item = (Unit, usize);

    fn next(&mut self) -> Option<Self::Item> {
        let first = *self.rest.first()?;
        if first < 0x80 {
            self.rest = &self.rest[1..];
            return Some((Unit::Char(char::from(first)), 1));
        }
        let width = match first {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => 1,
        };
        let unit =
            self.rest.get(..width).and_then(|head| std::str::from_utf8(head).ok()).and_then(|s| s.chars().next());
        match unit {
            Some(c) => {
                self.rest = &self.rest[width..];
                Some((Unit::Char(c), width))
            }
            None => {
                self.rest = &self.rest[1..];
                Some((Unit::Escaped(first), 1))
            }
        }
    }
}

/// Python's `len` of the surrogate-escaped string of `bytes`.
pub fn unit_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(s) => char_len(s),
        Err(_) => Units::new(bytes).count(),
    }
}

/// The bytes of Python's `s[:n]` for the surrogate-escaped string `s` of `bytes`.
pub fn take_units(bytes: &[u8], n: usize) -> &[u8] {
    let mut end = 0;
    for (_, width) in Units::new(bytes).take(n) {
        end += width;
    }
    &bytes[..end]
}

/// Python's comparison of the surrogate-escaped strings of two byte strings.
pub fn cmp_units(a: &[u8], b: &[u8]) -> Ordering {
    // Where the first differing bytes are both ASCII, the bytes before them decode the same way in
    // both strings (ASCII never continues a sequence), so byte order is Python's order.
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match (a.get(common), b.get(common)) {
        (Some(x), Some(y)) if x.is_ascii() && y.is_ascii() => return x.cmp(y),
        _ if a[..common].is_ascii() && (a.len() == common || b.len() == common) => return a.len().cmp(&b.len()),
        _ => {}
    }
    match (std::str::from_utf8(a), std::str::from_utf8(b)) {
        // UTF-8 byte order is code-point order.
        (Ok(_), Ok(_)) => a.cmp(b),
        _ => Units::new(a).map(|(unit, _)| unit.code_point()).cmp(Units::new(b).map(|(unit, _)| unit.code_point())),
    }
}

/// Python's `repr()` of the surrogate-escaped string of `bytes`.
///
/// Printability follows Python for controls, separators, format characters, surrogates and
/// private use; unassigned code points (which Python also escapes) print as they are.
pub fn repr(bytes: &[u8]) -> String {
    let has_single = bytes.contains(&b'\'');
    let quote = if has_single && !bytes.contains(&b'"') { '"' } else { '\'' };
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push(quote);
    for (unit, _) in Units::new(bytes) {
        match unit {
            Unit::Escaped(b) => out.push_str(&format!("\\udc{b:02x}")),
            Unit::Char(c) if c == quote || c == '\\' => {
                out.push('\\');
                out.push(c);
            }
            Unit::Char('\n') => out.push_str("\\n"),
            Unit::Char('\r') => out.push_str("\\r"),
            Unit::Char('\t') => out.push_str("\\t"),
            Unit::Char(c) if is_printable(c) => out.push(c),
            Unit::Char(c) => {
                let code = u32::from(c);
                if code <= 0xFF {
                    out.push_str(&format!("\\x{code:02x}"));
                } else if code <= 0xFFFF {
                    out.push_str(&format!("\\u{code:04x}"));
                } else {
                    out.push_str(&format!("\\U{code:08x}"));
                }
            }
        }
    }
    out.push(quote);
    out
}

fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || is_space(c)
        || matches!(c,
            '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{890}' | '\u{891}'
            | '\u{8e2}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
            | '\u{e000}'..='\u{f8ff}' | '\u{f0000}'..='\u{10ffff}' | '\u{e0001}' | '\u{e0020}'..='\u{e007f}'))
}

/// Python's message for `bytes.decode("utf-8")` failing with `error`.
pub fn utf8_error_message(bytes: &[u8], error: &std::str::Utf8Error) -> String {
    let start = error.valid_up_to();
    let (end, reason) = match error.error_len() {
        None => (bytes.len(), "unexpected end of data"),
        Some(len) => {
            let reason = match bytes[start] {
                0xC2..=0xF4 => "invalid continuation byte",
                _ => "invalid start byte",
            };
            (start + len, reason)
        }
    };
    if end - start == 1 {
        format!("'utf-8' codec can't decode byte 0x{:02x} in position {start}: {reason}", bytes[start])
    } else {
        format!("'utf-8' codec can't decode bytes in position {start}-{}: {reason}", end - 1)
    }
}

/// Python's `str(OSError)` for a failed call on `filename`: `[Errno 2] No such file or
/// directory: 'name'`.
pub fn os_error_message(error: &std::io::Error, filename: &[u8]) -> String {
    let Some(code) = error.raw_os_error() else {
        return error.to_string();
    };
    let text = std::io::Error::from_raw_os_error(code).to_string();
    let suffix = format!(" (os error {code})");
    let text = text.strip_suffix(&suffix).unwrap_or(&text);
    format!("[Errno {code}] {text}: {}", repr(filename))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_includes_python_separators() {
        for c in ['\u{1c}', '\u{1d}', '\u{1e}', '\u{1f}', '\u{85}', '\u{3000}'] {
            assert!(is_space(c), "{c:?}");
        }
        for c in ['\u{feff}', '\u{200b}', 'a', '\u{180e}'] {
            assert!(!is_space(c), "{c:?}");
        }
        assert_eq!(strip("\u{1f} a \u{a0}"), "a");
    }

    /// Stripping by bytes where they are ASCII gives what stripping by characters gives, for
    /// every string of up to three pieces drawn from spaces of each kind and other characters.
    #[test]
    fn strips_match_stripping_by_characters() {
        let pieces = [
            "", " ", "\t", "\r\n", "\u{b}", "\u{1c}", "\u{1f}", "\u{85}", "\u{a0}", "\u{3000}", "\u{2029}", "a", "é",
            "\u{feff}", "\u{200b}", "-", "\u{7f}", "\u{0}", "日本",
        ];
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let text = format!("{a}{b}{c}");
                    assert_eq!(strip(&text), text.trim_matches(is_space), "{text:?}");
                    assert_eq!(rstrip(&text), text.trim_end_matches(is_space), "{text:?}");
                    assert_eq!(lstrip(&text), text.trim_start_matches(is_space), "{text:?}");
                }
            }
        }
        for byte in 0..=0x7f_u8 {
            assert_eq!(is_ascii_space(byte), is_space(char::from(byte)), "{byte:#x}");
        }
        for byte in 0x80..=0xff_u8 {
            assert!(!is_ascii_space(byte), "{byte:#x}");
        }
    }

    /// The word tests against a byte-by-byte loop, for every byte at every position of words
    /// whose other bytes are the edges of the ranges tested.
    #[test]
    fn word_tests_match_byte_tests() {
        for fill in [0x00_u8, 0x1f, 0x20, 0x21, 0x5c, 0x7f, 0x80, 0xff] {
            for byte in 0..=0xff_u8 {
                for at in 0..8 {
                    let mut bytes = [fill; 8];
                    bytes[at] = byte;
                    let word = u64::from_le_bytes(bytes);
                    for bound in [1, 0x20, 0x80] {
                        assert_eq!(any_byte_below(word, bound), bytes.iter().any(|&b| b < bound), "{bytes:?} {bound}");
                    }
                    for wanted in [0x00, b'"', b'\\', 0xff] {
                        assert_eq!(any_byte_is(word, wanted), bytes.contains(&wanted), "{bytes:?} {wanted}");
                    }
                    let breaks = bytes.iter().any(|&b| !(0x20..=0x7f).contains(&b));
                    assert_eq!(may_start_break(word), breaks, "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn short_texts_are_taken_whole_and_lossy_text_is_borrowed_when_valid() {
        assert_eq!(take_chars("éé", 2), "éé");
        assert_eq!(take_chars("éé", 3), "éé");
        assert_eq!(take_chars("ééé", 2), "éé");
        assert_eq!(take_chars("abc", 2), "ab");
        assert!(matches!(lossy(b"caf\xc3\xa9"), Cow::Borrowed("café")));
        assert_eq!(lossy(b"a\xffb"), String::from_utf8_lossy(b"a\xffb"));
        assert!(matches!(lossy(b"a\xffb"), Cow::Owned(_)));
    }

    #[test]
    fn splitlines_matches_python() {
        let lines = |s| splitlines(s).collect::<Vec<_>>();
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a\n"), ["a"]);
        assert_eq!(lines("a\n\n"), ["a", ""]);
        assert_eq!(lines("a\r\nb\rc\u{2028}d\u{1f}e\u{85}f\u{2029}"), ["a", "b", "c", "d\u{1f}e", "f"]);
        assert_eq!(lines("\r\r\n\u{b}\u{c}\u{1c}\u{1d}\u{1e}x\u{2027}"), ["", "", "", "", "", "", "", "x\u{2027}"]);
        // Breaks at every offset of a run of eight bytes that may be skipped whole.
        for at in 0..20 {
            for line_break in ["\n", "\r\n", "\u{b}", "\u{1e}", "\u{85}", "\u{2028}"] {
                let text = format!("{}{line_break}{}", "a".repeat(at), "b".repeat(20 - at));
                assert_eq!(splitlines(&text).collect::<Vec<_>>(), ["a".repeat(at), "b".repeat(20 - at)], "{text:?}");
            }
        }
    }

    #[test]
    fn only_bytes_outside_printable_ascii_may_start_a_break() {
        for byte in 0..=u8::MAX {
            for at in 0..8 {
                let mut word = [b'x'; 8];
                word[at] = byte;
                let expected = !(0x20..=0x7f).contains(&byte);
                assert_eq!(may_start_break(u64::from_le_bytes(word)), expected, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn html_escape_matches_python() {
        assert_eq!(html_escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt;");
    }

    #[test]
    fn units_escape_each_undecodable_byte() {
        assert_eq!(unit_len(b"a\xe2\x82b"), 4);
        assert_eq!(take_units(b"\xffab", 2), b"\xffa");
        // U+00E9 < U+4E2D < U+DCFF (escaped 0xFF) < U+1F600, unlike byte order.
        let mut names: Vec<&[u8]> = vec![b"\xff", "😀".as_bytes(), "中".as_bytes(), "é".as_bytes()];
        names.sort_by(|a, b| cmp_units(a, b));
        assert_eq!(names, ["é".as_bytes(), "中".as_bytes(), b"\xff", "😀".as_bytes()]);
    }

    #[test]
    fn comparison_follows_code_points() {
        let pairs: &[(&[u8], &[u8])] = &[
            (b"skill-1", b"skill-2"),
            (b"a", b"ab"),
            (b"\xe2\x82", b"\xe2\x82\xac"),
            (b"\xe2\x82a", b"\xe2\x82\xac"),
            ("é".as_bytes(), b"\xff"),
            (b"\xff", "😀".as_bytes()),
            (b"Z", b"a"),
        ];
        for (a, b) in pairs {
            let slow = Units::new(a).map(|(u, _)| u.code_point()).cmp(Units::new(b).map(|(u, _)| u.code_point()));
            assert_eq!(cmp_units(a, b), slow, "{a:?} {b:?}");
            assert_eq!(cmp_units(b, a), slow.reverse(), "{b:?} {a:?}");
        }
    }

    #[test]
    fn repr_matches_python() {
        assert_eq!(repr(b"a'b"), "\"a'b\"");
        assert_eq!(repr(b"a\"b'c"), "'a\"b\\'c'");
        assert_eq!(repr("\x7f\u{85}\u{a0}\u{200b}".as_bytes()), "'\\x7f\\x85\\xa0\\u200b'");
        assert_eq!(repr(b"\xff"), "'\\udcff'");
    }

    #[test]
    fn utf8_errors_read_like_python() {
        let cases: &[(&[u8], &str)] = &[
            (b"\xff", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
            (b"\xe2\x82x", "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"),
            (b"ab\xed\xa0\x80", "'utf-8' codec can't decode byte 0xed in position 2: invalid continuation byte"),
            (b"\xc0\xaf", "'utf-8' codec can't decode byte 0xc0 in position 0: invalid start byte"),
            (b"\xf0\x9f\x98", "'utf-8' codec can't decode bytes in position 0-2: unexpected end of data"),
        ];
        for (bytes, expected) in cases {
            let error = std::str::from_utf8(bytes).unwrap_err();
            assert_eq!(utf8_error_message(bytes, &error), *expected);
        }
    }

    #[test]
    fn os_errors_read_like_python() {
        let error = std::io::Error::from_raw_os_error(2);
        assert_eq!(os_error_message(&error, b"nonexist"), "[Errno 2] No such file or directory: 'nonexist'");
    }

    #[test]
    fn word_characters_follow_python() {
        assert!(is_word('a') && is_word('_') && is_word('é') && is_word('中') && is_word('٣'));
        assert!(!is_word('$') && !is_word('-') && !is_word(' ') && !is_word('\u{300}'));
    }
}
