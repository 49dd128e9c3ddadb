//! The HTML of the pages, with maud: every value is escaped unless marked otherwise, and the one
//! value marked otherwise is a skill's Markdown after sanitizing (`markdown::render`).

use maud::{DOCTYPE, Markup, PreEscaped, html};
use skillcat_core::SkillFile;

use crate::catalog::{Catalog, CatalogSkill, DiagnosticEntry, ShadowedEntry, SkillEntry};

/// What every page's frame needs to know.
pub struct Frame<'a> {
    pub title: &'a str,
    /// What the live badge follows: the catalog's tag, which change events are compared with;
    /// or a skill's name and tag (a skill's page is kept per skill version: on a change event the
    /// script asks whether the skill changed). Neither: no badge.
    pub live: Live<'a>,
    /// Whether requests need a token: then the frame offers to log out.
    pub login: bool,
}

/// What a page follows live.
pub enum Live<'a> {
    None,
    Catalog(&'a str),
    Skill { name: &'a str, etag: &'a str },
}

impl<'a> Live<'a> {
    fn catalog(&self) -> Option<&'a str> {
        match self {
            Live::Catalog(etag) => Some(etag),
            _ => None,
        }
    }

    fn skill(&self) -> Option<(&'a str, &'a str)> {
        match self {
            Live::Skill { name, etag } => Some((name, etag)),
            _ => None,
        }
    }
}

fn page(frame: &Frame<'_>, main: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (frame.title) " · skillcat" }
                link rel="stylesheet" href="/ui/style.css";
                script src="/ui/app.js" defer {}
            }
            body data-etag=[frame.live.catalog()] data-skill=[frame.live.skill().map(|(name, _)| name)]
                data-skill-etag=[frame.live.skill().map(|(_, etag)| etag)] {
                header {
                    a.brand href="/" { "skillcat" }
                    @if !matches!(frame.live, Live::None) {
                        span #live .badge data-state="connecting" title="Changes to the catalog appear here without a reload" { "connecting…" }
                    }
                    nav {
                        a href="/openapi.json" { "API" }
                        a href="/manifest" { "Manifest" }
                        @if frame.login {
                            form.inline method="post" action="/ui/logout" {
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                (main)
            }
        }
    }
}

/// One page of the catalog (`number` counts from 1, of `pages`).
pub struct CatalogPage<'a> {
    pub catalog: &'a Catalog,
    pub number: usize,
    pub pages: usize,
    pub skills: &'a [std::sync::Arc<CatalogSkill>],
    /// Written in each row where its loads go, then where its installs go: the counts change
    /// with every load, so the page is kept without them and they are put in per answer.
    pub count_mark: &'a str,
}

pub fn catalog(frame: &Frame<'_>, view: &CatalogPage<'_>) -> Markup {
    let catalog = view.catalog;
    let main = html! {
        main #catalog {
            @if let Some(failure) = &catalog.error {
                section.alert role="alert" {
                    strong { "The last scan failed; this is the last good catalog." }
                    " " (failure.source) ": " (failure.message) " (since " (failure.since) ")"
                }
            }
            div.search {
                label for="search" { "Search" }
                input #search type="search" name="q" autocomplete="off" maxlength="256"
                    placeholder="Search names, descriptions and SKILL.md texts";
                span #search-status aria-live="polite" {}
            }
            ol #results hidden {}
            section #listing {
                h1 { (catalog.skills.len()) " skills" }
                table.skills {
                    thead { tr {
                        th { "Name" } th { "Description" } th { "Source" }
                        th.count title="Loads through every surface on this server since it started" { "Loads" }
                        th.count title="Installers' downloads from this server since it started" { "Installs" }
                    } }
                    tbody {
                        @for skill in view.skills {
                            (skill_row(&skill.entry, view.count_mark))
                        }
                    }
                }
                @if view.pages > 1 {
                    nav.pager aria-label="Pages" {
                        @if view.number > 1 {
                            a rel="prev" href={ "/?page=" (view.number - 1) } { "← previous" }
                        }
                        span { "page " (view.number) " of " (view.pages) }
                        @if view.number < view.pages {
                            a rel="next" href={ "/?page=" (view.number + 1) } { "next →" }
                        }
                    }
                }
            }
            @if !catalog.shadowed.is_empty() {
                (shadowed(&catalog.shadowed))
            }
            @if !catalog.diagnostics.is_empty() {
                (diagnostics(&catalog.diagnostics))
            }
        }
    };
    page(frame, main)
}

fn skill_row(entry: &SkillEntry, count_mark: &str) -> Markup {
    html! {
        tr data-name=(entry.name.as_str()) {
            td { a href={ "/ui/skills/" (entry.name.as_str()) } { (entry.name.as_str()) } }
            td { span.clamp title=(entry.description) { (entry.description) } }
            td.source { (entry.source) }
            td.count.loads { (count_mark) }
            td.count.installs { (count_mark) }
        }
    }
}

fn shadowed(entries: &[ShadowedEntry]) -> Markup {
    html! {
        section #shadowed {
            h2 { "Shadowed" }
            p.note { "Skills an earlier source's skill of the same name hides: agents never see these." }
            table {
                thead { tr { th { "Name" } th { "Location" } th { "Source" } } }
                tbody {
                    @for entry in entries {
                        tr { td { (entry.name.as_str()) } td.path { (entry.location) } td.source { (entry.source) } }
                    }
                }
            }
        }
    }
}

fn diagnostics(entries: &[DiagnosticEntry]) -> Markup {
    html! {
        section #diagnostics {
            h2 { "Diagnostics" }
            p.note { "What the sources skipped, and why." }
            table {
                thead { tr { th { "Source" } th { "Message" } } }
                tbody {
                    @for entry in entries {
                        tr { td.source { (entry.source) } td { (entry.message) } }
                    }
                }
            }
        }
    }
}

/// What a skill's page shows.
pub struct SkillPage<'a> {
    pub skill: &'a CatalogSkill,
    /// The frontmatter's fields, or why it cannot be read.
    pub frontmatter: Result<Vec<(String, String)>, String>,
    /// The body of `SKILL.md`, rendered and sanitized.
    pub body: String,
    /// The skill's files, or why they are not served.
    pub files: Result<&'a [SkillFile], String>,
    pub skipped: Vec<(String, String)>,
    /// Why installers do not get the skill, when they do not.
    pub not_installable: Option<String>,
    /// The server's base URL as the request named it, for the snippets.
    pub base: &'a str,
}

pub fn skill(frame: &Frame<'_>, view: &SkillPage<'_>) -> Markup {
    let entry = &view.skill.entry;
    let name = entry.name.as_str();
    let main = html! {
        main #skill {
            p.crumbs { a href="/" { "Catalog" } " / " (name) }
            h1 { (name) }
            p.description { (entry.description) }
            dl.facts {
                dt { "Source" } dd.source { (entry.source) }
                dt { "Location" } dd.path { (entry.location) }
                dt { "ETag" } dd { code { (entry.etag.as_str()) } }
            }
            section #frontmatter {
                h2 { "Frontmatter" }
                @match &view.frontmatter {
                    Ok(fields) if fields.is_empty() => p.note { "None." },
                    Ok(fields) => table.frontmatter {
                        tbody {
                            @for (key, value) in fields {
                                tr { th scope="row" { (key) } td { (value) } }
                            }
                        }
                    },
                    Err(why) => p.note { (why) },
                }
            }
            section #content {
                h2 { "SKILL.md" }
                article.markdown { (PreEscaped(&view.body)) }
            }
            section #files {
                h2 { "Files" }
                @match &view.files {
                    Ok(files) => {
                        p {
                            a.download href={ "/skills/" (name) "/archive" } download={ (name) ".zip" } { "Download the folder (zip)" }
                            " · "
                            a href={ "/ui/skills/" (name) "/versions" } { "Versions" }
                        }
                        (file_tree(name, files))
                    }
                    Err(why) => p.note { (why) },
                }
                @if !view.skipped.is_empty() {
                    p.note { "Not served:" }
                    ul.skipped {
                        @for (path, reason) in &view.skipped {
                            li { code { (path) } ": " (reason) }
                        }
                    }
                }
            }
            section #use {
                h2 { "Use it" }
                @for (id, title, text) in snippets(view.base, name, frame.login, view.not_installable.as_deref()) {
                    div.snippet {
                        div.snippet-head {
                            h3 { (title) }
                            button.copy type="button" data-copy=(id) { "Copy" }
                        }
                        pre { code id=(id) { (text) } }
                    }
                }
                @if let Some(why) = &view.not_installable {
                    p.note { "Installers do not get this skill: " (why) }
                } @else if frame.login {
                    p.note { "Installers (" code { "npx skills add" } ") send no token: they need a server without a token file." }
                }
            }
        }
    };
    page(frame, main)
}

/// The files as a tree of folders, each file linking to its bytes.
fn file_tree(name: &str, files: &[SkillFile]) -> Markup {
    // Files come in code-point order of their paths, so a folder's files are together.
    let mut open: Vec<&str> = Vec::new();
    let mut html = String::from("<ul class=\"tree\">");
    for file in files {
        let segments: Vec<&str> = file.path.segments().collect();
        let (folders, leaf) = segments.split_at(segments.len() - 1);
        let common = open.iter().zip(folders).take_while(|(a, b)| a == b).count();
        while open.len() > common {
            open.pop();
            html.push_str("</ul></li>");
        }
        for folder in &folders[common..] {
            html.push_str(&html! { li.dir { span { (folder) "/" } } }.into_string());
            // Reopen the item just written, to nest the folder's entries in it.
            html.truncate(html.len() - "</li>".len());
            html.push_str("<ul>");
            open.push(folder);
        }
        let href: String = std::iter::once(format!("/skills/{name}/files"))
            .chain(file.path.segments().map(encode_segment))
            .collect::<Vec<_>>()
            .join("/");
        let item = html! {
            li.file {
                a href=(href) { (leaf[0]) }
                " " span.size { (size(file.size)) }
                @if file.executable { " " span.exec { "executable" } }
            }
        };
        html.push_str(&item.into_string());
    }
    for _ in open {
        html.push_str("</ul></li>");
    }
    html.push_str("</ul>");
    PreEscaped(html)
}

/// Every byte but RFC 3986's unreserved characters, percent-encoded.
fn encode_segment(segment: &str) -> String {
    let mut encoded = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// The copy-paste snippets: id, title, text.
fn snippets(
    base: &str,
    name: &str,
    token: bool,
    not_installable: Option<&str>,
) -> Vec<(&'static str, &'static str, String)> {
    let curl_auth = if token { " -H \"Authorization: Bearer $SKILLCAT_TOKEN\"" } else { "" };
    let curl = format!(
        "curl -s{curl_auth} {base}/skills/{name}/content\n\
         curl -s{curl_auth} -X POST {base}/skills/{name}/load -H 'Content-Type: application/json' -d '{{\"token_limit\": 2000}}'"
    );
    let rust_remote = if token {
        format!(
            "let token = BearerToken::new(std::env::var(\"SKILLCAT_TOKEN\")?)?;\n\
             let remote = RemoteSkillDiscoverer::builder(\"{base}\").bearer_token(token).build()?;"
        )
    } else {
        format!("let remote = RemoteSkillDiscoverer::new(\"{base}\")?;")
    };
    let rust_imports = if token { "{BearerToken, RemoteSkillDiscoverer}" } else { "RemoteSkillDiscoverer" };
    let rust = format!(
        "// Cargo.toml: skillcat-client, skillcat-core, tokio\n\
         use skillcat_client::{rust_imports};\n\
         use skillcat_core::SkillDiscoverer;\n\n\
         {rust_remote}\n\
         let skills = remote.discover().await?;\n\
         let skill = skills.iter().find(|skill| skill.name().as_str() == \"{name}\").expect(\"in the catalog\");\n\
         let content = remote.load(skill).await?;"
    );
    let (python_os, python_token) = if token { (", os", ", token=os.environ[\"SKILLCAT_TOKEN\"]") } else { ("", "") };
    let python = format!(
        "# integrations/nagents/skillcat_remote.py, beside nagents\n\
         import asyncio{python_os}\n\
         from skillcat_remote import RemoteSkillDiscoverer\n\n\
         async def main():\n    \
             remote = RemoteSkillDiscoverer(\"{base}\"{python_token})\n    \
             skill = next(s for s in await remote.discover() if s.name == \"{name}\")\n    \
             print(await remote.load(skill))\n\n\
         asyncio.run(main())\n\
         # or give it to an agent: Agent(..., skill_discoverer=remote)"
    );
    let mut server = serde_json::json!({ "type": "http", "url": format!("{base}/mcp") });
    if token {
        server["headers"] = serde_json::json!({ "Authorization": "Bearer <token>" });
    }
    let mcp = serde_json::to_string_pretty(&serde_json::json!({ "mcpServers": { "skillcat": server } }))
        .expect("JSON serializes");
    let mut snippets = vec![
        ("snippet-curl", "curl", curl),
        ("snippet-rust", "Rust (skillcat-client)", rust),
        ("snippet-python", "Python (nagents)", python),
        ("snippet-mcp", "MCP host configuration", mcp),
    ];
    if not_installable.is_none() && !token {
        // Without `-y` and `--agent` the installer asks, and without a terminal installs nothing.
        let npx = format!(
            "# Node.js 22.20 or later: on an older one npx quietly runs an older skills.\n\
             # --agent: the agent to install for (claude-code, cursor, codex, ...).\n\
             npx skills add {base} --skill {name} -y --agent claude-code"
        );
        snippets.push(("snippet-npx", "Install (npx skills)", npx));
    }
    snippets
}

/// An error page: the problem's title and detail, and for a 401 the login form.
pub fn error(frame: &Frame<'_>, status: u16, title: &str, detail: &str, login_next: Option<&str>) -> Markup {
    let main = html! {
        main #error {
            h1 { (status) " " (title) }
            p.detail { (detail) }
            @if let Some(next) = login_next {
                (login_form(next, None))
            } @else {
                p { a href="/" { "Back to the catalog" } }
            }
        }
    };
    page(frame, main)
}

/// The login page.
pub fn login(frame: &Frame<'_>, next: &str, refused: Option<&str>) -> Markup {
    page(frame, html! { main #login { h1 { "Log in" } (login_form(next, refused)) } })
}

fn login_form(next: &str, refused: Option<&str>) -> Markup {
    html! {
        form.login method="post" action="/ui/login" {
            p { "This catalog needs one of the server's bearer tokens (its --token-file)." }
            @if let Some(why) = refused {
                p.alert role="alert" { (why) }
            }
            input type="hidden" name="next" value=(next);
            label for="token" { "Token" }
            input #token type="password" name="token" autocomplete="current-password" required;
            button type="submit" { "Log in" }
        }
    }
}

/// A skill's versions, newest first, each with its pinned archive and content.
pub fn versions(frame: &Frame<'_>, versions: &crate::catalog::Versions) -> Markup {
    let name = versions.name.as_str();
    let time = |seconds: i64| {
        let time = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds.max(0).unsigned_abs());
        humantime::format_rfc3339_seconds(time).to_string()
    };
    let main = html! {
        main #versions {
            p.crumbs { a href="/" { "Catalog" } " / " a href={ "/ui/skills/" (name) } { (name) } " / versions" }
            h1 { (name) ": versions" }
            @if !versions.entries.iter().any(|entry| entry.current) {
                p.note { "The catalog no longer has this skill; its history still serves these versions." }
            }
            table.versions {
                thead { tr { th { "Version" } th { "Commit" } th { "Committed" } th { "Tags" } th { "" } } }
                tbody {
                    @for entry in &versions.entries {
                        @let version = entry.version.to_string();
                        tr {
                            td.path {
                                code title=(version) { (&version[..19]) "…" }
                                @if entry.current { " " span.badge { "current" } }
                            }
                            td.path { @if let Some(commit) = &entry.commit { code title=(commit) { (&commit[..12.min(commit.len())]) } } }
                            td { @if let Some(at) = entry.committed_at { (time(at)) } }
                            td { @for tag in &entry.tags { code { (tag) } " " } }
                            td {
                                a href={ "/skills/" (name) "/archive?version=" (version) } download={ (name) ".zip" } { "zip" }
                                " · "
                                a href={ "/skills/" (name) "/content?version=" (version) } { "SKILL.md" }
                            }
                        }
                    }
                }
            }
        }
    };
    page(frame, main)
}
