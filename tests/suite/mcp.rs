//! MCP at `/mcp` through a real client (rmcp's, over Streamable HTTP): skill folders rebuilt from
//! `resources/read` equal their sources byte for byte (the public collections included), which
//! skills SEP-2640 lets the server list, the tools against the REST answers, verified reads,
//! change notifications, authentication and DNS rebinding, metrics, shutdown, and bad input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, GetSkillRequestParams, ProtocolVersion, ReadResourceDirectoryRequestParams,
    ReadResourceRequestParams, ResourceContents, ServerNotification, Skill, SkillResources, SubscriptionFilter,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt as _};
use serde_json::{Value, json};
use skillcat::config::SourceConfig;
use skillcat::limits::ConnectionLimits;

use crate::support::files::{digest, write};
use crate::support::server::TestApp;
use crate::support::skills::{skill_md, write_skill};
use crate::support::wait::DEADLINE;

pub(crate) type Client = RunningService<RoleClient, Listener>;

/// The client's handler: it passes on `notifications/resources/list_changed`.
#[derive(Clone, Default)]
pub(crate) struct Listener(Option<tokio::sync::mpsc::UnboundedSender<()>>);

impl ClientHandler for Listener {
    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(changes) = &self.0 {
            let _ = changes.send(());
        }
    }
}

async fn connect_with(app: &TestApp, listener: Listener, token: Option<&str>) -> Client {
    connect_to(&app.url("/mcp"), listener, token).await
}

/// A client of revision 2025-11-25 (`initialize`) of the server at `url`.
pub(crate) async fn connect_to(url: &str, listener: Listener, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    listener.serve(StreamableHttpClientTransport::from_config(config)).await.expect("initialize")
}

async fn connect(app: &TestApp) -> Client {
    connect_with(app, Listener::default(), None).await
}

/// A client of revision 2026-07-28: `server/discover`, then self-contained requests.
pub(crate) async fn connect_2026(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(url));
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    Listener::default().serve_with_lifecycle(transport, lifecycle).await.expect("server/discover")
}

/// A resource's bytes, from its text or its base64 blob.
pub(crate) fn bytes_of(contents: &ResourceContents) -> Vec<u8> {
    match contents {
        ResourceContents::TextResourceContents { text, .. } => text.as_bytes().to_vec(),
        ResourceContents::BlobResourceContents { blob, .. } => {
            base64::prelude::BASE64_STANDARD.decode(blob).expect("a base64 blob")
        }
        other => panic!("unexpected contents {other:?}"),
    }
}

/// Every regular file beneath `folder` not hidden (no component starting with `.`), by path.
pub(crate) fn folder_files(folder: &Path) -> BTreeMap<String, Vec<u8>> {
    fn visit(root: &Path, folder: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(folder).expect("read_dir") {
            let entry = entry.expect("entry");
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                visit(root, &entry.path(), files);
            } else if kind.is_file() {
                let path = entry.path().strip_prefix(root).expect("beneath").to_string_lossy().into_owned();
                files.insert(path, std::fs::read(entry.path()).expect("read"));
            }
        }
    }
    let mut files = BTreeMap::new();
    visit(folder, folder, &mut files);
    files
}

/// The skill's folder rebuilt from `resources/read` of each listed file, each checked against the
/// entry's digest and size.
pub(crate) async fn rebuild(client: &Client, skill: &Skill) -> BTreeMap<String, Vec<u8>> {
    let SkillResources::Files(files) = &skill.resources else { panic!("{} lists no files", skill.uri) };
    let root = skill.uri.strip_suffix("SKILL.md").expect("a SKILL.md uri");
    let mut rebuilt = BTreeMap::new();
    for file in files {
        let read = client.read_resource(ReadResourceRequestParams::new(&file.uri)).await.expect("resources/read");
        assert_eq!(read.contents.len(), 1, "{}", file.uri);
        let bytes = bytes_of(&read.contents[0]);
        file.verify(&bytes).unwrap_or_else(|error| panic!("{error}"));
        let encoded = file.uri.strip_prefix(root).expect("within the skill");
        let path = percent_encoding::percent_decode_str(encoded).decode_utf8().expect("UTF-8").into_owned();
        rebuilt.insert(path, bytes);
    }
    rebuilt
}

/// Where the catalog found each skill's folder, by name.
async fn folders(app: &TestApp) -> BTreeMap<String, PathBuf> {
    let catalog: Value = app.skills().await.json().await.expect("GET /skills");
    let skills = catalog["skills"].as_array().expect("skills");
    skills
        .iter()
        .map(|skill| {
            let location = PathBuf::from(skill["location"].as_str().expect("location"));
            (skill["name"].as_str().expect("name").to_owned(), location.parent().expect("a folder").to_path_buf())
        })
        .collect()
}

#[tokio::test]
async fn every_public_collection_is_rebuilt_byte_for_byte_from_resource_reads() {
    let collections = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/collections");
    for root in [
        "anthropics-skills/skills",
        "K-Dense-AI-claude-scientific-skills/scientific-skills",
        "obra-superpowers/skills",
        "openai-skills/skills",
    ] {
        let app = TestApp::spawn_dir(&collections.join(root)).await;
        let client = connect(&app).await;
        let listed = client.list_all_skills().await.expect("skills/list");
        let folders = folders(&app).await;
        // Every skill of these collections follows SEP-2640's rules: all are listed.
        let names: Vec<&str> = listed.iter().map(|skill| skill.frontmatter.name.as_str()).collect();
        assert_eq!(names, folders.keys().map(String::as_str).collect::<Vec<_>>(), "{root}");
        for skill in &listed {
            assert_eq!(skill.uri, format!("skill://{}/SKILL.md", skill.frontmatter.name));
            let source = &folders[&skill.frontmatter.name];
            let rebuilt = rebuild(&client, skill).await;
            assert_eq!(rebuilt, folder_files(source), "{root}: {}", skill.uri);
            // skills/get gives the listed entry.
            let got = client.get_skill(GetSkillRequestParams::new(&skill.uri)).await.expect("skills/get");
            assert_eq!(&got.skill, skill);
        }
        client.cancel().await.expect("close");
    }
}

/// The entry's frontmatter is the file's, whole: every field, typed as YAML types it.
#[tokio::test]
async fn entries_carry_the_frontmatter_verbatim_and_folders_list_their_children() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pdf = dir.path().join("pdf");
    write_skill(
        &pdf,
        "---\nname: pdf\ndescription: Fill PDF forms\nlicense: MIT\nmetadata:\n  version: 2.1\n  tags: [forms, \
         pdf]\nallowed-tools: Read Write\n---\n# PDF\n\nPick a template from templates/.\n",
    );
    write(&pdf.join("templates/invoice.md"), b"# Invoice\n");
    write(&pdf.join("templates/regional/eu.md"), b"# EU\n");
    write(&pdf.join("assets/logo.png"), &[0x89, b'P', b'N', b'G', 0xff, 0]);
    // Line breaks are served as they are on disk.
    let crlf = b"---\r\nname: crlf\r\ndescription: Windows line breaks\r\n---\r\nBody.\r\n\rOld Mac.\n";
    write(&dir.path().join("crlf/SKILL.md"), crlf);
    let app = TestApp::spawn_dir(dir.path()).await;
    let client = connect(&app).await;
    let mut listed = client.list_all_skills().await.expect("skills/list");
    assert_eq!(listed.len(), 2);
    let crlf_entry = listed.remove(0);
    assert_eq!(rebuild(&client, &crlf_entry).await, BTreeMap::from([("SKILL.md".to_owned(), crlf.to_vec())]));
    let frontmatter = serde_json::to_value(&listed[0].frontmatter).expect("JSON");
    assert_eq!(
        frontmatter,
        json!({"name": "pdf", "description": "Fill PDF forms", "license": "MIT",
               "metadata": {"version": 2.1, "tags": ["forms", "pdf"]}, "allowed-tools": "Read Write"})
    );
    let folder = |uri: &str| {
        let client = &client;
        let uri = uri.to_owned();
        async move {
            client.read_resource_directory(ReadResourceDirectoryRequestParams::new(uri)).await.map(|listing| {
                listing.resources.iter().map(|child| (child.uri.clone(), child.mime_type.clone())).collect::<Vec<_>>()
            })
        }
    };
    let some = |mime: &str| Some(mime.to_owned());
    assert_eq!(
        folder("skill://pdf").await.expect("the skill's folder"),
        [
            ("skill://pdf/SKILL.md".to_owned(), some("text/markdown")),
            ("skill://pdf/assets".to_owned(), some("inode/directory")),
            ("skill://pdf/templates".to_owned(), some("inode/directory")),
        ]
    );
    assert_eq!(
        folder("skill://pdf/templates").await.expect("a subfolder"),
        [
            ("skill://pdf/templates/invoice.md".to_owned(), some("text/markdown")),
            ("skill://pdf/templates/regional".to_owned(), some("inode/directory")),
        ]
    );
    // A folder named with a trailing slash is the same folder, as the skill's own is.
    assert_eq!(
        folder("skill://pdf/templates/").await.expect("with a slash"),
        folder("skill://pdf/templates").await.unwrap()
    );
    assert_eq!(
        folder("skill://pdf/").await.expect("the skill's own, with a slash"),
        folder("skill://pdf").await.unwrap()
    );
    for not_a_folder in
        ["skill://pdf/SKILL.md", "skill://pdf/nothing", "skill://other", "file:///etc", "skill://pdf/SKILL.md/"]
    {
        let error = folder(not_a_folder).await.expect_err(not_a_folder);
        assert_eq!(invalid_params_code(&error), Some(-32602), "{not_a_folder}: {error}");
    }
    // A binary file is a blob; SKILL.md is text/markdown with the frontmatter's name and description.
    let logo = client.read_resource(ReadResourceRequestParams::new("skill://pdf/assets/logo.png")).await.expect("read");
    assert!(
        matches!(&logo.contents[0], ResourceContents::BlobResourceContents { mime_type: Some(mime), .. } if mime == "image/png")
    );
    let resources = client.list_all_resources().await.expect("resources/list");
    assert_eq!(resources.len(), 2);
    assert_eq!(resources[1].uri, "skill://pdf/SKILL.md");
    assert_eq!((resources[1].name.as_str(), resources[1].description.as_deref()), ("pdf", Some("Fill PDF forms")));
    assert_eq!(resources[1].mime_type.as_deref(), Some("text/markdown"));
}

fn invalid_params_code(error: &ServiceError) -> Option<i32> {
    match error {
        ServiceError::McpError(error) => Some(error.code.0),
        _ => None,
    }
}

/// What the synthetic collection (cases of the agentskills.io rules) gives: the skills SEP-2640
/// allows are listed; the others are left out of MCP, yet the tools still reach them.
#[tokio::test]
async fn only_skills_that_sep_2640_allows_are_listed() {
    let synthetic = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/collections/synthetic");
    let app = TestApp::spawn_dir(&synthetic).await;
    let client = connect(&app).await;
    let listed: Vec<String> =
        client.list_all_skills().await.expect("skills/list").into_iter().map(|skill| skill.frontmatter.name).collect();
    // Left out: `2048` (YAML reads the name as a number), `Upper-Case`, `double--hyphen`,
    // `snake_case` (not agentskills.io names), `duplicate-key` (not YAML), `empty-description`,
    // `list-frontmatter`, `missing-name` and `no-frontmatter` (no name and description).
    assert_eq!(
        listed,
        [
            "allowed-tools-list",
            "anchors",
            "dashes-in-description",
            "empty-compatibility",
            "flow-style",
            "long-compatibility",
            "numeric-metadata",
            "other-name",
            "unknown-keys",
        ]
    );
    for left_out in ["Upper-Case", "missing-name", "2048"] {
        let uri = format!("skill://{left_out}/SKILL.md");
        let error = client.get_skill(GetSkillRequestParams::new(&uri)).await.expect_err(&uri);
        assert_eq!(invalid_params_code(&error), Some(-32602), "{uri}");
        client.read_resource(ReadResourceRequestParams::new(&uri)).await.expect_err(&uri);
    }
    // The tools reach every skill of the catalog, as the REST API does.
    let loaded = call(&client, "load_skill", json!({"name": "Upper-Case"})).await;
    assert_eq!(loaded.is_error, Some(false));
    assert_eq!(loaded.structured_content.expect("structured")["name"], "Upper-Case");
}

/// `load_skill` and a `resources/read` of a `SKILL.md` are loads of the skill; reads of its other
/// files are not.
#[tokio::test]
async fn loads_through_mcp_are_counted_per_skill() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Steps."));
    write(&dir.path().join("alpha/references/guide.md"), b"# Guide\n");
    let app = TestApp::spawn_dir(dir.path()).await;
    let client = connect(&app).await;
    let series = "skillcat_skill_loads_total{skill=\"alpha\",surface=\"mcp\"}";
    call(&client, "load_skill", json!({"name": "alpha"})).await;
    assert_eq!(app.metric(series).await, 1);
    client.read_resource(ReadResourceRequestParams::new("skill://alpha/SKILL.md")).await.expect("read");
    client.read_resource(ReadResourceRequestParams::new("skill://alpha/references/guide.md")).await.expect("read");
    assert_eq!(app.metric(series).await, 2);
    client.cancel().await.expect("close");
    app.shutdown().await.unwrap();
}

pub(crate) async fn call(client: &Client, tool: &str, arguments: Value) -> rmcp::model::CallToolResult {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)).await.expect("tools/call")
}

pub(crate) fn text(result: &rmcp::model::CallToolResult) -> &str {
    result.content[0].as_text().map(|text| text.text.as_str()).expect("text content")
}

/// Each tool through the client, against the REST answer to the same request.
#[tokio::test]
async fn the_tools_answer_as_the_rest_api_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", &"Step by step. ".repeat(20)));
    write(&dir.path().join("alpha/references/guide.md"), "# Guide\n\nCaf\u{e9}.\n".as_bytes());
    write(&dir.path().join("alpha/assets/logo.png"), &[0x89, b'P', b'N', b'G', 0xff, 0]);
    let app = TestApp::spawn_dir(dir.path()).await;
    let client = connect(&app).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| &*tool.name).collect();
    assert_eq!(names, ["list_skills", "load_skill", "search_skills", "read_skill_file"]);
    let load = &tools[1].input_schema;
    assert_eq!(load["required"], json!(["name"]));
    assert_eq!(
        (load["properties"]["token_limit"]["minimum"].as_u64(), load["properties"]["token_limit"]["maximum"].as_u64()),
        (Some(1), Some(100000))
    );
    assert_eq!(tools[2].input_schema["required"], json!(["query"]));
    assert_eq!(tools[3].input_schema["required"], json!(["name", "path"]));
    let info = client.peer_info().expect("server info");
    assert!(info.instructions.as_deref().is_some_and(|text| text.contains("load_skill")));

    let manifest = app.manifest().await.text().await.expect("manifest");
    assert_eq!(text(&call(&client, "list_skills", json!({})).await), manifest);

    let rest: Value = app.load("alpha", Some(json!({"token_limit": 5}))).await.json().await.expect("load");
    let loaded = call(&client, "load_skill", json!({"name": "alpha", "token_limit": 5})).await;
    assert_eq!(loaded.structured_content, Some(rest));
    assert_eq!(loaded.structured_content.as_ref().expect("load")["truncated"], true);
    // An integral number is the integer, as in the REST API.
    let loaded = call(&client, "load_skill", json!({"name": "alpha", "token_limit": 5.0})).await;
    assert_eq!(loaded.is_error, Some(false));

    let rest: Value = app.get("/search?q=step&limit=5").send().await.expect("GET").json().await.expect("search");
    let found = call(&client, "search_skills", json!({"query": "step", "limit": 5})).await;
    assert_eq!(found.structured_content, Some(rest));
    assert_eq!(found.structured_content.as_ref().expect("search")["hits"][0]["name"], "alpha");

    let guide = call(&client, "read_skill_file", json!({"name": "alpha", "path": "references/guide.md"})).await;
    assert_eq!(text(&guide), "# Guide\n\nCaf\u{e9}.\n");
    let logo = call(&client, "read_skill_file", json!({"name": "alpha", "path": "assets/logo.png"})).await;
    let rmcp::model::ContentBlock::Resource(embedded) = &logo.content[0] else { panic!("an embedded resource") };
    assert_eq!(bytes_of(&embedded.resource), [0x89, b'P', b'N', b'G', 0xff, 0]);

    // Errors are tool errors worded as the REST problems for the same request.
    let cases: [(&str, Value, reqwest::Response); 8] = [
        (
            "search_skills",
            json!({"query": "x".repeat(257)}),
            app.get(&format!("/search?q={}", "x".repeat(257))).send().await.expect("GET"),
        ),
        (
            "search_skills",
            json!({"query": "step", "limit": 0}),
            app.get("/search?q=step&limit=0").send().await.expect("GET"),
        ),
        ("load_skill", json!({"name": "no such"}), app.load("no such", None).await),
        ("load_skill", json!({"name": "ghost"}), app.load("ghost", None).await),
        (
            "load_skill",
            json!({"name": "alpha", "token_limit": 0}),
            app.load("alpha", Some(json!({"token_limit": 0}))).await,
        ),
        (
            "load_skill",
            json!({"name": "alpha", "token_limit": "ten"}),
            app.load("alpha", Some(json!({"token_limit": "ten"}))).await,
        ),
        (
            "read_skill_file",
            json!({"name": "alpha", "path": "../alpha/SKILL.md"}),
            app.get("/skills/alpha/files/..%2Falpha%2FSKILL.md").send().await.expect("GET"),
        ),
        (
            "read_skill_file",
            json!({"name": "ghost", "path": "SKILL.md"}),
            app.get("/skills/ghost/files/SKILL.md").send().await.expect("GET"),
        ),
    ];
    for (tool, arguments, rest) in cases {
        let status = rest.status();
        let problem: Value = rest.json().await.expect("a problem");
        let answer = call(&client, tool, arguments.clone()).await;
        assert_eq!(answer.is_error, Some(true), "{tool} {arguments}");
        // The same words; where the body was JSON, the REST detail also says where in it.
        let detail = problem["detail"].as_str().expect("detail");
        let detail = detail.rsplit_once(" at line ").map_or(detail, |(words, _)| words);
        assert_eq!(text(&answer), detail, "{tool} {arguments} ({status})");
    }
    let unknown = client.call_tool(CallToolRequestParams::new("no_such_tool")).await.expect_err("unknown tool");
    assert_eq!(invalid_params_code(&unknown), Some(-32602));
}

/// A file changed on disk since the snapshot is refused (never served unverified), as the REST
/// route refuses it, and the rescan that asks for brings the new digest.
#[tokio::test]
async fn reads_are_verified_against_the_listed_digest() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    write(&dir.path().join("alpha/notes.md"), b"before\n");
    let app = TestApp::spawn_dir_with(dir.path(), |options| options.live.watch = false).await;
    let client = connect(&app).await;
    let uri = "skill://alpha/notes.md";
    let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.expect("read");
    assert_eq!(bytes_of(&read.contents[0]), b"before\n");

    write(&dir.path().join("alpha/notes.md"), b"changed\n");
    let error = client.read_resource(ReadResourceRequestParams::new(uri)).await.expect_err("a changed file");
    assert!(error.to_string().contains("changed; refresh discovery and retry"), "{error}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let skill = client.get_skill(GetSkillRequestParams::new("skill://alpha/SKILL.md")).await.expect("skills/get");
        let SkillResources::Files(files) = skill.skill.resources else { panic!("files") };
        if files.iter().any(|file| file.uri == uri && file.digest == digest(b"changed\n")) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the rescan did not bring the new digest");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.expect("read again");
    assert_eq!(bytes_of(&read.contents[0]), b"changed\n");
}

/// A subscription (`subscriptions/listen`, 2026-07-28) carries `notifications/resources/list_changed`
/// at a catalog change; the change is then listed.
#[tokio::test]
async fn a_catalog_change_is_announced_on_a_subscription_and_then_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let app = TestApp::spawn_dir(dir.path()).await;
    let client = connect_2026(&app.url("/mcp")).await;
    assert_eq!(client.list_all_skills().await.expect("skills/list").len(), 1);
    let mut subscription = client
        .peer()
        .listen(SubscriptionFilter::builder().resources_list_changed().tools_list_changed().build())
        .await
        .expect("subscriptions/listen");
    assert_eq!(subscription.acknowledged(), &SubscriptionFilter::builder().resources_list_changed().build());
    write_skill(&dir.path().join("beta"), &skill_md("beta", "The second skill", "Body."));
    let notification = tokio::time::timeout(DEADLINE, subscription.next()).await.expect("list_changed in time");
    assert!(
        matches!(notification, Ok(Some(ServerNotification::ResourceListChangedNotification(_)))),
        "{notification:?}"
    );
    let names: Vec<String> =
        client.list_all_skills().await.expect("skills/list").into_iter().map(|skill| skill.frontmatter.name).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert!(app.metric("skillcat_mcp_requests_total{method=\"skills/list\",outcome=\"ok\"}").await >= 2);
    assert_eq!(app.metric("skillcat_mcp_requests_total{method=\"subscriptions/listen\",outcome=\"ok\"}").await, 1);
}

/// A 2025-11-25 host's stream (`GET /mcp`, no session) carries `notifications/resources/list_changed`
/// at a catalog change; without a token file, only loopback names may open one.
#[tokio::test]
async fn a_catalog_change_is_announced_on_a_2025_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let app = TestApp::spawn_dir(dir.path()).await;
    let open = |host: &str| {
        app.client
            .get(app.url("/mcp"))
            .header("host", host)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .send()
    };
    assert_eq!(open("attacker.example").await.expect("GET /mcp").status(), 403);
    let mut stream = open("localhost").await.expect("GET /mcp");
    assert_eq!(stream.status(), 200);
    assert!(stream.headers()["content-type"].to_str().expect("type").starts_with("text/event-stream"));
    write_skill(&dir.path().join("beta"), &skill_md("beta", "The second skill", "Body."));
    let notified = tokio::time::timeout(DEADLINE, async {
        let mut seen = String::new();
        while let Ok(Some(chunk)) = stream.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/resources/list_changed") {
                return seen;
            }
        }
        panic!("the stream ended: {seen}");
    })
    .await
    .expect("list_changed in time");
    assert!(
        notified.contains(r#"data: {"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#),
        "{notified}"
    );
    tokio::time::timeout(Duration::from_secs(10), app.shutdown()).await.expect("shutdown in time").expect("clean");
    let ended = tokio::time::timeout(DEADLINE, async { while let Ok(Some(_)) = stream.chunk().await {} }).await;
    assert!(ended.is_ok(), "the stream outlived the server");
}

/// Shutdown ends open subscriptions: the server stops in time with one open.
#[tokio::test]
async fn shutdown_ends_open_subscriptions() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let app = TestApp::spawn_dir(dir.path()).await;
    let client = connect_2026(&app.url("/mcp")).await;
    let _subscription = client
        .peer()
        .listen(SubscriptionFilter::builder().resources_list_changed().build())
        .await
        .expect("subscriptions/listen");
    tokio::time::timeout(Duration::from_secs(10), app.shutdown()).await.expect("shutdown in time").expect("clean");
    drop(client);
}

#[tokio::test]
async fn with_a_token_mcp_needs_it_and_any_host_may_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "s3cret-token\n").expect("token file");
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path())], {
        let tokens = tokens.clone();
        move |options| options.token_file = Some(tokens)
    })
    .await;
    let answer = initialize(&app, &[]).await;
    assert_eq!(answer.status(), 401);
    assert!(answer.headers().contains_key("www-authenticate"));
    let answer = initialize(&app, &[("authorization", "Bearer s3cret-token"), ("host", "skills.example.com")]).await;
    assert_eq!(answer.status(), 200, "behind a token, any Host may call");
    let client = connect_with(&app, Listener::default(), Some("s3cret-token")).await;
    assert_eq!(client.list_all_skills().await.expect("skills/list").len(), 1);
}

/// An `initialize` request with extra headers.
async fn initialize(app: &TestApp, headers: &[(&str, &str)]) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST /mcp")
}

/// Without a token, only loopback names may reach MCP (DNS rebinding).
#[tokio::test]
async fn without_a_token_foreign_hosts_and_origins_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let app = TestApp::spawn_dir(dir.path()).await;
    for (headers, allowed) in [
        (vec![], true),
        (vec![("host", "localhost:1")], true),
        (vec![("origin", "http://localhost:3000")], true),
        (vec![("host", "attacker.example")], false),
        (vec![("host", "attacker.example:80")], false),
        (vec![("origin", "http://attacker.example")], false),
        (vec![("origin", "null")], false),
    ] {
        let status = initialize(&app, &headers).await.status();
        assert_eq!(status.is_success(), allowed, "{headers:?}: {status}");
        assert!(status.is_success() || status.is_client_error(), "{headers:?}: {status}");
    }
}

/// Bad input gets a JSON-RPC or HTTP error, never a 5xx, and the server goes on answering.
#[tokio::test]
async fn bad_input_never_gets_a_server_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let app = Arc::new(TestApp::spawn_dir(dir.path()).await);
    let answer = initialize(&app, &[]).await;
    assert!(!answer.headers().contains_key("mcp-session-id"), "the server keeps no session");
    // Within the size bound, nested far deeper than a JSON reader recurses.
    let nesting = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let deep = format!(r#"{{"jsonrpc": "2.0", "id": 3, "method": "skills/get", "params": {{"uri": {nesting}}}}}"#);
    let huge = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "x".repeat(200_000)}});
    // Requests of a 2025-11-25 client, which names its revision in a header (and has no session).
    let post = |body: Vec<u8>, content_type: &str, version: Option<&str>| {
        let mut request = app
            .client
            .post(app.url("/mcp"))
            .header("content-type", content_type)
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(version) = version {
            request = request.header("mcp-protocol-version", version);
        }
        request
    };
    let legacy = Some("2025-11-25");
    let rpc = |method: &str, params: Value| {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})).expect("JSON")
    };
    // The HTTP status expected, or a JSON-RPC error code (in a 200 answer's event stream).
    let cases: Vec<(&str, reqwest::RequestBuilder, i32)> = vec![
        ("not JSON", post(b"{\"jsonrpc\": ".to_vec(), "application/json", legacy), 415),
        ("not JSON-RPC", post(b"{\"hello\": 1}".to_vec(), "application/json", legacy), 415),
        ("deeply nested", post(deep.into_bytes(), "application/json", legacy), 415),
        ("huge params", post(serde_json::to_vec(&huge).expect("JSON"), "application/json", legacy), 413),
        ("wrong content type", post(rpc("ping", json!({})), "text/plain", legacy), 415),
        ("unknown revision", post(rpc("ping", json!({})), "application/json", Some("1999-01-01")), 400),
        ("unknown method", post(rpc("skills/explode", json!({})), "application/json", legacy), -32601),
        // Params that do not read as the method's: -32602, not "method not found".
        (
            "skills/get, a number for uri",
            post(rpc("skills/get", json!({"uri": 5})), "application/json", legacy),
            -32602,
        ),
        (
            "resources/read, no params",
            post(br#"{"jsonrpc": "2.0", "id": 8, "method": "resources/read"}"#.to_vec(), "application/json", legacy),
            -32602,
        ),
        (
            "resources/read, a number for uri",
            post(rpc("resources/read", json!({"uri": 5})), "application/json", legacy),
            -32602,
        ),
        (
            "tools/call, a string for arguments",
            post(rpc("tools/call", json!({"name": "list_skills", "arguments": "x"})), "application/json", legacy),
            -32602,
        ),
        (
            "skills/list, a number for cursor",
            post(rpc("skills/list", json!({"cursor": 5})), "application/json", legacy),
            -32602,
        ),
        (
            "resources/list, a list for cursor",
            post(rpc("resources/list", json!({"cursor": [1]})), "application/json", legacy),
            -32602,
        ),
        (
            "tools/list, an object for cursor",
            post(rpc("tools/list", json!({"cursor": {}})), "application/json", legacy),
            -32602,
        ),
        (
            "tools/list, a cursor of a one-page listing",
            post(rpc("tools/list", json!({"cursor": "alpha"})), "application/json", legacy),
            -32602,
        ),
        ("wrong method", app.client.put(app.url("/mcp")), 405),
        ("GET without an event stream", app.client.get(app.url("/mcp")).header("accept", "application/json"), 406),
        // Revision 2026-07-28 listens with subscriptions/listen.
        (
            "GET of 2026-07-28",
            app.client
                .get(app.url("/mcp"))
                .header("accept", "text/event-stream")
                .header("mcp-protocol-version", "2026-07-28"),
            405,
        ),
        // There are no sessions to end.
        ("DELETE", app.client.delete(app.url("/mcp")).header("mcp-session-id", "nope"), 405),
    ];
    for (what, request, expected) in cases {
        let answer = request.send().await.expect(what);
        let status = i32::from(answer.status().as_u16());
        let body = answer.text().await.unwrap_or_default();
        if expected < 0 {
            assert_eq!(status, 200, "{what}: {body}");
            assert!(body.contains(&format!("\"code\":{expected}")), "{what}: {body}");
        } else {
            assert_eq!(status, expected, "{what}: {body}");
        }
    }
    // Revision 2026-07-28 removed `initialize` and `ping`: asked in that revision, they are not found.
    for method in ["initialize", "ping"] {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        let answer = app
            .client
            .post(app.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .json(&json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": {"_meta": meta}}))
            .send()
            .await
            .expect(method);
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        assert_eq!(status, 404, "{method}: {body}");
        assert!(body.contains("\"code\":-32601"), "{method}: {body}");
    }
    let client = connect(&app).await;
    assert_eq!(client.list_all_skills().await.expect("still answering").len(), 1);
}

/// A request of revision 2026-07-28 as the transport page writes it (`MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name` where the method has one, the `_meta` fields), with `headers` put over
/// those (an empty value leaves one out). Its status and the JSON-RPC message answered (from
/// JSON or the event stream's last message), and whether a session id came with it.
async fn modern(app: &TestApp, method: &str, params: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let name = params.get("uri").or_else(|| params.get("name")).and_then(Value::as_str).map(str::to_owned);
    let mut all = vec![("mcp-protocol-version", "2026-07-28".to_owned()), ("mcp-method", method.to_owned())];
    if let Some(name) = name.filter(|_| ["resources/read", "tools/call"].contains(&method)) {
        all.push(("mcp-name", name));
    }
    for (header, value) in headers {
        all.retain(|(name, _)| name != header);
        if !value.is_empty() {
            all.push((header, (*value).to_owned()));
        }
    }
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 41, "method": method, "params": params}));
    for (header, value) in all {
        request = request.header(header, value);
    }
    let answer = request.send().await.expect(method);
    let status = answer.status().as_u16();
    assert!(!answer.headers().contains_key("mcp-session-id"), "{method}: no session is minted");
    let text = answer.text().await.expect("body");
    let message = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim).filter(|data| !data.is_empty()))
        .next_back()
        .unwrap_or(&text);
    (status, serde_json::from_str(message).unwrap_or_else(|_| panic!("{method}: not JSON-RPC: {text}")))
}

/// What revision 2026-07-28 and the final Skills extension require of a server, request by request
/// on the wire: `server/discover`, `resultType` on every result, `ttlMs` and `cacheScope` on every
/// cacheable one (`skills/list` and `skills/get` among them), the error codes and HTTP statuses of
/// unknown skills, resources, folders and methods, header checks (`Mcp-Method`, `Mcp-Name`, its
/// Base64 form) and an unsupported version answered with the versions supported.
#[tokio::test]
async fn the_2026_07_28_revision_holds_on_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    write(&dir.path().join("alpha/templates/a.md"), b"A template.\n");
    let app = TestApp::spawn_dir(dir.path()).await;
    let skill_md_uri = "skill://alpha/SKILL.md";

    let (status, discover) = modern(&app, "server/discover", json!({}), &[]).await;
    assert_eq!(status, 200, "{discover}");
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete", "{discover}");
    for version in ["2026-07-28", "2025-11-25"] {
        assert!(result["supportedVersions"].as_array().expect("versions").contains(&json!(version)), "{discover}");
    }
    assert!(result["capabilities"]["resources"].is_object(), "the extension needs resources: {discover}");
    assert_eq!(result["capabilities"]["extensions"]["io.modelcontextprotocol/skills"]["directoryRead"], true);

    // Every result says it is complete; the cacheable ones say for how long and for whom.
    let cacheable = [
        ("skills/list", json!({})),
        ("skills/get", json!({"uri": skill_md_uri})),
        ("resources/list", json!({})),
        ("resources/read", json!({"uri": skill_md_uri})),
        ("resources/templates/list", json!({})),
        ("tools/list", json!({})),
    ];
    for (method, params) in cacheable {
        let (status, answer) = modern(&app, method, params, &[]).await;
        assert_eq!(status, 200, "{method}: {answer}");
        let result = &answer["result"];
        assert_eq!(result["resultType"], "complete", "{method}: {answer}");
        assert!(result["ttlMs"].is_u64(), "{method}: {answer}");
        assert_eq!(result["cacheScope"], "public", "{method}, no token: {answer}");
    }
    for (method, params) in [
        ("resources/directory/read", json!({"uri": "skill://alpha/templates"})),
        ("tools/call", json!({"name": "list_skills", "arguments": {}})),
    ] {
        let (status, answer) = modern(&app, method, params, &[]).await;
        assert_eq!((status, &answer["result"]["resultType"]), (200, &json!("complete")), "{method}: {answer}");
    }
    // Base64 sentinels in Mcp-Name are decoded before they are compared with the body.
    let encoded = format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(skill_md_uri));
    let (status, answer) =
        modern(&app, "resources/read", json!({"uri": skill_md_uri}), &[("mcp-name", &encoded)]).await;
    assert_eq!((status, &answer["result"]["resultType"]), (200, &json!("complete")), "{answer}");

    // Errors: (what, method, params, headers, HTTP status, JSON-RPC code).
    type Headers<'a> = &'a [(&'a str, &'a str)];
    let errors: [(&str, &str, Value, Headers, u16, i64); 8] = [
        ("an unknown skill", "skills/get", json!({"uri": "skill://nope/SKILL.md"}), &[], 200, -32602),
        ("a file's URI for a skill", "skills/get", json!({"uri": "skill://alpha/templates/a.md"}), &[], 200, -32602),
        ("an unknown resource", "resources/read", json!({"uri": "skill://nope/SKILL.md"}), &[], 200, -32602),
        ("a file as a folder", "resources/directory/read", json!({"uri": skill_md_uri}), &[], 200, -32602),
        ("an unknown method", "skills/explode", json!({}), &[], 404, -32601),
        ("Mcp-Method unlike the body's", "skills/list", json!({}), &[("mcp-method", "tools/list")], 400, -32020),
        ("no Mcp-Name", "resources/read", json!({"uri": skill_md_uri}), &[("mcp-name", "")], 400, -32020),
        ("a version not spoken", "skills/list", json!({}), &[("mcp-protocol-version", "2099-01-01")], 400, -32020),
    ];
    for (what, method, params, headers, expected_status, code) in errors {
        let (status, answer) = modern(&app, method, params, headers).await;
        assert_eq!((status, answer["error"]["code"].as_i64()), (expected_status, Some(code)), "{what}: {answer}");
        assert_eq!(answer["id"], 41, "{what}: {answer}");
    }
    // A version named only in the header (as revisions before 2026-07-28 do) that this server does
    // not speak: the revision's own error, listing what it speaks, so a client can retry.
    let answer = app
        .client
        .post(app.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2099-01-01")
        .json(&json!({"jsonrpc": "2.0", "id": 42, "method": "skills/list"}))
        .send()
        .await
        .expect("unsupported version");
    assert_eq!(answer.status(), 400);
    let answer: Value = answer.json().await.expect("a JSON-RPC error");
    assert_eq!((answer["id"].as_i64(), answer["error"]["code"].as_i64()), (Some(42), Some(-32022)), "{answer}");
    assert_eq!(answer["error"]["data"]["requested"], "2099-01-01", "{answer}");
    let supported = answer["error"]["data"]["supported"].as_array().expect("supported versions");
    assert!(supported.contains(&json!("2026-07-28")) && supported.contains(&json!("2025-11-25")), "{answer}");

    // The same unknown resource in revision 2025-11-25 keeps that revision's code.
    let legacy = app
        .client
        .post(app.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 43, "method": "resources/read", "params": {"uri": "skill://nope/SKILL.md"}}))
        .send()
        .await
        .expect("legacy read");
    assert!(legacy.text().await.expect("body").contains("\"code\":-32002"), "2025-11-25's resource not found");
}

/// The `mcpServers` block of the README, pointed at a test server with a token: a client
/// configured with its URL path and headers lists the skills.
#[tokio::test]
async fn the_readme_configuration_connects() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    let section = &readme[readme.find("### MCP hosts").expect("the MCP hosts section")..];
    let block = section.split("```json\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a JSON block");
    let configuration: Value = serde_json::from_str(block).expect("the block is JSON");
    let server = &configuration["mcpServers"]["skillcat"];
    assert_eq!(server["type"], "http");
    let url = server["url"].as_str().expect("url");
    let path = url.strip_prefix("http://127.0.0.1:8080").expect("the default address");
    let authorization = server["headers"]["Authorization"].as_str().expect("the token header");
    let placeholder = authorization.strip_prefix("Bearer ").expect("a bearer token");

    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("skills/alpha"), &skill_md("alpha", "The first skill", "Body."));
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "readme-token\n").expect("token file");
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path().join("skills"))], move |options| {
        options.token_file = Some(tokens)
    })
    .await;
    let token = placeholder.replace("YOUR-TOKEN", "readme-token");
    let config = StreamableHttpClientTransportConfig::with_uri(app.url(path)).auth_header(token);
    let client =
        Listener::default().serve(StreamableHttpClientTransport::from_config(config)).await.expect("initialize");
    let listed = client.list_all_skills().await.expect("skills/list");
    assert_eq!(listed.iter().map(|skill| skill.uri.as_str()).collect::<Vec<_>>(), ["skill://alpha/SKILL.md"]);
}

/// A `subscriptions/listen` request of revision 2026-07-28, with extra headers.
fn listen_request(app: &TestApp, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "notifications": {"resourcesListChanged": true},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        },
    }});
    let mut request = app
        .client
        .post(app.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
}

/// A subscription's stream ends when the token it was opened with is revoked.
#[tokio::test]
async fn a_subscription_ends_when_its_token_is_revoked() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("skills/alpha"), &skill_md("alpha", "The first skill", "Body."));
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "first-token\n").expect("token file");
    let app = TestApp::spawn_with(vec![SourceConfig::directory(dir.path().join("skills"))], {
        let tokens = tokens.clone();
        move |options| options.token_file = Some(tokens)
    })
    .await;
    let mut stream = listen_request(&app, &[("authorization", "Bearer first-token")]).send().await.expect("listen");
    assert_eq!(stream.status(), 200);
    let acknowledged = stream.chunk().await.expect("read").expect("the acknowledgment");
    assert!(String::from_utf8_lossy(&acknowledged).contains("notifications/subscriptions/acknowledged"));
    let next = tempfile::NamedTempFile::new_in(dir.path()).expect("temporary");
    std::fs::write(next.path(), "second-token\n").expect("write");
    next.persist(&tokens).expect("replace the token file");
    let ended = tokio::time::timeout(DEADLINE, async { while let Ok(Some(_)) = stream.chunk().await {} }).await;
    assert!(ended.is_ok(), "the stream outlived its token");
}

/// What a client leaves on the server is bounded: requests leave nothing (no session), and
/// event streams (subscriptions, 2025-11-25 streams) take places among the capped event streams, in all and per client; one that ends
/// gives its place back.
#[tokio::test]
async fn subscriptions_are_capped_and_requests_leave_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let limits = ConnectionLimits { max_connections: 64, max_streams: 2, max_streams_per_client: 2 };
    let app = TestApp::spawn_dir_with(dir.path(), |options| options.connections = Some(limits)).await;
    for _ in 0..200 {
        let answer = initialize(&app, &[]).await;
        assert_eq!(answer.status(), 200);
        assert!(!answer.headers().contains_key("mcp-session-id"));
    }
    let mut held = Vec::new();
    let mut stream = listen_request(&app, &[]).send().await.expect("listen");
    assert_eq!(stream.status(), 200);
    stream.chunk().await.expect("read").expect("the acknowledgment");
    held.push(stream);
    let get = app.client.get(app.url("/mcp")).header("accept", "text/event-stream");
    let stream = get.header("mcp-protocol-version", "2025-11-25").send().await.expect("GET /mcp");
    assert_eq!(stream.status(), 200);
    held.push(stream);
    // Initialize calls took no place: the subscription and the 2025-11-25 stream did, and a third
    // stream is refused.
    let refused = listen_request(&app, &[]).send().await.expect("listen");
    assert!(matches!(refused.status().as_u16(), 429 | 503), "{}", refused.status());
    // Requests are not streams: they are answered.
    assert_eq!(initialize(&app, &[]).await.status(), 200);
    drop(held.remove(0));
    let reopened = crate::support::wait::eventually("the ended subscription's place is free", || async {
        let stream = listen_request(&app, &[]).send().await.expect("listen");
        stream.status() == 200
    });
    reopened.await;
    app.shutdown().await.expect("clean shutdown");
}

/// Any replica answers any request: two servers of one tree, a 2025-11-25 client initialized on
/// the first sends its next requests to the second, and a 2026-07-28 client discovers on one and
/// reads on the other.
#[tokio::test]
async fn requests_need_no_replica_affinity() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    let first = TestApp::spawn_dir(dir.path()).await;
    let second = TestApp::spawn_dir(dir.path()).await;
    let answer = initialize(&first, &[]).await;
    assert_eq!(answer.status(), 200);
    let version = "2025-11-25";
    let mut answers = Vec::new();
    for (method, params) in [
        ("notifications/initialized", None),
        ("tools/list", Some(json!({}))),
        ("skills/list", Some(json!({}))),
        ("resources/read", Some(json!({"uri": "skill://alpha/SKILL.md"}))),
    ] {
        let mut body = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            body["id"] = json!(2);
            body["params"] = params;
        }
        let answer = second
            .client
            .post(second.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .json(&body)
            .send()
            .await
            .expect("POST /mcp");
        let status = answer.status().as_u16();
        answers.push((method, status, answer.text().await.expect("text")));
    }
    assert_eq!(answers[0].1, 202, "{answers:?}");
    for (method, status, text) in &answers[1..] {
        assert_eq!(*status, 200, "{method}: {text}");
        assert!(text.contains("\"result\"") && !text.contains("\"error\""), "{method}: {text}");
    }
    assert!(answers[3].2.contains("The first skill"));
    // A client of 2026-07-28 on one replica, then the other: no handshake to lose.
    let client = connect_2026(&first.url("/mcp")).await;
    assert_eq!(client.list_all_skills().await.expect("skills/list").len(), 1);
    let other = connect_2026(&second.url("/mcp")).await;
    let read = other.read_resource(ReadResourceRequestParams::new("skill://alpha/SKILL.md")).await.expect("read");
    assert_eq!(bytes_of(&read.contents[0]), std::fs::read(dir.path().join("alpha/SKILL.md")).expect("SKILL.md"));
}

/// `load_skill` and `read_skill_file` take a version: the current one's digest reads as the
/// current skill; any other is a tool error naming it, never the current version instead.
#[tokio::test]
async fn tools_read_a_version_and_refuse_one_the_skill_does_not_have() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_skill(&dir.path().join("alpha"), &skill_md("alpha", "The first skill", "Body."));
    write(&dir.path().join("alpha/notes.txt"), b"notes\n");
    let app = TestApp::spawn_dir(dir.path()).await;
    let client = connect(&app).await;
    let entry: Value = app.skill("alpha").await.json().await.expect("JSON");
    let version = entry["version"].as_str().expect("a version");
    let current = call(&client, "load_skill", json!({"name": "alpha"})).await;
    let pinned = call(&client, "load_skill", json!({"name": "alpha", "version": version})).await;
    assert_eq!(pinned.is_error, Some(false));
    assert_eq!(pinned.structured_content, current.structured_content);
    let file =
        call(&client, "read_skill_file", json!({"name": "alpha", "path": "notes.txt", "version": version})).await;
    assert_eq!(text(&file), "notes\n");
    let other = format!("sha256:{}", "0".repeat(64));
    for (tool, arguments) in [
        ("load_skill", json!({"name": "alpha", "version": other})),
        ("read_skill_file", json!({"name": "alpha", "path": "notes.txt", "version": "v1"})),
    ] {
        let refused = call(&client, tool, arguments).await;
        assert_eq!(refused.is_error, Some(true), "{tool}");
        assert!(text(&refused).contains("has no version"), "{tool}: {}", text(&refused));
    }
    let malformed = call(&client, "load_skill", json!({"name": "alpha", "version": ""})).await;
    assert_eq!(malformed.is_error, Some(true));
    assert!(text(&malformed).starts_with("a version is 1 to 255 characters"), "{}", text(&malformed));
    client.cancel().await.expect("close");
    app.shutdown().await.expect("shutdown");
}
