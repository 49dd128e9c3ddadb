//! `mcp-peer DIR ADDR [--stateless]`: serves the skills below DIR at http://ADDR/mcp with rmcp's
//! `SkillCatalog`, the way its documentation shows, on rmcp's Streamable HTTP transport with its
//! defaults (stateful sessions for 2025-11-25, event-stream answers). With `--stateless`, the
//! transport is configured as skillcat configures its own (no session manager, no sessions for
//! any revision, JSON answers), which makes it the floor of what rmcp's transport costs a
//! stateless server per request. Prints `serving address=ADDR` once listening; stops on SIGINT or
//! SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt as _;
use rmcp::handler::server::skill_catalog::SkillCatalog;
use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListResourcesResult, ListSkillsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

#[derive(Clone)]
struct Peer {
    skills: Arc<SkillCatalog>,
}

impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_resources().enable_skills_with_directory_read().build())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(self.skills.list_skills())
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.skills.get_skill(&request.uri)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.skills.read_resource_directory(&request.uri)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(self.skills.resources()))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.skills
            .read_resource(&request.uri)
            .map(Into::into)
            .ok_or_else(|| ErrorData::resource_not_found(request.uri, None))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let (Some(dir), Some(address)) = (arguments.next(), arguments.next()) else {
        return Err("usage: mcp-peer DIR ADDR [--stateless]".into());
    };
    let stateless = match arguments.next().as_deref() {
        None => false,
        Some("--stateless") => true,
        Some(other) => return Err(format!("unknown argument {other:?}: usage: mcp-peer DIR ADDR [--stateless]").into()),
    };
    let skills = Arc::new(tokio::task::spawn_blocking(move || SkillCatalog::from_dir(dir)).await??);
    let peer = Peer { skills };
    let config = StreamableHttpServerConfig::default().with_sse_keep_alive(Some(Duration::from_secs(15)));
    let router = if stateless {
        let config = config.with_legacy_session_mode(false).with_json_response(true);
        let service =
            StreamableHttpService::new(move || Ok(peer.clone()), Arc::new(NeverSessionManager::default()), config);
        axum::Router::new().route_service("/mcp", service)
    } else {
        let service =
            StreamableHttpService::new(move || Ok(peer.clone()), Arc::new(LocalSessionManager::default()), config);
        axum::Router::new().route_service("/mcp", service)
    };
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("serving address={}", listener.local_addr()?);
    // TCP_NODELAY, as skillcat sets it: an event stream's writes must not wait for delayed ACKs.
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let mut terminate =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        })
        .await?;
    Ok(())
}
