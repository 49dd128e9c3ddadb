//! A skill's Markdown as HTML that is safe to put in a page: rendered with pulldown-cmark, then
//! cleaned by ammonia's allow-list, which keeps no script, no event handler attribute, no style,
//! no frame, no SVG and no URL of a scheme other than http, https and mailto. The page's
//! Content-Security-Policy is a second wall, not the first.
//!
//! Raw HTML in the Markdown cannot take the rest of the page with it. An opening tag with no end
//! tag takes in everything after it, and some elements lose what they hold: the sanitizer drops
//! the content of SVG and MathML elements (`<math>`, `<mtext>`, `<svg>`...) and of `<style>` and
//! `<script>`, the HTML parser reads the content of `<textarea>` or `<plaintext>` as text and may
//! drop what a `<table>` holds. So one line would blank the rest of the page. An opening tag the
//! document never closes is therefore shown as text, unless its element is one the sanitizer keeps
//! with its content (`<p>`, `<li>`, `<div>`, ...; a table excepted) or a void one (`<br>`). And an
//! HTML block that ends inside a comment, a tag or a quoted attribute value is closed where the
//! block ends, so the Markdown after it is read as Markdown, as CommonMark says it is.

use std::borrow::Cow;

use pulldown_cmark::{CowStr, Event, Options, Parser, TagEnd, html};

/// `text` (a `SKILL.md` without its frontmatter) as sanitized HTML. Relative links and images
/// point at the skill's files (`references/a.md` becomes `/skills/{name}/files/references/a.md`).
pub fn render(text: &str, skill: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_FOOTNOTES;
    let mut rendered = String::with_capacity(text.len() * 3 / 2);
    let mut events: Vec<Event<'_>> = Parser::new_ext(text, options).collect();
    for (index, at) in unclosed_capturing_tags(&events) {
        if let Event::Html(raw) | Event::InlineHtml(raw) = &mut events[index] {
            let mut escaped = raw.to_string();
            escaped.replace_range(at..=at, "&lt;");
            *raw = CowStr::from(escaped);
        }
    }
    let mut block = RawBlock::default();
    let events = events.into_iter().flat_map(move |event| {
        let closer = match &event {
            Event::Html(raw) => {
                block.feed(raw.as_bytes());
                None
            }
            Event::End(TagEnd::HtmlBlock) => block.close().map(|closer| Event::Html(closer.into())),
            _ => None,
        };
        closer.into_iter().chain(std::iter::once(event))
    });
    html::push_html(&mut rendered, events);
    ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .url_relative(ammonia::UrlRelative::Custom(Box::new(SkillFiles(skill.to_owned()))))
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&rendered)
        .to_string()
}

/// Elements whose end tag is never written.
const VOID: [&str; 14] =
    ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"];

/// The HTML elements (not SVG's or MathML's) that, left open, take in what follows: a table, and
/// those whose content is not parsed as markup (raw text, RCDATA, `plaintext`), kept apart
/// (`template`) or stripped of its tags (`select`).
const HTML_CAPTURING: [&str; 13] = [
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
    "script",
    "select",
    "style",
    "table",
    "template",
    "textarea",
    "title",
    "xmp",
];

/// Whether an element may be left open without taking in what follows: a void element, or one
/// the sanitizer keeps with its content, but a table.
fn may_stay_open(name: &str) -> bool {
    static KEPT: std::sync::LazyLock<std::collections::HashSet<&'static str>> =
        std::sync::LazyLock::new(|| ammonia::Builder::default().clone_tags());
    name != "table" && (VOID.contains(&name) || KEPT.contains(name))
}

/// The opening tags in the raw HTML of `events` that no end tag of the document closes and that
/// may not stay open ([`may_stay_open`]), as (event, byte offset of its `<`), last first.
fn unclosed_capturing_tags(events: &[Event<'_>]) -> Vec<(usize, usize)> {
    let mut open: std::collections::HashMap<String, Vec<(usize, usize)>> = std::collections::HashMap::new();
    for (index, event) in events.iter().enumerate() {
        let (Event::Html(raw) | Event::InlineHtml(raw)) = event else { continue };
        for (at, closing, name) in tags(raw.as_bytes()) {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            if closing {
                if let Some(opened) = open.get_mut(&name) {
                    opened.pop();
                }
                continue;
            }
            // `<svg/>` or `<circle/>` is a whole element (foreign content honours the slash); an
            // HTML element that takes in what follows is opened by its tag, slash or not.
            let tag = &raw.as_bytes()[at..];
            let self_closing = tag.iter().position(|byte| *byte == b'>').is_some_and(|end| tag[end - 1] == b'/');
            if !may_stay_open(&name) && (!self_closing || HTML_CAPTURING.contains(&name.as_str())) {
                open.entry(name).or_default().push((index, at));
            }
        }
    }
    let mut unclosed: Vec<(usize, usize)> = open.into_values().flatten().collect();
    unclosed.sort_unstable_by(|a, b| b.cmp(a));
    unclosed
}

/// The tags in `raw`: where each `<` is, whether it is an end tag, and the name.
fn tags(raw: &[u8]) -> impl Iterator<Item = (usize, bool, &[u8])> {
    raw.iter().enumerate().filter(|(_, byte)| **byte == b'<').filter_map(|(at, _)| {
        let rest = &raw[at + 1..];
        let closing = rest.first() == Some(&b'/');
        let rest = if closing { &rest[1..] } else { rest };
        let length = rest.iter().take_while(|byte| byte.is_ascii_alphanumeric() || **byte == b'-').count();
        let name = &rest[..length];
        let ends = rest.get(length).is_none_or(|after| after.is_ascii_whitespace() || matches!(after, b'/' | b'>'));
        (name.first().is_some_and(u8::is_ascii_alphabetic) && ends).then_some((at, closing, name))
    })
}

/// Where an HTML block's text has left the HTML tokenizer, line by line: in text, or inside a
/// tag, a quoted attribute value or a comment, which would take in what follows the block.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum RawBlock {
    #[default]
    Text,
    /// In a tag (`<a`, `</a`, `<!doctype`, `<?`), and whether an `=` came last.
    Tag {
        value_next: bool,
    },
    Quoted(u8),
    Comment,
}

impl RawBlock {
    fn feed(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            let byte = bytes[at];
            *self = match *self {
                RawBlock::Text if bytes[at..].starts_with(b"<!--") => {
                    at += 3;
                    RawBlock::Comment
                }
                RawBlock::Text
                    if byte == b'<'
                        && bytes
                            .get(at + 1)
                            .is_some_and(|next| next.is_ascii_alphabetic() || matches!(next, b'/' | b'!' | b'?')) =>
                {
                    RawBlock::Tag { value_next: false }
                }
                RawBlock::Text => RawBlock::Text,
                RawBlock::Tag { .. } if byte == b'>' => RawBlock::Text,
                RawBlock::Tag { value_next: true } if matches!(byte, b'"' | b'\'') => RawBlock::Quoted(byte),
                RawBlock::Tag { value_next } if byte.is_ascii_whitespace() => RawBlock::Tag { value_next },
                RawBlock::Tag { .. } => RawBlock::Tag { value_next: byte == b'=' },
                RawBlock::Quoted(quote) if byte == quote => RawBlock::Tag { value_next: false },
                RawBlock::Quoted(quote) => RawBlock::Quoted(quote),
                RawBlock::Comment if bytes[at..].starts_with(b"-->") => {
                    at += 2;
                    RawBlock::Text
                }
                RawBlock::Comment => RawBlock::Comment,
            };
            at += 1;
        }
    }

    /// What ends what the block left open, if anything, for the next block.
    fn close(&mut self) -> Option<&'static str> {
        let closer = match std::mem::take(self) {
            RawBlock::Text => return None,
            RawBlock::Tag { .. } => ">",
            RawBlock::Quoted(b'"') => "\">",
            RawBlock::Quoted(_) => "'>",
            RawBlock::Comment => "-->",
        };
        Some(closer)
    }
}

/// Resolves a relative URL of a skill's Markdown against the skill's folder.
struct SkillFiles(String);

impl<'a> ammonia::UrlRelativeEvaluate<'a> for SkillFiles {
    fn evaluate<'url>(&self, url: &'url str) -> Option<Cow<'url, str>> {
        if url.starts_with('#') || url.starts_with('/') || url.starts_with('?') {
            return Some(Cow::Borrowed(url));
        }
        let path = url.split(['#', '?']).next().unwrap_or_default();
        let mut segments: Vec<&str> = Vec::new();
        for segment in path.split('/') {
            match segment {
                "" | "." => {}
                // Above the skill's folder: nothing of the skill's to link to.
                ".." => {
                    segments.pop()?;
                }
                segment => segments.push(segment),
            }
        }
        if segments.is_empty() {
            return None;
        }
        Some(Cow::Owned(format!("/skills/{}/files/{}", self.0, segments.join("/"))))
    }
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn markdown_is_rendered() {
        let html = render(
            "# Title\n\nSome *text* and `code`.\n\n```sh\nrm -rf /\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
            "s",
        );
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<em>text</em>"), "{html}");
        assert!(html.contains("<pre><code>rm -rf /\n</code></pre>"), "{html}");
        assert!(html.contains("<td>1</td>"), "{html}");
    }

    /// The tags of `html`, lowercased, without the text between them: where anything active
    /// would be (text, escaped, runs nothing).
    fn markup(html: &str) -> String {
        html.split('<')
            .skip(1)
            .filter_map(|rest| rest.split_once('>').map(|(tag, _)| format!("<{tag}>")))
            .collect::<String>()
            .to_ascii_lowercase()
    }

    /// Each payload, and what must not be left of it in the page's markup.
    #[test]
    fn hostile_markdown_keeps_nothing_active() {
        let payloads: &[(&str, &[&str])] = &[
            ("<script>window.pwned = 1</script>", &["<script", "pwned"]),
            ("<img src=x onerror=\"window.pwned = 1\">", &["onerror", "pwned"]),
            ("<a href=\"javascript:window.pwned = 1\">click</a>", &["javascript:", "pwned"]),
            ("[click](javascript:alert(1))", &["javascript:", "alert"]),
            ("[click](JaVaScRiPt&#58;alert(1))", &["javascript", "alert"]),
            ("[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", &["data:"]),
            ("<iframe src=\"https://example.com\"></iframe>", &["<iframe"]),
            ("<iframe srcdoc=\"<script>parent.pwned=1</script>\"></iframe>", &["<iframe", "srcdoc", "pwned"]),
            ("<svg><script>window.pwned = 1</script></svg>", &["<svg", "<script", "pwned"]),
            ("<svg onload=\"window.pwned = 1\"><circle r=1 /></svg>", &["<svg", "onload", "pwned"]),
            ("<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>", &["onerror", "<style", "<math"]),
            ("<object data=\"x.swf\"></object><embed src=\"x\">", &["<object", "<embed"]),
            ("<form action=\"https://evil\"><input name=t></form>", &["<form", "<input"]),
            ("<meta http-equiv=\"refresh\" content=\"0;url=https://evil\">", &["<meta", "refresh"]),
            ("<base href=\"https://evil/\">", &["<base"]),
            ("<link rel=stylesheet href=\"https://evil/x.css\">", &["<link"]),
            ("<p style=\"background:url(https://evil)\">x</p>", &["style="]),
            ("<div onclick=\"window.pwned=1\" onmouseover='x'>x</div>", &["onclick", "onmouseover", "pwned"]),
            ("<a href=\"vbscript:msgbox\">x</a>", &["vbscript"]),
        ];
        for (payload, forbidden) in payloads {
            let html = render(payload, "s");
            let tags = markup(&html);
            for needle in *forbidden {
                assert!(!tags.contains(needle), "{payload} left {needle}: {html}");
            }
        }
    }

    /// Raw HTML that would take in what follows (an element whose content is not markup, or is
    /// dropped; a block left inside a comment, tag or attribute value) leaves the rest of the
    /// page as it is.
    #[test]
    fn hostile_markdown_leaves_the_rest_of_the_page() {
        let rest = "\n\n# After\n\nThe *rest* of the page.\n";
        // In a paragraph, or in an HTML block that ends at a blank line: the Markdown after it is
        // rendered as Markdown.
        let inline_or_ended = [
            "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
            "Inline <style> in a paragraph",
            "Inline <script\n>split</script> tag",
            "A <svg><circle r=1 /> and no end",
            "Inline <math><mi>x</mi> and no end",
            "<div><math><mtext>open",
            "<div><svg>",
            "<div><textarea>",
            "<div><select>",
            "<div><template>",
            "<div><plaintext>",
            "<div><title>",
            "<div><!-- a comment that never ends",
            "<div title=\"a quote that never ends",
            "<div title='a quote that never ends",
            "<div class=x",
            "x <table> y",
            "x <p><table><mglyph>z",
            "<div><table>",
            "<div><table/>",
            "x <style/> y",
            "<math><mi>x</mi></math> closed, then <svg><circle r=1 /> open",
        ];
        for payload in inline_or_ended {
            let html = render(&format!("{payload}{rest}"), "s");
            assert!(html.contains("<h1>After</h1>"), "{payload}: {html}");
            assert!(html.contains("<em>rest</em>"), "{payload}: {html}");
            let tags = markup(&html);
            for needle in [
                "<style",
                "<script",
                "<textarea",
                "<plaintext",
                "<xmp",
                "<title",
                "<template",
                "<math",
                "<svg",
                "<select",
                "onerror",
            ] {
                assert!(!tags.contains(needle), "{payload} left {needle}: {html}");
            }
        }
        // An HTML block that starts with `<style>`, `<script>` or `<textarea>` lasts until its end
        // tag, to the end of the document without one (CommonMark): the rest is shown as text.
        for payload in ["<style>", "<STYLE type=text/css>", "<script>window.pwned = 1", "<textarea>"] {
            let html = render(&format!("{payload}{rest}"), "s");
            assert!(html.contains("After") && html.contains("The *rest* of the page."), "{payload}: {html}");
            assert!(!markup(&html).contains("<style") && !markup(&html).contains("<script"), "{payload}: {html}");
        }
        // A placeholder in angle brackets, never closed, is shown as written.
        let html = render("Replace <your-name> with yours.", "s");
        assert!(html.contains("Replace &lt;your-name&gt; with yours."), "{html}");
        // Names that only start like one of them, and what closes in time, are markup as before.
        let html = render("<details><summary>More</summary>\n\ntext\n\n</details>\n\n<b>bold</b> <stylish>", "s");
        assert!(html.contains("<details>") && html.contains("<b>bold</b>"), "{html}");
        let html = render(
            "<svg/> and <math/> and <svg><circle r=1 /></svg> are whole\n\n<table><tr><td>cell</td></tr></table>\n\n# After\n",
            "s",
        );
        assert!(html.contains("<h1>After</h1>") && html.contains("<td>cell</td>") && !html.contains("&lt;"), "{html}");
        let html = render("<div title=\"a > b\">\n<!-- a\ncomment -->\n</div>\n\n# After\n", "s");
        assert!(html.contains("<h1>After</h1>") && !html.contains("--&gt;") && !html.contains("comment"), "{html}");
    }

    #[test]
    fn relative_links_point_at_the_skill_s_files() {
        let html = render(
            "[a](references/a.md) [b](./x/../b.md#top) ![i](img/i.png) [up](../other/SKILL.md) [h](#h) [s](/skills)",
            "pdf",
        );
        assert!(html.contains("href=\"/skills/pdf/files/references/a.md\""), "{html}");
        assert!(html.contains("href=\"/skills/pdf/files/b.md\""), "{html}");
        assert!(html.contains("src=\"/skills/pdf/files/img/i.png\""), "{html}");
        assert!(!html.contains("other/SKILL.md"), "{html}");
        assert!(html.contains("href=\"#h\""), "{html}");
        assert!(html.contains("href=\"/skills\""), "{html}");
        let external = render("[e](https://example.com/x)", "pdf");
        assert!(external.contains("href=\"https://example.com/x\""), "{external}");
        assert!(external.contains("rel=\"noopener noreferrer nofollow\""), "{external}");
    }
}
