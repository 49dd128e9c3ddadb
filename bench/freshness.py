#!/usr/bin/env python3
"""Freshness of the live catalog: how long after a file change GET /skills shows it.

Builds a tree of N skills in a temporary directory, starts the release binary on it
(`skillcat serve`), waits for /readyz, then makes changes one at a time, cycling through
"edit a description", "add a skill" and "delete a skill". For each change it takes the time
just after the write (the rename or delete) returns and polls GET /skills in a tight loop on
one keep-alive connection (conditional on the last ETag, so an unchanged catalog costs a
304) until the catalog shows the change. It prints p50/p90/p99/max in milliseconds, the
machine, the server's scan metrics and how long the server took to exit on SIGTERM.

Exit status: 0 when p99 <= --max-p99-ms, every change was seen, the final catalog is right and
the server exited within 10 s of SIGTERM; 1 otherwise; 2 when the setup failed.

Standard library only. Example:

    python3 bench/freshness.py                      # 200 skills, 100 changes
    python3 bench/freshness.py --skills 10000       # uses a --config file (max_entries raised)
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Server, ServerError, free_port, skill_md, write_atomic

REPO = Path(__file__).resolve().parent.parent
# skillcat's default bound on the entries (folders and files) one directory source may walk.
DEFAULT_MAX_ENTRIES = 10_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def skill_text(description: str, body: str) -> str:
    # No `name` in the frontmatter: the folder names the skill.
    return skill_md(None, description, f"{body}\n")


def build_tree(tree: Path, count: int) -> list[str]:
    names = []
    for index in range(count):
        name = f"skill-{index:05d}"
        folder = tree / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_text(f"Skill {index}, version 0.", f"Body of {name}.\n"), "utf-8")
        names.append(name)
    return names


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return f"nproc {usable}, {model}, {platform.system()} {platform.release()}"


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


class Catalog:
    """GET /skills on one keep-alive connection, conditional on the last tag."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.etag: str | None = None
        self.body: dict | None = None

    def poll(self) -> tuple[bool, float]:
        """One request: whether the catalog changed, and when its answer arrived."""
        headers = {"If-None-Match": self.etag} if self.etag else {}
        self.connection.request("GET", "/skills", headers=headers)
        response = self.connection.getresponse()
        arrived = time.perf_counter()
        data = response.read()
        if response.status == 304:
            return False, arrived
        if response.status != 200:
            raise RuntimeError(f"GET /skills answered {response.status}: {data[:300]!r}")
        self.etag = response.getheader("ETag")
        self.body = json.loads(data)
        return True, arrived

    def skills(self) -> dict[str, dict]:
        assert self.body is not None
        return {skill["name"]: skill for skill in self.body["skills"]}

    def wait_for(self, check, deadline: float) -> float | None:
        """Polls until `check(skills)` holds; the arrival time of that answer, or None."""
        while True:
            changed, arrived = self.poll()
            if changed and check(self.skills()):
                return arrived
            if arrived > deadline:
                return None

    def close(self) -> None:
        self.connection.close()


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def scan_metrics(port: int) -> tuple[int, float]:
    status, body = get(port, "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics answered {status}")
    count, total = 0, 0.0
    for line in body.decode("utf-8").splitlines():
        if line.startswith("skillcat_scan_duration_seconds_count "):
            count = int(line.split()[1])
        elif line.startswith("skillcat_scan_duration_seconds_sum "):
            total = float(line.split()[1])
    return count, total


def build_binary() -> Path:
    log("building the release binary (cargo build --release --locked) ...")
    subprocess.run(["cargo", "build", "--release", "--locked"], cwd=REPO, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / "release" / "skillcat"


class SetupError(Exception):
    """The measurement could not start (no binary, the server failed or was never ready)."""


def measure(binary: Path, skills: int = 200, changes: int = 100, change_timeout: float = 10.0, keep: bool = False) -> dict:
    """Runs the server on a fresh tree of `skills` skills and times `changes` changes.

    Returns the latencies (ms, sorted, and per kind), the server's scan metrics, how it shut
    down and the failures seen; raises SetupError when it could not measure at all."""
    if not binary.is_file():
        raise SetupError(f"no binary at {binary}")

    work = Path(tempfile.mkdtemp(prefix="skillcat-freshness-"))
    tree = work / "tree"
    server_log = work / "server.log"
    log(f"building a tree of {skills} skills in {tree} ...")
    started = time.perf_counter()
    present = build_tree(tree, skills)
    log(f"  built in {time.perf_counter() - started:.1f} s")

    # A port chosen here: RUST_LOG=warn hides the line in which a server on port 0 says its own.
    port = free_port()
    arguments: list[str] = []
    # Folders and files each count as an entry; leave room for the skills the run adds.
    entries = 2 * (skills + changes) + 16
    if entries > DEFAULT_MAX_ENTRIES:
        config = work / "skillcat.toml"
        max_entries = max(100_000, 2 * entries)
        config.write_text(
            f'[[sources]]\nkind = "directory"\nroots = [{json.dumps(str(tree))}]\nmax_entries = {max_entries}\n',
            encoding="utf-8",
        )
        arguments += ["--config", str(config)]
        how = f"--config (max_entries = {max_entries})"
    else:
        arguments += ["--no-builtin", "--dir", str(tree)]
        how = "--dir"
    log(f"starting {binary.name} on 127.0.0.1:{port} with {how}")
    environment = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    failures: list[str] = []
    latencies: dict[str, list[float]] = {"edit": [], "add": [], "delete": []}
    server: Server | None = None
    try:
        try:
            server = Server(binary, arguments, listen=f"127.0.0.1:{port}", timeout=120, probe_timeout=1.0,
                            env=environment, log_path=server_log)
        except ServerError as error:
            raise SetupError(str(error)) from error
        ready = server.ready_after
        log(f"  ready after {ready * 1000:.0f} ms")

        catalog = Catalog(port)
        catalog.wait_for(lambda listed: len(listed) == skills, time.perf_counter() + 30)
        if set(catalog.skills()) != set(present):
            raise SetupError("the first catalog does not list the tree's skills")
        scans_before = scan_metrics(port)

        # The changes: cycle edit -> add -> delete. Edits and deletes walk through the tree in
        # an order that spreads them over it; adds create new folders.
        versions: dict[str, int] = {}
        added = 0
        cursor = 0
        for change in range(changes):
            kind = ("edit", "add", "delete")[change % 3]
            if kind == "edit":
                name = present[(cursor * 7919) % len(present)]
                cursor += 1
                version = versions.get(name, 0) + 1
                versions[name] = version
                description = f"{name}, version {version}."
                write_atomic(tree / name / "SKILL.md", skill_text(description, f"Body of {name}.\n"))
                written = time.perf_counter()
                check = lambda listed, name=name, description=description: (  # noqa: E731
                    name in listed and listed[name]["description"] == description
                )
            elif kind == "add":
                name = f"added-{added:05d}"
                added += 1
                folder = tree / name
                folder.mkdir()
                write_atomic(folder / "SKILL.md", skill_text(f"Added skill {name}.", "New.\n"))
                written = time.perf_counter()
                present.append(name)
                check = lambda listed, name=name: name in listed  # noqa: E731
            else:
                name = present.pop((cursor * 104729) % len(present))
                cursor += 1
                shutil.rmtree(tree / name)
                written = time.perf_counter()
                versions.pop(name, None)
                check = lambda listed, name=name: name not in listed  # noqa: E731
            seen = catalog.wait_for(check, written + change_timeout)
            if seen is None:
                failures.append(f"change {change} ({kind} {name}) not seen within {change_timeout} s")
                log(failures[-1])
                continue
            latencies[kind].append(max(0.0, seen - written) * 1000)

        # The final catalog must be exactly the tree, without diagnostics.
        catalog.wait_for(lambda listed: set(listed) == set(present), time.perf_counter() + 5)
        if set(catalog.skills()) != set(present):
            failures.append("the final catalog does not match the tree")
        if catalog.body and catalog.body.get("diagnostics"):
            failures.append(f"the final catalog has diagnostics: {catalog.body['diagnostics'][:3]}")
        catalog.close()
        scans_after = scan_metrics(port)
    finally:
        # Shut down: SIGTERM, then it must exit within 10 s.
        stopping = time.perf_counter()
        exit_code = server.stop(10) if server is not None else None
        stopped_after = time.perf_counter() - stopping
        if not keep:
            shutil.rmtree(work, ignore_errors=True)

    if exit_code is None:
        failures.append("the server did not exit within 10 s of SIGTERM")
    elif exit_code != 0:
        failures.append(f"the server exited with status {exit_code}")
    everything = sorted(value for values in latencies.values() for value in values)
    summary = {}
    if everything:
        summary = {
            "p50": percentile(everything, 0.50),
            "p90": percentile(everything, 0.90),
            "p99": percentile(everything, 0.99),
            "max": everything[-1],
            "min": everything[0],
            "mean": sum(everything) / len(everything),
        }
    return {
        "skills": skills,
        "changes": changes,
        "how": how,
        "ready_ms": ready * 1000,
        "latencies_ms": everything,
        "by_kind_ms": {kind: sorted(values) for kind, values in latencies.items()},
        "summary_ms": summary,
        "scans_before": scans_before,
        "scans_after": scans_after,
        "exit_code": exit_code,
        "stopped_after_ms": stopped_after * 1000,
        "failures": failures,
        "work": str(work) if keep else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=200, help="skills in the tree (default 200)")
    parser.add_argument("--changes", type=int, default=100, help="changes to time, at least 50 (default 100)")
    parser.add_argument("--binary", type=Path, help="a built skillcat binary (default: build the release binary)")
    parser.add_argument("--max-p99-ms", type=float, default=100.0, help="fail above this p99 (default 100)")
    parser.add_argument("--change-timeout", type=float, default=10.0, help="seconds one change may take to show")
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree and server log")
    args = parser.parse_args()
    if args.changes < 50:
        parser.error("--changes must be at least 50")
    if args.skills < 1:
        parser.error("--skills must be positive")

    binary = args.binary.resolve() if args.binary else build_binary()
    try:
        result = measure(binary, args.skills, args.changes, args.change_timeout, args.keep)
    except SetupError as error:
        log(str(error))
        return 2

    failures = list(result["failures"])
    summary = result["summary_ms"]
    print(f"machine:  {machine()}")
    print(f"tree:     {args.skills} skills, {args.changes} changes ({result['how']}), "
          f"ready after {result['ready_ms']:.0f} ms")
    if summary:
        everything = result["latencies_ms"]
        p99 = summary["p99"]
        print(
            f"freshness (ms, n={len(everything)}): p50 {summary['p50']:.1f}  p90 {summary['p90']:.1f}  "
            f"p99 {p99:.1f}  max {summary['max']:.1f}  min {summary['min']:.1f}  mean {summary['mean']:.1f}"
        )
        for kind, values in result["by_kind_ms"].items():
            if values:
                print(
                    f"  {kind:6} n={len(values):3}  p50 {percentile(values, 0.5):.1f}  "
                    f"p99 {percentile(values, 0.99):.1f}  max {values[-1]:.1f}"
                )
    else:
        p99 = math.inf
        print("freshness: no change was seen")
    scans_before, scans_after = result["scans_before"], result["scans_after"]
    count = scans_after[0] - scans_before[0]
    total = scans_after[1] - scans_before[1]
    mean = f", mean {total / count * 1000:.1f} ms" if count else ""
    print(
        f"scans:    skillcat_scan_duration_seconds count {scans_after[0]} sum {scans_after[1]:.3f} s "
        f"(during the changes: {count} scans, {total:.3f} s{mean})"
    )
    if result["exit_code"] is None:
        print("shutdown: did NOT exit within 10 s of SIGTERM (killed)")
    else:
        print(f"shutdown: exited with status {result['exit_code']} {result['stopped_after_ms']:.0f} ms after SIGTERM")
    if p99 > args.max_p99_ms:
        failures.append(f"p99 {p99:.1f} ms is over --max-p99-ms {args.max_p99_ms:g}")
    for failure in failures:
        print(f"FAIL: {failure}")
    if result["work"]:
        print(f"kept {result['work']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
