"""Helpers shared by the benchmarks: the machine, builds, processes, HTTP and memory.

Standard library only. Starting servers, writing skills and files, and free ports come from
tests/support/skillcat_support.py, shared with the Python tests; the benchmarks import them from
here.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import platform
import pwd
import grp
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))
from skillcat_support import Process, Server, ServerError, free_port, skill_md, write_atomic  # noqa: E402,F401


class BenchError(Exception):
    """A benchmark could not run (as opposed to running and missing its target)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the machine -------------------------------------------------------------------------------


def keep_or_remove(work: Path, keep: bool, result: dict) -> None:
    """After a run: its work directory named in the result when it is kept, removed otherwise."""
    if keep:
        result["work"] = str(work)
    else:
        shutil.rmtree(work, ignore_errors=True)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError):
        pass
    return "unknown"


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def cpu_times() -> tuple[int, int] | None:
    """All CPU time so far and the part of it the hypervisor gave to other machines ("steal"),
    in clock ticks, from /proc/stat; `None` where it cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        ticks = [int(field) for field in fields[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    return sum(ticks), ticks[7] if len(ticks) > 7 else 0


def steal_share(start: tuple[int, int] | None, end: tuple[int, int] | None) -> str:
    """The share of CPU time stolen by the hypervisor between two `cpu_times()` readings: on a
    virtual machine, a load average near zero does not mean the cores were the run's alone."""
    if start is None or end is None or end[0] <= start[0]:
        return "unknown"
    return f"{100 * (end[1] - start[1]) / (end[0] - start[0]):.0f} %"


def command_version(command: list[str]) -> str:
    """The first line a `--version`-style command prints (on stdout or stderr), or "unknown"."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for stream in (result.stdout, result.stderr):
        for line in stream.splitlines():
            if line.strip():
                return line.strip()
    return "unknown"


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=30
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


# --- builds ------------------------------------------------------------------------------------


def target_dir() -> Path:
    try:
        metadata = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        metadata = None
    if metadata is not None and metadata.returncode == 0:
        return Path(json.loads(metadata.stdout)["target_directory"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target if target.is_absolute() else REPO / target


def cargo_build(arguments: list[str], product: str) -> Path:
    """`cargo build --release --locked ARGUMENTS`; the path of `product` under target/release."""
    command = ["cargo", "build", "--release", "--locked", *arguments]
    log(f"building: {' '.join(command)}")
    started = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=REPO)
    except FileNotFoundError:
        raise BenchError("cargo is not installed: install Rust, or pass the built binaries") from None
    if result.returncode != 0:
        raise BenchError(f"{' '.join(command)} failed with exit code {result.returncode}")
    path = target_dir() / "release" / product
    if not path.is_file():
        raise BenchError(f"{' '.join(command)} succeeded but {path} does not exist")
    log(f"  built {path} in {time.perf_counter() - started:.0f} s")
    return path


# --- processes ---------------------------------------------------------------------------------


def current_user_and_group() -> tuple[str, str]:
    return pwd.getpwuid(os.geteuid()).pw_name, grp.getgrgid(os.getegid()).gr_name


def runtime_env(workers: int) -> dict[str, str]:
    """This environment with `workers` runtime threads (TOKIO_WORKER_THREADS) and without RUST_LOG:
    the default filter (info) writes no line per request."""
    env = dict(os.environ, TOKIO_WORKER_THREADS=str(workers))
    env.pop("RUST_LOG", None)
    return env


def memory_of(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def process_tree(pid: int) -> list[int]:
    """`pid` and its direct children (nginx's master and its workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: the fields follow the last ')'.
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            children.append(int(entry.name))
    return [pid, *children]


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time of the processes (all their threads), in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


# --- HTTP --------------------------------------------------------------------------------------


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def request(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float = 30.0,
) -> Response:
    """One request on a new connection, sent with exactly the given headers (plus Host and,
    with a body, Content-Length): no Accept-Encoding unless given."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        return Response(response.status, {name.lower(): value for name, value in response.getheaders()}, data)
    finally:
        connection.close()


def wait_until(ready, timeout: float, what: str, process: Process | None = None) -> float:
    """Calls `ready()` until it is true; the seconds that took. ServerError as soon as `process`
    has exited."""
    started = time.perf_counter()
    while True:
        if process is not None:
            process.check_alive()
        try:
            if ready():
                return time.perf_counter() - started
        except OSError:
            pass
        if time.perf_counter() - started > timeout:
            raise BenchError(f"{what} within {timeout:.0f} s")
        time.sleep(0.01)


# --- numbers -----------------------------------------------------------------------------------


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def which(name: str, *extra_dirs: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in extra_dirs:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None
