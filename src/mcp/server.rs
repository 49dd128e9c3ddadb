//! The MCP server: one handler whose methods answer from the current snapshot.

use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode, ErrorData,
    GetSkillRequestParams, GetSkillResult, Implementation, InitializeRequestParams, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerCapabilities, ServerConfig, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};

use skillcat_core::{SKILL_MD, SpecName};

use super::error::method_error;
use super::tools;
use super::view::{Target, View, contents, mime_type};
use crate::app::App;
use crate::observability::{MCP_METHODS, Surface};

/// Entries of `skills/list` (and `SKILL.md` resources of `resources/list`) per page.
const PAGE: usize = 100;

/// What a host learns at `initialize`: how to use the tools, and the extension.
const INSTRUCTIONS: &str = "This server is a catalog of skills: folders of instructions led by a SKILL.md. Call \
                            list_skills to see which skills exist (or search_skills to find one), load_skill with a \
                            name (and optionally a token_limit) to read one, and read_skill_file for a file its SKILL.md refers to; hosts \
                            with the io.modelcontextprotocol/skills extension can use skills/list and resources/read \
                            on skill:// URIs instead.";

/// The MCP handler of every request; each request's is a clone (two `Arc`s).
#[derive(Clone)]
pub struct SkillServer {
    pub(super) app: Arc<App>,
    /// What [`ServerHandler::get_info`] answers, made once: rmcp asks for it several times per
    /// request (a stateless request starts a service of its own).
    info: Arc<ServerConfig>,
}

impl SkillServer {
    pub(super) fn new(app: Arc<App>) -> SkillServer {
        let capabilities = ServerCapabilities::builder()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_skills_with_directory_read()
            .build();
        let info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("skillcat", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS);
        SkillServer { app, info: Arc::new(info) }
    }

    /// The MCP view of the current catalog version.
    pub(super) async fn view(&self) -> Result<Arc<View>, ErrorData> {
        View::of(&self.app.catalog, &self.app.catalog.snapshot()).await.map_err(method_error)
    }

    /// Runs one request's answer, counting it by method and outcome.
    async fn count<T>(&self, method: &str, answer: impl Future<Output = Result<T, ErrorData>>) -> Result<T, ErrorData> {
        let answer = answer.await;
        self.app.metrics.mcp.request(method, answer.as_ref().map(|_| ()).map_err(|error| error.code.0));
        answer
    }

    /// The caching attributes (SEP-2549) where the negotiated version has them: the catalog is
    /// live, so a listing is fresh only until the next change (announced with
    /// `notifications/resources/list_changed`); behind a token it is the caller's alone.
    fn cacheable(&self, context: &RequestContext<RoleServer>) -> Option<(u64, CacheScope)> {
        let version = context.protocol_version()?;
        let scope = if self.app.tokens.is_some() { CacheScope::Private } else { CacheScope::Public };
        (version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()).then_some((0, scope))
    }
}

/// The served skill a cursor names, or -32602 (as for a cursor that is not a string: see
/// [`super::BadCursor`]).
fn cursor(
    request: Option<&PaginatedRequestParams>,
    context: &RequestContext<RoleServer>,
) -> Result<Option<SpecName>, ErrorData> {
    let parts = context.extensions.get::<http::request::Parts>();
    if let Some(super::BadCursor(kind)) = parts.and_then(|parts| parts.extensions.get::<super::BadCursor>()) {
        return Err(ErrorData::invalid_params(format!("invalid cursor: a string is expected, not {kind}"), None));
    }
    match request.and_then(|request| request.cursor.as_deref()) {
        None => Ok(None),
        Some(cursor) => SpecName::parse(cursor)
            .map(Some)
            .map_err(|_| ErrorData::invalid_params(format!("invalid cursor: {cursor:?}"), None)),
    }
}

/// -32602 for a cursor in a request of a listing that has one page (or for a bad one).
fn one_page(request: Option<&PaginatedRequestParams>, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    match cursor(request, context)? {
        None => Ok(()),
        Some(_) => Err(ErrorData::invalid_params("this listing has one page: no cursor applies", None)),
    }
}

impl SkillServer {
    async fn answer_list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let after = cursor(request.as_ref(), context)?;
        let view = self.view().await?;
        let (page, next) = view.page(after.as_ref(), PAGE);
        let mut result = ListSkillsResult::with_all_items(page.map(|skill| skill.mcp.entry.clone()).collect());
        result.next_cursor = next;
        if let Some((ttl, scope)) = self.cacheable(context) {
            result = result.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(result)
    }

    async fn answer_get_skill(
        &self,
        request: GetSkillRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let view = self.view().await?;
        let unknown = || ErrorData::invalid_params(format!("no skill is served at {}", request.uri), None);
        let skill = match view.resolve(&request.uri) {
            Some(Target::File(skill, file)) if file.path.as_str() == SKILL_MD => skill,
            _ => return Err(unknown()),
        };
        if skill.mcp.entry.uri != request.uri {
            // The same file under another spelling of its URI: the entry answers to its own.
            return Err(unknown());
        }
        let mut result = GetSkillResult::new(skill.mcp.entry.clone());
        if let Some((ttl, scope)) = self.cacheable(context) {
            result = result.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(result)
    }

    async fn answer_list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let after = cursor(request.as_ref(), context)?;
        let view = self.view().await?;
        let (page, next) = view.page(after.as_ref(), PAGE);
        let mut result = ListResourcesResult::with_all_items(page.map(|skill| skill.mcp.listed.clone()).collect());
        result.next_cursor = next;
        if let Some((ttl, scope)) = self.cacheable(context) {
            result = result.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(result)
    }

    async fn answer_read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, ErrorData> {
        let view = self.view().await?;
        let not_found = || {
            let data = serde_json::json!({ "uri": request.uri });
            ErrorData::resource_not_found(format!("no such resource: {}", request.uri), Some(data))
        };
        let Some(Target::File(skill, file)) = view.resolve(&request.uri) else {
            return Err(not_found());
        };
        super::reserve(&self.app, context, file.size)
            .await
            .map_err(|busy| ErrorData::internal_error(busy.to_string(), None))?;
        // A SKILL.md (what hosts read most) comes from the catalog's contents, checked against the
        // snapshot's version of it and kept while no file changed; any other file is read
        // beneath the skill's folder and checked against its listed digest.
        let read = if file.path.as_str() == SKILL_MD {
            let read = self.app.catalog.content(skill.catalog).await;
            if read.is_ok() {
                self.app.metrics.skill_loaded(skill.catalog.skill.name().as_str(), Surface::Mcp);
            }
            read.map(|content| content.text().as_bytes().to_vec())
        } else {
            self.app.catalog.file(skill.catalog, file).await
        };
        let bytes = read.map_err(method_error)?;
        let mime = mime_type(file);
        let contents = contents(&request.uri, bytes, &mime).with_mime_type(mime);
        let mut result = ReadResourceResult::new(vec![contents]);
        if let Some((ttl, scope)) = self.cacheable(context) {
            result = result.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(result)
    }

    async fn answer_read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        let view = self.view().await?;
        let Some(Target::Directory(skill, folder)) = view.resolve(&request.uri) else {
            return Err(ErrorData::invalid_params(format!("not a folder of a served skill: {}", request.uri), None));
        };
        if request.cursor.is_some() {
            return Err(ErrorData::invalid_params("this listing has one page: no cursor applies", None));
        }
        let children = skill.mcp.directories.get(&folder).cloned().unwrap_or_default();
        Ok(ReadResourceDirectoryResult::with_all_items(children))
    }
}

impl ServerHandler for SkillServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::clone(&self.info)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.count("initialize", async { self.negotiate_initialize(&request) }).await
    }

    async fn ping(&self, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.count("ping", async { Ok(()) }).await
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.count("skills/list", self.answer_list_skills(request, &context)).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.count("skills/get", self.answer_get_skill(request, &context)).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.count("resources/list", self.answer_list_resources(request, &context)).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.count("resources/read", self.answer_read_resource(request, &context)).await.map(Into::into)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.count("resources/directory/read", self.answer_read_resource_directory(request, &context)).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.count("tools/list", async {
            one_page(request.as_ref(), &context)?;
            let mut result = ListToolsResult::with_all_items(tools::all());
            if let Some((ttl, scope)) = self.cacheable(&context) {
                result = result.with_ttl_ms(ttl).with_cache_scope(scope);
            }
            Ok(result)
        })
        .await
    }

    /// No templates: every resource is listed by its own URI. Answered (rather than left to the
    /// default) so that its caching attributes say what every other listing says.
    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.count("resources/templates/list", async {
            one_page(request.as_ref(), &context)?;
            let mut result = ListResourceTemplatesResult::default();
            if let Some((ttl, scope)) = self.cacheable(&context) {
                result = result.with_ttl_ms(ttl).with_cache_scope(scope);
            }
            Ok(result)
        })
        .await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.count("tools/call", tools::call(&self.app, request, &context)).await.map(Into::into)
    }

    /// A request whose method rmcp did not recognize, which happens too when a method this server
    /// answers comes with params that do not read as that method's: those are -32602 (invalid
    /// params, saying what is wrong), any other method -32601, as are the methods revision
    /// 2026-07-28 removed (`initialize`, `ping`) in a request of that revision. A method name is
    /// client text: it is echoed cut short.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method.as_str();
        let stateless_revision = context
            .protocol_version()
            .or_else(|| context.meta.protocol_version())
            .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let answer = if stateless_revision && REMOVED_IN_2026_07_28.contains(&method) {
            Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("no method {method:?} in revision 2026-07-28"),
                None,
            ))
        } else if MCP_METHODS.contains(&method) {
            Err(ErrorData::invalid_params(
                format!("invalid params for {method}: {}", params_problem(method, request.params)),
                None,
            ))
        } else {
            let shown: String = method.chars().take(64).collect();
            let cut = if shown.len() < method.len() { "…" } else { "" };
            Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, format!("no method {shown:?}{cut}"), None))
        };
        self.count(method, async { answer }).await
    }

    /// Subscriptions (2026-07-28) carry `notifications/resources/list_changed`, the one change
    /// notification this server sends.
    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().resources_list_changed().build())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        self.app.metrics.mcp.request("subscriptions/listen", Ok(()));
        announce_changes(&self.app, &subscription).await;
        Ok(())
    }
}

/// The methods this server answers in revision 2025-11-25 that 2026-07-28 removed.
const REMOVED_IN_2026_07_28: [&str; 2] = ["initialize", "ping"];

/// What is wrong with `params` for `method` (one this server answers), read as rmcp's own type of
/// that method's params.
fn params_problem(method: &str, params: Option<serde_json::Value>) -> String {
    fn problem<T: serde::de::DeserializeOwned>(params: Option<serde_json::Value>) -> String {
        let Some(params) = params else { return "params are required".to_owned() };
        match serde_json::from_value::<T>(params) {
            Ok(_) => "they do not fit the method".to_owned(),
            Err(error) => error.to_string().chars().take(200).collect(),
        }
    }
    match method {
        "skills/get" => problem::<GetSkillRequestParams>(params),
        "resources/read" => problem::<ReadResourceRequestParams>(params),
        "resources/directory/read" => problem::<ReadResourceDirectoryRequestParams>(params),
        "tools/call" => problem::<CallToolRequestParams>(params),
        "initialize" => problem::<InitializeRequestParams>(params),
        _ => problem::<PaginatedRequestParams>(params),
    }
}

/// Sends `notifications/resources/list_changed` on a subscription at every new catalog version,
/// until the client cancels it or goes (its stream closes), a notification fails or the server
/// shuts down. It lives no longer than the request that opened it.
async fn announce_changes(app: &App, subscription: &SubscriptionContext) {
    let mut snapshots = app.catalog.subscribe();
    snapshots.mark_unchanged();
    let mut shutdown = app.shutdown.clone();
    if subscription.accepted().resources_list_changed != Some(true) {
        // Nothing to send: the stream stays open until the client ends it.
        tokio::select! {
            () = subscription.cancelled() => {}
            () = crate::shutdown::stopped(&mut shutdown) => {}
        }
        return;
    }
    loop {
        tokio::select! {
            changed = snapshots.changed() => {
                let notification = ServerNotification::ResourceListChangedNotification(Default::default());
                if changed.is_err() || subscription.sink().send(notification).await.is_err() {
                    return;
                }
            }
            () = subscription.cancelled() => return,
            () = crate::shutdown::stopped(&mut shutdown) => return,
        }
    }
}
