#!/usr/bin/env python3
"""MCP: skillcat's /mcp against rmcp's own directory-backed skills server, side by side.

    bench/mcp_vs_rmcp.py                  # 200 and 10,000 skills; rewrites its part of docs/BENCHMARKS.md
    bench/mcp_vs_rmcp.py --quick          # short runs; prints the table, writes no document
    bench/mcp_vs_rmcp.py --binary target/release/skillcat --peer target/mcp-peer/release/mcp-peer

The peer is bench/mcp-peer: rmcp 3.11's `SkillCatalog` (feature `skills-fs`), wired as rmcp's
documentation shows, on the same Streamable HTTP transport with the same settings. Both serve the
same tree (bench/discovery_ratio.py's: team-XX/skill-NNNNN, some with references and examples), one
at a time, on the same number of
runtime threads. Measured with wrk (POST of a JSON-RPC request), each request on the next of as
many MCP sessions as wrk has connections (hosts each have their own):

  skills/list            the first page: skillcat pages by 100 entries, the peer answers the whole
                         catalog at once, so entries listed per second is the comparable number
  resources/read         of one skill's SKILL.md
  ping                   no work at all: what the transport and the HTTP stack cost (no target)

Target: skillcat at least 2x the peer's throughput (entries per second for skills/list, requests
per second for resources/read) with a p99 no worse. The peer serves a snapshot it read at start;
skillcat serves its live catalog, each read checked against the listed digest.

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
PROTOCOL = "2025-11-25"
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


def open_session(port: int) -> str:
    """initialize and notifications/initialized; the session's id."""
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    answer = request(port, "POST", "/mcp", headers, rpc("initialize", {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}))
    if answer.status != 200 or "mcp-session-id" not in answer.headers:
        raise BenchError(f"initialize answered {answer.status}: {answer.body[:300]!r}")
    session = answer.headers["mcp-session-id"]
    headers.update({"Mcp-Session-Id": session, "Mcp-Protocol-Version": PROTOCOL})
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    answer = request(port, "POST", "/mcp", headers, note)
    if answer.status != 202:
        raise BenchError(f"notifications/initialized answered {answer.status}")
    return session


def call(port: int, session: str, method: str, params: dict) -> tuple[dict, int]:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": session,
               "Mcp-Protocol-Version": PROTOCOL}
    answer = request(port, "POST", "/mcp", headers, rpc(method, params))
    if answer.status != 200:
        raise BenchError(f"{method} answered {answer.status}: {answer.body[:300]!r}")
    return result_of(answer.body), len(answer.body)


def wrk_script(directory: Path, name: str, sessions: list[str], body: bytes) -> Path:
    """POSTs `body`, each request on the next of `sessions` in turn (a host has a session of its
    own: one session shared by every connection would measure how one session queues)."""
    script = directory / f"wrk-mcp-{name}.lua"
    common = {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Protocol-Version": PROTOCOL}
    lines = ['wrk.method = "POST"', f"wrk.body = [==[{body.decode()}]==]"]
    lines += [f'wrk.headers["{key}"] = "{value}"' for key, value in common.items()]
    lines.append("local sessions = {" + ", ".join(f'"{session}"' for session in sessions) + "}")
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


def run_wrk(settings: web.WrkSettings, url: str, script: Path, seconds: float) -> dict:
    """bench/http_vs_nginx.py's wrk run, with a longer timeout: the peer's whole-catalog answer at
    10,000 skills can take seconds under load, and a timed-out request would end the row."""
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
    if data["requests"] <= 0 or errors:
        raise BenchError(f"wrk made no request or saw errors {errors}: {' '.join(command)}")
    data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
    return data


def measure_server(label: str, port: int, settings: web.WrkSettings, work: Path) -> dict:
    sessions = [open_session(port) for _ in range(settings.connections)]
    session = sessions[0]
    listing, list_bytes = call(port, session, "skills/list", {})
    entries = len(listing["skills"])
    if entries == 0:
        raise BenchError(f"{label}: skills/list listed nothing")
    skill_md = listing["skills"][0]["uri"]
    read, read_bytes = call(port, session, "resources/read", {"uri": skill_md})
    if not read["contents"][0].get("text", "").startswith("---"):
        raise BenchError(f"{label}: resources/read of {skill_md} is not the SKILL.md")
    outcome = {"entries_per_list": entries, "list_bytes": list_bytes, "read_bytes": read_bytes, "skill_md": skill_md}
    requests = (("list", rpc("skills/list", {})), ("read", rpc("resources/read", {"uri": skill_md})), ("ping", rpc("ping", {})))
    for key, body in requests:
        script = wrk_script(work, f"{label}-{key}", sessions, body)
        url = f"http://127.0.0.1:{port}/mcp"
        if settings.warmup:
            run_wrk(settings, url, script, settings.warmup)
        outcome[key] = run_wrk(settings, url, script, settings.duration)
        log(f"  {label} {key}: {outcome[key]['rps']:.0f} requests/s, p99 {outcome[key]['p99_us'] / 1000:.2f} ms")
    return outcome


def measure(binary: Path, peer: Path, sizes: list[int], settings: web.WrkSettings, workers: int, work: Path) -> dict:
    results = {}
    for size in sizes:
        tree = work / f"tree-{size}"
        tree.mkdir()
        entries = discovery_ratio.build_tree(tree, size)
        log(f"MCP at {size} skills ({entries} entries)")
        row = {}
        # skillcat
        port = free_port()
        config = web.write_config(work, tree, max(100_000, 2 * entries))
        skillcat = Server(binary, ["--config", str(config)], listen=f"127.0.0.1:{port}", timeout=180,
                          env=runtime_env(workers), log_path=work / f"skillcat-{size}.log")
        try:
            wait_until(lambda: len(json.loads(request(port, "GET", "/skills").body)["skills"]) == size, 120,
                       f"skillcat did not list {size} skills", skillcat)
            row["skillcat"] = measure_server(f"skillcat-{size}", port, settings, work)
            skillcat.check_alive()
        finally:
            skillcat.stop()
        # the peer
        port = free_port()
        rmcp = Process([peer, tree, f"127.0.0.1:{port}"], name="mcp-peer", env=runtime_env(workers),
                       log_path=work / f"peer-{size}.log")
        try:
            wait_until(lambda: "serving address=" in rmcp.log_tail(), 300, "the peer did not start", rmcp)
            row["peer"] = measure_server(f"peer-{size}", port, settings, work)
            rmcp.check_alive()
        finally:
            rmcp.stop()
        results[size] = row
    return results


def table(results: dict) -> str:
    lines = [
        "| skills | request | skillcat | rmcp SkillCatalog | ratio | skillcat p99 | peer p99 | target (≥ 2x, p99 no worse) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for size, row in results.items():
        ours, peer = row["skillcat"], row["peer"]
        for key, what in (("list", "skills/list"), ("read", "resources/read SKILL.md"), ("ping", "ping")):
            if key == "list":
                mine = ours["list"]["rps"] * ours["entries_per_list"]
                theirs = peer["list"]["rps"] * peer["entries_per_list"]
                unit = " entries/s"
                detail = f" ({ours['entries_per_list']} / {peer['entries_per_list']} per answer)"
            else:
                mine, theirs, unit, detail = ours[key]["rps"], peer[key]["rps"], " req/s", ""
            ratio = mine / theirs
            p99_ours, p99_peer = ours[key]["p99_us"] / 1000, peer[key]["p99_us"] / 1000
            met = ratio >= 2 and p99_ours <= p99_peer
            verdict = "info" if key == "ping" else ("met" if met else "missed")
            lines.append(
                f"| {size:,} | {what}{detail} | {mine:,.0f}{unit} | {theirs:,.0f}{unit} | {ratio:.1f}x | "
                f"{p99_ours:.2f} ms | {p99_peer:.2f} ms | {verdict} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short wrk runs")
    parser.add_argument("--binary", type=Path, help="a built skillcat release binary (default: cargo build --release)")
    parser.add_argument("--peer", type=Path, help="a built bench/mcp-peer release binary (default: built)")
    parser.add_argument("--sizes", default="200,10000", help="catalog sizes (default 200,10000)")
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
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="skillcat-bench-mcp-") as work:
        started = time.time()
        results = measure(binary, peer, sizes, settings, args.workers, Path(work))
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
        f"{duration:g} s measured per request, each on the next of {args.connections} MCP sessions (protocol "
        f"{PROTOCOL}); each server {args.workers} runtime threads.",
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
