#!/usr/bin/env python3
"""Instructions per request of skillcat's HTTP paths, counted by valgrind's callgrind.

Request rates on a shared 2-core machine move with whatever else runs; instruction counts do
not. This starts `skillcat serve` under `valgrind --tool=callgrind` on the 200-skill catalog of
bench/run's rows a-c, and for each case sends a warm-up, zeroes the counters
(`callgrind_control -z`), sends N requests over one keep-alive connection exactly as wrk sends
them, and dumps the counters (`callgrind_control -d`). The server's instructions over N are its
cost per request (every thread: the runtime's workers, the blocking pool, the watcher), and the
dump says which functions spent them, grouped here by crate.

    bench/request_profile.py --binary target/release/skillcat          # every case, 2,000 requests each
    bench/request_profile.py --binary target/release/skillcat --cases 304,load --top 25
    bench/request_profile.py --binary target/release/skillcat --cases 304 --floor target/hyper-floor/release/hyper-floor

Needs valgrind (Debian: `apt-get install valgrind`). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import discovery_ratio  # noqa: E402
import http_vs_nginx as web  # noqa: E402
from common import BenchError, Process, Server, ServerError, free_port, log, request, runtime_env, wait_until  # noqa: E402


@dataclass
class Case:
    key: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes | None
    status: int


def mcp(method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def cases(etag: str, skill: str) -> list[Case]:
    json_body = {"Content-Type": "application/json"}
    # A 2025-11-25 host's requests to the stateless /mcp: its revision in a header, no session.
    rpc = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-11-25"}
    return [
        Case("304", "GET", "/skills", {"If-None-Match": etag}, None, 304),
        Case("gzip", "GET", "/skills", {"Accept-Encoding": "gzip"}, None, 200),
        Case("identity", "GET", "/skills", {}, None, 200),
        Case("load", "POST", f"/skills/{web.LARGE_SKILL}/load", json_body, web.LOAD_REQUEST_BODY, 200),
        Case("skill", "GET", f"/skills/{skill}", {}, None, 200),
        Case("healthz", "GET", "/healthz", {}, None, 200),
        Case("mcp-ping", "POST", "/mcp", rpc, mcp("ping", {}), 200),
        Case("mcp-read", "POST", "/mcp", rpc, mcp("resources/read", {"uri": f"skill://{skill}/SKILL.md"}), 200),
        Case("mcp-list", "POST", "/mcp", rpc, mcp("skills/list", {}), 200),
    ]


class Connection:
    """One keep-alive connection sending wrk's request bytes and reading whole answers."""

    def __init__(self, port: int, case: Case) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = [f"{case.method} {case.path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
        head += [f"{name}: {value}" for name, value in case.headers.items()]
        if case.body is not None:
            head.append(f"Content-Length: {len(case.body)}")
        self.request = ("\r\n".join(head) + "\r\n\r\n").encode() + (case.body or b"")
        self.status = case.status
        self.buffer = b""

    def ask(self) -> None:
        self.socket.sendall(self.request)
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self.read()
        head = self.buffer[:end].decode("latin-1")
        status = int(head.split(" ", 2)[1])
        if status != self.status:
            raise BenchError(f"answered {status}, expected {self.status}: {self.buffer[:300]!r}")
        length = 0
        chunked = False
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "transfer-encoding":
                chunked = "chunked" in value.lower()
        if chunked:
            self.buffer = self.buffer[end + 4:]
            self.skip_chunks()
            return
        while len(self.buffer) < end + 4 + length:
            self.read()
        self.buffer = self.buffer[end + 4 + length:]

    def skip_chunks(self) -> None:
        """Reads a chunked body (an event stream's) to its last chunk."""
        while True:
            while (end := self.buffer.find(b"\r\n")) < 0:
                self.read()
            size = int(self.buffer[:end].split(b";")[0], 16)
            while len(self.buffer) < end + 2 + size + 2:
                self.read()
            self.buffer = self.buffer[end + 2 + size + 2:]
            if size == 0:
                return

    def read(self) -> None:
        chunk = self.socket.recv(1 << 20)
        if not chunk:
            raise BenchError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.socket.close()


# `  1,234,567 (12.34%)  ???:hyper::proto::h1::role::...  [/path/skillcat]`
ANNOTATE_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*?)\s*(\[[^\]]*\])?\s*$")

GROUPS = [
    ("kernel entry (syscall wrappers)", re.compile(r"^(__libc_|__GI___libc_|__GI___|epoll_wait|writev|__send|__recv|syscall)")),
    ("malloc/free", re.compile(r"(malloc|free|realloc|calloc|_int_|tcache|mi_|_rjem_|je_|sdallocx)")),
    ("memcpy/memmove/memset", re.compile(r"mem(cpy|move|set|cmp)|__memcpy|__memmove|__memset|__memcmp|strlen")),
    ("hyper", re.compile(r"\bhyper(_util)?::")),
    ("httparse", re.compile(r"\bhttparse::")),
    ("http (header maps)", re.compile(r"\bhttp::|\bheaders::")),
    ("axum / matchit", re.compile(r"\baxum(_core)?::|\bmatchit::")),
    ("tower / tower-http", re.compile(r"\btower(_http|_layer)?::")),
    ("tokio", re.compile(r"\btokio::")),
    ("tracing", re.compile(r"\btracing(_core|_subscriber)?::")),
    ("rmcp (MCP)", re.compile(r"\brmcp::")),
    ("serde / serde_json", re.compile(r"\bserde(_json)?::")),
    ("skillcat", re.compile(r"\bskillcat(_core)?::")),
    ("futures / bytes / std", re.compile(r"\b(futures_\w+|bytes|core|alloc|std)::")),
]


def group_of(function: str) -> str:
    for name, pattern in GROUPS:
        if pattern.search(function):
            return name
    return "other"


# Frames that were on a thread's stack when the counters were zeroed: callgrind_annotate shows
# their inclusive cost (all of it) among the self costs.
THREAD_FRAMES = re.compile(r"(clone\.S:clone|start_thread|thread_start|FnOnce::call_once\{\{vtable\.shim\}\}"
                           r"|__rust_begin_short_backtrace)$")

ALLOCATE = re.compile(r"^(malloc|calloc|realloc|posix_memalign|aligned_alloc|mi_\w*(alloc|realloc)\w*)$")


def allocations(dump: Path) -> int:
    """Calls into the allocator from outside it, from the dump's call records."""
    names: dict[str, str] = {}
    definition = re.compile(r"^c?fn=\((\d+)\)(?: (.*))?$")
    current = called = None
    total = 0
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith(("fn=", "cfn=")):
            match = definition.match(line)
            if not match:
                continue
            if match.group(2) is not None:
                names[match.group(1)] = match.group(2)
            name = names.get(match.group(1), "")
            if line.startswith("fn="):
                current = name
            else:
                called = name
        elif line.startswith("calls=") and called is not None:
            if ALLOCATE.match(called) and not ALLOCATE.match(current or ""):
                total += int(line.split("=", 1)[1].split()[0])
            called = None
    return total


def annotate(dump: Path, top: int) -> tuple[int, list[tuple[int, str]]]:
    """The total instructions of a dump and its functions by self cost."""
    output = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(dump)],
        capture_output=True, text=True, check=True,
    ).stdout
    total = None
    functions = []
    for line in output.splitlines():
        if total is None and (found := re.match(r"^\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS", line)):
            total = int(found.group(1).replace(",", ""))
            continue
        match = ANNOTATE_LINE.match(line)
        if match and total is not None and "PROGRAM TOTALS" not in line:
            function = match.group(3)
            if THREAD_FRAMES.search(function):
                continue
            function = function.split(":", 1)[1] if function.startswith("???:") else function
            functions.append((int(match.group(1).replace(",", "")), function))
    if total is None:
        raise BenchError(f"callgrind_annotate printed no total for {dump}")
    return total, functions


def control(pid: int, option: str) -> None:
    result = subprocess.run(["callgrind_control", option, str(pid)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise BenchError(f"callgrind_control {option} {pid} failed:\n{result.stdout}{result.stderr}")


def newest_dump(directory: Path, before: set[Path]) -> Path:
    def found() -> bool:
        return bool(set(directory.glob("callgrind.out*")) - before)

    wait_until(found, 60, "callgrind wrote no dump")
    time.sleep(0.5)  # let the file be complete
    return max(set(directory.glob("callgrind.out*")) - before, key=lambda path: path.stat().st_mtime)


def profile(args: argparse.Namespace, work: Path) -> dict:
    tree = work / "tree"
    tree.mkdir()
    entries = discovery_ratio.build_tree(tree, 199)
    (tree / web.LARGE_SKILL).mkdir()
    (tree / web.LARGE_SKILL / "SKILL.md").write_text(web.large_skill_text(), encoding="utf-8")
    config = web.write_config(work, tree, max(100_000, 2 * entries))
    port = free_port()
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out", "--dump-instr=no"]
    # Under valgrind a start takes long, and so may each answer.
    server = Server(args.binary, ["--config", str(config)], listen=f"127.0.0.1:{port}", wrapper=valgrind,
                    timeout=300, probe_timeout=30, name="skillcat under callgrind", env=runtime_env(args.workers),
                    log_path=work / "server.log")
    log(f"{' '.join(server.command)}: ready after {server.ready_after:.0f} s")
    results = {}
    try:
        listing = request(port, "GET", "/skills", timeout=60)
        catalog = json.loads(listing.body)
        if len(catalog["skills"]) != 200:
            raise BenchError(f"GET /skills listed {len(catalog['skills'])} skills, expected 200")
        skill = next(entry["name"] for entry in catalog["skills"] if entry["name"] != web.LARGE_SKILL)
        for case in cases(listing.headers["etag"], skill):
            if args.cases and case.key not in args.cases:
                continue
            results[case.key] = measure(args, work, server.pid, port, case)
    finally:
        server.stop(grace=60)
    if args.floor:
        results["floor-304"] = profile_floor(args, work)
    return results


def measure(args: argparse.Namespace, work: Path, pid: int, port: int, case: Case) -> dict:
    """One case's counts: a warm-up, the counters zeroed, `args.requests` requests, a dump."""
    connection = Connection(port, case)
    try:
        for _ in range(args.warmup):
            connection.ask()
        control(pid, "-z")
        for _ in range(args.requests):
            connection.ask()
        before = set(work.glob("callgrind.out*"))
        control(pid, "-d")
        # valgrind takes a command when one of the program's threads runs: a server that waits
        # for the network with no timer of its own (the floor) dumps at its next request.
        connection.ask()
        dump = newest_dump(work, before)
    finally:
        connection.close()
    total, functions = annotate(dump, args.top)
    groups: dict[str, int] = {}
    for cost, function in functions:
        groups[group_of(function)] = groups.get(group_of(function), 0) + cost
    result = {
        "requests": args.requests,
        "instructions_per_request": total / args.requests,
        "allocations_per_request": allocations(dump) / args.requests,
        "groups": {name: cost / args.requests for name, cost in sorted(groups.items(), key=lambda item: -item[1])},
        "top": [(cost / args.requests, function) for cost, function in functions[: args.top]],
    }
    log(f"{case.key}: {total / args.requests:,.0f} instructions per request, "
        f"{result['allocations_per_request']:.1f} allocations")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(dump, args.keep / f"callgrind.{case.key}.out")
    return result


def profile_floor(args: argparse.Namespace, work: Path) -> dict:
    """The hyper floor of bench/run's row b (bench/hyper-floor: hyper answering a fixed 304) under
    callgrind, asked the 304 case's bytes: what hyper and Tokio alone cost per request."""
    port = free_port()
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out", "--dump-instr=no"]
    floor = Process([*valgrind, args.floor, f"127.0.0.1:{port}"], name="hyper floor under callgrind",
                    env=runtime_env(args.workers), log_path=work / "floor.log")
    try:
        wait_until(lambda: "serving address=" in floor.log_tail(), 300, "the hyper floor did not start", floor)
        case = Case("floor-304", "GET", "/skills", {"If-None-Match": "\"00000000000000000000000000000000\""}, None, 304)
        return measure(args, work, floor.pid, port, case)
    finally:
        floor.stop(grace=60)


def print_results(results: dict) -> None:
    for key, result in results.items():
        per_request = result["instructions_per_request"]
        print(f"\n== {key}: {per_request:,.0f} instructions and {result['allocations_per_request']:.1f} allocations "
              f"per request ({result['requests']} requests)")
        for name, cost in result["groups"].items():
            print(f"   {cost:10,.0f}  {100 * cost / per_request:5.1f} %  {name}")
        print("   top functions (self):")
        for cost, function in result["top"]:
            print(f"   {cost:10,.0f}  {100 * cost / per_request:5.1f} %  {function[:150]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", type=Path, required=True, help="the skillcat binary (a release build)")
    parser.add_argument("--requests", type=int, default=2000, help="requests counted per case")
    parser.add_argument("--warmup", type=int, default=200, help="requests before counting, per case")
    parser.add_argument("--workers", type=int, default=2, help="TOKIO_WORKER_THREADS")
    parser.add_argument("--cases", type=lambda text: set(text.split(",")), default=None,
                        help="comma-separated: 304,gzip,identity,load,skill,healthz,mcp-ping,mcp-read,mcp-list "
                             "(default: all)")
    parser.add_argument("--top", type=int, default=20, help="functions listed per case")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", type=Path, help="copy each case's callgrind dump into this folder")
    parser.add_argument("--floor", type=Path,
                        help="also profile this bench/hyper-floor binary's fixed 304 (case floor-304)")
    args = parser.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        print("request_profile: needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    if not args.binary.is_file():
        print(f"request_profile: --binary {args.binary}: no such file", file=sys.stderr)
        return 2
    args.binary = args.binary.resolve()
    if args.floor:
        if not args.floor.is_file():
            print(f"request_profile: --floor {args.floor}: no such file", file=sys.stderr)
            return 2
        args.floor = args.floor.resolve()
    work = Path(tempfile.mkdtemp(prefix="skillcat-callgrind-"))
    try:
        results = profile(args, work)
    except (BenchError, ServerError) as error:
        print(f"request_profile: {error}", file=sys.stderr)
        return 2
    finally:
        web.remove(work)
    print_results(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
