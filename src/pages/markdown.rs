//! A skill's Markdown as HTML that is safe to put in a page: rendered with pulldown-cmark, then
//! cleaned by ammonia's allow-list, which keeps no script, no event handler attribute, no style,
//! no frame, no SVG and no URL of a scheme other than http, https and mailto. The page's
//! Content-Security-Policy is a second wall, not the first.

use std::borrow::Cow;

use pulldown_cmark::{Options, Parser, html};

/// `text` (a `SKILL.md` without its frontmatter) as sanitized HTML. Relative links and images
/// point at the skill's files (`references/a.md` becomes `/skills/{name}/files/references/a.md`).
pub fn render(text: &str, skill: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_FOOTNOTES;
    let mut rendered = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut rendered, Parser::new_ext(text, options));
    ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .url_relative(ammonia::UrlRelative::Custom(Box::new(SkillFiles(skill.to_owned()))))
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&rendered)
        .to_string()
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

    /// Each payload, and what must not be left of it.
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
            ("<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>", &["onerror", "<style"]),
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
            let html = render(payload, "s").to_ascii_lowercase();
            for needle in *forbidden {
                assert!(!html.contains(needle), "{payload} left {needle}: {html}");
            }
        }
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
