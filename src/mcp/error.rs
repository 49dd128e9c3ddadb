//! The catalog's errors as MCP answers them, in one place: as JSON-RPC errors of the Skills
//! extension's methods, and as the tools' error results (worded as the REST API's problems for the
//! same request, since both are the catalog error's own message).

use rmcp::model::{CallToolResult, ContentBlock, ErrorData};

use crate::catalog::CatalogError;

/// What a method of the extension answers when the catalog cannot: the request was valid, so it is
/// the server's error (-32603), and its message says why (not ready, a source failed, the skill
/// changed: retry). A read that failed for another reason is logged, and its message is generic.
pub fn method_error(error: CatalogError) -> ErrorData {
    match error {
        CatalogError::Read { .. } => {
            tracing::error!(%error, "a source failed to read a skill file");
            ErrorData::internal_error("internal error", None)
        }
        error => ErrorData::internal_error(error.to_string(), None),
    }
}

/// Why a tool call could not be answered: what the catalog said, or what is wrong with the call.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The arguments, the query or the limit: what is wrong with them.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Busy(#[from] Busy),
}

/// No room for one more large answer within a moment (`crate::limits::AnswerBytes`): the request
/// was valid, and a retry shortly will do.
#[derive(Debug, thiserror::Error)]
#[error("the server is busy sending large files; retry shortly")]
pub struct Busy;

/// A tool's error as its result: the message for the model to read.
pub fn tool_error(error: ToolError) -> CallToolResult {
    let text = match error {
        ToolError::Catalog(error @ CatalogError::Read { .. }) => {
            tracing::error!(%error, "a source failed to read a skill");
            "internal error".to_owned()
        }
        error => error.to_string(),
    };
    CallToolResult::error(vec![ContentBlock::text(text)])
}
