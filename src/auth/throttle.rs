//! Wrong tokens, by client: an address may present [`BURST`] wrong tokens at full speed, and one
//! more each [`REFILL`]; beyond, each wrong token is answered only after [`PENALTY`], and a client
//! with [`MAX_PENALIZED`] such answers pending gets 429 at once. A server answering wrong tokens as
//! fast as it can would be an oracle for guessing them. A valid token is never held up (many
//! clients may share an address behind a proxy), and neither is a client that mistyped one.
//! Failures are logged, at most once a minute per client and a few lines a minute in all.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Wrong tokens an address may present at full speed.
pub const BURST: f64 = 100.0;
/// How often an address earns one more.
pub const REFILL: Duration = Duration::from_millis(100);
/// How long a wrong token beyond those waits for its answer.
pub const PENALTY: Duration = Duration::from_secs(1);
/// Waiting answers one address may have; beyond, 429.
pub const MAX_PENALIZED: usize = 32;
/// Addresses kept (the one that failed longest ago is forgotten first): what a flood of
/// addresses can make the server hold.
const CLIENTS: usize = 4096;
/// Log lines about failures, at most, per minute (beyond, they are counted into the next line).
const LINES_PER_MINUTE: u32 = 10;
const MINUTE: Duration = Duration::from_secs(60);

/// The failures of every client.
#[derive(Debug, Default)]
pub struct Throttle {
    state: Mutex<State>,
}

/// What a wrong token gets, beyond its 401.
#[derive(Debug)]
pub enum Penalty {
    /// Answered at once.
    None,
    /// Answered after the delay; the guard counts the wait among the client's pending ones.
    Wait(Duration, Waiting),
    /// Too many waits pending: 429, retry after this many seconds.
    Refuse(u64),
}

/// One waiting answer of a client, counted until dropped.
#[derive(Debug)]
pub struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug, Default)]
struct State {
    clients: HashMap<Client, Bucket>,
    /// Lines logged in the current minute, and when it began.
    lines: u32,
    minute: Option<Instant>,
    /// Failures not yet in a log line, over all clients.
    unlogged: u64,
}

/// A client as the throttle counts it: an IPv4 address, or an IPv6 address's /64 (what one host
/// is usually given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client(u128);

impl Client {
    fn of(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(address) => Client(u128::from(address.to_bits())),
            IpAddr::V6(address) => match address.to_ipv4_mapped() {
                Some(address) => Client(u128::from(address.to_bits())),
                None => Client((address.to_bits() >> 64) << 64 | 1),
            },
        }
    }
}

#[derive(Debug)]
struct Bucket {
    /// Wrong tokens it may still present at full speed, up to [`BURST`].
    tries: f64,
    updated: Instant,
    /// Its answers waiting out a penalty now.
    waiting: Arc<AtomicUsize>,
    /// When its failures were last logged, and how many since.
    logged: Option<Instant>,
    since_logged: u64,
}

impl Throttle {
    /// Counts a wrong token `address` presented (`how`: through which door), logs it when due, and
    /// says what the answer must wait or be.
    pub fn failed(&self, address: IpAddr, how: &'static str) -> Penalty {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let client = Client::of(address);
        if !state.clients.contains_key(&client) && state.clients.len() >= CLIENTS {
            let oldest = state.clients.iter().min_by_key(|(_, bucket)| bucket.updated).map(|(client, _)| *client);
            if let Some(oldest) = oldest {
                state.clients.remove(&oldest);
            }
        }
        let bucket = state.clients.entry(client).or_insert_with(|| Bucket {
            tries: BURST,
            updated: now,
            waiting: Arc::default(),
            logged: None,
            since_logged: 0,
        });
        let earned = now.duration_since(bucket.updated).as_secs_f64() / REFILL.as_secs_f64();
        bucket.tries = (bucket.tries + earned).min(BURST);
        bucket.updated = now;
        bucket.since_logged += 1;
        let penalty = if bucket.tries >= 1.0 {
            bucket.tries -= 1.0;
            Penalty::None
        } else if bucket.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_PENALIZED {
            bucket.waiting.fetch_sub(1, Ordering::AcqRel);
            Penalty::Refuse(PENALTY.as_secs().max(1))
        } else {
            Penalty::Wait(PENALTY, Waiting(Arc::clone(&bucket.waiting)))
        };
        let due = bucket.logged.is_none_or(|at| now.duration_since(at) >= MINUTE);
        let failures = bucket.since_logged;
        if due {
            if state.minute.is_none_or(|at| now.duration_since(at) >= MINUTE) {
                state.minute = Some(now);
                state.lines = 0;
            }
            if state.lines < LINES_PER_MINUTE {
                state.lines += 1;
                let elsewhere = std::mem::take(&mut state.unlogged);
                let bucket = state.clients.get_mut(&client).expect("counted above");
                bucket.logged = Some(now);
                bucket.since_logged = 0;
                tracing::warn!(
                    client = %address,
                    failures,
                    through = how,
                    other_clients_failures = elsewhere,
                    "a client presented wrong bearer tokens (logged at most once a minute per client; beyond {} \
                     wrong tokens each waits {} s for its answer)",
                    BURST as u32,
                    PENALTY.as_secs(),
                );
            } else {
                state.unlogged += 1;
            }
        }
        penalty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn penalty(throttle: &Throttle, address: &str) -> &'static str {
        match throttle.failed(address.parse().unwrap(), "header") {
            Penalty::None => "none",
            Penalty::Wait(..) => "wait",
            Penalty::Refuse(_) => "refuse",
        }
    }

    #[test]
    fn a_burst_at_full_speed_then_waits_then_refusals() {
        let throttle = Throttle::default();
        for _ in 0..BURST as usize {
            assert_eq!(penalty(&throttle, "192.0.2.7"), "none");
        }
        let waits: Vec<Penalty> =
            (0..MAX_PENALIZED).map(|_| throttle.failed("192.0.2.7".parse().unwrap(), "header")).collect();
        assert!(waits.iter().all(|penalty| matches!(penalty, Penalty::Wait(PENALTY, _))));
        assert_eq!(penalty(&throttle, "192.0.2.7"), "refuse", "too many waiting at once");
        drop(waits);
        assert_eq!(penalty(&throttle, "192.0.2.7"), "wait", "a wait ended, so another may start");
        assert_eq!(penalty(&throttle, "192.0.2.8"), "none", "another client is not held up");
        // An IPv6 host's /64 is one client.
        for _ in 0..BURST as usize {
            throttle.failed("2001:db8::1".parse().unwrap(), "cookie");
        }
        assert_eq!(penalty(&throttle, "2001:db8::ffff"), "wait");
        assert_eq!(penalty(&throttle, "2001:db8:0:1::1"), "none");
    }

    #[test]
    fn the_clients_kept_and_the_lines_logged_are_bounded() {
        let throttle = Throttle::default();
        for index in 0..CLIENTS as u32 + 100 {
            throttle.failed(IpAddr::V4(index.into()), "header");
        }
        let state = throttle.state.lock().unwrap();
        assert_eq!(state.clients.len(), CLIENTS);
        assert!(state.lines <= LINES_PER_MINUTE);
        assert_eq!(state.unlogged, u64::from(CLIENTS as u32 + 100 - LINES_PER_MINUTE));
    }
}
