//! Logs and metrics.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`; see [`log_filter`]). Text is coloured
/// only on a terminal, and not when `NO_COLOR` is set: in a file, a pipe or a container's log the
/// escape codes would be noise.
pub fn init_tracing(format: LogFormat) {
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(BoundedLines { format }).with_ansi(colour);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// The longest log line written, in bytes: what a client sends (a method name, a path, a header)
/// can end up in a line, and must not make the log grow faster than the requests that carry it.
pub const MAX_LOG_LINE: usize = 2048;

/// The longest string value kept in a JSON log line that is over [`MAX_LOG_LINE`].
const MAX_JSON_VALUE: usize = 256;

/// Writes log lines to stderr, each at most [`MAX_LOG_LINE`] bytes: a longer text line is cut and
/// says how much was cut; in a longer JSON line each long string value is cut, so the line stays
/// one JSON object.
struct BoundedLines {
    format: LogFormat,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BoundedLines {
    type Writer = BoundedLine;

    fn make_writer(&'a self) -> BoundedLine {
        BoundedLine { format: self.format }
    }
}

/// One event's writer: the formatter writes a whole line at once.
struct BoundedLine {
    format: LogFormat,
}

impl std::io::Write for BoundedLine {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut stderr = std::io::stderr().lock();
        if line.len() <= MAX_LOG_LINE {
            stderr.write_all(line)?;
        } else {
            stderr.write_all(&bounded(self.format, line))?;
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// `line` (over [`MAX_LOG_LINE`]) cut down to it.
fn bounded(format: LogFormat, line: &[u8]) -> Vec<u8> {
    if format == LogFormat::Json
        && let Ok(mut record) = serde_json::from_slice::<serde_json::Value>(line)
    {
        cut_strings(&mut record);
        let mut out = serde_json::to_vec(&record).unwrap_or_default();
        if out.len() <= MAX_LOG_LINE {
            out.push(b'\n');
            return out;
        }
    }
    let text = String::from_utf8_lossy(line);
    let mut end = MAX_LOG_LINE - 64;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)\n", text[..end].trim_end_matches('\n'), line.len() - end).into_bytes()
}

fn cut_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) if text.len() > MAX_JSON_VALUE => {
            let mut end = MAX_JSON_VALUE;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let cut = text.len() - end;
            text.truncate(end);
            text.push_str(&format!("… ({cut} bytes cut)"));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(cut_strings),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(cut_strings),
        _ => {}
    }
}

/// Libraries that log routine events at `info`, kept at a quieter level unless `RUST_LOG` names
/// them: rmcp logs every MCP session's start and its client's whole `initialize` request, and every error a
/// request is answered with (an unknown method, a resource not found) as a warning, which a
/// client can have written as often as it likes.
const QUIETER: &[(&str, &str)] = &[("rmcp", "warn"), ("rmcp::service", "error")];

/// The filter for a `RUST_LOG` value: its directives (`info` when unset or invalid), plus
/// [`QUIETER`] for the targets it does not name.
fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    let mut filter =
        rust_log.and_then(|directives| EnvFilter::try_new(directives).ok()).unwrap_or_else(|| EnvFilter::new("info"));
    for (target, level) in QUIETER {
        // A directive names the target when it is about the target, a module within it, or
        // a module it is within (`rmcp=debug` names `rmcp::service`).
        let names_target = |directive: &str| {
            let named = directive.trim().split(['=', '[']).next().unwrap_or_default();
            let within = |inner: &str, outer: &str| {
                inner.strip_prefix(outer).is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
            };
            !named.is_empty() && (within(named, target) || within(target, named))
        };
        if !rust_log.is_some_and(|directives| directives.split(',').any(names_target)) {
            filter = filter.add_directive(format!("{target}={level}").parse().expect("a valid directive"));
        }
    }
    filter
}

/// Upper bounds of the latency histograms, in seconds.
const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bucket, bound) in self.counts.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        for (count, bound) in self.counts.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{separator}le=\"+Inf\"}} {}", self.count);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// The requests answered on one route.
#[derive(Debug, Default)]
struct RouteStats {
    statuses: BTreeMap<u16, u64>,
    latency: Histogram,
}

/// The service's Prometheus metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests by route template: by status, and their latency. One lock for both: every
    /// request takes it.
    routes: Mutex<BTreeMap<String, RouteStats>>,
    scans: Mutex<Histogram>,
    scan_failures: AtomicU64,
    catalog_failing: AtomicU64,
    catalog_skills: AtomicUsize,
    watcher_errors: AtomicU64,
    watch_incomplete: AtomicU64,
    watch_limit_reached: AtomicU64,
    watch_overflows: AtomicU64,
    rescans_incremental: AtomicU64,
    rescans_full: AtomicU64,
    picture_disagreements: AtomicU64,
    sse_clients: AtomicUsize,
    search_indexes: AtomicU64,
    search_documents: AtomicU64,
    /// MCP requests by method.
    pub mcp: McpRequests,
    /// Fetches of git sources, by source label.
    git: Mutex<BTreeMap<String, GitFetches>>,
    /// Loads of each skill of the current catalog, by surface.
    skill_loads: Mutex<SkillLoads>,
}

/// Where a skill was loaded through: each of these is counted in `skillcat_skill_loads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `POST /skills/{name}/load`: a budgeted load.
    Load,
    /// `GET /skills/{name}/content`: the whole `SKILL.md`.
    Content,
    /// `GET /skills/{name}/files/SKILL.md`: the file an installer downloads for a skill of one file.
    File,
    /// `GET /skills/{name}/archive`: the zip of the folder.
    Archive,
    /// `GET /.well-known/skills/{name}/SKILL.md`: an install through the older well-known index.
    WellKnown,
    /// MCP: the `load_skill` tool, or `resources/read` of a skill's `SKILL.md`.
    Mcp,
}

impl Surface {
    pub const ALL: [Surface; 6] =
        [Surface::Load, Surface::Content, Surface::File, Surface::Archive, Surface::WellKnown, Surface::Mcp];

    /// The value of the `surface` label.
    pub fn label(self) -> &'static str {
        match self {
            Surface::Load => "load",
            Surface::Content => "content",
            Surface::File => "file",
            Surface::Archive => "archive",
            Surface::WellKnown => "well-known",
            Surface::Mcp => "mcp",
        }
    }

    /// Whether a load through this surface is an installer's download (what `/api/search`
    /// counts as installs): an archive, or a `SKILL.md` downloaded as a file.
    pub fn is_install(self) -> bool {
        matches!(self, Surface::File | Surface::Archive | Surface::WellKnown)
    }
}

/// The loads of one skill, by [`Surface`] (in the order of [`Surface::ALL`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoadCounts([u64; Surface::ALL.len()]);

impl LoadCounts {
    pub fn of(&self, surface: Surface) -> u64 {
        self.0[surface as usize]
    }

    /// Loads through every surface.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Installers' downloads: archives and `SKILL.md` files.
    pub fn installs(&self) -> u64 {
        Surface::ALL.iter().filter(|surface| surface.is_install()).map(|surface| self.of(*surface)).sum()
    }
}

/// Loads by skill, only for the names of the current catalog: a name the catalog does not have
/// (a skill removed, a pinned version of one) is not counted, so the series are bounded by the
/// catalog. A skill that leaves the catalog loses its counts.
#[derive(Debug, Default)]
struct SkillLoads {
    /// The current catalog's names, in name order, each shared with the catalog's skill.
    names: Vec<skillcat_core::SkillName>,
    /// The counts of the skills loaded at least once, in name order: most skills of a large
    /// catalog are never loaded, and take no room here.
    counts: Vec<(skillcat_core::SkillName, LoadCounts)>,
}

impl SkillLoads {
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.counts.binary_search_by(|(known, _)| known.as_str().cmp(name))
    }
}

/// One git source's fetches.
#[derive(Debug, Default)]
struct GitFetches {
    ok: u64,
    failed: u64,
    seconds: f64,
    /// The last successful fetch, in seconds since the epoch.
    last_ok: Option<f64>,
}

impl Metrics {
    /// Records one answered request; `route` is the matched route template, never the raw path.
    pub fn request(&self, route: &str, status: u16, elapsed: Duration) {
        // Routes are few: after the first request of each, recording allocates nothing.
        let mut routes = lock(&self.routes);
        let stats = match routes.get_mut(route) {
            Some(stats) => stats,
            None => routes.entry(route.to_owned()).or_default(),
        };
        *stats.statuses.entry(status).or_default() += 1;
        stats.latency.observe(elapsed.as_secs_f64());
    }

    pub fn scan_finished(&self, elapsed: Duration) {
        lock(&self.scans).observe(elapsed.as_secs_f64());
    }

    /// Counts a rescan that failed (a source could not be read, or listed a name twice).
    pub fn scan_failed(&self) {
        self.scan_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the catalog served is not the files' current state, because the last scan failed.
    pub fn set_failing(&self, failing: bool) {
        self.catalog_failing.store(u64::from(failing), Ordering::Relaxed);
    }

    pub fn set_catalog_size(&self, skills: usize) {
        self.catalog_skills.store(skills, Ordering::Relaxed);
    }

    /// The skills of the current catalog, `names` in name order (the catalog's): loads are counted
    /// for these only; the counts of a name gone are dropped.
    pub fn set_catalog_skills<'a>(&self, names: impl ExactSizeIterator<Item = &'a skillcat_core::SkillName>) {
        let mut loads = lock(&self.skill_loads);
        loads.names = names.cloned().collect();
        debug_assert!(loads.names.is_sorted_by(|a, b| a < b), "names in name order");
        let SkillLoads { names, counts } = &mut *loads;
        counts.retain(|(name, _)| names.binary_search(name).is_ok());
    }

    /// Counts a load of the skill `name` through `surface`, if the current catalog has that name.
    pub fn skill_loaded(&self, name: &str, surface: Surface) {
        let mut loads = lock(&self.skill_loads);
        let Ok(known) = loads.names.binary_search_by(|known| known.as_str().cmp(name)) else { return };
        let index = match loads.position(name) {
            Ok(index) => index,
            Err(index) => {
                let name = loads.names[known].clone();
                loads.counts.insert(index, (name, LoadCounts::default()));
                index
            }
        };
        loads.counts[index].1.0[surface as usize] += 1;
    }

    /// The loads of the skill `name` since the server started (zero for a name the catalog does
    /// not have).
    pub fn skill_loads(&self, name: &str) -> LoadCounts {
        let loads = lock(&self.skill_loads);
        loads.position(name).map_or_else(|_| LoadCounts::default(), |index| loads.counts[index].1)
    }

    fn render_skill_loads(&self, out: &mut String) {
        let loads = lock(&self.skill_loads);
        out.push_str(
            "# HELP skillcat_catalog_skill Each skill of the current catalog (1), to find the skills never loaded.\n\
             # TYPE skillcat_catalog_skill gauge\n",
        );
        for name in &loads.names {
            let _ = writeln!(out, "skillcat_catalog_skill{{skill=\"{}\"}} 1", escape_label(name.as_str()));
        }
        out.push_str(
            "# HELP skillcat_skill_loads_total Loads of a skill of the current catalog since start, by surface \
             (load, content, file, archive, well-known, mcp); surfaces without a load are left out.\n\
             # TYPE skillcat_skill_loads_total counter\n",
        );
        for (name, counts) in &loads.counts {
            for surface in Surface::ALL {
                let count = counts.of(surface);
                if count > 0 {
                    let _ = writeln!(
                        out,
                        "skillcat_skill_loads_total{{skill=\"{}\",surface=\"{}\"}} {count}",
                        escape_label(name.as_str()),
                        surface.label()
                    );
                }
            }
        }
    }

    pub fn watcher_error(&self) {
        self.watcher_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a search index made (one per catalog version searched).
    pub fn search_index_made(&self) {
        self.search_indexes.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a skill's search document made (one per skill version searched).
    pub fn search_document_made(&self) {
        self.search_documents.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether some folder is not watched (the kernel's limit on inotify watches was reached).
    pub fn set_watch_incomplete(&self, incomplete: bool) {
        self.watch_incomplete.store(u64::from(incomplete), Ordering::Relaxed);
    }

    /// Counts a watch the kernel refused for its limit on watches.
    pub fn watch_limit_reached(&self) {
        self.watch_limit_reached.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a directory source's scan: from its picture of the folders (only what changed), or
    /// a full walk.
    pub fn rescanned(&self, incremental: bool) {
        let counter = if incremental { &self.rescans_incremental } else { &self.rescans_full };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a periodic full walk whose catalog differed from the rescan of changes.
    pub fn picture_disagreement(&self) {
        self.picture_disagreements.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an overflow of the kernel's event queue (events were lost).
    pub fn watch_overflow(&self) {
        self.watch_overflows.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an open event stream until the guard is dropped.
    pub fn sse_client(self: &std::sync::Arc<Self>) -> SseClient {
        self.sse_clients.fetch_add(1, Ordering::Relaxed);
        SseClient(std::sync::Arc::clone(self))
    }

    /// One fetch of the git source `label`: whether it succeeded, how long it took, when it ended.
    pub fn git_fetched(&self, label: &str, ok: bool, elapsed: Duration, at: std::time::SystemTime) {
        let mut git = lock(&self.git);
        let fetches = git.entry(label.to_owned()).or_default();
        fetches.seconds += elapsed.as_secs_f64();
        if ok {
            fetches.ok += 1;
            fetches.last_ok = at.duration_since(std::time::UNIX_EPOCH).ok().map(|since| since.as_secs_f64());
        } else {
            fetches.failed += 1;
        }
    }

    fn render_git(&self, out: &mut String) {
        let git = lock(&self.git);
        if git.is_empty() {
            return;
        }
        out.push_str(
            "# HELP skillcat_git_fetches_total Fetches of git sources, by source and outcome.\n\
             # TYPE skillcat_git_fetches_total counter\n",
        );
        for (label, fetches) in git.iter() {
            let label = escape_label(label);
            let _ = writeln!(out, "skillcat_git_fetches_total{{source=\"{label}\",outcome=\"ok\"}} {}", fetches.ok);
            let _ =
                writeln!(out, "skillcat_git_fetches_total{{source=\"{label}\",outcome=\"failed\"}} {}", fetches.failed);
        }
        out.push_str(
            "# HELP skillcat_git_fetch_seconds_total Time spent fetching, by git source.\n\
             # TYPE skillcat_git_fetch_seconds_total counter\n",
        );
        for (label, fetches) in git.iter() {
            let _ = writeln!(
                out,
                "skillcat_git_fetch_seconds_total{{source=\"{}\"}} {}",
                escape_label(label),
                fetches.seconds
            );
        }
        out.push_str(
            "# HELP skillcat_git_last_fetch_timestamp_seconds When the last successful fetch of a git source ended \
             (seconds since the epoch).\n# TYPE skillcat_git_last_fetch_timestamp_seconds gauge\n",
        );
        for (label, fetches) in git.iter() {
            if let Some(at) = fetches.last_ok {
                let _ = writeln!(
                    out,
                    "skillcat_git_last_fetch_timestamp_seconds{{source=\"{}\"}} {at}",
                    escape_label(label)
                );
            }
        }
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP skillcat_http_requests_total HTTP requests answered, by route and status.\n");
        out.push_str("# TYPE skillcat_http_requests_total counter\n");
        let routes = lock(&self.routes);
        for (route, stats) in routes.iter() {
            for (status, count) in &stats.statuses {
                let _ = writeln!(out, "skillcat_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}");
            }
        }
        out.push_str("# HELP skillcat_http_request_duration_seconds Time to answer a request, by route.\n");
        out.push_str("# TYPE skillcat_http_request_duration_seconds histogram\n");
        for (route, stats) in routes.iter() {
            stats.latency.render(&mut out, "skillcat_http_request_duration_seconds", &format!("route=\"{route}\""));
        }
        drop(routes);
        out.push_str("# HELP skillcat_scan_duration_seconds Time to discover every source and prepare a snapshot.\n");
        out.push_str("# TYPE skillcat_scan_duration_seconds histogram\n");
        lock(&self.scans).render(&mut out, "skillcat_scan_duration_seconds", "");
        out.push_str(
            "# HELP skillcat_directory_scans_total Scans of directory sources: full walks, and rescans of only \
             the folders file events named.\n# TYPE skillcat_directory_scans_total counter\n",
        );
        let _ = writeln!(
            out,
            "skillcat_directory_scans_total{{kind=\"full\"}} {}",
            self.rescans_full.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "skillcat_directory_scans_total{{kind=\"incremental\"}} {}",
            self.rescans_incremental.load(Ordering::Relaxed)
        );
        let gauges = [
            (
                "skillcat_rescan_disagreements_total",
                "counter",
                "Periodic full walks whose catalog differed from the rescan of the changes (a bug; the full walk's \
                 catalog is served).",
                self.picture_disagreements.load(Ordering::Relaxed),
            ),
            (
                "skillcat_catalog_skills",
                "gauge",
                "Skills in the current catalog.",
                self.catalog_skills.load(Ordering::Relaxed) as u64,
            ),
            (
                "skillcat_scan_failures_total",
                "counter",
                "Scans that failed (a source could not be read, or listed a name twice).",
                self.scan_failures.load(Ordering::Relaxed),
            ),
            (
                "skillcat_catalog_failing",
                "gauge",
                "1 while the last scan failed: the last good catalog (or none) is served, with the error.",
                self.catalog_failing.load(Ordering::Relaxed),
            ),
            (
                "skillcat_watcher_errors_total",
                "counter",
                "File watcher errors (changes are still seen by periodic rescans).",
                self.watcher_errors.load(Ordering::Relaxed),
            ),
            (
                "skillcat_watch_incomplete",
                "gauge",
                "1 while some folder is not watched (fs.inotify.max_user_watches reached): changes there wait for \
                 the periodic rescan.",
                self.watch_incomplete.load(Ordering::Relaxed),
            ),
            (
                "skillcat_watch_limit_reached_total",
                "counter",
                "Watches the kernel refused because fs.inotify.max_user_watches was reached.",
                self.watch_limit_reached.load(Ordering::Relaxed),
            ),
            (
                "skillcat_watch_overflows_total",
                "counter",
                "Overflows of the kernel's inotify event queue (fs.inotify.max_queued_events); each costs a full rescan.",
                self.watch_overflows.load(Ordering::Relaxed),
            ),
            (
                "skillcat_sse_clients",
                "gauge",
                "Open GET /events streams.",
                self.sse_clients.load(Ordering::Relaxed) as u64,
            ),
            (
                "skillcat_search_indexes_total",
                "counter",
                "Search indexes made: one per catalog version searched.",
                self.search_indexes.load(Ordering::Relaxed),
            ),
            (
                "skillcat_search_documents_total",
                "counter",
                "Skills' search documents made: one per skill version searched (unchanged skills keep theirs).",
                self.search_documents.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        self.mcp.render(&mut out);
        self.render_git(&mut out);
        self.render_skill_loads(&mut out);
        out
    }
}

/// A label value as the text format writes it: `\`, `"` and line feeds escaped.
fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// MCP requests by method (one of [`MCP_METHODS`]), then outcome (`ok` or a JSON-RPC error code): a few
/// dozen series at most, whatever clients send. Methods the server does not implement are
/// answered by the SDK (`-32601`) and counted only by the HTTP metrics of `/mcp`.
#[derive(Debug, Default)]
pub struct McpRequests {
    requests: Mutex<BTreeMap<(&'static str, String), u64>>,
}

/// The methods the server answers, each counted under its own name.
pub const MCP_METHODS: [&str; 11] = [
    "initialize",
    "ping",
    "skills/list",
    "skills/get",
    "resources/list",
    "resources/read",
    "resources/directory/read",
    "resources/templates/list",
    "tools/list",
    "subscriptions/listen",
    "tools/call",
];

impl McpRequests {
    /// Counts one request of `method`, answered `Ok` or with the JSON-RPC error `code`.
    pub fn request(&self, method: &str, outcome: Result<(), i32>) {
        let method = MCP_METHODS.iter().copied().find(|known| *known == method).unwrap_or("other");
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

/// An open event stream, counted in `skillcat_sse_clients`.
pub struct SseClient(std::sync::Arc<Metrics>);

impl Drop for SseClient {
    fn drop(&mut self) {
        self.0.sse_clients.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<skillcat_core::SkillName> {
        names.iter().map(|name| skillcat_core::SkillName::parse(name).unwrap()).collect()
    }

    /// The dashboard under deploy/ is JSON Grafana can import, its panels do not overlap, and
    /// every metric its queries name is one this registry writes (a histogram by its series).
    #[test]
    fn the_grafana_dashboard_names_only_metrics_that_exist() {
        let metrics = Metrics::default();
        metrics.request("/skills", 200, Duration::from_millis(1));
        metrics.scan_finished(Duration::from_millis(1));
        metrics.git_fetched("https://h/r.git", true, Duration::from_millis(1), std::time::SystemTime::now());
        metrics.mcp.request("ping", Ok(()));
        metrics.set_catalog_skills(names(&["pdf"]).iter());
        metrics.skill_loaded("pdf", Surface::Load);
        let text = metrics.render();
        let mut series = std::collections::BTreeSet::new();
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            series.insert(line.split(['{', ' ']).next().unwrap().to_owned());
        }

        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../deploy/grafana/skillcat.json")).expect("the dashboard is JSON");
        assert!(dashboard["title"].is_string() && dashboard["uid"].is_string());
        let panels = dashboard["panels"].as_array().expect("panels");
        let mut named = std::collections::BTreeSet::new();
        let mut areas: Vec<(String, [u64; 4])> = Vec::new();
        for panel in panels {
            let place = &panel["gridPos"];
            let [x, y, w, h] = ["x", "y", "w", "h"].map(|key| place[key].as_u64().expect("a grid position"));
            assert!(x + w <= 24, "{panel}");
            for (other, [ox, oy, ow, oh]) in &areas {
                let apart = x + w <= *ox || ox + ow <= x || y + h <= *oy || oy + oh <= y;
                assert!(apart, "{} overlaps {other}", panel["title"]);
            }
            areas.push((panel["title"].to_string(), [x, y, w, h]));
            if panel["type"] == "row" {
                continue;
            }
            let targets = panel["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{}", panel["title"]);
            for target in targets {
                let expr = target["expr"].as_str().expect("an expression");
                assert_eq!(expr.matches('(').count(), expr.matches(')').count(), "{expr}");
                let mut rest = expr;
                while let Some(start) = rest.find("skillcat_") {
                    let name: String = rest[start..]
                        .chars()
                        .take_while(|character| character.is_ascii_alphanumeric() || *character == '_')
                        .collect();
                    rest = &rest[start + name.len()..];
                    named.insert(name);
                }
            }
        }
        assert!(named.contains("skillcat_skill_loads_total") && named.contains("skillcat_catalog_skill"));
        let unknown: Vec<&String> = named.iter().filter(|name| !series.contains(*name)).collect();
        assert!(unknown.is_empty(), "the dashboard names metrics skillcat does not write: {unknown:?}");
    }

    #[test]
    fn loads_are_counted_for_the_catalog_s_names_only() {
        let metrics = Metrics::default();
        metrics.set_catalog_skills(names(&["docx", "pdf"]).iter());
        metrics.skill_loaded("pdf", Surface::Archive);
        metrics.skill_loaded("pdf", Surface::Archive);
        metrics.skill_loaded("pdf", Surface::Mcp);
        metrics.skill_loaded("gone", Surface::Load);
        assert_eq!((metrics.skill_loads("pdf").installs(), metrics.skill_loads("pdf").total()), (2, 3));
        assert_eq!(metrics.skill_loads("gone"), LoadCounts::default());
        let text = metrics.render();
        assert!(text.contains("skillcat_skill_loads_total{skill=\"pdf\",surface=\"archive\"} 2\n"), "{text}");
        assert!(text.contains("skillcat_skill_loads_total{skill=\"pdf\",surface=\"mcp\"} 1\n"), "{text}");
        assert!(text.contains("skillcat_catalog_skill{skill=\"docx\"} 1\n"), "{text}");
        assert!(!text.contains("gone") && !text.contains("skill=\"docx\",surface"), "{text}");
        // A skill that leaves the catalog loses its counts; the others keep theirs.
        metrics.set_catalog_skills(names(&["docx"]).iter());
        metrics.set_catalog_skills(names(&["docx", "pdf"]).iter());
        assert_eq!(metrics.skill_loads("pdf").total(), 0);
        metrics.skill_loaded("docx", Surface::Content);
        metrics.set_catalog_skills(names(&["docx"]).iter());
        assert_eq!(metrics.skill_loads("docx").of(Surface::Content), 1);
    }

    #[test]
    fn rmcp_is_quieter_unless_rust_log_names_it() {
        for rust_log in [None, Some("info"), Some("debug,skillcat=trace"), Some("not a directive=")] {
            let filter = log_filter(rust_log).to_string();
            assert!(filter.contains("rmcp=warn"), "{rust_log:?}: {filter}");
        }
        for rust_log in ["info,rmcp=info", "rmcp::handler=debug", "warn, rmcp"] {
            let filter = log_filter(Some(rust_log)).to_string();
            assert!(!filter.contains("rmcp=warn"), "{rust_log}: {filter}");
        }
        // A target that merely starts with the name is another target.
        assert!(log_filter(Some("rmcpish=debug")).to_string().contains("rmcp=warn"));
        // A directive about a module's parent names the module too.
        assert!(log_filter(None).to_string().contains("rmcp::service=error"));
        assert!(!log_filter(Some("rmcp=debug")).to_string().contains("rmcp::service=error"));
        assert!(log_filter(Some("rmcp::transport=debug")).to_string().contains("rmcp::service=error"));
    }

    #[test]
    fn long_log_lines_are_cut_and_json_stays_json() {
        let long = "m".repeat(65_000);
        let text = bounded(LogFormat::Text, format!("WARN rmcp: response error method={long}\n").as_bytes());
        assert!(text.len() <= MAX_LOG_LINE && text.ends_with(b" bytes cut)\n"), "{}", text.len());
        let line =
            serde_json::to_vec(&serde_json::json!({"level": "WARN", "message": "x", "method": long, "n": 5})).unwrap();
        let json = bounded(LogFormat::Json, &line);
        assert!(json.len() <= MAX_LOG_LINE, "{}", json.len());
        let record: serde_json::Value = serde_json::from_slice(&json).expect("one JSON object");
        assert_eq!((record["level"].as_str(), record["n"].as_u64()), (Some("WARN"), Some(5)));
        assert!(record["method"].as_str().unwrap().ends_with("(64744 bytes cut)"));
        // A line of many short fields is cut as text rather than not at all.
        let many: serde_json::Map<String, serde_json::Value> =
            (0..2000).map(|index| (format!("f{index}"), serde_json::Value::from("v"))).collect();
        assert!(bounded(LogFormat::Json, &serde_json::to_vec(&many).unwrap()).len() <= MAX_LOG_LINE);
    }
}
