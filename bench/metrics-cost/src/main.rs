//! What a request pays to be counted, and what a scrape pays, at 10,000 skills: the hand-written
//! registry of `src/observability.rs` (its shapes copied here: a `Mutex` over a map per family,
//! the text written with `write!`) against `prometheus-client` (a `Family` per labelled metric,
//! its own encoder). Each request records its route and status, its latency in a histogram, and
//! one load of a skill by surface, as a load of `POST /skills/{name}/load` does. Timed with
//! `Instant` over many rounds, best of five; run on one thread and on two at once.
//!
//!     cargo run --release            # in bench/metrics-cost

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram as PcHistogram;
use prometheus_client::registry::Registry;

const SKILLS: usize = 10_000;
const ROUNDS: usize = 1_000_000;
const BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];
const SURFACES: [&str; 6] = ["load", "content", "file", "archive", "well-known", "mcp"];

/// The hand-written registry's shapes (src/observability.rs).
#[derive(Default)]
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
}

#[derive(Default)]
struct RouteStats {
    statuses: BTreeMap<u16, u64>,
    latency: Histogram,
}

struct HandWritten {
    routes: Mutex<BTreeMap<String, RouteStats>>,
    loads: Mutex<HashMap<Box<str>, [u64; 6]>>,
}

impl HandWritten {
    fn new(names: &[String]) -> Self {
        let loads = names.iter().map(|name| (Box::from(name.as_str()), [0; 6])).collect();
        HandWritten { routes: Mutex::default(), loads: Mutex::new(loads) }
    }

    fn record(&self, route: &str, status: u16, elapsed: Duration, skill: &str, surface: usize) {
        let mut routes = self.routes.lock().unwrap();
        let stats = match routes.get_mut(route) {
            Some(stats) => stats,
            None => routes.entry(route.to_owned()).or_default(),
        };
        *stats.statuses.entry(status).or_default() += 1;
        stats.latency.observe(elapsed.as_secs_f64());
        drop(routes);
        if let Some(counts) = self.loads.lock().unwrap().get_mut(skill) {
            counts[surface] += 1;
        }
    }

    fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        for (route, stats) in self.routes.lock().unwrap().iter() {
            for (status, count) in &stats.statuses {
                let _ = writeln!(out, "skillcat_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {count}");
            }
            for (count, bound) in stats.latency.counts.iter().zip(BUCKETS) {
                let _ = writeln!(
                    out,
                    "skillcat_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {count}"
                );
            }
        }
        let loads = self.loads.lock().unwrap();
        let mut names: Vec<&str> = loads.keys().map(|name| &**name).collect();
        names.sort_unstable();
        for name in names {
            for (surface, count) in SURFACES.iter().zip(loads[name]) {
                if count > 0 {
                    let _ =
                        writeln!(out, "skillcat_skill_loads_total{{skill=\"{name}\",surface=\"{surface}\"}} {count}");
                }
            }
        }
        out
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoadLabels {
    skill: String,
    surface: String,
}

struct Crate {
    registry: Registry,
    requests: Family<RouteLabels, Counter>,
    latency: Family<LatencyLabels, PcHistogram>,
    loads: Family<LoadLabels, Counter>,
}

impl Crate {
    fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RouteLabels, Counter>::default();
        let latency = Family::<LatencyLabels, PcHistogram>::new_with_constructor(
            (|| PcHistogram::new(BUCKETS)) as fn() -> PcHistogram,
        );
        let loads = Family::<LoadLabels, Counter>::default();
        registry.register("skillcat_http_requests", "HTTP requests answered", requests.clone());
        registry.register("skillcat_http_request_duration_seconds", "Time to answer", latency.clone());
        registry.register("skillcat_skill_loads", "Loads per skill", loads.clone());
        Crate { registry, requests, latency, loads }
    }

    fn record(&self, route: &str, status: u16, elapsed: Duration, skill: &str, surface: usize) {
        self.requests.get_or_create(&RouteLabels { route: route.to_owned(), status }).inc();
        self.latency.get_or_create(&LatencyLabels { route: route.to_owned() }).observe(elapsed.as_secs_f64());
        // The catalog's check (names of the catalog only) is the caller's, as in skillcat.
        self.loads.get_or_create(&LoadLabels { skill: skill.to_owned(), surface: SURFACES[surface].to_owned() }).inc();
    }

    fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut out, &self.registry).unwrap();
        out
    }
}

/// Nanoseconds per record on `threads` threads at once (each doing `ROUNDS`), best of five.
fn per_record(threads: usize, names: &[String], record: &(dyn Fn(&str, u16, Duration, &str, usize) + Sync)) -> f64 {
    let routes = ["/skills/{name}/load", "/skills/{name}/content", "/skills", "/skills/{name}/archive"];
    (0..5)
        .map(|_| {
            let started = Instant::now();
            std::thread::scope(|scope| {
                for thread in 0..threads {
                    scope.spawn(move || {
                        for round in 0..ROUNDS {
                            let index = round.wrapping_mul(7919).wrapping_add(thread) % names.len();
                            record(
                                routes[round % routes.len()],
                                200,
                                Duration::from_micros((round % 900) as u64),
                                &names[index],
                                round % SURFACES.len(),
                            );
                        }
                    });
                }
            });
            started.elapsed().as_nanos() as f64 / (ROUNDS * threads) as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn render_time(render: &dyn Fn() -> String) -> (f64, usize) {
    let mut best = f64::INFINITY;
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        bytes = std::hint::black_box(render()).len();
        best = best.min(started.elapsed().as_secs_f64() * 1000.0);
    }
    (best, bytes)
}

fn main() {
    let names: Vec<String> = (0..SKILLS).map(|index| format!("skill-{index:05}")).collect();
    let hand = HandWritten::new(&names);
    let library = Crate::new();
    for threads in [1, 2] {
        let hand_ns = per_record(threads, &names, &|route, status, elapsed, skill, surface| {
            hand.record(route, status, elapsed, skill, surface)
        });
        let crate_ns = per_record(threads, &names, &|route, status, elapsed, skill, surface| {
            library.record(route, status, elapsed, skill, surface)
        });
        println!(
            "record one request, {threads} thread(s): hand-written {hand_ns:.0} ns, prometheus-client {crate_ns:.0} ns"
        );
    }
    let (hand_ms, hand_bytes) = render_time(&|| hand.render());
    let (crate_ms, crate_bytes) = render_time(&|| library.render());
    println!(
        "render /metrics with {} load series: hand-written {hand_ms:.2} ms ({hand_bytes} bytes), prometheus-client {crate_ms:.2} ms ({crate_bytes} bytes)",
        SKILLS * SURFACES.len()
    );
}
