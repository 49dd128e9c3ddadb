//! The frontmatter's YAML, read only as deep as the rules look.
//!
//! The rules read the top-level mapping, the values under its keys, and the entries of those
//! values (`metadata`'s keys and values, the items of an `allowed-tools` list). So the tree kept
//! here stops there: a collection deeper than that is kept as its kind alone. That bounds what a
//! hostile file can make us hold, and keeps the tree shallow: a deep `[[[[...` never turns into
//! a deep Rust structure whose drop would recurse. Aliases share the anchored node (`Rc`), so
//! an alias bomb ("billion laughs") costs one pointer per alias, never a copy.
//!
//! Scalars are typed by the YAML 1.2 core schema, as YAML 1.2 readers type them: a plain `1.0`
//! is a number, `true` a boolean, an empty value null; quoted and block scalars are strings.
//! The rules then say when a field that must be a string is not one.
//!
//! The whole document is still parsed, to its end: a syntax error anywhere, a second document,
//! or a key given twice in any mapping (YAML requires keys to be unique) makes it not YAML.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::rc::Rc;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};

/// Collections at this depth and deeper (the document's root is depth 0) are kept as their kind.
const COLLAPSED_DEPTH: usize = 2;

/// A node as far as it was kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Scalar(Scalar),
    Sequence(Vec<Rc<Node>>),
    Mapping(Entries),
    /// A collection below the depth the rules read.
    Collapsed(CollectionKind),
}

/// A mapping's entries, in the document's order.
pub type Entries = Vec<(Rc<Node>, Rc<Node>)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectionKind {
    Sequence,
    Mapping,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    pub text: Box<str>,
    pub kind: ScalarKind,
}

/// What a scalar is under the core schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    String,
    Null,
    Boolean,
    Number,
    /// A tag outside the core schema (`!thing`), shown as written.
    Tagged(Box<str>),
}

impl Node {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(Scalar { text, kind: ScalarKind::String }) => Some(text),
            _ => None,
        }
    }

    /// What the node is, for a message: "a string", "a number", "a list", ...
    pub fn describe(&self) -> String {
        match self {
            Node::Scalar(scalar) => match &scalar.kind {
                ScalarKind::String => "a string".to_owned(),
                ScalarKind::Null => "empty (null)".to_owned(),
                ScalarKind::Boolean => format!("a boolean ({})", scalar.text),
                ScalarKind::Number => format!("a number ({})", scalar.text),
                ScalarKind::Tagged(tag) => format!("a value tagged {tag}"),
            },
            Node::Sequence(_) | Node::Collapsed(CollectionKind::Sequence) => "a list".to_owned(),
            Node::Mapping(_) | Node::Collapsed(CollectionKind::Mapping) => "a mapping".to_owned(),
        }
    }

    /// The node as a key is shown in a message: a scalar's text, a collection's kind.
    pub fn key_text(&self) -> String {
        match self {
            Node::Scalar(scalar) => scalar.text.to_string(),
            other => format!("({})", other.describe()),
        }
    }
}

/// Why the frontmatter is not YAML, with the line it was found on (1-based, in the YAML text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (line {} of the frontmatter)", self.reason, self.line)
    }
}

/// Parses one YAML document. `Ok(None)` when the text holds no document at all (only comments
/// or nothing).
pub fn parse(text: &str) -> Result<Option<Rc<Node>>, YamlError> {
    parse_to_depth(text, COLLAPSED_DEPTH)
}

/// [`parse`], keeping collections down to `depth` (the root is depth 0) rather than to the
/// depth the rules read: the whole frontmatter, as MCP's skill listing copies it.
pub fn parse_to_depth(text: &str, depth: usize) -> Result<Option<Rc<Node>>, YamlError> {
    let mut builder = Builder { collapse_at: depth, ..Builder::default() };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(scan_error)?;
        if let Some(done) = builder.on_event(event, span)? {
            return Ok(done);
        }
    }
    // The parser always ends with StreamEnd, which returns above; an input that stops early
    // is an error it reports.
    Ok(builder.root)
}

fn scan_error(error: ScanError) -> YamlError {
    YamlError { line: error.marker().line(), reason: error.info().to_owned() }
}

/// A collection being read.
struct Frame {
    kind: CollectionKind,
    anchor: usize,
    /// The children, while this collection is kept; `None` below the depth the rules read.
    children: Option<Vec<Rc<Node>>>,
    /// The scalar keys seen so far, for a mapping (every mapping, kept or not).
    keys: HashSet<(ScalarKind, Box<str>)>,
    /// For a mapping: the next node is a key.
    expecting_key: bool,
}

#[derive(Default)]
struct Builder {
    /// Collections at this depth and deeper are kept as their kind.
    collapse_at: usize,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Rc<Node>>,
    root: Option<Rc<Node>>,
    documents: usize,
}

impl Builder {
    /// Takes one event; `Some(result)` once the stream has ended.
    fn on_event(&mut self, event: Event<'_>, span: Span) -> Result<Option<Option<Rc<Node>>>, YamlError> {
        let line = span.start.line();
        match event {
            Event::StreamEnd => return Ok(Some(self.root.take())),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(YamlError { line, reason: "more than one YAML document".to_owned() });
                }
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::Scalar(text, style, anchor, tag) => {
                let kind = scalar_kind(&text, style, tag.as_deref());
                let node = Rc::new(Node::Scalar(Scalar { text: text.into(), kind }));
                self.remember(anchor, &node);
                self.add(node, line)?;
            }
            Event::Alias(anchor) => {
                // Every anchored node is remembered, and the parser refuses an alias to an anchor
                // it has not seen; this is only the answer to a parser that would not.
                let node = self.anchors.get(&anchor).cloned();
                let node = node.ok_or_else(|| YamlError { line, reason: "unknown anchor".to_owned() })?;
                self.add(node, line)?;
            }
            Event::SequenceStart(anchor, _) => self.open(CollectionKind::Sequence, anchor),
            Event::MappingStart(anchor, _) => self.open(CollectionKind::Mapping, anchor),
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else {
                    return Err(YamlError { line, reason: "a collection ends that never began".to_owned() });
                };
                let node = Rc::new(match (frame.kind, frame.children) {
                    (CollectionKind::Sequence, Some(children)) => Node::Sequence(children),
                    (CollectionKind::Mapping, Some(children)) => {
                        let mut pairs = Vec::with_capacity(children.len() / 2);
                        let mut children = children.into_iter();
                        while let (Some(key), Some(value)) = (children.next(), children.next()) {
                            pairs.push((key, value));
                        }
                        Node::Mapping(pairs)
                    }
                    (kind, None) => Node::Collapsed(kind),
                });
                self.remember(frame.anchor, &node);
                self.add(node, line)?;
            }
        }
        Ok(None)
    }

    fn open(&mut self, kind: CollectionKind, anchor: usize) {
        let kept = self.stack.len() < self.collapse_at;
        self.stack.push(Frame {
            kind,
            anchor,
            children: kept.then(Vec::new),
            keys: HashSet::new(),
            expecting_key: true,
        });
    }

    fn remember(&mut self, anchor: usize, node: &Rc<Node>) {
        if anchor != 0 {
            self.anchors.insert(anchor, Rc::clone(node));
        }
    }

    /// Adds a finished node to the collection being read, or makes it the document's root.
    fn add(&mut self, node: Rc<Node>, line: usize) -> Result<(), YamlError> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        if frame.kind == CollectionKind::Mapping {
            if frame.expecting_key
                && let Node::Scalar(key) = &*node
                && !frame.keys.insert((key.kind.clone(), key.text.clone()))
            {
                return Err(YamlError { line, reason: format!("the key '{}' is given twice", key.text) });
            }
            frame.expecting_key = !frame.expecting_key;
        }
        if let Some(children) = &mut frame.children {
            children.push(node);
        }
        Ok(())
    }
}

/// The core schema's type of a scalar (YAML 1.2.2, 10.3): only plain scalars are resolved by
/// their text; quoted and block scalars are strings; a core tag says the type outright.
fn scalar_kind(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> ScalarKind {
    if let Some(tag) = tag {
        if tag.is_yaml_core_schema() {
            return match tag.suffix.as_str() {
                "str" => ScalarKind::String,
                "null" => ScalarKind::Null,
                "bool" => ScalarKind::Boolean,
                "int" | "float" => ScalarKind::Number,
                _ => ScalarKind::Tagged(tag.to_string().into()),
            };
        }
        // The non-specific tag `!` (which the parser gives as an empty handle and the suffix
        // `!`) makes a plain scalar a string.
        if tag.handle.is_empty() && tag.suffix == "!" {
            return ScalarKind::String;
        }
        return ScalarKind::Tagged(tag.to_string().into());
    }
    if style != ScalarStyle::Plain {
        return ScalarKind::String;
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => ScalarKind::Null,
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => ScalarKind::Boolean,
        _ if is_core_int(text) || is_core_float(text) => ScalarKind::Number,
        _ => ScalarKind::String,
    }
}

fn digits(text: &str, radix: u32) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_digit(radix))
}

/// `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`.
fn is_core_int(text: &str) -> bool {
    if let Some(octal) = text.strip_prefix("0o") {
        return digits(octal, 8);
    }
    if let Some(hex) = text.strip_prefix("0x") {
        return digits(hex, 16);
    }
    digits(text.strip_prefix(['-', '+']).unwrap_or(text), 10)
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, `[-+]?\.(inf|Inf|INF)`,
/// `\.(nan|NaN|NAN)`.
fn is_core_float(text: &str) -> bool {
    if matches!(text, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => digits(fraction, 10),
        Some((whole, fraction)) => digits(whole, 10) && fraction.chars().all(|c| c.is_ascii_digit()),
        None => digits(mantissa, 10),
    };
    let exponent_ok = exponent.is_none_or(|exponent| digits(exponent.strip_prefix(['-', '+']).unwrap_or(exponent), 10));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Rc<Node> {
        parse(text).unwrap().unwrap()
    }

    fn entries(node: &Node) -> Vec<(String, String)> {
        let Node::Mapping(pairs) = node else { panic!("{node:?}") };
        pairs.iter().map(|(key, value)| (key.key_text(), value.describe())).collect()
    }

    #[test]
    fn plain_scalars_are_typed_by_the_core_schema() {
        let cases = [
            ("a", "a string"),
            ("'1.0'", "a string"),
            ("\"true\"", "a string"),
            ("|\n  1.0", "a string"),
            ("1.0", "a number (1.0)"),
            ("-12", "a number (-12)"),
            ("0x1F", "a number (0x1F)"),
            ("0o17", "a number (0o17)"),
            ("1e3", "a number (1e3)"),
            (".5", "a number (.5)"),
            ("-.inf", "a number (-.inf)"),
            (".NaN", "a number (.NaN)"),
            ("1.2.3", "a string"),
            ("0x", "a string"),
            ("+-5", "a string"),
            ("1_000", "a string"),
            ("yes", "a string"),
            ("True", "a boolean (True)"),
            ("~", "empty (null)"),
            ("", "empty (null)"),
            ("!!str 12", "a string"),
            ("! 12", "a string"),
            ("!!int '12'", "a number (12)"),
            ("!thing x", "a value tagged !thing"),
            ("[a]", "a list"),
            ("{a: b}", "a mapping"),
        ];
        for (value, described) in cases {
            let node = root(&format!("k: {value}\n"));
            assert_eq!(entries(&node), [("k".to_owned(), described.to_owned())], "{value}");
        }
    }

    #[test]
    fn what_is_not_one_yaml_document() {
        for (text, reason) in [
            ("a: [b\n", "expected ',' or ']'"),
            ("a: b\na: c\n", "the key 'a' is given twice"),
            ("a:\n  x: 1\n  'x': 2\n", "the key 'x' is given twice"),
            ("a: [[[{x: 1, x: 2}]]]\n", "the key 'x' is given twice"),
            ("a: 1\n...\nb: 2\n", "more than one YAML document"),
            ("a: *nowhere\n", "unknown anchor"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.reason.contains(reason), "{text:?}: {error}");
        }
        // Keys of different types are different keys.
        assert!(parse("1: a\n'1': b\n").is_ok());
        assert_eq!(parse("# nothing\n").unwrap(), None);
        assert_eq!(parse("").unwrap(), None);
    }

    #[test]
    fn only_two_levels_are_kept() {
        let node = root("m:\n  a: {b: {c: d}}\n  l: [1, [2]]\n");
        let Node::Mapping(top) = &*node else { panic!() };
        let Node::Mapping(m) = &*top[0].1 else { panic!() };
        assert_eq!(*m[0].1, Node::Collapsed(CollectionKind::Mapping));
        assert_eq!(*m[1].1, Node::Collapsed(CollectionKind::Sequence));
    }

    #[test]
    fn hostile_documents_stay_small() {
        // Aliases share their anchor: ten levels of ten aliases each would be 10^10 nodes copied.
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let aliases = vec![format!("*a{}", level - 1); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{aliases}]\n"));
        }
        assert_eq!(entries(&root(&text)).len(), 10);
        // Deep nesting is read without recursion and kept shallow: block collections to any depth,
        // flow collections to the parser's bound (255 levels), beyond which it is an error.
        let mut deep = String::new();
        for level in 0..2_000 {
            deep.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
        }
        deep.push_str(&format!("{}end: x\n", " ".repeat(2_000)));
        assert_eq!(entries(&root(&deep)), [("k0".to_owned(), "a mapping".to_owned())]);
        let flow = |depth| format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(entries(&root(&flow(255))), [("a".to_owned(), "a list".to_owned())]);
        assert_eq!(parse(&flow(100_000)).unwrap_err().reason, "recursion limit exceeded");
    }
}
