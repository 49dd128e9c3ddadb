"""Shared pieces of the reliability suite (standard library only): the server process, skill
trees, one HTTP exchange at a time over http.client, and the checks of entity tags. Starting the
server and writing skills and files come from tests/support/skillcat_support.py, shared with
the other Python tests and the benchmarks."""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import shutil
import os
import re
import resource
import secrets
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))
import skillcat_support  # noqa: E402 - needs the path above
# The suite's parts write their trees with these, as harness.skill_md and so on.
from skillcat_support import skill_md, write_atomic, write_skill  # noqa: E402,F401

DEFAULT_BINARY = REPO / "target" / "debug" / "skillcat"
FALLBACK_DESCRIPTION = "Load with skill(name) for instructions."
TAG = re.compile(r'^"[0-9a-f]{32}"$')


class CheckFailed(Exception):
    """A property of the suite does not hold."""


# --- the server process ------------------------------------------------------------------------


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """A part's command line, described by the first line of its docstring: --binary (the debug
    build by default), and what the part adds."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=DEFAULT_BINARY)
    return parser


def parse_arguments(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The part's arguments, once the binary is known to have `serve --token-file`."""
    args = parser.parse_args()
    require_token_flag(args.binary)
    return args


def require_token_flag(binary: Path) -> None:
    """The suite runs the server with a token file: refuse a binary that predates the flag."""
    usage = subprocess.run([str(binary), "serve", "--help"], capture_output=True, text=True, check=True).stdout
    if "--token-file" not in usage:
        raise CheckFailed(f"{binary} has no `serve --token-file`; rebuild it from the current tree")


def raise_descriptor_limit(needed: int) -> None:
    """Raises this process's soft limit on open descriptors to `needed` (the hard limit at most)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))


class Server:
    """`skillcat serve` on an ephemeral port, with JSON logs in a file and, unless `token` is
    false, a token file with one bearer token."""

    def __init__(
        self,
        binary: Path,
        roots: list[Path],
        workdir: Path,
        rust_log: str = "info",
        env: dict | None = None,
        token: bool = True,
        nofile: int | None = None,
    ) -> None:
        self.binary = binary
        self.extra_env = env or {}
        self.roots = roots
        self.workdir = workdir
        self.rust_log = rust_log
        self.token = secrets.token_urlsafe(24) if token else None
        self.token_file = workdir / "tokens" if token else None
        # The process's limit on open descriptors (soft and hard), when the test sets one.
        self.nofile = nofile
        self.log_path = workdir / "server.log"
        self.served: skillcat_support.Server | None = None
        self.process: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self._started: set[str] = set()
        self._log_offset = 0
        self._log_rest = b""

    def start(self, timeout: float = 30.0) -> None:
        if self.token_file is not None:
            self.token_file.write_text(f"{self.token}\n")
        # The suite's own settings only: none of a developer's SKILLCAT_* variables.
        env = {key: value for key, value in os.environ.items() if not key.startswith("SKILLCAT_")}
        env["RUST_LOG"] = self.rust_log
        env.update(self.extra_env)
        nofile = self.nofile

        def limit_descriptors() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        # The fallback rescan as shipped (rescan_interval None): the suite tests the server as deployed.
        arguments = skillcat_support.directory_arguments(self.roots, token_file=self.token_file, rescan_interval=None)
        try:
            self.served = skillcat_support.Server(
                self.binary, arguments, timeout=timeout, env=env, log_path=self.log_path,
                preexec_fn=limit_descriptors if nofile is not None else None,
            )
        except skillcat_support.ServerError as error:
            raise CheckFailed(str(error)) from error
        self.process = self.served.popen
        self.host, self.port = self.served.host, self.served.port

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}

    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(self, path: str) -> Response:
        connection = self.connection()
        try:
            return exchange(connection, "GET", path, self.auth)
        finally:
            connection.close()

    def log_lines(self) -> list[dict]:
        """The log's lines so far (a line that is not JSON with level RAW)."""
        assert self.served is not None
        return self.served.log_records()

    def started_request_ids(self) -> set[str]:
        """The ids of the requests the server has started processing so far (needs
        RUST_LOG=skillcat::router=debug,tower_http=debug: the request span and its lines), read
        incrementally from the log."""
        with open(self.log_path, "rb") as log:
            log.seek(self._log_offset)
            data = self._log_rest + log.read()
            self._log_offset = log.tell()
        *complete, self._log_rest = data.split(b"\n")
        for raw in complete:
            if b"started processing request" not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            request_id = (line.get("span") or {}).get("request_id")
            if line.get("message") == "started processing request" and request_id:
                self._started.add(request_id)
        return set(self._started)

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        if match is None:
            raise CheckFailed("no VmRSS for the server")
        return int(match.group(1))

    def stop(self, timeout: float = 10.0) -> tuple[int | None, float]:
        """SIGTERM, then the exit status and how long the exit took (None: killed after `timeout`)."""
        assert self.served is not None
        started = time.monotonic()
        code = self.served.stop(timeout)
        return code, time.monotonic() - started

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.served is not None:
            self.served.kill()


def verdict(name: str, failures: list[str], workdir: Path) -> int:
    """Prints the part's verdict; keeps its work folder (server log, tree) only when it failed.
    Returns the exit status."""
    if failures:
        print(f"\n{name.upper()} FAILED: {len(failures)} failures")
        for failure in failures[:50]:
            print(f"  - {failure}")
        print(f"server log and tree kept in {workdir}")
        return 1
    print(f"\n{name} passed")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def log_problems(lines: list[dict]) -> tuple[list[dict], list[dict]]:
    """The server's ERROR lines (a failure) and WARN lines (reported)."""
    errors = [line for line in lines if line.get("level") in ("ERROR", "RAW")]
    warnings = [line for line in lines if line.get("level") == "WARN"]
    return errors, warnings


# --- skill files ---------------------------------------------------------------------------------


def descriptor_of(folder: str, content: str) -> tuple[str, str]:
    """(name, description) of a SKILL.md this suite wrote, as the server derives them. An empty file
    (caught between truncation and write) takes the folder's name and the fallback description."""
    if content == "":
        return folder, FALLBACK_DESCRIPTION
    match = re.match(r"---\nname: (.*)\ndescription: (.*)\n---\n", content)
    if match is None:
        raise CheckFailed(f"content of {folder!r} is not a file this suite wrote: {content[:120]!r}")
    return match.group(1), match.group(2).strip()


def write_in_place(path: Path, text: str) -> None:
    """Truncate and write in one call, as an editor that saves over the file does."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# --- HTTP ----------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    started: float = 0.0
    finished: float = 0.0

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body)


def exchange(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
) -> Response:
    """One request and its complete response (http.client raises on a short body)."""
    started = time.monotonic()
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    received = {name.lower(): value for name, value in response.getheaders()}
    return Response(response.status, received, data, started, time.monotonic())


class Unterminated(Exception):
    """A chunked body whose connection closed before its last chunk."""


def event_lines(response: http.client.HTTPResponse):
    """The lines of a chunked `text/event-stream` body, read off the connection directly: http.client's
    own readline() takes a connection closed mid-body for the end of the body, which is exactly what
    must be told apart here. Returns at the last chunk; raises Unterminated if the connection closes
    before it."""
    if not response.chunked:
        raise CheckFailed("the event stream is not chunked")
    source = response.fp
    pending = b""
    while True:
        size_line = source.readline(1024)
        if not size_line.endswith(b"\n"):
            raise Unterminated(f"closed before the last chunk ({size_line!r})")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            while (trailer := source.readline(1024)) not in (b"\r\n", b"\n"):
                if not trailer:
                    raise Unterminated("closed inside the last chunk's trailer")
            response.close()
            if pending:
                yield pending
            return
        data = source.read(size + 2)
        if len(data) != size + 2:
            raise Unterminated(f"closed inside a chunk ({len(data)} of {size + 2} bytes)")
        pending += data[:size]
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r")


def open_event_stream(server: Server, connection: http.client.HTTPConnection) -> http.client.HTTPResponse:
    """Sends `GET /events` with the server's token on `connection`; the response, its body unread."""
    connection.request("GET", "/events", headers={**server.auth, "Accept": "text/event-stream"})
    return connection.getresponse()


class EventStream(threading.Thread):
    """One `/events` stream opened with the server's token, read on its own thread until it ends.
    Keeps each event's tag (`tags`), the lines that are neither a well-formed catalog event nor a
    comment (`oddities`), when the stream ended (`ended`) and how (`outcome`: "open" while it
    lasts, "clean" at the body's last chunk, else what cut it short)."""

    def __init__(self, server: Server, name: str = "events", timeout: float = 30.0) -> None:
        super().__init__(name=name, daemon=True)
        self.server = server
        self.timeout = timeout
        self.lock = threading.Lock()
        self.got_event = threading.Condition(self.lock)
        self.tags: list[str | None] = []
        self.oddities: list[str] = []
        self.ended: float | None = None
        self.outcome = "open"

    @property
    def events(self) -> int:
        with self.lock:
            return len(self.tags)

    def run(self) -> None:
        connection = self.server.connection(timeout=self.timeout)
        try:
            response = open_event_stream(self.server, connection)
            if response.status != 200:
                self.outcome = f"answered {response.status}"
                return
            for line in event_lines(response):
                if line.startswith(b"data:"):
                    tag = json.loads(line[5:]).get("etag")
                    if tag is None or not TAG.match(tag):
                        self.oddities.append(f"data {line[:100]!r}")
                    with self.lock:
                        self.tags.append(tag)
                        self.got_event.notify_all()
                elif line and not line.startswith((b"event: catalog", b":")):
                    self.oddities.append(f"line {line[:100]!r}")
            self.outcome = "clean"
        except (OSError, http.client.HTTPException, Unterminated, ValueError) as error:
            self.outcome = f"{type(error).__name__}: {error}"
        finally:
            with self.lock:
                self.ended = time.monotonic()
                self.got_event.notify_all()
            connection.close()

    def wait_for_events(self, count: int, timeout: float) -> bool:
        """Whether the stream has carried `count` events within `timeout` (False as soon as it ends
        short of them)."""
        with self.lock:
            self.got_event.wait_for(lambda: len(self.tags) >= count or self.ended is not None, timeout)
            return len(self.tags) >= count


def identity_body(response: Response) -> bytes:
    """The body as the server prepared it, decompressing a gzip answer."""
    if response.header("content-encoding") == "gzip":
        import gzip

        return gzip.decompress(response.body)
    if response.header("content-encoding") not in (None, "identity"):
        raise CheckFailed(f"unexpected content-encoding {response.header('content-encoding')!r}")
    return response.body


# --- entity tags ---------------------------------------------------------------------------------


def identity_tag(response: Response) -> str | None:
    """The tag of the identity representation an answer stands for: a gzip answer has its own tag,
    the identity tag with `-gzip` inside the quotes (src/catalog/snapshot.rs, `GzipBody`)."""
    etag = response.header("etag")
    if response.header("content-encoding") != "gzip":
        return etag
    if etag is None or not etag.endswith('-gzip"'):
        raise CheckFailed(f"a gzip answer's ETag is not a gzip tag: {etag!r}")
    return etag[: -len('-gzip"')] + '"'


def tag_of(*parts: bytes) -> str:
    """The server's tag: the quoted first 128 bits (hex) of SHA-256 over each part prefixed with
    its length as a big-endian u64 (src/catalog/snapshot.rs, `ETag::of`)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return '"' + digest.hexdigest()[:32] + '"'


def check_listing(body: bytes, etag: str | None) -> dict:
    """A 200 of `GET /skills`: the header is the tag of the body without its leading `etag` member
    (the catalog is hashed before its tag is written into it), and the member repeats the header."""
    if etag is None or not TAG.match(etag):
        raise CheckFailed(f"GET /skills: bad ETag {etag!r}")
    prefix = b'{"etag":' + json.dumps(etag).encode() + b","
    if not body.startswith(prefix):
        raise CheckFailed(f"GET /skills: the body does not open with its etag member {etag}: {body[:80]!r}")
    untagged = b"{" + body[len(prefix) :]
    if tag_of(untagged) != etag:
        raise CheckFailed(f"GET /skills: ETag {etag} is not the tag of the body ({tag_of(untagged)})")
    return json.loads(body)


def check_manifest(body: bytes, etag: str | None) -> None:
    if etag is None or tag_of(body) != etag:
        raise CheckFailed(f"GET /manifest: ETag {etag} is not the tag of the body ({tag_of(body)})")


def check_entry(name: str, body: bytes, etag: str | None) -> dict:
    """A 200 of `GET /skills/{name}`: the entry of that skill, whose ETag is the skill's tag."""
    entry = json.loads(body)
    if etag is None or not TAG.match(etag) or entry.get("etag") != etag or entry.get("name") != name:
        raise CheckFailed(f"GET /skills/{name}: ETag {etag} vs entry {entry}")
    return entry


class Registry:
    """What the clients saw, shared by every thread: each skill version listed (name and tag to
    its entry), each content served under a tag, and the contents written to disk."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[tuple[str, str], dict] = {}
        self.contents: dict[tuple[str, str], str] = {}
        self.written: dict[str, set[str]] = {}
        self.failures: list[str] = []

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)

    def wrote(self, folder: str, text: str) -> None:
        with self.lock:
            self.written.setdefault(folder, set()).add(text)

    def listed(self, catalog: dict) -> None:
        with self.lock:
            for entry in catalog["skills"]:
                key = (entry["name"], entry["etag"])
                known = self.entries.setdefault(key, entry)
                if known != entry:
                    self.failures.append(f"one skill tag, two entries: {known} and {entry}")

    def entry(self, name: str, etag: str) -> dict | None:
        with self.lock:
            return self.entries.get((name, etag))

    def served(self, name: str, etag: str, content: str) -> None:
        """One tag always names one content."""
        with self.lock:
            known = self.contents.setdefault((name, etag), content)
            if known != content:
                self.failures.append(f"{name} {etag}: two contents served under one tag")

    def full_content(self, name: str, etag: str) -> str | None:
        with self.lock:
            return self.contents.get((name, etag))

    def was_written(self, folder: str, content: str) -> bool:
        with self.lock:
            return content == "" or content in self.written.get(folder, ())


def free_port_refused(host: str, port: int) -> bool:
    """Whether a connection to the port is refused now."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


@dataclass
class Counter:
    """Thread-safe counts by key."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: dict = field(default_factory=dict)

    def add(self, key, amount: int = 1) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + amount

    def snapshot(self) -> dict:
        with self.lock:
            return dict(self.counts)
