#!/usr/bin/env python3
"""How skillcat's costs grow with the catalog: 200, 10,000 and 100,000 skills.

For each size it builds a tree with `discovery_ratio.build_tree` (teams of skills, a tenth of
them with a `references/` folder: about 2.26 entries per skill), starts the release binary on it
with a `--config` file (one directory source, `max_entries` raised), and measures:

- cold start: from spawn to the first 200 of GET /readyz (the watches placed, the first full
  walk done, the first catalog published), and that first walk's duration (scan metrics);
- memory: VmRSS and VmHWM once ready and after a few requests of every kind, and again after
  the changes below: then VmRSS is sampled for a while and its lowest is the server at rest,
  its highest the server during a scan (with the watch limit exhausted, a full walk runs every
  10 s; one reading would say either, depending on when it fell);
- GET /skills CPU per request: the server's user+system time over a run of sequential GET
  /skills (identity) on one keep-alive connection, over the requests;
- changes: edits of a description, new skills and deleted skills, in turn, each timed from the
  return of the write until a GET /skills polled in a loop (conditional, so an unchanged catalog
  costs a 304) shows it; and the mean duration of the rescans they caused (scan metrics).

At 100,000 skills the server runs twice: with the kernel's limit on inotify watches raised
(when it is too low and this runs as root, `fs.inotify.max_user_watches` is raised for the run
and put back afterwards), and with the limit exhausted: the server runs in a user namespace of
its own whose limit (`/proc/sys/user/max_inotify_watches`) is half the tree's folders, so it
cannot watch the whole tree, exactly as on a node whose limit is too low, without lowering the
limit of any other process. There, with `--rescan-interval 0`, changes in unwatched folders are
seen by the periodic full rescan the server falls back to (every 10 s).

Standard library only. Trees go to a temporary directory and are deleted afterwards.

    python3 bench/scale.py --binary target/release/skillcat            # 200, 10,000, 100,000
    python3 bench/scale.py --binary target/release/skillcat --sizes 200,10000 --changes 20
    python3 bench/scale.py --binary NEW --baseline OLD --sizes 10000,100000 --rounds 2   # two builds in turn
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import discovery_ratio  # noqa: E402
from common import (  # noqa: E402
    BenchError,
    Server,
    cpu_seconds,
    free_port,
    log,
    memory_of,
    percentile,
    request,
    skill_md,
    write_atomic,
)

WATCH_LIMIT = Path("/proc/sys/fs/inotify/max_user_watches")
UNSHARE = "/usr/bin/unshare"


def count_folders(tree: Path) -> int:
    return sum(1 for _ in os.walk(tree))


def metrics(port: int) -> dict[str, float]:
    """Every unlabelled sample of GET /metrics, and the labelled ones under their full series."""
    response = request(port, "GET", "/metrics")
    if response.status != 200:
        raise BenchError(f"GET /metrics answered {response.status}")
    values = {}
    for line in response.body.decode().splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            values[series] = float(value)
    return values


class Poller:
    """GET /skills on one keep-alive connection, conditional on the last tag; the body is kept
    as bytes (parsing 30 MB of JSON per poll would time Python, not the server)."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.etag: str | None = None
        self.body = b""

    def poll(self) -> tuple[bool, float]:
        headers = {"If-None-Match": self.etag} if self.etag else {}
        self.connection.request("GET", "/skills", headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        arrived = time.perf_counter()
        if response.status == 304:
            return False, arrived
        if response.status != 200:
            raise BenchError(f"GET /skills answered {response.status}: {data[:300]!r}")
        self.etag = response.getheader("ETag")
        self.body = data
        return True, arrived

    def wait_for(self, check, deadline: float) -> float | None:
        while True:
            changed, arrived = self.poll()
            if changed and check(self.body):
                return arrived
            if arrived > deadline:
                return None

    def close(self) -> None:
        self.connection.close()


def skill_text(name: str, description: str) -> str:
    return skill_md(name, description, f"\n# {name}\n\nChanged by the bench.\n")


def skill_folders(tree: Path) -> list[Path]:
    return sorted(folder for team in tree.iterdir() if team.is_dir() for folder in team.iterdir() if folder.is_dir())


def changes(tree: Path, port: int, count: int, timeout: float, tag: str) -> dict:
    """Edits, adds and deletes in turn; the latency of each until GET /skills shows it. `tag`
    keeps the names of added skills apart between runs on the same tree."""
    folders = skill_folders(tree)
    poller = Poller(port)
    poller.poll()
    latencies: list[float] = []
    missed: list[str] = []
    for change in range(count):
        kind = ("edit", "add", "delete")[change % 3]
        if kind == "edit":
            folder = folders[(change * 7919) % len(folders)]
            description = f"Edited by change {change} of run {tag}."
            write_atomic(folder / "SKILL.md", skill_text(folder.name, description))
            needle = json.dumps(description).encode()
            check = lambda body, needle=needle: needle in body  # noqa: E731
        elif kind == "add":
            name = f"added-{tag}-{change:05d}"
            folder = folders[(change * 104729) % len(folders)].parent / name
            folder.mkdir()
            write_atomic(folder / "SKILL.md", skill_text(name, "Added by the bench."))
            folders.append(folder)
            needle = f'"name":"{name}"'.encode()
            check = lambda body, needle=needle: needle in body  # noqa: E731
        else:
            folder = folders.pop((change * 15485863) % len(folders))
            shutil.rmtree(folder)
            needle = f'"name":"{folder.name}"'.encode()
            check = lambda body, needle=needle: needle not in body  # noqa: E731
        written = time.perf_counter()
        seen = poller.wait_for(check, written + timeout)
        if seen is None:
            missed.append(f"{kind} {folder.name}")
            continue
        latencies.append(max(0.0, seen - written) * 1000)
    poller.close()
    latencies.sort()
    summary = {}
    if latencies:
        summary = {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "max": latencies[-1]}
    return {"changes": count, "seen": len(latencies), "missed": missed, "latency_ms": summary}


def get_skills_cpu(port: int, pid: int, requests: int) -> dict:
    """Server CPU per GET /skills (identity), sequential on one keep-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", "/skills")
        size = len(connection.getresponse().read())
        before, started = cpu_seconds([pid]), time.perf_counter()
        for _ in range(requests):
            connection.request("GET", "/skills")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise BenchError(f"GET /skills answered {response.status}")
        elapsed, used = time.perf_counter() - started, cpu_seconds([pid]) - before
    finally:
        connection.close()
    return {"requests": requests, "bytes": size, "cpu_us": used / requests * 1e6, "wall_ms": elapsed / requests * 1000}


def exercise(port: int) -> None:
    """A few requests of every kind, so memory includes what serving them keeps."""
    for _ in range(3):
        for path, headers in (("/skills", {}), ("/skills", {"Accept-Encoding": "gzip"}), ("/manifest", {}),
                              ("/skills/skill-00000", {}), ("/skills/skill-00000/content", {}),
                              ("/skills/skill-00000/files", {}), ("/metrics", {})):
            response = request(port, "GET", path, headers)
            if response.status != 200:
                raise BenchError(f"GET {path} answered {response.status}")
        response = request(port, "POST", "/skills/skill-00000/load", {"Content-Type": "application/json"}, b"{}")
        if response.status != 200:
            raise BenchError(f"POST load answered {response.status}")


# With the watch limit exhausted, the server walks the whole tree this often (watching.rs).
FALLBACK_WALK_S = 10


def memory_at_rest(pid: int, seconds: float) -> dict[str, int]:
    """VmRSS sampled every 0.2 s for `seconds`: the lowest (`VmRSS`, the server at rest between
    scans) and the highest (`VmRSS_peak`, while a scan ran: with the watch limit exhausted, a full
    walk every `FALLBACK_WALK_S`), and VmHWM at the end. One reading alone would say either,
    depending on when it fell."""
    samples = []
    deadline = time.monotonic() + seconds
    while True:
        samples.append(memory_of(pid))
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    rss = [sample["VmRSS"] for sample in samples]
    return {"VmRSS": min(rss), "VmRSS_peak": max(rss), "VmHWM": samples[-1]["VmHWM"], "samples": len(samples)}


def run_server(binary: Path, config: Path, log_path: Path, rescan_interval: int, watch_limit: int | None) -> Server:
    """The server on the tree, ready (`ready_after`: the cold start); with `watch_limit`, in a user
    namespace whose limit on inotify watches is that. On a port chosen here: RUST_LOG=warn hides
    the line in which a server on port 0 would say its own."""
    wrapper: list[str] = []
    if watch_limit is not None:
        wrapper = [UNSHARE, "--user", "--map-root-user", "/bin/sh", "-c",
                   f'echo {watch_limit} > /proc/sys/user/max_inotify_watches && exec "$0" "$@"']
    environment = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    return Server(binary, ["--config", str(config), "--rescan-interval", str(rescan_interval)],
                  listen=f"127.0.0.1:{free_port()}", wrapper=wrapper, timeout=300, env=environment, log_path=log_path)


def measure_size(binary: Path, work: Path, skills: int, count: int, exhausted: bool, cpu_requests: int,
                 tag: str = "") -> dict:
    tree = work / f"tree-{skills}"
    if not tree.exists():
        tree.mkdir()
        started = time.perf_counter()
        entries = discovery_ratio.build_tree(tree, skills)
        (tree / ".entries").write_text(str(entries))
        log(f"built {skills:,} skills ({entries:,} entries) in {time.perf_counter() - started:.1f} s")
    entries = int((tree / ".entries").read_text())
    folders = count_folders(tree)
    config = work / f"skillcat-{skills}.toml"
    config.write_text(
        f'[[sources]]\nkind = "directory"\nroots = [{json.dumps(str(tree))}]\n'
        f"max_entries = {max(100_000, 2 * entries)}\n",
        encoding="utf-8",
    )
    watch_limit = max(16, folders // 2) if exhausted else None
    # Exhausted, nothing but the fallback rescan can see a change: `--rescan-interval 0` shows it runs anyway.
    server = run_server(binary, config, work / f"server-{skills}-{exhausted}.log", 0 if exhausted else 30, watch_limit)
    port = server.port
    result: dict = {"skills": skills, "entries": entries, "folders": folders, "exhausted": exhausted,
                    "watch_limit": watch_limit}
    try:
        result["ready_ms"] = server.ready_after * 1000
        # The processor time the start took (both cores' share): steadier than the wall time on
        # a shared machine.
        result["cpu_at_ready_ms"] = cpu_seconds([server.pid]) * 1000
        first = metrics(port)
        result["cold_scan_ms"] = first.get("skillcat_scan_duration_seconds_sum", 0) * 1000
        result["watch_incomplete"] = first.get("skillcat_watch_incomplete")
        result["memory_ready_kib"] = memory_of(server.pid)
        exercise(port)
        result["memory_kib"] = memory_of(server.pid)
        result["get_skills"] = get_skills_cpu(port, server.pid, cpu_requests)
        before = metrics(port)
        result["changes"] = changes(tree, port, count, 25.0 if exhausted else 10.0, tag + ("x" if exhausted else "w"))
        time.sleep(0.5)
        after = metrics(port)
        scans = after["skillcat_scan_duration_seconds_count"] - before["skillcat_scan_duration_seconds_count"]
        total = after["skillcat_scan_duration_seconds_sum"] - before["skillcat_scan_duration_seconds_sum"]
        result["rescans"] = {
            "count": scans,
            "mean_ms": total / scans * 1000 if scans else None,
            "incremental": after.get('skillcat_directory_scans_total{kind="incremental"}', 0)
            - before.get('skillcat_directory_scans_total{kind="incremental"}', 0),
            "full": after.get('skillcat_directory_scans_total{kind="full"}', 0)
            - before.get('skillcat_directory_scans_total{kind="full"}', 0),
            "disagreements": after.get("skillcat_rescan_disagreements_total", 0),
        }
        result["memory_after_changes_kib"] = memory_at_rest(server.pid, FALLBACK_WALK_S + 1 if exhausted else 1)
        log_text = server.log_tail(20_000)
        result["limit_logged"] = "max_user_watches" in log_text
    finally:
        result["exit"] = server.stop()
    return result


class RaisedWatchLimit:
    """Raises fs.inotify.max_user_watches to at least `needed` for the run (as root), and puts the
    old value back afterwards. Raising never hurts another process; lowering it again is safe
    because this run's watches are gone by then."""

    def __init__(self, needed: int) -> None:
        self.needed = needed
        self.old: int | None = None

    def __enter__(self) -> "RaisedWatchLimit":
        current = int(WATCH_LIMIT.read_text())
        if current < self.needed:
            if os.geteuid() != 0:
                raise BenchError(f"fs.inotify.max_user_watches is {current}, below the {self.needed} needed; "
                                 "run as root or raise it: sysctl fs.inotify.max_user_watches=1048576")
            WATCH_LIMIT.write_text(f"{self.needed}\n")
            self.old = current
            log(f"raised fs.inotify.max_user_watches from {current} to {self.needed} for the run")
        return self

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            WATCH_LIMIT.write_text(f"{self.old}\n")
            log(f"put fs.inotify.max_user_watches back to {self.old}")


def measure(binary: Path, sizes: list[int], count: int, exhausted: bool = True, cpu_requests: int | None = None) -> dict:
    if not binary.is_file():
        raise BenchError(f"no binary at {binary}")
    if exhausted and not os.access(UNSHARE, os.X_OK):
        raise BenchError(f"{UNSHARE} is needed to run a server with its own limit on watches (util-linux)")
    work = Path(tempfile.mkdtemp(prefix="skillcat-scale-"))
    results: dict = {"sizes": {}}
    try:
        for skills in sizes:
            requests = cpu_requests or max(5, min(2000, 2_000_000 // skills))
            # Each skill folder, a tenth of them with references/, the teams: room to spare.
            with RaisedWatchLimit(max(524_288, 4 * skills)):
                log(f"scale: {skills:,} skills")
                results["sizes"][str(skills)] = measure_size(binary, work, skills, count, False, requests)
                if exhausted and skills >= 100_000:
                    log(f"scale: {skills:,} skills, watch limit exhausted")
                    results["sizes"][f"{skills}_exhausted"] = measure_size(
                        binary, work, skills, max(6, count // 5), True, requests)
            shutil.rmtree(work / f"tree-{skills}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def compare(binaries: list[Path], sizes: list[int], count: int, rounds: int) -> dict:
    """Each size's tree served by each binary in turn, `rounds` times, on the same tree (the limit
    on watches raised): builds compared on one machine within minutes, so that the load of a
    shared machine weighs on both alike. Results by size, then `binary#round`."""
    for binary in binaries:
        if not binary.is_file():
            raise BenchError(f"no binary at {binary}")
    work = Path(tempfile.mkdtemp(prefix="skillcat-scale-"))
    results: dict = {"sizes": {}}
    try:
        for skills in sizes:
            requests = max(5, min(2000, 2_000_000 // skills))
            runs: dict = {}
            with RaisedWatchLimit(max(524_288, 4 * skills)):
                for round_ in range(rounds):
                    for index, binary in enumerate(binaries):
                        log(f"compare: {skills:,} skills, {binary}, round {round_ + 1}")
                        runs[f"{binary}#{round_ + 1}"] = measure_size(
                            binary, work, skills, count, False, requests, tag=f"b{index}r{round_}")
            results["sizes"][str(skills)] = runs
            shutil.rmtree(work / f"tree-{skills}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, required=True)
    parser.add_argument("--sizes", default="200,10000,100000")
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--no-exhausted", action="store_true")
    parser.add_argument("--baseline", type=Path,
                        help="another build: serve each tree with it and with --binary in turn, --rounds times")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.baseline:
        result = compare([args.baseline, args.binary], sizes, args.changes, args.rounds)
        for size, runs in result["sizes"].items():
            for run, measured in runs.items():
                latency = measured["changes"]["latency_ms"] or {}
                print(f"{int(size):>7,} skills  {run}: ready {measured['ready_ms']:,.0f} ms "
                      f"(CPU {measured['cpu_at_ready_ms']:,.0f} ms), first walk "
                      f"{measured['cold_scan_ms']:,.0f} ms, rescan mean {measured['rescans']['mean_ms'] or 0:.1f} ms, "
                      f"visible p50 {latency.get('p50', 0):.0f} ms p99 {latency.get('p99', 0):.0f} ms, "
                      f"VmRSS {measured['memory_kib']['VmRSS'] / 1024:.1f} MiB, after the changes "
                      f"{measured['memory_after_changes_kib']['VmRSS'] / 1024:.1f} MiB at rest", file=sys.stderr)
    else:
        result = measure(args.binary, sizes, args.changes, not args.no_exhausted)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
