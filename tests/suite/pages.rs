//! The HTML pages: the catalog (paged, with shadowed skills and diagnostics), a skill's page
//! (rendered and sanitized Markdown, frontmatter, file tree, snippets), the security headers,
//! error pages for browsers, raw files that never render as pages, and the login with a token
//! file. (The same pages in a real browser: `browser`.)

use std::path::PathBuf;

use reqwest::header::HeaderMap;
use skillcat::config::SourceConfig;

use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};

const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

const DOCUMENTED: &str = "---\nname: documented\ndescription: A skill with every kind of content\nlicense: MIT\nmetadata:\n  author: someone\n  version: \"1.0\"\n---\n# Documented\n\nSee [the reference](references/guide.md).\n\n## Usage\n\n```sh\nrun --fast\n```\n";

/// The hostile `SKILL.md`: every payload the page must render inert.
pub const HOSTILE: &str = "---\nname: hostile\ndescription: Tries <script>window.pwned=1</script> everything\n---\n# Hostile\n\n<script>window.pwned = 1</script>\n\n<img src=x onerror=\"window.pwned = 2\">\n\n[click me](javascript:window.pwned=3)\n\n<a href=\"javascript:window.pwned=4\" id=\"jslink\">another</a>\n\n<iframe src=\"javascript:parent.pwned=5\"></iframe>\n\n<iframe srcdoc=\"<script>parent.pwned=6</script>\"></iframe>\n\n<svg><script>window.pwned = 7</script><circle r=\"5\" onload=\"window.pwned = 8\"/></svg>\n\n<object data=\"javascript:window.pwned=9\"></object>\n\n<div onmouseover=\"window.pwned=10\" style=\"position:fixed;inset:0\">cover</div>\n\n<form action=\"javascript:window.pwned=11\"><button>go</button></form>\n\n<meta http-equiv=\"refresh\" content=\"0;url=javascript:window.pwned=12\">\n\nThe end.\n";

fn catalog() -> (tempfile::TempDir, tempfile::TempDir) {
    let first = tempfile::tempdir().expect("tempdir");
    let second = tempfile::tempdir().expect("tempdir");
    write_skill(&first.path().join("documented"), DOCUMENTED);
    std::fs::create_dir_all(first.path().join("documented/references")).unwrap();
    std::fs::write(first.path().join("documented/references/guide.md"), "# Guide\n").unwrap();
    std::fs::write(first.path().join("documented/page.html"), "<script>window.pwned = 1</script>").unwrap();
    std::fs::write(first.path().join("documented/logo.svg"), "<svg><script>alert(1)</script></svg>").unwrap();
    std::fs::write(first.path().join("documented/tool.js"), "window.pwned = 13;\n").unwrap();
    std::fs::write(first.path().join("documented/theme.css"), "body { display: none }\n").unwrap();
    write_skill(&first.path().join("hostile"), HOSTILE);
    // Hidden by the first source's skill of the same name.
    write_skill(&second.path().join("documented"), &skill_md("documented", "The hidden one", "Hidden."));
    // Skipped, with a diagnostic.
    write_skill(&second.path().join("broken"), "---\nname: not valid!\ndescription: x\n---\n");
    (first, second)
}

async fn serve(first: &tempfile::TempDir, second: &tempfile::TempDir) -> TestApp {
    TestApp::spawn(vec![SourceConfig::directory(first.path()), SourceConfig::directory(second.path())]).await
}

async fn page(app: &TestApp, path: &str) -> (u16, HeaderMap, String) {
    let response = app.get(path).header("accept", BROWSER).send().await.expect("GET");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("text"))
}

/// The headers every page carries: a strict policy, no sniffing, no framing.
fn assert_secure(headers: &HeaderMap, what: &str) {
    assert_eq!(headers["content-type"], "text/html; charset=utf-8", "{what}");
    let policy = headers["content-security-policy"].to_str().unwrap();
    for directive in
        ["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"]
    {
        assert!(policy.contains(directive), "{what}: {policy}");
    }
    assert!(!policy.contains("unsafe"), "{what}: {policy}");
    assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
}

#[tokio::test]
async fn the_catalog_page_lists_skills_shadowed_skills_and_diagnostics() {
    let (first, second) = catalog();
    let app = serve(&first, &second).await;
    let (status, headers, html) = page(&app, "/").await;
    assert_eq!(status, 200);
    assert_secure(&headers, "/");
    assert!(html.contains("<a href=\"/ui/skills/documented\">documented</a>"), "{html}");
    assert!(html.contains("<a href=\"/ui/skills/hostile\">hostile</a>"), "{html}");
    assert!(html.contains("id=\"shadowed\""), "{html}");
    assert!(html.contains(&format!("{}/documented/SKILL.md", second.path().display())), "{html}");
    assert!(html.contains("id=\"diagnostics\""), "{html}");
    assert!(html.contains("broken"), "{html}");
    // The hostile description is text: escaped, never markup.
    assert!(html.contains("Tries &lt;script&gt;window.pwned=1&lt;/script&gt; everything"), "{html}");
    assert!(!html.contains("<script>window"), "{html}");
    // Scripts come from the one file the policy allows.
    assert_eq!(html.matches("<script").count(), 1);
    assert!(html.contains("<script src=\"/ui/app.js\" defer></script>"));
    let etag = app.catalog_etag().await;
    assert!(html.contains(&format!("data-etag=\"{}\"", etag.replace('"', "&quot;"))), "{html}");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_catalog_is_paged_past_five_hundred_skills() {
    let dir = tempfile::tempdir().unwrap();
    for index in 0..501 {
        let name = format!("skill-{index:04}");
        write_skill(&dir.path().join(&name), &skill_md(name.as_str(), "One of many", "Body."));
    }
    let app = TestApp::spawn_dir(dir.path()).await;
    let (_, _, first) = page(&app, "/").await;
    assert_eq!(first.matches("<tr data-name=").count(), 500);
    assert!(first.contains("501 skills"));
    assert!(first.contains("page 1 of 2") && first.contains("href=\"/?page=2\""), "the pager");
    let (status, _, second) = page(&app, "/?page=2").await;
    assert_eq!(status, 200);
    assert_eq!(second.matches("<tr data-name=").count(), 1);
    assert!(second.contains("skill-0500") && second.contains("href=\"/?page=1\""));
    // The same version's page is prepared once and answered as it was, tagged: a client holding
    // it revalidates without a body, and one that takes gzip gets it compressed.
    let (_, headers, again) = page(&app, "/?page=2").await;
    assert_eq!(again, second);
    let etag = headers["etag"].to_str().unwrap();
    let revalidated = app.get("/?page=2").header("if-none-match", etag).send().await.unwrap();
    assert_eq!(revalidated.status(), 304);
    let compressed = app.get("/").header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(compressed.headers()["content-encoding"], "gzip");
    assert_secure(compressed.headers(), "a compressed page");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_skill_page_renders_its_markdown_frontmatter_files_and_snippets() {
    let (first, second) = catalog();
    let app = serve(&first, &second).await;
    let (status, headers, html) = page(&app, "/ui/skills/documented").await;
    assert_eq!(status, 200);
    assert_secure(&headers, "skill page");
    for expected in [
        "<h1>Documented</h1>",
        "<h2>Usage</h2>",
        "<pre><code>run --fast\n</code></pre>",
        // Relative links lead to the skill's files.
        "<a href=\"/skills/documented/files/references/guide.md\" rel=\"noopener noreferrer nofollow\">the reference</a>",
        // The frontmatter as a table.
        "<th scope=\"row\">license</th><td>MIT</td>",
        "<th scope=\"row\">metadata</th><td>author: someone; version: 1.0</td>",
        // The file tree, each file linking to its bytes, and the archive.
        "<li class=\"dir\"><span>references/</span><ul><li class=\"file\"><a href=\"/skills/documented/files/references/guide.md\">guide.md</a>",
        "href=\"/skills/documented/files/SKILL.md\"",
        "href=\"/skills/documented/archive\"",
    ] {
        assert!(html.contains(expected), "{expected}\nin {html}");
    }
    let base = app.url("");
    for snippet in [
        format!("curl -s {base}/skills/documented/content"),
        format!("RemoteSkillDiscoverer::new(&quot;{base}&quot;)"),
        format!("RemoteSkillDiscoverer(&quot;{base}&quot;)"),
        format!("&quot;url&quot;: &quot;{base}/mcp&quot;"),
        // Non-interactive: without a terminal the interactive form installs nothing.
        format!("npx skills add {base} --skill documented -y --agent claude-code"),
        "Node.js 22.20 or later".to_owned(),
    ] {
        assert!(html.contains(&snippet), "{snippet}\nin {html}");
    }
    assert!(!html.contains("Authorization"), "no token, no header in the snippets");
    // Kept per skill version, the page follows its skill's tag, not the catalog's.
    let skill: serde_json::Value = app.skill("documented").await.json().await.unwrap();
    let tag = skill["etag"].as_str().unwrap().replace('"', "&quot;");
    assert!(html.contains(&format!("data-skill=\"documented\" data-skill-etag=\"{tag}\"")), "{html}");
    assert!(!html.contains("data-etag="), "{html}");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_hostile_skill_page_keeps_nothing_active() {
    let (first, second) = catalog();
    let app = serve(&first, &second).await;
    let (status, _, html) = page(&app, "/ui/skills/hostile").await;
    assert_eq!(status, 200);
    let article = html.split("<article class=\"markdown\">").nth(1).expect("the rendered SKILL.md");
    let lowered = article.to_ascii_lowercase();
    for forbidden in [
        "<script",
        "onerror",
        "onload",
        "onmouseover",
        "javascript:",
        "<iframe",
        "srcdoc",
        "<svg",
        "<object",
        "<form",
        "<meta",
        "style=",
    ] {
        assert!(!lowered.contains(forbidden), "{forbidden} in {article}");
    }
    assert!(article.contains("The end."), "the rest is rendered: {article}");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn raw_files_are_never_pages_of_this_origin() {
    let (first, second) = catalog();
    let app = serve(&first, &second).await;
    for file in ["page.html", "logo.svg"] {
        let response =
            app.get(&format!("/skills/documented/files/{file}")).header("accept", BROWSER).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let headers = response.headers();
        assert_eq!(headers["content-disposition"], "attachment", "{file}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{file}");
        assert!(headers["content-security-policy"].to_str().unwrap().starts_with("sandbox"), "{file}");
    }
    let text = app.get("/skills/documented/files/references/guide.md").send().await.unwrap();
    assert!(text.headers().get("content-disposition").is_none(), "text is shown inline");
    // Scripts and style sheets go out as plain text: with nosniff, no page of this origin can run
    // or apply one, whatever its policy allows.
    for file in ["tool.js", "theme.css"] {
        let response = app.get(&format!("/skills/documented/files/{file}")).send().await.unwrap();
        let headers = response.headers();
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8", "{file}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{file}");
    }
    // The listing still says what they are.
    let listing: serde_json::Value = app.get("/skills/documented/files").send().await.unwrap().json().await.unwrap();
    let script = listing["files"].as_array().unwrap().iter().find(|file| file["path"] == "tool.js").unwrap();
    assert_eq!(script["media_type"], "text/javascript; charset=utf-8");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn browsers_get_error_pages_and_api_clients_problems() {
    let (first, second) = catalog();
    let app = serve(&first, &second).await;
    let (status, headers, html) = page(&app, "/ui/skills/nothing").await;
    assert_eq!(status, 404);
    assert_secure(&headers, "404 page");
    assert_eq!(headers["cache-control"], "no-store");
    assert!(
        html.contains("<h1>404 Unknown skill</h1>") && html.contains("no skill named &#39;nothing&#39;")
            || html.contains("no skill named 'nothing'"),
        "{html}"
    );
    let (status, _, html) = page(&app, "/nowhere").await;
    assert_eq!((status, html.contains("<h1>404 Not found</h1>")), (404, true), "{html}");
    let (status, headers, _) = page(&app, "/ui/skills/bad%20name").await;
    assert_eq!((status, headers["content-type"].to_str().unwrap()), (400, "text/html; charset=utf-8"));
    for accept in
        [None, Some("*/*"), Some("application/json"), Some("application/json, text/html;q=0.5"), Some("text/html;q=0")]
    {
        let mut request = app.get("/ui/skills/nothing");
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 404);
        assert_eq!(response.headers()["content-type"], "application/problem+json", "{accept:?}");
    }
    app.shutdown().await.unwrap();
}

fn token_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tokens");
    std::fs::write(&path, text).expect("write the token file");
    (dir, path)
}

#[tokio::test]
async fn with_a_token_file_pages_need_a_login_and_the_cookie_only_reads() {
    let (first, second) = catalog();
    let (_tokens, path) = token_file("page-token\n");
    let app = TestApp::spawn_with(
        vec![SourceConfig::directory(first.path()), SourceConfig::directory(second.path())],
        move |options| options.token_file = Some(path),
    )
    .await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    // No page reveals the catalog without the token: a browser gets the login form instead.
    for path in ["/", "/ui/skills/documented", "/ui/skills/nothing", "/search?q=documented", "/skills"] {
        let (status, _, html) = page(&app, path).await;
        assert_eq!(status, 401, "{path}");
        assert!(html.contains("<form class=\"login\" method=\"post\" action=\"/ui/login\">"), "{path}: {html}");
        assert!(!html.contains("documented</a>") && !html.contains("A skill with every kind"), "{path}: {html}");
    }
    // The login: a wrong token is the form again; a right one sets the cookie and goes on.
    let login = |token: &str, next: &str| {
        client
            .post(app.url("/ui/login"))
            .header("origin", app.url(""))
            .header("sec-fetch-site", "same-origin")
            .form(&[("token", token), ("next", next)])
    };
    let refused = login("wrong", "/").send().await.unwrap();
    assert_eq!(refused.status(), 401, "{:?}", refused.headers());
    assert!(refused.headers().get("set-cookie").is_none());
    assert!(refused.text().await.unwrap().contains("That token is not valid."));
    let accepted = login("page-token", "/ui/skills/documented").send().await.unwrap();
    assert_eq!(accepted.status(), 303);
    assert_eq!(accepted.headers()["location"], "/ui/skills/documented");
    let cookie = accepted.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert_eq!(cookie, "skillcat_token=page-token; Path=/; HttpOnly; SameSite=Strict");
    let redirected = login("page-token", "https://evil.example/").send().await.unwrap();
    assert_eq!(redirected.headers()["location"], "/", "never away from this server");
    // The cookie opens the pages and what they read...
    let with_cookie = |method: reqwest::Method, path: &str| {
        client.request(method, app.url(path)).header("cookie", "skillcat_token=page-token").header("accept", BROWSER)
    };
    for path in ["/", "/ui/skills/documented", "/search?q=documented", "/skills/documented/files/SKILL.md"] {
        assert_eq!(with_cookie(reqwest::Method::GET, path).send().await.unwrap().status(), 200, "{path}");
    }
    // ...but nothing else: a POST needs the header.
    let load = with_cookie(reqwest::Method::POST, "/skills/documented/load").send().await.unwrap();
    assert_eq!(load.status(), 401);
    let wrong_cookie = client.get(app.url("/")).header("cookie", "skillcat_token=nope").send().await.unwrap();
    assert_eq!(wrong_cookie.status(), 401);
    // The skill page's snippets say a token is needed, without naming it.
    let html = with_cookie(reqwest::Method::GET, "/ui/skills/documented").send().await.unwrap().text().await.unwrap();
    assert!(html.contains("&quot;Authorization&quot;: &quot;Bearer &lt;token&gt;&quot;"), "{html}");
    assert!(html.contains("$SKILLCAT_TOKEN") && !html.contains("page-token"), "{html}");
    // A login form another site posts is refused, and logging out clears the cookie.
    let cross = client
        .post(app.url("/ui/login"))
        .header("origin", "https://evil.example")
        .form(&[("token", "page-token")])
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    assert!(cross.headers().get("set-cookie").is_none());
    let out = client.post(app.url("/ui/logout")).header("sec-fetch-site", "same-origin").send().await.unwrap();
    assert_eq!(out.status(), 303);
    assert!(out.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    app.shutdown().await.unwrap();
}

/// The text of the snippet `id` of a skill page, as a browser shows it.
fn snippet(html: &str, id: &str) -> String {
    let start = html.find(&format!("<code id=\"{id}\">")).unwrap_or_else(|| panic!("no {id}")) + id.len() + 12;
    let end = start + html[start..].find("</code>").expect("the end of the snippet");
    html[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Runs `program` with `arguments` off the runtime's thread (the server answers on it meanwhile);
/// its standard output.
async fn run(program: std::path::PathBuf, arguments: Vec<String>, environment: Vec<(String, String)>) -> String {
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&program).args(&arguments).envs(environment).output().expect("run the snippet")
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn the_curl_and_python_snippets_work_as_pasted() {
    let (first, second) = catalog();
    let app = serve(&first, &second).await;
    let (_, _, html) = page(&app, "/ui/skills/documented").await;
    let curl = snippet(&html, "snippet-curl");
    let content = curl.lines().next().expect("the content request");
    assert_eq!(run("sh".into(), vec!["-c".into(), content.to_owned()], Vec::new()).await, DOCUMENTED);
    let load = curl.lines().nth(1).expect("the load request");
    let loaded: serde_json::Value =
        serde_json::from_str(&run("sh".into(), vec!["-c".into(), load.to_owned()], Vec::new()).await).unwrap();
    assert_eq!((loaded["name"].as_str(), loaded["token_limit"].as_u64()), (Some("documented"), Some(2000)));
    let Some(python) = crate::support::nagents::python("the_curl_and_python_snippets_work_as_pasted") else {
        return;
    };
    let integration = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/nagents");
    let printed = run(
        python,
        vec!["-c".into(), snippet(&html, "snippet-python")],
        vec![("PYTHONPATH".into(), integration.display().to_string())],
    )
    .await;
    assert_eq!(printed, format!("{DOCUMENTED}\n"));
    app.shutdown().await.unwrap();
}
