"""Soak: mixed requests on 64 connections (56 kept alive, 8 new for each request), 4 event streams
held open and one more opened and closed over and over, for 60 s while the skills change on disk
every 100 ms.

What must hold, every one checked on every response:
- no 5xx, and no status outside what the route documents for this situation (a 409 or 412 is an
  expected answer to a skill that changed between the listing and the request; a 404 to one that
  was deleted); no connection error or timeout;
- `GET /skills` and `GET /manifest` (gzip or not): the ETag is the tag of the body as the server
  defines it (harness.tag_of; for the catalog, of the body without its own `etag` member);
- `GET /skills/{name}`: ETag = the entry's `etag`, and a (name, etag) pair always carries the same
  entry as every catalog that listed it;
- `GET /skills/{name}/content` (2 in 3 with `If-Match` of the etag the client's last catalog
  lists): a 200 carries the If-Match tag; its content is a version this suite wrote (or the empty
  file an in-place write passes through); its name and description are those the catalog lists
  under that tag; one tag never names two contents;
- `POST /skills/{name}/load`: the same for the budgeted content (untruncated: equal to the content
  served under the tag; truncated: a prefix of it within 4 * token_limit bytes);
- event streams: well-formed `catalog` events, never a null etag (no source ever fails here); once
  the writes stop, each stream's last event names the catalog's final tag, and that catalog lists
  exactly the skills on disk; streams whose clients hung up are gone (`skillcat_sse_clients`
  counts only the open ones);
- the server logs no ERROR line;
- RSS (VmRSS, sampled every second) is stable. The series and the trend of the last 30 s are
  printed; the run fails when RSS both *grew* (the peak of the last 20 s is more than 10 %, and
  at least 4 MiB, above the reference: the median of seconds 10 to 20, after the warm-up of
  connection buffers and first catalogs) and is *still growing* (that peak is more than 1 MiB
  above the peak of the 20 s before it). RSS is a high-water mark: a burst of concurrent requests
  (the 2-core machine is shared, and a stalled server lets requests pile up, each pinning the
  catalog version it started with) can lift it by several MiB once, after which it stays flat;
  that is not a leak, and the second condition keeps it from failing the run unless the step
  falls in its last 20 s and exceeds 4 MiB. A leak does both: at the 600 to 1000 requests/s the
  clients reach, one of some 100 bytes per request or more fails the run. (Windows are taken
  from the end: a longer run, --seconds, judges its last 50 s.)

The server runs as shipped: `skillcat serve` limits glibc to two malloc arenas itself (with
glibc's default of up to 8 arenas per core, each thread that allocates warms up an arena of its
own, and RSS climbs for two to three minutes before it levels off, which a 60 s run cannot tell
from a leak). --malloc-arena-max N overrides it through MALLOC_ARENA_MAX.
"""

from __future__ import annotations

import http.client
import json
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
from harness import CheckFailed, Registry, Server

CONNECTIONS = 64
# Of those, the ones that open a new connection for each request.
FRESH_CONNECTIONS = 8
EVENT_STREAMS = 4
MUTATION_PERIOD = 0.1
STABLE_SKILLS = 50
MAX_CHURN_SKILLS = 20
# RSS has grown if the peak of the last 20 s exceeds the reference by 10 %, and at least 4 MiB...
RSS_GROWTH_RATIO = 0.10
RSS_GROWTH_KIB = 4 * 1024
# ...and is still growing if that peak exceeds the peak of the 20 s before by more than 1 MiB.
RSS_STILL_GROWING_KIB = 1024
LIMITS = [None, 1, 7, 64, 500, 10000, 100000]

# Statuses each route may answer in this run; anything else fails it.
ALLOWED = {
    "GET /skills": {200, 304},
    "GET /skills/{name}": {200, 304, 404},
    "GET /skills/{name}/content": {200, 304, 404, 409, 412},
    "POST /skills/{name}/load": {200, 404, 409, 412},
    "GET /manifest": {200, 304},
    "GET /healthz": {200},
    "GET /readyz": {200},
    "GET /metrics": {200},
    "bad name": {400},
    "unknown skill": {404},
    "bad load body": {400, 415, 422},
}


def words(rng: random.Random, count: int) -> str:
    vocabulary = "skill catalog agent budget token manifest load content version change watch".split()
    return " ".join(rng.choice(vocabulary) for _ in range(count))


class Mutator(threading.Thread):
    """Changes the tree every 100 ms: descriptions and bodies edited in place or replaced by rename,
    skills added and deleted. Every version written is unique and recorded."""

    def __init__(self, root: Path, registry: Registry, seed: int) -> None:
        super().__init__(name="mutator", daemon=True)
        self.root = root
        self.registry = registry
        self.rng = random.Random(seed)
        self.revision = 0
        self.skills: dict[str, tuple[str, str]] = {}
        self.churn_serial = 0
        self.stop = threading.Event()
        self.ops = harness.Counter()
        self.error: BaseException | None = None

    def body(self) -> str:
        size = self.rng.choice([200, 2_000, 20_000, 60_000])
        line = words(self.rng, 12)
        text = f"# revision {self.revision}\n\n"
        while len(text) < size:
            text += f"{line} {len(text)}\n"
        return text

    def description(self, name: str) -> str:
        return f"{name} revision {self.revision}: {words(self.rng, 6)}"

    def write(self, name: str, description: str, body: str, atomic: bool) -> None:
        self.revision += 1
        text = harness.skill_md(name, description, body)
        # Recorded before the write, so a reader never sees a version the registry lacks.
        self.registry.wrote(name, text)
        folder = self.root / name
        folder.mkdir(exist_ok=True)
        (harness.write_atomic if atomic else harness.write_in_place)(folder / "SKILL.md", text)
        self.skills[name] = (description, body)

    def populate(self) -> None:
        for index in range(STABLE_SKILLS):
            name = f"skill-{index:03d}"
            self.write(name, self.description(name), self.body(), atomic=True)

    def churn_names(self) -> list[str]:
        return sorted(name for name in self.skills if name.startswith("churn-"))

    def step(self) -> None:
        rng = self.rng
        op = rng.choices(
            ["description", "body", "replace", "add", "delete", "touch"], weights=[35, 25, 15, 10, 10, 5]
        )[0]
        churn = self.churn_names()
        if op == "add" and len(churn) >= MAX_CHURN_SKILLS:
            op = "delete"
        if op == "delete" and not churn:
            op = "add"
        self.ops.add(op)
        if op == "add":
            self.churn_serial += 1
            name = f"churn-{self.churn_serial:04d}"
            self.write(name, self.description(name), self.body(), atomic=rng.random() < 0.5)
        elif op == "delete":
            name = rng.choice(churn)
            del self.skills[name]
            shutil.rmtree(self.root / name)
        else:
            name = rng.choice(sorted(self.skills))
            description, body = self.skills[name]
            if op == "description":
                self.write(name, self.description(name), body, atomic=False)
            elif op == "body":
                self.write(name, description, self.body(), atomic=False)
            elif op == "replace":
                self.write(name, self.description(name), self.body(), atomic=True)
            else:
                harness.write_in_place(self.root / name / "SKILL.md", harness.skill_md(name, description, body))

    def run(self) -> None:
        try:
            next_at = time.monotonic()
            while not self.stop.is_set():
                self.step()
                next_at += MUTATION_PERIOD
                self.stop.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error


class Worker(threading.Thread):
    """One connection issuing a random mix of requests until the deadline: kept alive, or (`fresh`)
    a new one for each request."""

    def __init__(
        self, index: int, server: Server, registry: Registry, stats: harness.Counter, deadline: float, fresh: bool
    ) -> None:
        super().__init__(name=f"worker-{index}", daemon=True)
        self.fresh = fresh
        self.server = server
        self.registry = registry
        self.stats = stats
        self.deadline = deadline
        self.rng = random.Random(index)
        self.catalog: dict | None = None
        self.catalog_tag: str | None = None
        self.manifest_tag: str | None = None
        self.latencies: dict[str, list[float]] = {}

    def send(self, route: str, method: str, path: str, headers: dict | None = None, body: bytes | None = None):
        sent = dict(self.server.auth)
        sent.update(headers or {})
        try:
            response = harness.exchange(self.connection, method, path, sent, body)
        except (OSError, http.client.HTTPException) as error:
            self.connection.close()
            self.connection = self.server.connection()
            self.stats.add((route, type(error).__name__))
            raise CheckFailed(f"{method} {path}: {type(error).__name__}: {error}") from error
        finally:
            if self.fresh:
                self.connection.close()
        self.stats.add((route, response.status))
        self.latencies.setdefault(route, []).append(response.finished - response.started)
        if response.status not in ALLOWED[route]:
            shown = {key: value for key, value in (headers or {}).items()}
            raise CheckFailed(
                f"{method} {path} headers={shown} body={body!r}: {response.status} {response.body[:300]!r}"
            )
        return response

    def pick(self) -> dict | None:
        if not self.catalog or not self.catalog["skills"]:
            return None
        return self.rng.choice(self.catalog["skills"])

    def revalidating_headers(self, tag: str | None) -> dict[str, str]:
        """Half the time `If-None-Match` with the tag last seen (if any), a third of the time
        `Accept-Encoding: gzip`."""
        headers = {}
        if tag and self.rng.random() < 0.5:
            headers["If-None-Match"] = tag
        if self.rng.random() < 0.33:
            headers["Accept-Encoding"] = "gzip"
        return headers

    def listing(self) -> None:
        headers = self.revalidating_headers(self.catalog_tag)
        response = self.send("GET /skills", "GET", "/skills", headers)
        if response.status == 304:
            if response.header("etag") != self.catalog_tag:
                raise CheckFailed(f"304 with ETag {response.header('etag')} for If-None-Match {self.catalog_tag}")
            return
        catalog = harness.check_listing(harness.identity_body(response), harness.identity_tag(response))
        self.registry.listed(catalog)
        self.catalog, self.catalog_tag = catalog, catalog["etag"]

    def entry(self) -> None:
        skill = self.pick()
        if skill is None:
            return
        name = skill["name"]
        headers = {"If-None-Match": skill["etag"]} if self.rng.random() < 0.3 else {}
        response = self.send("GET /skills/{name}", "GET", f"/skills/{name}", headers)
        if response.status == 200:
            entry = harness.check_entry(name, response.body, response.header("etag"))
            listed = self.registry.entry(name, entry["etag"])
            if listed is not None and listed != entry:
                raise CheckFailed(f"GET /skills/{name}: {entry} but a catalog listed {listed}")

    def content(self) -> None:
        skill = self.pick()
        if skill is None:
            return
        name = skill["name"]
        guarded = self.rng.random() < 0.67
        headers = {"If-Match": skill["etag"]} if guarded else {}
        response = self.send("GET /skills/{name}/content", "GET", f"/skills/{name}/content", headers)
        if response.status == 412 and not guarded:
            raise CheckFailed(f"GET /skills/{name}/content: 412 without If-Match")
        if response.status != 200:
            return
        etag = response.header("etag")
        if etag is None or not harness.TAG.match(etag) or (guarded and etag != skill["etag"]):
            raise CheckFailed(f"GET /skills/{name}/content: ETag {etag}, If-Match {headers.get('If-Match')}")
        self.check_content(name, etag, response.body.decode("utf-8"))

    def check_content(self, name: str, etag: str, content: str) -> None:
        if not self.registry.was_written(name, content):
            raise CheckFailed(f"{name} {etag}: served content this suite never wrote: {content[:120]!r}")
        self.registry.served(name, etag, content)
        listed = self.registry.entry(name, etag)
        if listed is not None:
            described = harness.descriptor_of(name, content)
            if described != (listed["name"], listed["description"]):
                raise CheckFailed(f"{name} {etag}: content describes {described}, the catalog lists {listed}")

    def load(self) -> None:
        skill = self.pick()
        if skill is None:
            return
        name = skill["name"]
        limit = self.rng.choice(LIMITS)
        guarded = self.rng.random() < 0.5
        headers = {"If-Match": skill["etag"]} if guarded else {}
        if limit is None and self.rng.random() < 0.5:
            body = None
        else:
            body = json.dumps({} if limit is None else {"token_limit": limit}).encode()
            headers["Content-Type"] = "application/json"
        response = self.send("POST /skills/{name}/load", "POST", f"/skills/{name}/load", headers, body)
        if response.status != 200:
            return
        result = response.json()
        expected_limit = 10000 if limit is None else limit
        if result["name"] != name or result["token_limit"] != expected_limit:
            raise CheckFailed(f"POST /skills/{name}/load limit={limit}: {str(result)[:300]}")
        content = result["content"]
        if len(content.encode()) > 4 * expected_limit:
            raise CheckFailed(f"POST /skills/{name}/load: {len(content.encode())} bytes over limit {expected_limit}")
        if not guarded:
            return
        if result["location"] != skill["location"]:
            raise CheckFailed(f"POST /skills/{name}/load: location {result['location']} vs {skill['location']}")
        if not result["truncated"]:
            self.check_content(name, skill["etag"], content)
            return
        full = self.registry.full_content(name, skill["etag"])
        if full is not None and not full.startswith(content):
            raise CheckFailed(f"POST /skills/{name}/load: truncated content is not a prefix of the version")

    def manifest(self) -> None:
        headers = self.revalidating_headers(self.manifest_tag)
        response = self.send("GET /manifest", "GET", "/manifest", headers)
        if response.status == 200:
            harness.check_manifest(harness.identity_body(response), harness.identity_tag(response))
            self.manifest_tag = response.header("etag")

    def operations(self) -> None:
        route = self.rng.choice(["GET /healthz", "GET /readyz", "GET /metrics"])
        self.send(route, "GET", route.split()[1])

    def mistakes(self) -> None:
        choice = self.rng.randrange(3)
        if choice == 0:
            self.send("bad name", "GET", "/skills/not%20a%20name/content")
        elif choice == 1:
            self.send("unknown skill", "GET", "/skills/no-such-skill-xyz")
        else:
            body, content_type = self.rng.choice(
                [(b'{"token_limit": 5.5}', "application/json"), (b"{not json", "application/json"),
                 (b'{"token_limit": 10}', "text/plain"), (b'{"token_limit": true}', "application/json")]
            )
            headers = {"Content-Type": content_type}
            self.send("bad load body", "POST", "/skills/skill-000/load", headers, body)

    def run(self) -> None:
        self.connection = self.server.connection()
        steps = [self.listing, self.entry, self.content, self.load, self.manifest, self.operations, self.mistakes]
        weights = [20, 15, 20, 20, 10, 5, 5]
        self.listing_safely()
        while time.monotonic() < self.deadline:
            step = self.rng.choices(steps, weights)[0]
            try:
                step()
            except CheckFailed as failure:
                self.registry.fail(f"{self.name}: {failure}")
            except Exception as error:  # noqa: BLE001 - any surprise is a finding
                self.registry.fail(f"{self.name}: {step.__name__}: {type(error).__name__}: {error}")
        self.connection.close()

    def listing_safely(self) -> None:
        try:
            self.listing()
        except CheckFailed as failure:
            self.registry.fail(f"{self.name}: {failure}")


class EventReader(threading.Thread):
    """Holds one `/events` stream open and checks every event."""

    def __init__(self, index: int, server: Server, registry: Registry) -> None:
        super().__init__(name=f"events-{index}", daemon=True)
        self.server = server
        self.registry = registry
        self.events = 0
        self.last_tag: str | None = None
        self.closing = threading.Event()
        self.connection = server.connection(timeout=60)

    def run(self) -> None:
        try:
            response = harness.open_event_stream(self.server, self.connection)
            if response.status != 200:
                self.registry.fail(f"{self.name}: GET /events answered {response.status}")
                return
            kind = None
            for line in harness.event_lines(response):
                if line.startswith(b"event:"):
                    kind = line[6:].strip()
                elif line.startswith(b"data:"):
                    data = json.loads(line[5:])
                    tag = data.get("etag")
                    if kind != b"catalog" or tag is None or not harness.TAG.match(tag):
                        self.registry.fail(f"{self.name}: bad event {kind!r} {data}")
                    self.last_tag = tag
                    self.events += 1
                elif line and not line.startswith(b":"):
                    self.registry.fail(f"{self.name}: unexpected line {line[:100]!r}")
            if not self.closing.is_set():
                self.registry.fail(f"{self.name}: the server ended the stream during the soak")
        except Exception as error:  # noqa: BLE001
            if not self.closing.is_set():
                self.registry.fail(f"{self.name}: {type(error).__name__}: {error}")

    def close(self) -> None:
        self.closing.set()
        try:
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self.connection.close()


class EventChurner(threading.Thread):
    """Opens `/events` streams one after another, reads each one's first event and hangs up, so
    that streams come and go for the whole soak (their count must come back down)."""

    def __init__(self, server: Server, registry: Registry, until: float) -> None:
        super().__init__(name="events-churn", daemon=True)
        self.server = server
        self.registry = registry
        self.until = until
        self.cycles = 0

    def run(self) -> None:
        while time.monotonic() < self.until:
            connection = self.server.connection(timeout=30)
            try:
                response = harness.open_event_stream(self.server, connection)
                if response.status != 200:
                    self.registry.fail(f"{self.name}: GET /events answered {response.status}")
                    return
                for line in harness.event_lines(response):
                    if line.startswith(b"data:"):
                        break
                self.cycles += 1
            except Exception as error:  # noqa: BLE001
                self.registry.fail(f"{self.name}: {type(error).__name__}: {error}")
                return
            finally:
                connection.close()
            time.sleep(0.05)


def sse_clients(server: Server) -> int | None:
    """`skillcat_sse_clients` from /metrics."""
    connection = server.connection()
    try:
        response = harness.exchange(connection, "GET", "/metrics", server.auth)
    finally:
        connection.close()
    for line in response.body.decode().splitlines():
        if line.startswith("skillcat_sse_clients"):
            return int(float(line.split()[-1]))
    return None


def settle_and_compare(server: Server, mutator: Mutator, readers: list[EventReader], registry: Registry) -> str:
    """After the writes stop: the catalog lists exactly what is on disk, and every stream's last
    event names that catalog."""
    deadline = time.monotonic() + 5
    expected = {name: description for name, (description, _) in mutator.skills.items()}
    while True:
        response = server.get("/skills")
        catalog = harness.check_listing(response.body, response.header("etag"))
        listed = {entry["name"]: entry["description"] for entry in catalog["skills"]}
        tags = {reader.last_tag for reader in readers}
        if listed == expected and tags == {catalog["etag"]}:
            return catalog["etag"]
        if time.monotonic() > deadline:
            missing = sorted(set(expected) - set(listed))
            extra = sorted(set(listed) - set(expected))
            differing = sorted(name for name in set(listed) & set(expected) if listed[name] != expected[name])
            registry.fail(
                f"5 s after the last write the catalog {catalog['etag']} misses {missing}, has extra {extra}, "
                f"differs for {differing}; the streams' last tags are {sorted(map(str, tags))}"
            )
            return catalog["etag"]
        time.sleep(0.05)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report_requests(counts: dict, workers: list[Worker], elapsed: float) -> None:
    print("\nrequests by route and status:")
    for route in sorted({route for route, _ in counts}):
        answers = {status: count for (name, status), count in counts.items() if name == route}
        latency = [value for worker in workers for value in worker.latencies.get(route, [])]
        timing = ""
        if latency:
            timing = f"p50 {percentile(latency, 0.5) * 1000:.1f} ms, p99 {percentile(latency, 0.99) * 1000:.1f} ms"
        print(f"  {route:28} {dict(sorted(answers.items(), key=str))}  {timing}")
    total = sum(counts.values())
    server_errors = sum(count for (_, status), count in counts.items() if isinstance(status, int) and status >= 500)
    print(f"total {total} requests in {elapsed:.0f} s ({total / elapsed:.0f}/s), 5xx: {server_errors}")


def judge_rss(rss: list[tuple[float, int, int]], elapsed: float, registry: Registry) -> None:
    """Fails the soak if RSS grew materially over the run and was still growing at its end."""
    print("\nRSS of the server (VmRSS, KiB) by second, with requests completed so far:")
    for second, kib, done in rss:
        print(f"  t={second:5.1f} s  rss={kib:7d} KiB  requests={done}")
    if elapsed < 50:
        registry.fail("the run was too short to judge RSS (needs 50 s)")
        return
    # In a 60 s run: the reference is seconds 10 to 20, the previous window 20 to 40, the last 40 to 60.
    reference = statistics.median(kib for second, kib, _ in rss if elapsed - 50 <= second < elapsed - 40)
    previous = max(kib for second, kib, _ in rss if elapsed - 40 <= second < elapsed - 20)
    last = max(kib for second, kib, _ in rss if second >= elapsed - 20)
    grown = last - reference > max(RSS_GROWTH_KIB, reference * RSS_GROWTH_RATIO)
    growing = last - previous > RSS_STILL_GROWING_KIB
    print(f"RSS: reference (median of {elapsed - 50:.0f}-{elapsed - 40:.0f} s) {reference:.0f} KiB; peak of "
          f"{elapsed - 40:.0f}-{elapsed - 20:.0f} s {previous} KiB; peak of the last 20 s {last} KiB "
          f"({last - reference:+.0f} over the reference, {last - previous:+d} over the previous peak): "
          f"{'GROWING' if grown and growing else 'stable'}")
    tail = [row for row in rss if row[0] >= elapsed - 30]
    per_second = statistics.linear_regression([row[0] for row in tail], [row[1] for row in tail]).slope
    per_request = statistics.linear_regression([row[2] for row in tail], [row[1] for row in tail]).slope
    print(f"RSS trend over the last 30 s: {per_second:+.1f} KiB/s, {per_request * 1024:+.1f} bytes per request")
    if grown and growing:
        registry.fail(f"RSS grew to {last} KiB from a reference of {reference:.0f} KiB and was still growing "
                      f"({last - previous:+d} KiB over the peak of the 20 s before)")


def main() -> int:
    parser = harness.argument_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--malloc-arena-max", default="default", help="MALLOC_ARENA_MAX for the server, or 'default' (as shipped)")
    args = harness.parse_arguments(parser)

    workdir = Path(tempfile.mkdtemp(prefix="skillcat-soak-"))
    root = workdir / "skills"
    root.mkdir()
    registry = Registry()
    mutator = Mutator(root, registry, args.seed)
    mutator.populate()
    stats = harness.Counter()
    rss: list[tuple[float, int, int]] = []
    env = {} if args.malloc_arena_max == "default" else {"MALLOC_ARENA_MAX": args.malloc_arena_max}
    with Server(args.binary, [root], workdir, env=env) as server:
        print(f"soak: server pid {server.pid} on {server.host}:{server.port} ({env or 'allocator arenas as shipped'}), "
              f"{STABLE_SKILLS} skills, {CONNECTIONS} connections + {EVENT_STREAMS} event streams, a change every "
              f"{MUTATION_PERIOD * 1000:.0f} ms for {args.seconds:.0f} s", flush=True)
        readers = [EventReader(index, server, registry) for index in range(EVENT_STREAMS)]
        for reader in readers:
            reader.start()
        started = time.monotonic()
        deadline = started + args.seconds
        workers = [Worker(index, server, registry, stats, deadline, fresh=index < FRESH_CONNECTIONS)
                   for index in range(CONNECTIONS)]
        churner = EventChurner(server, registry, deadline - 5)
        mutator.start()
        churner.start()
        for worker in workers:
            worker.start()
        next_sample = started
        streams_counted = None
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                registry.fail(f"the server died with status {server.process.returncode} during the soak")
                break
            if streams_counted is None and time.monotonic() > deadline - 2:
                # The churner stopped 3 s ago; a change every 100 ms has since been written to
                # (and so ended) every stream whose client hung up.
                churner.join(5)
                streams_counted = sse_clients(server)
                if streams_counted != EVENT_STREAMS:
                    registry.fail(f"skillcat_sse_clients is {streams_counted} with {EVENT_STREAMS} streams open")
            total = sum(stats.snapshot().values())
            rss.append((time.monotonic() - started, server.rss_kib(), total))
            next_sample += 1.0
            time.sleep(max(0.0, next_sample - time.monotonic()))
        mutator.stop.set()
        mutator.join()
        for worker in workers:
            worker.join(60)
        final_tag = None
        if server.process.poll() is None:
            rss.append((time.monotonic() - started, server.rss_kib(), sum(stats.snapshot().values())))
            final_tag = settle_and_compare(server, mutator, readers, registry)
        for reader in readers:
            reader.close()
            reader.join(5)
        code, took = server.stop()
        errors, warnings = harness.log_problems(server.log_lines())

    if mutator.error is not None:
        registry.fail(f"the mutator failed: {mutator.error!r}")
    if code != 0:
        registry.fail(f"the server exited with {code} ({took:.1f} s after SIGTERM)")
    for line in errors:
        registry.fail(f"server log: {json.dumps(line)[:400]}")
    counts = stats.snapshot()
    report_requests(counts, workers, args.seconds)
    print(f"mutations: {dict(sorted(mutator.ops.snapshot().items()))}, {mutator.revision} versions written, "
          f"{len(mutator.skills)} skills at the end")
    print(f"event streams: {[reader.events for reader in readers]} events; {churner.cycles} more opened and "
          f"closed; skillcat_sse_clients {streams_counted} near the end; final catalog {final_tag}")
    print(f"consistency: {len(registry.entries)} listed skill versions, "
          f"{len(registry.contents)} (skill, tag) contents checked")
    if warnings:
        print(f"server WARN lines: {len(warnings)}, e.g. {json.dumps(warnings[0])[:300]}")
    for reader in readers:
        if reader.events < 10:
            registry.fail(f"{reader.name}: only {reader.events} events in {args.seconds:.0f} s")
    judge_rss(rss, args.seconds, registry)

    return harness.verdict("soak", registry.failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
