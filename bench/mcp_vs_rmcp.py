#!/usr/bin/env python3
"""MCP: skillcat's /mcp against rmcp's own directory-backed skills server, side by side.

    bench/mcp_vs_rmcp.py                  # 200 and 10,000 skills; rewrites its part of docs/BENCHMARKS.md
    bench/mcp_vs_rmcp.py --quick          # short runs; prints the table, writes no document
    bench/mcp_vs_rmcp.py --binary target/release/skillcat --peer target/mcp-peer/release/mcp-peer

The peer is bench/mcp-peer: rmcp 3.11's `SkillCatalog` (feature `skills-fs`), wired as rmcp's
documentation shows, on the same Streamable HTTP transport (rmcp's defaults: stateful sessions for
2025-11-25, answers as event streams). Both serve the same tree (bench/discovery_ratio.py's:
team-XX/skill-NNNNN, some with references and examples), side by side, on the same number of
runtime threads. Measured with wrk (POST of a JSON-RPC request) for each protocol revision, each
server driven the way its configuration expects (see `Driver`: the peer's 2025-11-25 requests
each on the next of as many sessions as wrk has connections, skillcat's without a session, which
it never gives; self-contained 2026-07-28 requests to both). The servers run side by side and
each row is measured on them back to back, so that a busy machine's changing load falls on all
alike:

  skills/list            the first page: skillcat pages by 100 entries, the peer answers the whole
                         catalog at once, so entries listed per second is the comparable number
  resources/read         of one skill's SKILL.md
  ping                   no work at all: what the transport and the HTTP stack cost; 2026-07-28
                         has no ping, so there `server/discover`, which reads no skill either

Target: skillcat at least 2x the peer's throughput (entries per second for skills/list, requests
per second for the others) with a p99 no worse, on every row. The peer serves a snapshot it read
at start; skillcat serves its live catalog, each read checked against the listed digest.

The floor: the peer's binary again with `--stateless`, its transport configured as skillcat's
(no sessions, JSON answers) and nothing around it: what rmcp's stateless transport costs a server
that adds nothing. A ratio skillcat cannot reach through that transport shows there first.

Needs wrk (bench/run installs it with nginx), cargo (unless both binaries are given) and Python 3.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import discovery_ratio  # noqa: E402
import http_vs_nginx as web  # noqa: E402
from common import (  # noqa: E402
    REPO,
    BenchError,
    Process,
    Server,
    ServerError,
    cargo_build,
    command_version,
    cpu_model,
    free_port,
    git_revision,
    load_average,
    log,
    request,
    runtime_env,
    target_dir,
    usable_cpus,
    wait_until,
    which,
)

PEER = REPO / "bench" / "mcp-peer"
DOC = REPO / "docs" / "BENCHMARKS.md"
BEGIN = "<!-- BEGIN bench/mcp_vs_rmcp.py output: a run replaces everything from here to the END marker -->"
END = "<!-- END bench/mcp_vs_rmcp.py output -->"
LEGACY = "2025-11-25"
REVISIONS = (LEGACY, "2026-07-28")
CLIENT = {"name": "bench", "version": "1"}
ACCEPT = "application/json, text/event-stream"


def peer_binary(explicit: Path | None) -> Path:
    if explicit:
        if not explicit.is_file():
            raise BenchError(f"--peer {explicit}: no such file")
        return explicit.resolve()
    target = target_dir() / "mcp-peer"
    command = ["cargo", "build", "--release", "--locked", "--manifest-path", str(PEER / "Cargo.toml")]
    log(f"building: {' '.join(command)}")
    result = subprocess.run(command, cwd=REPO, env=dict(os.environ, CARGO_TARGET_DIR=str(target)))
    if result.returncode != 0:
        raise BenchError(f"{' '.join(command)} failed with exit code {result.returncode}")
    return target / "release" / "mcp-peer"


def rpc(method: str, params: dict, id_: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def result_of(body: bytes) -> dict:
    """The JSON-RPC message of an answer, as JSON or the `data:` line of an event stream."""
    text = body.decode()
    if not text.lstrip().startswith("{"):
        lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        text = lines[-1]
    message = json.loads(text)
    if "error" in message:
        raise BenchError(f"a JSON-RPC error: {message['error']}")
    return message["result"]


class Driver:
    """How one server is sent requests of one revision, the way its configuration expects.

    2025-11-25: a host `initialize`s. A server that answers with an `Mcp-Session-Id` (the peer:
    rmcp's default, stateful sessions) is driven over `sessions` sessions, each request on the
    next (hosts each have their own; rmcp handles one session's requests one after another). A
    server that answers without one (skillcat: stateless, which that revision allows) is sent
    each request with its `MCP-Protocol-Version` header only, as a host of a stateless server
    does: a session id it never gave would be a client error.

    2026-07-28: no handshake and no session on either side. Each request carries the revision in
    its `_meta` (`io.modelcontextprotocol/protocolVersion`, with the client's capabilities and
    info, which the revision requires) and in the `MCP-Protocol-Version` header, and the standard
    headers SEP-2243 asks of it (`Mcp-Method`; `Mcp-Name`, the URI, for `resources/read`).
    """

    def __init__(self, port: int, revision: str, sessions: int) -> None:
        self.port = port
        self.revision = revision
        self.sessions: list[str] = []
        if revision == LEGACY:
            first = self.initialize()
            if first is not None:
                self.sessions = [first] + [self.initialize() for _ in range(sessions - 1)]

    @property
    def mode(self) -> str:
        if self.revision != LEGACY:
            return "stateless (per-request _meta)"
        return f"{len(self.sessions)} sessions" if self.sessions else "stateless (no session given)"

    def initialize(self) -> str | None:
        """initialize and notifications/initialized; the session's id, if the server gave one."""
        headers = {"Content-Type": "application/json", "Accept": ACCEPT}
        answer = request(self.port, "POST", "/mcp", headers, rpc("initialize", {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT}))
        if answer.status != 200:
            raise BenchError(f"initialize answered {answer.status}: {answer.body[:300]!r}")
        if result_of(answer.body).get("protocolVersion") != LEGACY:
            raise BenchError(f"initialize did not agree on {LEGACY}: {answer.body[:300]!r}")
        session = answer.headers.get("mcp-session-id")
        headers["Mcp-Protocol-Version"] = LEGACY
        if session:
            headers["Mcp-Session-Id"] = session
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        answer = request(self.port, "POST", "/mcp", headers, note)
        if answer.status != 202:
            raise BenchError(f"notifications/initialized answered {answer.status}")
        return session

    def body(self, method: str, params: dict) -> bytes:
        if self.revision != LEGACY:
            params = dict(params, _meta={
                "io.modelcontextprotocol/protocolVersion": self.revision,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": CLIENT,
            })
        return rpc(method, params)

    def headers(self, method: str, params: dict) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Protocol-Version": self.revision}
        if self.revision != LEGACY:
            headers["Mcp-Method"] = method
            if "uri" in params:
                headers["Mcp-Name"] = params["uri"]
        return headers

    def call(self, method: str, params: dict) -> tuple[dict, int]:
        headers = self.headers(method, params)
        if self.sessions:
            headers["Mcp-Session-Id"] = self.sessions[0]
        answer = request(self.port, "POST", "/mcp", headers, self.body(method, params))
        if answer.status != 200:
            raise BenchError(f"{method} ({self.revision}) answered {answer.status}: {answer.body[:300]!r}")
        return result_of(answer.body), len(answer.body)

    def wrk_script(self, directory: Path, name: str, method: str, params: dict) -> Path:
        """POSTs the request; with sessions, each request on the next session in turn."""
        script = directory / f"wrk-mcp-{name}.lua"
        lines = ['wrk.method = "POST"', f"wrk.body = [==[{self.body(method, params).decode()}]==]"]
        lines += [f'wrk.headers["{key}"] = "{value}"' for key, value in self.headers(method, params).items()]
        if self.sessions:
            lines.append("local sessions = {" + ", ".join(f'"{session}"' for session in self.sessions) + "}")
            lines += [
                "local counter = 0",
                "function request()",
                "  counter = counter + 1",
                '  wrk.headers["Mcp-Session-Id"] = sessions[(counter % #sessions) + 1]',
                "  return wrk.format()",
                "end",
            ]
        script.write_text("\n".join(lines) + "\n" + web.WRK_DONE, encoding="utf-8")
        return script


def run_wrk(settings: web.WrkSettings, url: str, script: Path, seconds: float, warmup: bool = False) -> dict:
    """bench/http_vs_nginx.py's wrk run, with a longer timeout: the peer's whole-catalog answer at
    10,000 skills can take seconds under load, and a timed-out request would end the row. A
    warm-up may end with no answer (a server still working off the previous row's backlog)."""
    command = [
        settings.wrk, "-t", str(settings.threads), "-c", str(settings.connections),
        "-d", f"{max(1, round(seconds))}s", "--timeout", "30s", "-s", str(script), url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    lines = [line for line in result.stdout.splitlines() if line.startswith("WRK_RESULT ")]
    if not lines:
        raise BenchError(f"wrk printed no result (exit {result.returncode}):\n{result.stdout}\n{result.stderr}")
    data = json.loads(lines[0][len("WRK_RESULT "):])
    errors = {kind: count for kind, count in data["errors"].items() if count}
    if (warmup or data["requests"] <= 0) and not errors.keys() - {"timeout"}:
        return data
    if errors:
        raise BenchError(f"wrk made no request or saw errors {errors}: {' '.join(command)}")
    data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
    return data


# The run of a row that had no answer at all in the run asked for.
LONG_RUN = 20.0


def no_work(revision: str) -> str:
    """The request that does no work: `ping`, which 2026-07-28 removed; there `server/discover`."""
    return "ping" if revision == LEGACY else "server/discover"


REQUESTS = ("list", "read", "ping")


def prepare(label: str, port: int, revision: str, settings: web.WrkSettings, work: Path) -> tuple[dict, dict]:
    """Checks the server's answers for `revision`; what is known of it, and a wrk script per row."""
    driver = Driver(port, revision, settings.connections)
    listing, list_bytes = driver.call("skills/list", {})
    entries = len(listing["skills"])
    if entries == 0:
        raise BenchError(f"{label}: skills/list listed nothing")
    skill_md = listing["skills"][0]["uri"]
    read, read_bytes = driver.call("resources/read", {"uri": skill_md})
    if not read["contents"][0].get("text", "").startswith("---"):
        raise BenchError(f"{label}: resources/read of {skill_md} is not the SKILL.md")
    driver.call(no_work(revision), {})
    outcome = {"mode": driver.mode, "entries_per_list": entries, "list_bytes": list_bytes, "read_bytes": read_bytes,
               "skill_md": skill_md}
    calls = {"list": ("skills/list", {}), "read": ("resources/read", {"uri": skill_md}), "ping": (no_work(revision), {})}
    scripts = {key: (driver, driver.wrk_script(work, f"{label}-{key}", *calls[key])) for key in REQUESTS}
    return outcome, scripts


def measure_row(label: str, port: int, revision: str, driver: Driver, script: Path, settings: web.WrkSettings) -> dict:
    url = f"http://127.0.0.1:{port}/mcp"
    if settings.warmup:
        run_wrk(settings, url, script, settings.warmup, warmup=True)
    outcome = run_wrk(settings, url, script, settings.duration)
    if outcome["requests"] <= 0:
        # Not one answer within the run (the peer's whole catalog at 10,000 skills, on a short
        # run): measured again over a run long enough for some.
        log(f"  {label}: no answer in {settings.duration:g} s; measuring over {LONG_RUN:g} s")
        outcome = run_wrk(settings, url, script, LONG_RUN)
        if outcome["requests"] <= 0:
            raise BenchError(f"{label}: no answer in {LONG_RUN:g} s")
    # The next row starts on a server that answers at once: no backlog of this one.
    driver.call(no_work(revision), {})
    log(f"  {label}: {outcome['rps']:.0f} requests/s, p99 {outcome['p99_us'] / 1000:.2f} ms")
    return outcome


SERVERS = ("skillcat", "peer", "floor")


def measure(binary: Path, peer: Path, sizes: list[int], revisions: list[str], settings: web.WrkSettings,
            workers: int, work: Path) -> dict:
    """Per size, the three servers started side by side (each idle while another is measured) and
    each row measured on the three back to back, so that a busy machine's changing load falls on
    all three alike."""
    results = {}
    for size in sizes:
        tree = work / f"tree-{size}"
        tree.mkdir()
        entries = discovery_ratio.build_tree(tree, size)
        log(f"MCP at {size} skills ({entries} entries)")
        row: dict = {revision: {} for revision in revisions}
        processes = []
        try:
            ports = {}
            ports["skillcat"] = free_port()
            config = web.write_config(work, tree, max(100_000, 2 * entries))
            skillcat = Server(binary, ["--config", str(config)], listen=f"127.0.0.1:{ports['skillcat']}",
                              timeout=180, env=runtime_env(workers), log_path=work / f"skillcat-{size}.log")
            processes.append(skillcat)
            wait_until(lambda: len(json.loads(request(ports["skillcat"], "GET", "/skills").body)["skills"]) == size,
                       120, f"skillcat did not list {size} skills", skillcat)
            # the peer, and the same binary with the transport configured as skillcat's (the floor)
            for key, flags in (("peer", []), ("floor", ["--stateless"])):
                ports[key] = free_port()
                rmcp = Process([peer, tree, f"127.0.0.1:{ports[key]}", *flags], name=f"mcp-peer {key}",
                               env=runtime_env(workers), log_path=work / f"{key}-{size}.log")
                processes.append(rmcp)
                wait_until(lambda: "serving address=" in rmcp.log_tail(), 300, f"the {key} did not start", rmcp)
            for revision in revisions:
                prepared = {server: prepare(f"{server}-{size}-{revision}", ports[server], revision, settings, work)
                            for server in SERVERS}
                for server in SERVERS:
                    row[revision][server] = prepared[server][0]
                for key in REQUESTS:
                    for server in SERVERS:
                        driver, script = prepared[server][1][key]
                        row[revision][server][key] = measure_row(f"{server}-{size}-{revision} {key}", ports[server],
                                                                 revision, driver, script, settings)
            for process in processes:
                process.check_alive()
        finally:
            for process in processes:
                process.stop()
        results[size] = row
    return results


def table(results: dict) -> str:
    lines = [
        "| skills | revision | request | skillcat | rmcp SkillCatalog | ratio | skillcat p99 | peer p99 "
        "| target (≥ 2x, p99 no worse) | bare stateless rmcp (floor) | floor / peer |",
        "|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for size, by_revision in results.items():
        for revision, row in by_revision.items():
            ours, peer, floor = row["skillcat"], row["peer"], row["floor"]
            for key, what in (("list", "skills/list"), ("read", "resources/read SKILL.md"), ("ping", no_work(revision))):
                if key == "list":
                    unit = " entries/s"
                    detail = f" ({ours['entries_per_list']} / {peer['entries_per_list']} per answer)"
                else:
                    unit, detail = " req/s", ""
                mine, theirs, bare = (rate(outcome, key) for outcome in (ours, peer, floor))
                ratio = mine / theirs
                p99_ours, p99_peer = ours[key]["p99_us"] / 1000, peer[key]["p99_us"] / 1000
                verdict = "met" if ratio >= 2 and p99_ours <= p99_peer else "missed"
                lines.append(
                    f"| {size:,} | {revision} | {what}{detail} | {mine:,.0f}{unit} | {theirs:,.0f}{unit} | "
                    f"{ratio:.1f}x | {p99_ours:.2f} ms | {p99_peer:.2f} ms | {verdict} | {bare:,.0f}{unit} | "
                    f"{bare / theirs:.1f}x |"
                )
    return "\n".join(lines)


def rate(outcome: dict, key: str) -> float:
    """Requests per second, or for skills/list entries per second."""
    per_answer = outcome["entries_per_list"] if key == "list" else 1
    return outcome[key]["rps"] * per_answer


def modes(results: dict) -> str:
    """How each server was driven, per revision (from the first size: the same at every size)."""
    first = next(iter(results.values()))
    return "; ".join(f"{revision}: skillcat {row['skillcat']['mode']}, the peer {row['peer']['mode']}, "
                     f"the floor {row['floor']['mode']}" for revision, row in first.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short wrk runs")
    parser.add_argument("--binary", type=Path, help="a built skillcat release binary (default: cargo build --release)")
    parser.add_argument("--peer", type=Path, help="a built bench/mcp-peer release binary (default: built)")
    parser.add_argument("--sizes", default="200,10000", help="catalog sizes (default 200,10000)")
    parser.add_argument("--revisions", default=",".join(REVISIONS),
                        help=f"protocol revisions (default {','.join(REVISIONS)})")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--warmup", type=float)
    parser.add_argument("--workers", type=int, default=usable_cpus())
    parser.add_argument("--json", type=Path, help="also write the measurements as JSON to this file")
    parser.add_argument("--no-doc", action="store_true", help="print the table only (--quick never writes the page)")
    args = parser.parse_args()
    duration = args.duration or (2.0 if args.quick else 10.0)
    warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 3.0)
    wrk = which("wrk")
    if wrk is None:
        raise SystemExit("mcp_vs_rmcp: wrk is not installed (bench/run installs it)")
    binary = args.binary.resolve() if args.binary else cargo_build([], "skillcat")
    peer = peer_binary(args.peer)
    settings = web.WrkSettings(wrk, args.threads, args.connections, duration, warmup)
    sizes = [int(size) for size in args.sizes.split(",")]
    revisions = args.revisions.split(",")
    if unknown := set(revisions) - set(REVISIONS):
        raise SystemExit(f"mcp_vs_rmcp: unknown revisions {sorted(unknown)}: {', '.join(REVISIONS)}")
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="skillcat-bench-mcp-") as work:
        started = time.time()
        results = measure(binary, peer, sizes, revisions, settings, args.workers, Path(work))
        minutes = (time.time() - started) / 60
        log(f"done in {minutes:.1f} min")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    run = "quick" if args.quick else "full"
    lines = [
        f"- Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, `bench/mcp_vs_rmcp.py` ({run}), "
        f"{minutes:.1f} min; commit {git_revision()}.",
        f"- Machine: {cpu_model()}; {usable_cpus()} usable cores; load average {load_before} at the start, "
        f"{load_average()} at the end.",
        f"- Versions: {command_version([str(binary), '--version'])}, rmcp 3.11.0 (bench/mcp-peer), "
        f"{command_version([wrk, '--version'])}.",
        f"- Settings: wrk {args.threads} threads, {args.connections} keep-alive connections, {warmup:g} s warm-up then "
        f"{duration:g} s measured per request; each server {args.workers} runtime threads.",
        f"- Driven as configured: {modes(results)}.",
        "",
        table(results),
    ]
    section = "\n".join(lines)
    print(section)
    if not (args.quick or args.no_doc):
        text = DOC.read_text()
        before, rest = text.split(BEGIN, 1)
        _, after = rest.split(END, 1)
        DOC.write_text(f"{before}{BEGIN}\n\n{section}\n\n{END}{after}")
        log(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, ServerError) as error:
        log(f"mcp_vs_rmcp: {error}")
        sys.exit(2)
