//! The tools, for hosts without the skills extension. They reach every skill of the catalog (as
//! the REST API does, not only those the catalog publishes), call the same catalog API the REST
//! routes call, and their errors are tool errors worded as the REST API's problems.
//!
//! Adding a tool: an input type (its JSON schema is derived), an entry in [`all`], an arm in
//! [`call`].

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, JsonObject, Tool, ToolAnnotations};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use skillcat_core::{SkillName, TokenLimit};

use super::error::{ToolError, tool_error};
use crate::app::App;
use crate::catalog::{CatalogError, CatalogSkill, SearchLimit, SearchQuery, media_type};
use crate::json;
use crate::observability::Surface;

/// `list_skills` takes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ListSkills {}

/// `load_skill`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct LoadSkill {
    /// The skill's name, as list_skills gives it.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// The budget in estimated tokens (4 UTF-8 bytes each); the content is cut to fit. Default 10000.
    #[serde(default)]
    #[schemars(with = "Option<u32>", range(min = 1, max = 100000))]
    pub token_limit: Option<TokenLimit>,
    /// Load the skill as it was at this version: a version digest (sha256:<hex>), a commit (7 to
    /// 40 hex digits) or a tag. Default: the current version.
    #[serde(default)]
    pub version: Option<String>,
}

/// `read_skill_file`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ReadSkillFile {
    /// The skill's name, as list_skills gives it.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// The file's path relative to the skill's folder, with `/` (as SKILL.md refers to it).
    pub path: String,
    /// Read the file as it was at this version of the skill (a version digest, a commit or a
    /// tag). Default: the current version.
    #[serde(default)]
    pub version: Option<String>,
}

/// `search_skills`' input.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct SearchSkills {
    /// Words to look for in the skills' names, descriptions and instructions (at most 256
    /// characters; the last word also matches words it begins).
    #[schemars(length(max = 256))]
    pub query: String,
    /// The most skills to answer, best first. Default 20.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// Every tool, with its input schema.
pub fn all() -> Vec<Tool> {
    let read_only = ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false);
    vec![
        Tool::new(
            "list_skills",
            "The skills this server offers: the catalog's prompt manifest, each skill's name and description. \
             Load one with load_skill.",
            schema_for_type::<ListSkills>(),
        ),
        Tool::new(
            "load_skill",
            "A skill's instructions (its SKILL.md), cut to fit token_limit, as JSON: name, location, content, \
             truncated, estimated_tokens, token_limit.",
            schema_for_type::<LoadSkill>(),
        ),
        Tool::new(
            "search_skills",
            "The skills that best match a query (ranked by relevance to their names, descriptions and SKILL.md \
             texts), as JSON: total, and hits with name, description, source, etag, score and an excerpt.",
            schema_for_type::<SearchSkills>(),
        ),
        Tool::new(
            "read_skill_file",
            "One file of a skill's folder (a reference, script or template its SKILL.md names), checked against \
             the catalog's digest of it.",
            schema_for_type::<ReadSkillFile>(),
        ),
    ]
    .into_iter()
    .map(|tool| tool.with_annotations(read_only.clone()))
    .collect()
}

/// Calls a tool. An unknown tool is a protocol error (-32602); anything wrong with the call
/// itself is a tool error, worded as the REST API's problem for the same request.
pub async fn call(
    app: &Arc<App>,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let arguments = request.arguments.unwrap_or_default();
    let answer = match &*request.name {
        "list_skills" => match input::<ListSkills>(arguments) {
            Ok(ListSkills {}) => list_skills(app),
            Err(error) => Err(error),
        },
        "load_skill" => match input::<LoadSkill>(arguments) {
            Ok(input) => load_skill(app, input).await,
            Err(error) => Err(error),
        },
        "search_skills" => match input::<SearchSkills>(arguments) {
            Ok(input) => search_skills(app, input).await,
            Err(error) => Err(error),
        },
        "read_skill_file" => match input::<ReadSkillFile>(arguments) {
            Ok(input) => read_skill_file(app, input, context).await,
            Err(error) => Err(error),
        },
        unknown => return Err(ErrorData::invalid_params(format!("no tool named {unknown:?}"), None)),
    };
    Ok(answer.unwrap_or_else(tool_error))
}

/// The arguments as `T`, or what is wrong with them (`path: what`), as a load's body would be told.
fn input<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, ToolError> {
    json::decode_value(serde_json::Value::Object(arguments)).map_err(|error| ToolError::Input(error.to_string()))
}

fn list_skills(app: &App) -> Result<CallToolResult, ToolError> {
    let snapshot = app.catalog.snapshot();
    let catalog = snapshot.ready()?;
    let manifest = String::from_utf8_lossy(&catalog.manifest.bytes).into_owned();
    Ok(CallToolResult::success(vec![ContentBlock::text(manifest)]))
}

/// The skill `name` of the current catalog, or as it was at `version`.
async fn skill_at(app: &App, name: &str, version: Option<&str>) -> Result<Arc<CatalogSkill>, CatalogError> {
    let name = SkillName::parse(name).map_err(|_| CatalogError::InvalidName)?;
    match version {
        None => {
            let snapshot = app.catalog.snapshot();
            let skill = snapshot.ready()?.get(&name).ok_or(CatalogError::UnknownSkill(name))?;
            Ok(Arc::clone(skill))
        }
        // Also a skill the catalog no longer has, while its history has the version.
        Some(version) => app.catalog.pinned(&name, version).await,
    }
}

async fn load_skill(app: &App, input: LoadSkill) -> Result<CallToolResult, ToolError> {
    let skill = skill_at(app, &input.name, input.version.as_deref()).await?;
    let loaded = app.catalog.content(&skill).await?.load(input.token_limit.unwrap_or_default());
    app.metrics.skill_loaded(skill.skill.name().as_str(), Surface::Mcp);
    Ok(CallToolResult::structured(serde_json::to_value(loaded).expect("load results are JSON")))
}

/// As `GET /search?q=&limit=` answers, with the same errors.
async fn search_skills(app: &App, input: SearchSkills) -> Result<CallToolResult, ToolError> {
    let query = SearchQuery::parse(&input.query).map_err(|error| ToolError::Input(error.to_string()))?;
    let limit = match input.limit {
        None => SearchLimit::DEFAULT,
        Some(limit) => SearchLimit::new(limit.into()).map_err(|error| ToolError::Input(error.to_string()))?,
    };
    let answer = app.catalog.search(&app.catalog.snapshot(), &query, limit).await?;
    Ok(CallToolResult::structured(serde_json::to_value(answer).expect("search answers are JSON")))
}

async fn read_skill_file(
    app: &App,
    input: ReadSkillFile,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ToolError> {
    let skill = skill_at(app, &input.name, input.version.as_deref()).await?;
    let file = skill.file(&input.path)?;
    super::reserve(app, context, file.size).await?;
    let bytes = app.catalog.file(&skill, file).await?;
    let uri = super::view::uri(skill.skill.name().as_str(), file.path.as_str());
    let content = match String::from_utf8(bytes) {
        Ok(text) => ContentBlock::text(text),
        Err(error) => {
            let mime = media_type(&file.path);
            ContentBlock::resource(super::view::contents(&uri, error.into_bytes(), &mime).with_mime_type(mime))
        }
    };
    Ok(CallToolResult::success(vec![content]))
}
