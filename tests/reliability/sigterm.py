"""SIGTERM under load: the server is stopped while many requests are in flight.

Load, all with the bearer token, each request with its own `x-request-id`:
- SHORT clients issue short requests of every route (half on keep-alive connections, half on a new
  connection each);
- UPLOADERS send `POST /skills/big-N/load` (a 3.5 MB skill, token_limit 100000) with a body they
  trickle over UPLOAD_SECONDS: the server starts such a request at its headers and cannot answer
  before the body is complete;
- DOWNLOADERS fetch the 3.5 MB contents and 400 kB loads of the big skills and read them at about
  1.6 MB/s (the kernel's socket buffers may hold much of such a body, so these test that a
  response is complete more than that the server waits);
- EVENT_STREAMS `/events` streams are held open.
The server logs, at debug level, "started processing request" with the request's id. The server
gets SIGTERM once the load has run LOAD_SECONDS and every uploader's current request has been
started by the server and still has at least a third of its body to send (so that each is in
flight inside the server for a second or more after SIGTERM, however slowly a busy machine runs
the test); the clients keep going until the server has exited.

Definitions:
- A request is *accepted* when the server started processing it: its id is in a "started
  processing request" log line. Nothing else counts as accepted: a request written to an idle
  keep-alive connection that the server closes at shutdown, or to a connection still in the
  listen backlog, was never read, and HTTP/1.1 lets a client retry it (RFC 9112, 9.3.1).
- A request *failed* when the client did not get a complete response: a connection error, or a
  body shorter than its Content-Length or chunked framing.
- A request is *refused* when it failed without being accepted.

What must hold:
1. before SIGTERM, no request fails;
2. every accepted request gets a complete response with a correct body (tags of catalogs and
   manifests, contents byte for byte, loads a prefix of the skill), and no 5xx but `/readyz`'s
   503 `shutting-down`;
3. a refusal happens only once shutdown has started: it is observed after SIGTERM was sent;
4. every event stream gets its first event, and ends cleanly (the chunked body's last chunk,
   not a dropped connection) within STREAM_END_LIMIT of SIGTERM, having received nothing odd;
5. the server logs "all connections closed" (no connection was cut by the grace period) and exits
   with status 0 within 10 s of SIGTERM, and a connection to its port is refused afterwards;
6. the test proves something: at least MIN_IN_FLIGHT accepted requests began before SIGTERM and
   completed after it, every uploader's among them.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import harness
from harness import CheckFailed, Server

SHORT = 40
UPLOADERS = 6
DOWNLOADERS = 4
EVENT_STREAMS = 6
LOAD_SECONDS = 4.0
SMALL_SKILLS = 30
BIG_SKILLS = 4
BIG_BYTES = 3_500_000
# Within the server's body deadline (3 s) with room to spare on a busy machine: a body slower
# than that is answered 408.
UPLOAD_SECONDS = 1.5
UPLOAD_PIECES = 30
# SIGTERM waits (at most this long past LOAD_SECONDS) for the uploads to be in flight.
IN_FLIGHT_WAIT = 20.0
READ_CHUNK = 64 * 1024
READ_PAUSE = 0.04
RECEIVE_BUFFER = 32 * 1024
EXIT_LIMIT = 10.0
STREAM_END_LIMIT = 2.0
MIN_IN_FLIGHT = 10


@dataclass
class Attempt:
    id: str
    kind: str
    method: str
    path: str
    fresh_connection: bool
    began: float
    sent: float | None = None
    finished: float | None = None
    status: int | None = None
    error: str | None = None
    failed_at: float | None = None
    problem: str | None = None


class Tree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.contents: dict[str, str] = {}
        rng = random.Random(7)
        for index in range(SMALL_SKILLS):
            self.add(f"small-{index:02d}", "".join(rng.choice("abcdefgh \n") for _ in range(rng.randrange(100, 5000))))
        for index in range(BIG_SKILLS):
            line = f"big skill {index}: a long body for slow transfers\n"
            self.add(f"big-{index}", line * (BIG_BYTES // len(line)))

    def add(self, name: str, body: str) -> None:
        text = harness.skill_md(name, f"the {name} skill", body)
        harness.write_skill(self.root / name, text)
        self.contents[name] = text


class SmallWindowConnection(http.client.HTTPConnection):
    """A small receive buffer, so that a slowly read body is not taken in whole by the client's
    kernel at once."""

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        self.sock.settimeout(self.timeout)
        self.sock.connect((self.host, self.port))


class Client(threading.Thread):
    """Issues requests of one kind until told to stop, recording every attempt."""

    def __init__(
        self, kind: str, index: int, server: Server, tree: Tree, stop: threading.Event, fresh: bool
    ) -> None:
        super().__init__(name=f"{kind}-{index}", daemon=True)
        # The request being uploaded and how many pieces of its body are still to be sent.
        self.uploading: tuple[str, int] | None = None
        self.kind = kind
        self.server = server
        self.tree = tree
        self.stop_event = stop
        self.fresh = fresh
        self.rng = random.Random(self.name)
        self.attempts: list[Attempt] = []
        self.connection: http.client.HTTPConnection | None = None

    def next_request(self) -> tuple[str, str, dict, bytes | None]:
        rng = self.rng
        json_type = {"Content-Type": "application/json"}
        big = f"big-{rng.randrange(BIG_SKILLS)}"
        if self.kind == "upload":
            # Valid JSON padded with whitespace, so that it can be sent in pieces over time.
            return "POST", f"/skills/{big}/load", json_type, b'{"token_limit": 100000}' + b" " * 2000
        if self.kind == "download":
            if rng.random() < 0.5:
                return "GET", f"/skills/{big}/content", {}, None
            return "POST", f"/skills/{big}/load", json_type, b'{"token_limit": 100000}'
        name = f"small-{rng.randrange(SMALL_SKILLS):02d}"
        choice = rng.randrange(9)
        if choice == 0:
            return "GET", "/skills", {"Accept-Encoding": rng.choice(["gzip", "identity"])}, None
        if choice == 1:
            return "GET", f"/skills/{name}", {}, None
        if choice == 2:
            return "GET", f"/skills/{name}/content", {}, None
        if choice == 3:
            return "POST", f"/skills/{name}/load", json_type, b'{"token_limit": 50}'
        if choice == 4:
            return "GET", "/manifest", {"Accept-Encoding": rng.choice(["gzip", "identity"])}, None
        return "GET", rng.choice(["/healthz", "/readyz", "/metrics", "/skills"]), {}, None

    def run(self) -> None:
        serial = 0
        while not self.stop_event.is_set():
            serial += 1
            method, path, headers, body = self.next_request()
            attempt = Attempt(f"{self.name}-{serial}", self.kind, method, path, self.fresh, time.monotonic())
            self.attempts.append(attempt)
            self.attempt(attempt, headers, body)
            if attempt.error is not None:
                time.sleep(0.02)

    def attempt(self, attempt: Attempt, headers: dict, body: bytes | None) -> None:
        if self.connection is None or self.fresh:
            connection_class = SmallWindowConnection if self.kind == "download" else http.client.HTTPConnection
            self.connection = connection_class(self.server.host, self.server.port, timeout=30)
        sent = {**self.server.auth, **headers, "x-request-id": attempt.id}
        try:
            if self.kind == "upload":
                self.trickle(attempt, sent, body or b"")
            else:
                self.connection.request(attempt.method, attempt.path, body=body, headers=sent)
            attempt.sent = time.monotonic()
            response = self.connection.getresponse()
            attempt.status = response.status
            data = self.read(response)
            attempt.finished = time.monotonic()
            received = {key.lower(): value for key, value in response.getheaders()}
            attempt.problem = self.check(attempt, harness.Response(response.status, received, data))
        except (OSError, http.client.HTTPException) as error:
            attempt.failed_at = time.monotonic()
            attempt.error = type(error).__name__
            self.connection.close()
            self.connection = None
        if self.fresh and self.connection is not None:
            self.connection.close()

    def trickle(self, attempt: Attempt, headers: dict, body: bytes) -> None:
        connection = self.connection
        connection.putrequest(attempt.method, attempt.path, skip_accept_encoding=True)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            connection.putheader(name, value)
        connection.endheaders()
        piece = -(-len(body) // UPLOAD_PIECES)
        offsets = range(0, len(body), piece)
        try:
            for sent, offset in enumerate(offsets):
                self.uploading = (attempt.id, len(offsets) - sent)
                time.sleep(UPLOAD_SECONDS / UPLOAD_PIECES)
                connection.send(body[offset : offset + piece])
        finally:
            self.uploading = None

    def read(self, response: http.client.HTTPResponse) -> bytes:
        if self.kind != "download":
            return response.read()
        parts = []
        while chunk := response.read(READ_CHUNK):
            parts.append(chunk)
            time.sleep(READ_PAUSE)
        return b"".join(parts)

    def check(self, attempt: Attempt, response: harness.Response) -> str | None:
        """What is wrong with a complete response, if anything."""
        path, status = attempt.path, response.status
        if path == "/readyz" and status == 503:
            kind = json.loads(response.body).get("type")
            return None if kind == "urn:skillcat:problem:shutting-down" else f"/readyz 503 {kind}"
        if status != 200:
            return f"{attempt.method} {path}: {status} {response.body[:200]!r}"
        try:
            if path == "/skills":
                harness.check_listing(harness.identity_body(response), harness.identity_tag(response))
            elif path == "/manifest":
                harness.check_manifest(harness.identity_body(response), harness.identity_tag(response))
            elif path.endswith("/content"):
                expected = self.tree.contents[path.split("/")[2]].encode()
                if hashlib.sha256(response.body).digest() != hashlib.sha256(expected).digest():
                    return f"{path}: {len(response.body)} bytes, not the skill's content"
            elif path.endswith("/load"):
                result = json.loads(response.body)
                if not self.tree.contents[result["name"]].startswith(result["content"]) or not result["content"]:
                    return f"{path}: the loaded content is not a prefix of the skill's"
            elif path.startswith("/skills/"):
                harness.check_entry(path.split("/")[2], response.body, response.header("etag"))
        except (CheckFailed, ValueError, KeyError) as error:
            return f"{path}: {error}"
        return None


def uploads_in_flight(server: Server, uploaders: list[Client], deadline: float) -> bool:
    """Waits until every uploader is sending a request the server has started, with at least a
    third of its body still to send."""
    while time.monotonic() < deadline:
        started = server.started_request_ids()
        states = [uploader.uploading for uploader in uploaders]
        if all(state and state[0] in started and state[1] >= UPLOAD_PIECES // 3 for state in states):
            return True
        time.sleep(0.02)
    return False


def main() -> int:
    args = harness.parse_arguments(harness.argument_parser(__doc__))

    workdir = Path(tempfile.mkdtemp(prefix="skillcat-sigterm-"))
    root = workdir / "skills"
    root.mkdir()
    tree = Tree(root)
    failures: list[str] = []
    stop = threading.Event()
    server = Server(args.binary, [root], workdir, rust_log="info,skillcat::router=debug,tower_http=debug")
    with server:
        print(f"sigterm: server pid {server.pid} on {server.host}:{server.port}; {SHORT} clients of short requests "
              f"(half on a new connection each), {UPLOADERS} uploads trickled over {UPLOAD_SECONDS} s, "
              f"{DOWNLOADERS} slow downloads of {BIG_BYTES / 1e6:.1f} MB, {EVENT_STREAMS} event streams; "
              f"SIGTERM after {LOAD_SECONDS:.0f} s or more", flush=True)
        streams = [harness.EventStream(server, name=f"events-{index}") for index in range(EVENT_STREAMS)]
        for stream in streams:
            stream.start()
        for stream in streams:
            if not stream.wait_for_events(1, 10):
                failures.append(f"{stream.name}: no first event ({stream.outcome})")
        load_started = time.monotonic()
        clients = [Client("short", index, server, tree, stop, fresh=index % 2 == 1) for index in range(SHORT)]
        uploaders = [Client("upload", index, server, tree, stop, fresh=False) for index in range(UPLOADERS)]
        clients += uploaders
        clients += [Client("download", index, server, tree, stop, fresh=False) for index in range(DOWNLOADERS)]
        for client in clients:
            client.start()
        time.sleep(max(0.0, load_started + LOAD_SECONDS - time.monotonic()))
        if not uploads_in_flight(server, uploaders, time.monotonic() + IN_FLIGHT_WAIT):
            failures.append(f"the uploads were not all in flight at once within {IN_FLIGHT_WAIT:.0f} s")
        sigterm_at = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            code = server.process.wait(EXIT_LIMIT + 5)
        except subprocess.TimeoutExpired:
            code = None
        exited_at = time.monotonic()
        time.sleep(0.5)
        stop.set()
        for client in clients:
            client.join(30)
        for stream in streams:
            stream.join(5)
        refused_after = harness.free_port_refused(server.host, server.port)
        lines = server.log_lines()
        accepted = server.started_request_ids()

    exit_seconds = exited_at - sigterm_at
    attempts = [attempt for client in clients for attempt in client.attempts]
    early = [a for a in attempts if a.failed_at is not None and a.failed_at < sigterm_at]
    for attempt in early[:20]:
        failures.append(f"{attempt.id} {attempt.method} {attempt.path}: {attempt.error} before SIGTERM")
    accepted_attempts = [a for a in attempts if a.id in accepted]
    for attempt in accepted_attempts:
        if attempt.error is not None:
            failures.append(f"accepted {attempt.id} {attempt.method} {attempt.path} failed: {attempt.error} "
                            f"{attempt.failed_at - sigterm_at:+.3f} s after SIGTERM")
        elif attempt.problem is not None:
            failures.append(f"accepted {attempt.id}: {attempt.problem}")
    unlogged = [a for a in attempts if a.status is not None and a.id not in accepted]
    for attempt in unlogged[:10]:
        failures.append(f"{attempt.id} {attempt.path}: answered {attempt.status} but never logged as started")
    refused = [a for a in attempts if a.error is not None and a.id not in accepted]
    kinds: dict[str, int] = {}
    for attempt in refused:
        key = f"{attempt.error} ({'new connection' if attempt.fresh_connection else 'keep-alive'})"
        kinds[key] = kinds.get(key, 0) + 1
    raced = [a for a in refused if a.sent is not None and a.sent < sigterm_at]
    in_flight = [a for a in accepted_attempts if a.began < sigterm_at and a.finished and a.finished > sigterm_at]
    by_kind = {kind: sum(1 for a in in_flight if a.kind == kind) for kind in ("short", "upload", "download")}
    accepted_after = [a for a in accepted_attempts if a.began > sigterm_at]
    last_finish = max((a.finished for a in in_flight), default=sigterm_at)

    for stream in streams:
        ended = None if stream.ended is None else stream.ended - sigterm_at
        if stream.outcome != "clean":
            failures.append(f"{stream.name}: ended {stream.outcome}")
        elif ended is None or not 0 <= ended <= STREAM_END_LIMIT:
            failures.append(f"{stream.name}: ended {ended} s after SIGTERM")
        failures.extend(f"{stream.name}: {oddity}" for oddity in stream.oddities)
    messages = [line.get("message") for line in lines]
    if "all connections closed" not in messages:
        shutdown_lines = [m for m in messages if "shut" in str(m) or "grace" in str(m) or "closed" in str(m)]
        failures.append(f"the server did not log 'all connections closed': {shutdown_lines}")
    errors, _ = harness.log_problems(lines)
    failures.extend(f"server log: {json.dumps(line)[:300]}" for line in errors)
    if code != 0:
        failures.append(f"exit status {code}")
    if exit_seconds > EXIT_LIMIT:
        failures.append(f"exited {exit_seconds:.2f} s after SIGTERM (limit {EXIT_LIMIT:.0f} s)")
    if not refused_after:
        failures.append("a connection to the port was not refused after the exit")
    if len(in_flight) < MIN_IN_FLIGHT or by_kind["upload"] < UPLOADERS:
        failures.append(f"too little in flight at SIGTERM: {len(in_flight)} requests, {by_kind['upload']} uploads")

    statuses: dict[str, int] = {}
    for attempt in accepted_attempts:
        route = attempt.path.split("/")[1] if not attempt.path.startswith("/skills/") else (
            "skills/{name}/" + attempt.path.split("/")[3] if attempt.path.count("/") == 3 else "skills/{name}")
        key = f"{attempt.method} /{route} {attempt.status if attempt.error is None else attempt.error}"
        statuses[key] = statuses.get(key, 0) + 1
    print(f"SIGTERM sent {sigterm_at - load_started:.2f} s after the load started")
    print(f"requests: {len(attempts)} attempted, {len(accepted_attempts)} accepted, {len(refused)} refused "
          f"(never started); failures before SIGTERM: {len(early)}")
    print("accepted, by route and outcome:")
    for key, count in sorted(statuses.items()):
        print(f"  {key}: {count}")
    print(f"in flight at SIGTERM (began before, completed after): {len(in_flight)} {by_kind}; the last completed "
          f"{last_finish - sigterm_at:.2f} s after SIGTERM; {len(accepted_after)} accepted requests began after "
          f"SIGTERM was sent (before the server acted on it)")
    print(f"refusals by kind: {kinds}; {len(raced)} of them were written to an idle keep-alive connection before "
          f"SIGTERM and closed unread by the shutdown")
    print(f"event streams: {[s.events for s in streams]} events; ended "
          f"{[None if s.ended is None else round(s.ended - sigterm_at, 3) for s in streams]} s after SIGTERM: "
          f"{sorted({s.outcome for s in streams})}")
    print(f"server: exit status {code}, {exit_seconds:.2f} s after SIGTERM; port refused afterwards: {refused_after}")
    return harness.verdict("sigterm", failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
