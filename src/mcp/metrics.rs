//! MCP requests by method and outcome, rendered with the service's other metrics.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Requests by method (one of [`METHODS`]), then outcome (`ok` or a JSON-RPC error code): a few
/// dozen series at most, whatever clients send. Methods the server does not implement are
/// answered by the SDK (`-32601`) and counted only by the HTTP metrics of `/mcp`.
#[derive(Debug, Default)]
pub struct McpMetrics {
    requests: Mutex<BTreeMap<(&'static str, String), u64>>,
}

/// The methods the server answers, each counted under its own name.
pub const METHODS: [&str; 9] = [
    "initialize",
    "ping",
    "skills/list",
    "skills/get",
    "resources/list",
    "resources/read",
    "resources/directory/read",
    "tools/list",
    "tools/call",
];

impl McpMetrics {
    /// Counts one request of `method`, answered `Ok` or with the JSON-RPC error `code`.
    pub fn request(&self, method: &str, outcome: Result<(), i32>) {
        let method = METHODS.iter().copied().find(|known| *known == method).unwrap_or("other");
        let outcome = match outcome {
            Ok(()) => "ok".to_owned(),
            Err(code) => code.to_string(),
        };
        *self
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((method, outcome))
            .or_default() += 1;
    }

    /// The Prometheus text of these metrics.
    pub fn render(&self, out: &mut String) {
        out.push_str("# HELP skillcat_mcp_requests_total MCP requests answered, by method and outcome (ok or the JSON-RPC error code).\n");
        out.push_str("# TYPE skillcat_mcp_requests_total counter\n");
        let requests = self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for ((method, outcome), count) in requests.iter() {
            let _ = writeln!(out, "skillcat_mcp_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}} {count}");
        }
    }
}
