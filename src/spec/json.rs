//! The whole frontmatter as JSON, the way SEP-2640's `skills/list` carries it ("the skill's
//! `SKILL.md` YAML frontmatter rendered verbatim as a JSON object").
//!
//! Scalars are typed by the YAML 1.2 core schema, as YAML 1.2 readers (the `yaml` package of
//! Node.js, for one) type them. What JSON cannot say is refused rather than bent: a number JSON
//! has no form for (`.inf`, `.nan`), a frontmatter nested deeper than [`MAX_DEPTH`], or one whose
//! aliases would expand past [`MAX_NODES`] values (an alias bomb).

use serde_json::{Map, Number, Value};

use super::frontmatter_text;
use super::yaml::{self, Node, ScalarKind};

/// Collections nested deeper than this are refused.
pub const MAX_DEPTH: usize = 32;

/// JSON values the frontmatter may expand to (aliases counted each time they are used).
pub const MAX_NODES: usize = 10_000;

/// The frontmatter of `content` (a `SKILL.md`) as a JSON object, or why it cannot be one.
pub fn frontmatter_json(content: &str) -> Result<Map<String, Value>, String> {
    let text = frontmatter_text(content)?;
    let root = yaml::parse_to_depth(&text, MAX_DEPTH).map_err(|error| {
        format!("the frontmatter is not valid YAML: {} (line {} of SKILL.md)", error.reason, error.line + 1)
    })?;
    let mut budget = MAX_NODES;
    match root.as_deref() {
        Some(Node::Mapping(entries)) => {
            let mut object = Map::new();
            for (key, value) in entries {
                object.insert(key_text(key)?, to_json(value, &mut budget)?);
            }
            Ok(object)
        }
        Some(other) => Err(format!("the frontmatter is {}, not a mapping of fields", other.describe())),
        None => Err("the frontmatter is empty: it needs at least name and description".to_owned()),
    }
}

fn key_text(key: &Node) -> Result<String, String> {
    match key {
        Node::Scalar(scalar) => Ok(scalar.text.to_string()),
        other => Err(format!("the frontmatter has a key that is {}, which JSON cannot hold", other.describe())),
    }
}

fn to_json(node: &Node, budget: &mut usize) -> Result<Value, String> {
    *budget =
        budget.checked_sub(1).ok_or_else(|| format!("the frontmatter expands to more than {MAX_NODES} values"))?;
    Ok(match node {
        Node::Scalar(scalar) => match &scalar.kind {
            ScalarKind::String | ScalarKind::Tagged(_) => Value::String(scalar.text.to_string()),
            ScalarKind::Null => Value::Null,
            ScalarKind::Boolean => Value::Bool(scalar.text.eq_ignore_ascii_case("true")),
            ScalarKind::Number => Value::Number(number(&scalar.text)?),
        },
        Node::Sequence(items) => {
            Value::Array(items.iter().map(|item| to_json(item, budget)).collect::<Result<_, _>>()?)
        }
        Node::Mapping(entries) => {
            let mut object = Map::new();
            for (key, value) in entries {
                object.insert(key_text(key)?, to_json(value, budget)?);
            }
            Value::Object(object)
        }
        Node::Collapsed(_) => return Err(format!("the frontmatter is nested deeper than {MAX_DEPTH} levels")),
    })
}

/// A core-schema number (already known to be one) as JSON.
fn number(text: &str) -> Result<Number, String> {
    let integer = if let Some(octal) = text.strip_prefix("0o") {
        i64::from_str_radix(octal, 8).ok()
    } else if let Some(hex) = text.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else {
        text.parse::<i64>().ok()
    };
    if let Some(integer) = integer {
        return Ok(Number::from(integer));
    }
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .ok_or_else(|| format!("the frontmatter holds the number {text}, which JSON cannot represent"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_frontmatter_is_copied_whole_and_typed() {
        let content = "---\nname: pdf\ndescription: \"Fill: forms\"\nlicense: MIT\nmetadata:\n  version: 2.1\n  \
                       tags: [a, b]\n  nested: {deep: {deeper: [1, 0x10, 0o10, -3, true, ~]}}\nallowed-tools: Read \
                       Write\n---\n# Body\n";
        assert_eq!(
            Value::Object(frontmatter_json(content).unwrap()),
            json!({
                "name": "pdf", "description": "Fill: forms", "license": "MIT",
                "metadata": {"version": 2.1, "tags": ["a", "b"], "nested": {"deep": {"deeper": [1, 16, 8, -3, true, null]}}},
                "allowed-tools": "Read Write",
            })
        );
    }

    #[test]
    fn what_json_cannot_hold_is_refused() {
        let refused = |content: &str| frontmatter_json(content).unwrap_err();
        assert!(refused("---\nname: a\nweight: .inf\n---\n").contains(".inf"));
        assert!(refused("---\n[a]: b\n---\n").contains("key"));
        let deep = format!("---\nname: {}{}\n---\n", "[".repeat(40), "]".repeat(40));
        assert!(refused(&deep).contains("deeper"));
        // Nine levels of ten aliases each: far more values than the bound, never built.
        let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let previous = format!("*a{}", level - 1);
            bomb.push_str(&format!("a{level}: &a{level} [{}]\n", vec![previous; 10].join(", ")));
        }
        bomb.push_str("---\n");
        assert!(refused(&bomb).contains("more than"));
        assert!(refused("no frontmatter\n").contains("no YAML frontmatter"));
        assert!(refused("---\n- a\n---\n").contains("not a mapping"));
    }
}
