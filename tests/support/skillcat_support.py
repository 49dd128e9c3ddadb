"""What the Python tests and the benchmarks share about driving skillcat: starting `skillcat serve`
(or any other server) and waiting until it is ready, keeping its log, writing skills and files
the way a live server must see them, and free ports.

Used by the browser tests (tests/browser), the nagents integration's tests
(integrations/nagents/tests), the reliability suite (tests/reliability) and the benchmarks
(bench/); each puts this folder on sys.path itself. Standard library only: the benchmarks and the
reliability suite's parts run on whatever Python 3 starts them, and nothing here may depend on
what a virtual environment happens to hold.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# How often a start polls the log and the readiness probe: fine enough for the benchmarks, which
# report how long a start took.
POLL_SECONDS = 0.01


class ServerError(RuntimeError):
    """A process did not start, exited, or was not ready in time; the message ends with the tail
    of its log."""


# --- files -------------------------------------------------------------------------------------


def write_atomic(path: Path, content: str | bytes) -> None:
    """Writes `content` (text as UTF-8, byte for byte) beside `path` and renames it over it, as git
    and most editors save a file, so that a server scanning the folder never reads half of it.
    Makes the folders it needs. The temporary file is hidden (a leading dot): the server serves
    no hidden file of a skill."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(content.encode() if isinstance(content, str) else content)
    os.replace(temporary, path)


def skill_md(name: str | None, description: str, body: str = "Body.\n") -> str:
    """A SKILL.md with that frontmatter; without a `name` line when `name` is None (the folder then
    names the skill)."""
    name_line = "" if name is None else f"name: {name}\n"
    return f"---\n{name_line}description: {description}\n---\n{body}"


def write_skill(folder: Path, text: str) -> Path:
    """Writes `folder`/SKILL.md atomically (see write_atomic); its path."""
    path = Path(folder) / "SKILL.md"
    write_atomic(path, text)
    return path


def free_port() -> int:
    """A loopback TCP port nothing listens on at the moment: for a program that must be told its
    port, or an address that must refuse connections. Another process may take it before it is
    used; a `Server` on port 0 has no such race."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- processes ---------------------------------------------------------------------------------


class Process:
    """A program this run started, its output (stdout and stderr together) kept: written by the
    program itself to `log_path` when one is given (nothing held in memory, and readable while it
    runs, as long runs and log-reading tests want), else kept in memory by a thread that drains
    the pipe (a full pipe would stop the program). Its standard input is empty."""

    def __init__(
        self,
        command: Sequence[str | Path],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.command = [str(part) for part in command]
        self.name = name or Path(self.command[0]).name
        self.log_path = log_path
        self._lines: list[str] = []
        self._drain: threading.Thread | None = None
        with open(log_path, "wb") if log_path is not None else contextlib.nullcontext() as log_file:
            self.popen = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log_file or subprocess.PIPE,
                stderr=subprocess.STDOUT, env=env, preexec_fn=preexec_fn,
            )
        if log_path is None:
            self._drain = threading.Thread(target=self._read_pipe, name=f"{self.name} log", daemon=True)
            self._drain.start()
        # When the program was started, for what waits on it to say how long that took.
        self.spawned = time.perf_counter()

    def _read_pipe(self) -> None:
        assert self.popen.stdout is not None
        with self.popen.stdout:
            for line in self.popen.stdout:
                self._lines.append(line.decode("utf-8", "replace"))

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_text(self) -> str:
        """Everything the program has written so far."""
        if self.log_path is None:
            return "".join(self._lines)
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, limit: int = 3000) -> str:
        return self.log_text()[-limit:]

    def log_records(self) -> list[dict]:
        """The log's lines as JSON objects (`--log-format json`); a line that is not JSON (a panic's
        message, say) as {"level": "RAW", "message": the line}. Lines end at "\n" alone (a JSON
        string may hold U+2028, which str.splitlines would cut at); while the program runs, a last
        line still being written is left for the next call."""
        lines = self.log_text().split("\n")
        if self.popen.poll() is None or not lines[-1]:
            lines.pop()
        records = []
        for line in lines:
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            records.append(record if isinstance(record, dict) else {"level": "RAW", "message": line})
        return records

    def check_alive(self) -> None:
        """Raises ServerError, with the tail of the log, once the program has exited."""
        if self.popen.poll() is not None:
            raise self._error(f"exited with status {self.popen.returncode}")

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM, and up to `grace` seconds for the program to exit: its exit status, or None when
        it had to be killed."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.popen.returncode

    def kill(self) -> None:
        """SIGKILL, if the program still runs, and its exit reaped."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()

    def _error(self, what: str) -> ServerError:
        """A ServerError: this program `what`, with its command and the tail of its log (once it has
        exited, after the drain has read the pipe to its end: the last lines say why)."""
        if self._drain is not None and self.popen.poll() is not None:
            self._drain.join(5)
        return ServerError(f"{self.name} {what}: {' '.join(self.command)}\n{self.log_tail()}")


class Server(Process):
    """`skillcat serve ARGUMENTS` (after `wrapper`, e.g. unshare or valgrind), started and ready:
    `GET /readyz` has answered 200 within `timeout` seconds, each probe given `probe_timeout` (or
    503 `catalog-unavailable`: started on files that give no good catalog, as some tests want).
    On any failure to get there the server is stopped and ServerError raised.

    `listen` is port 0 by default: the server binds a port of its own choosing and says which in
    its log's `serving` line, so no other process can take the port between a probe and the bind.
    Finding that line needs the JSON log (`--log-format json` among the arguments) and
    skillcat::server's info lines; a caller whose log filter hides them (RUST_LOG=warn) passes an
    address it chose with free_port() instead."""

    def __init__(
        self,
        binary: Path | str,
        arguments: Sequence[str | Path] = (),
        *,
        listen: str = "127.0.0.1:0",
        wrapper: Sequence[str | Path] = (),
        timeout: float = 60.0,
        probe_timeout: float = 2.0,
        name: str = "skillcat",
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        host, _, port = listen.rpartition(":")
        self.host = host
        self.port = int(port)
        command = [*wrapper, binary, "serve", "--listen", listen, *arguments]
        super().__init__(command, name=name, env=env, log_path=log_path, preexec_fn=preexec_fn)
        deadline = self.spawned + timeout
        try:
            if self.port == 0:
                self._read_address(deadline, timeout)
            self._wait_ready(deadline, timeout, probe_timeout)
        except BaseException:
            self.stop()
            raise
        # Seconds from the start to the first 200 of /readyz: the cold start.
        self.ready_after = time.perf_counter() - self.spawned

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _read_address(self, deadline: float, timeout: float) -> None:
        while True:
            for record in self.log_records():
                if record.get("message") == "serving" and record.get("address"):
                    host, _, port = record["address"].rpartition(":")
                    self.host, self.port = host, int(port)
                    return
            self.check_alive()
            if time.perf_counter() > deadline:
                raise self._error(
                    f"logged no `serving` line with its address within {timeout:.0f} s (that needs "
                    "--log-format json and skillcat::server's info lines)"
                )
            time.sleep(POLL_SECONDS)

    def _wait_ready(self, deadline: float, timeout: float, probe_timeout: float) -> None:
        while True:
            self.check_alive()
            connection = http.client.HTTPConnection(self.host, self.port, timeout=probe_timeout)
            try:
                connection.request("GET", "/readyz")
                response = connection.getresponse()
                # Ready; or started on files that give no good catalog (a source failed), which is
                # no readiness (the catalog routes answer 503 too) but what tests of it wait for.
                if response.status == 200 or b"catalog-unavailable" in response.read():
                    return
            except (OSError, http.client.HTTPException):
                pass
            finally:
                connection.close()
            if time.perf_counter() > deadline:
                raise self._error(f"was not ready within {timeout:.0f} s")
            time.sleep(POLL_SECONDS)


# --- the tests' servers ------------------------------------------------------------------------


def directory_arguments(
    dirs: Sequence[Path],
    *,
    builtin: bool = False,
    token_file: Path | None = None,
    rescan_interval: int | None = 0,
) -> list[str]:
    """`serve`'s arguments for a test: these directory sources in precedence order, the builtin
    skills only when asked for, JSON logs (a port-0 `Server` reads its address there), the token
    file if any, and the fallback rescan every `rescan_interval` seconds: by default none, so that
    a test sees a change through the watcher alone; None keeps the server's default."""
    arguments = ["--log-format", "json"]
    if not builtin:
        arguments.append("--no-builtin")
    if rescan_interval is not None:
        arguments += ["--rescan-interval", str(rescan_interval)]
    if token_file is not None:
        arguments += ["--token-file", str(token_file)]
    for directory in dirs:
        arguments += ["--dir", str(directory)]
    return arguments


def skillcat_binary() -> Path:
    """The server binary the tests drive: $SKILLCAT_BIN, else the debug build, made with
    `cargo build` (into $CARGO_TARGET_DIR or target/)."""
    configured = os.environ.get("SKILLCAT_BIN")
    if configured:
        binary = Path(configured)
    else:
        subprocess.run(["cargo", "build", "--locked", "--bin", "skillcat"], cwd=REPO, check=True)
        target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
        binary = (target if target.is_absolute() else REPO / target) / "debug" / "skillcat"
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise ServerError(f"no skillcat binary at {binary}")
    return binary


class Servers:
    """The servers one test starts over its trees (`start`), of the class `kind`, each on a port of
    its own; all stopped by `close` (a pytest fixture yields `start` and closes after the test)."""

    def __init__(self, binary: Path, kind: type[Server] = Server) -> None:
        self.binary = binary
        self.kind = kind
        self.started: list[Server] = []

    def start(self, *dirs: Path, token_file: Path | None = None, builtin: bool = False) -> Server:
        """A ready server over the directories `dirs` (and that bearer-token file, the builtin
        skills), without the periodic rescan."""
        server = self.kind(self.binary, directory_arguments(dirs, builtin=builtin, token_file=token_file))
        self.started.append(server)
        return server

    def close(self) -> None:
        for server in self.started:
            server.stop()
