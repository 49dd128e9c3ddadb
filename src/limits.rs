//! What bounds the server's descriptors: the process limit, raised at start, and from it the
//! caps on connections and event streams, with descriptors kept in reserve for the scanner, the
//! watcher and the token file.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Descriptors never given to connections: a scan holds up to a window of folders open at each
/// depth, and the watcher, the token file, the listener and the runtime need their own.
pub const RESERVED_DESCRIPTORS: u64 = 256;

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
