//! What bounds the server's descriptors and memory: the process's limit on open files, raised at
//! start, and its memory limit (the cgroup's), and from them the caps on connections and event
//! streams, with descriptors kept in reserve for the scanner, the watcher and the token file; and
//! the budget of answers held whole in memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Descriptors never given to connections: a scan holds up to a window of folders open at each
/// depth, and the watcher, the token file, the listener and the runtime need their own.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// The most a connection's buffers take: hyper's read buffer (which holds the request head, so it
/// is larger than [`crate::server::MAX_HEADER_BYTES`]) and its queue of answer bytes waiting to be
/// written. A file answer reads the next 64 KiB chunk only when the queue has room.
pub const CONNECTION_BUFFER: usize = 64 << 10;

/// The most memory one connection makes the server hold, whatever its client does: its read
/// buffer and write queue ([`CONNECTION_BUFFER`] each), a request body
/// ([`crate::http::MAX_BODY_BYTES`]) or a file's chunk being sent and the one held back until the
/// file's digest is checked, rounded up. Answers made once per catalog version are shared, never
/// copied per connection; MCP's file answers have their own budget ([`AnswerBytes`]).
pub const CONNECTION_BYTES: u64 = 256 << 10;

/// Memory kept for the catalog itself when connections are sized from a memory limit: a catalog
/// of some 10,000 skills with room for a rescan (docs/deploy.md, "Scaling and sizing").
pub const CATALOG_BYTES: u64 = 64 << 20;

/// The caps on connections and event streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once; beyond it new connections wait in the listen backlog.
    pub max_connections: usize,
    /// `GET /events` streams open at once (503 beyond).
    pub max_streams: usize,
    /// `GET /events` streams open at once from one client address (429 beyond).
    pub max_streams_per_client: usize,
}

impl ConnectionLimits {
    /// The defaults for a process allowed `descriptors` open files: every descriptor but the
    /// reserve for connections, half of them at most for event streams (so requests and probes
    /// always find room), and a sixteenth of those for one client.
    pub fn for_descriptors(descriptors: u64) -> Self {
        Self::for_connections(descriptors.saturating_sub(RESERVED_DESCRIPTORS).clamp(16, 1 << 20) as usize)
    }

    /// The defaults for a process allowed `descriptors` open files and, when it has one, `memory`
    /// bytes: the descriptors' defaults, with no more connections than the memory left once the
    /// catalog and the answers held whole have theirs holds at [`CONNECTION_BYTES`] each.
    pub fn for_machine(descriptors: u64, memory: Option<u64>) -> Self {
        let by_descriptors = Self::for_descriptors(descriptors);
        let Some(memory) = memory else { return by_descriptors };
        let room = memory.saturating_sub(CATALOG_BYTES).saturating_sub(answer_budget(Some(memory)));
        let by_memory = usize::try_from((room / CONNECTION_BYTES).max(64)).unwrap_or(usize::MAX);
        if by_memory < by_descriptors.max_connections { Self::for_connections(by_memory) } else { by_descriptors }
    }

    /// The defaults for `connections` connections.
    pub fn for_connections(connections: usize) -> Self {
        let streams = (connections / 2).max(1);
        ConnectionLimits { max_connections: connections, max_streams: streams, max_streams_per_client: 1 }
            .with_streams(streams)
    }

    /// These limits with `streams` streams (and the default share of them per client).
    pub fn with_streams(self, streams: usize) -> Self {
        ConnectionLimits { max_streams: streams, max_streams_per_client: (streams / 16).clamp(1, 64), ..self }
    }
}

/// Raises the soft limit on open descriptors to the hard limit, and gives the limit in force.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
    match setrlimit(Resource::Nofile, raised) {
        // `None` is unlimited: count it as the most the defaults make use of.
        Ok(()) => limit.maximum.unwrap_or(u64::MAX),
        Err(error) => {
            tracing::warn!(%error, "cannot raise the limit on open files");
            limit.current.unwrap_or(u64::MAX)
        }
    }
}

/// The memory limit of the process's cgroup (v2 `memory.max`, or v1 `memory.limit_in_bytes`), if
/// it has one: a container's limit, as the defaults are sized from.
pub fn memory_limit() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok()?.trim().parse::<u64>().ok();
    // v1 writes "no limit" as a huge number (the largest page multiple of an i64).
    read("/sys/fs/cgroup/memory.max")
        .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        .filter(|limit| *limit < 1 << 60)
}

/// What the answers held whole may reserve in all ([`AnswerBytes`]): [`ANSWER_BYTES`], or a
/// quarter of a smaller memory limit.
pub fn answer_budget(memory: Option<u64>) -> u64 {
    memory.map_or(ANSWER_BYTES, |memory| ANSWER_BYTES.min(memory / 4))
}

/// The event streams open now, in all and by client.
#[derive(Debug)]
pub struct StreamSlots {
    max: usize,
    max_per_client: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRefusal {
    /// Every stream slot is taken.
    Full,
    /// This client holds its share already.
    ClientFull,
}

impl StreamSlots {
    pub fn new(limits: &ConnectionLimits) -> Arc<Self> {
        Arc::new(StreamSlots {
            max: limits.max_streams,
            max_per_client: limits.max_streams_per_client,
            open: Mutex::default(),
        })
    }

    /// A slot for a stream of `client`, held until the returned guard is dropped.
    pub fn open(self: &Arc<Self>, client: IpAddr) -> Result<StreamSlot, StreamRefusal> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, clients) = &mut *open;
        if *total >= self.max {
            return Err(StreamRefusal::Full);
        }
        let mine = clients.entry(client).or_default();
        if *mine >= self.max_per_client {
            return Err(StreamRefusal::ClientFull);
        }
        *mine += 1;
        *total += 1;
        Ok(StreamSlot { slots: Arc::clone(self), client })
    }
}

/// One open stream's slot.
#[derive(Debug)]
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    client: IpAddr,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, clients) = &mut *open;
        *total -= 1;
        if let Some(mine) = clients.get_mut(&self.client) {
            *mine -= 1;
            if *mine == 0 {
                clients.remove(&self.client);
            }
        }
    }
}

/// The bytes of the answers held whole in memory until they are sent (a file MCP answers, which
/// goes out as one JSON-RPC message, so it cannot be streamed from disk): what is reserved for them
/// at once, waiting at most a moment for room. A stalled reader holds its reservation until the
/// send deadline closes its connection; the rest of the server is not held up by it.
#[derive(Debug)]
pub struct AnswerBytes {
    kibibytes: Arc<tokio::sync::Semaphore>,
    /// The whole budget, in KiB.
    total: u32,
}

/// What answers held whole may reserve in all, by default.
pub const ANSWER_BYTES: u64 = 64 << 20;

/// How long an answer waits for room before it is refused.
pub const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl AnswerBytes {
    pub fn new(bytes: u64) -> Arc<Self> {
        let total = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).max(1);
        Arc::new(AnswerBytes { kibibytes: Arc::new(tokio::sync::Semaphore::new(total as usize)), total })
    }

    /// Room for an answer of `bytes`, held until the permit is dropped; `None` when there was none
    /// within [`ANSWER_WAIT`]. An answer larger than the whole budget gets the whole budget.
    pub async fn reserve(&self, bytes: u64) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let wanted = u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).clamp(1, self.total);
        let reserved = tokio::time::timeout(ANSWER_WAIT, Arc::clone(&self.kibibytes).acquire_many_owned(wanted));
        reserved.await.ok()?.ok()
    }
}

/// Hands the free pages of the allocator's arenas back to the system (glibc keeps them otherwise,
/// and the process stays at its peak). It walks the allocator's free lists: call it off the
/// runtime's workers, after a burst of allocations has been freed.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_descriptor_limit() {
        let limits = ConnectionLimits::for_descriptors(1024);
        assert_eq!(limits, ConnectionLimits { max_connections: 768, max_streams: 384, max_streams_per_client: 24 });
        assert_eq!(ConnectionLimits::for_descriptors(100).max_connections, 16);
        assert_eq!(ConnectionLimits::for_descriptors(u64::MAX).max_streams_per_client, 64);
    }

    #[test]
    fn defaults_follow_a_memory_limit() {
        // 256 MiB: 64 MiB for the catalog, 64 MiB for answers held whole, 128 MiB for connections.
        let limits = ConnectionLimits::for_machine(1 << 20, Some(256 << 20));
        assert_eq!(limits, ConnectionLimits { max_connections: 512, max_streams: 256, max_streams_per_client: 16 });
        assert_eq!(answer_budget(Some(256 << 20)), 64 << 20);
        // A small limit keeps a few connections and a smaller budget of answers.
        assert_eq!(ConnectionLimits::for_machine(1 << 20, Some(64 << 20)).max_connections, 64);
        assert_eq!(answer_budget(Some(64 << 20)), 16 << 20);
        // Fewer descriptors than the memory allows, or no memory limit: the descriptors decide.
        assert_eq!(ConnectionLimits::for_machine(1024, Some(16 << 30)), ConnectionLimits::for_descriptors(1024));
        assert_eq!(ConnectionLimits::for_machine(1 << 20, None), ConnectionLimits::for_descriptors(1 << 20));
        assert_eq!(answer_budget(None), ANSWER_BYTES);
    }

    #[test]
    fn streams_are_capped_in_all_and_per_client() {
        let slots =
            StreamSlots::new(&ConnectionLimits { max_connections: 8, max_streams: 3, max_streams_per_client: 2 });
        let (a, b, c): (IpAddr, IpAddr, IpAddr) =
            ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        let first = slots.open(a).unwrap();
        let _second = slots.open(a).unwrap();
        assert_eq!(slots.open(a).unwrap_err(), StreamRefusal::ClientFull);
        let _third = slots.open(b).unwrap();
        assert_eq!(slots.open(c).unwrap_err(), StreamRefusal::Full);
        drop(first);
        let _again = slots.open(c).unwrap();
        assert_eq!(slots.open(a).unwrap_err(), StreamRefusal::Full);
        assert!(slots.open.lock().unwrap().1.get(&a) == Some(&1));
    }
}
