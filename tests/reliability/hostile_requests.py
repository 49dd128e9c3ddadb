"""Hostile requests: requests that would hold the server's capacity. Loopback only; bounded in count
and time; against the debug server with a token file (the requests carry the token, so they reach
the handlers).

What must hold:
1. slow bodies: 1,024 loads that announce 10 bytes and send one take every place among the
   requests in progress; each is answered within the body deadline and a margin (408
   body-timeout; 503 for one that found no place) and its connection closed, probes answer at
   once meanwhile, and `GET /skills` answers 200 again within the body deadline and the margin
   of the last one being sent;
2. Expect: loads with `Expect: 100-continue` and a `Content-Length` over 64 KiB get 413 (not
   `100 Continue`) within a second; a load within the bound still gets `100 Continue`, then its
   answer.
"""

from __future__ import annotations

import selectors
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
from harness import CheckFailed, Server

SLOW_BODIES = 1024
# The server's default body deadline (`Limits::default().body_timeout` in src/api/mod.rs), and
# what is allowed beyond it for a debug build on a busy machine. The request timeout (10 s) is
# well beyond both, so a server without a body deadline fails.
BODY_DEADLINE = 3.0
MARGIN = 2.0
# A probe answers within this, whatever the floods.
PROBE_LIMIT = 1.0
EXPECT_REQUESTS = 60
EXPECT_LIMIT = 1.0
MAX_BODY_BYTES = 64 * 1024
SKILLS = 8


def tree(root: Path) -> None:
    for index in range(SKILLS):
        harness.write_skill(root / f"skill-{index}", harness.skill_md(f"skill-{index}", f"Skill {index}.", "Body.\n"))


def load_head(server: Server, extra: str) -> bytes:
    return (
        "POST /skills/skill-0/load HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n{extra}\r\n"
    ).encode()


def status_of(head: bytes) -> int | None:
    parts = head.split(b" ", 2)
    return int(parts[1]) if head.startswith(b"HTTP/1.1 ") and len(parts) > 1 and parts[1].isdigit() else None


class Watch(threading.Thread):
    """Probes and `GET /skills`, over and over until stopped: how long each took, and when
    `GET /skills` first answered 200 after `since`."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.stop = threading.Event()
        self.skills_back: float | None = None
        self.skills_statuses: dict[int | str, int] = {}
        self.slowest: dict[str, float] = {}
        self.problems: list[str] = []

    def exchange(self, path: str) -> int | str:
        started = time.monotonic()
        try:
            connection = self.server.connection(timeout=BODY_DEADLINE + MARGIN + 5)
            status: int | str = harness.exchange(connection, "GET", path, self.server.auth).status
            connection.close()
        except OSError as error:
            status = repr(error)
        took = time.monotonic() - started
        self.slowest[path] = max(self.slowest.get(path, 0.0), took)
        if took > PROBE_LIMIT:
            self.problems.append(f"GET {path} took {took:.1f} s (answered {status})")
        return status

    def run(self) -> None:
        while not self.stop.is_set():
            for path in ("/healthz", "/readyz"):
                if (status := self.exchange(path)) != 200:
                    self.problems.append(f"GET {path} answered {status}")
            status = self.exchange("/skills")
            self.skills_statuses[status] = self.skills_statuses.get(status, 0) + 1
            if status == 200 and self.skills_back is None:
                self.skills_back = time.monotonic()
            time.sleep(0.05)


def slow_bodies(server: Server, failures: list[str]) -> None:
    head = load_head(server, "Content-Length: 10\r\n") + b"{"
    selector = selectors.DefaultSelector()
    # Connected first and sent in one burst, so that they all hold their places at once.
    socks = [socket.create_connection((server.host, server.port), timeout=5) for _ in range(SLOW_BODIES)]
    sent: dict[socket.socket, float] = {}
    for sock in socks:
        sock.sendall(head)
        sent[sock] = time.monotonic()
    last_sent = time.monotonic()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    # The probes start once every slow body is sent: GET /skills is then shed (503) until the
    # slow bodies' places are free.
    watch = Watch(server)
    watch.start()
    print(f"  {SLOW_BODIES} slow bodies sent in {last_sent - min(sent.values()):.2f} s")

    received: dict[socket.socket, bytes] = {sock: b"" for sock in sent}
    answered: dict[socket.socket, float] = {}
    closed: dict[socket.socket, float] = {}
    deadline = last_sent + BODY_DEADLINE + MARGIN + 3
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            try:
                data = sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            now = time.monotonic()
            if data:
                received[sock] += data
                if b"\r\n\r\n" in received[sock]:
                    answered.setdefault(sock, now)
            else:
                closed[sock] = now
                selector.unregister(sock)
    while time.monotonic() < last_sent + BODY_DEADLINE + MARGIN and watch.skills_back is None:
        time.sleep(0.05)
    watch.stop.set()
    watch.join()

    statuses: dict[int | None, int] = {}
    late: list[float] = []
    left_open = 0
    for sock, started in sent.items():
        status = status_of(received[sock]) if sock in answered else None
        statuses[status] = statuses.get(status, 0) + 1
        if status == 408 and b"urn:skillcat:problem:body-timeout" not in received[sock]:
            failures.append(f"a slow body's 408 is not a body-timeout problem: {received[sock][:300]!r}")
        if sock in answered and answered[sock] - started > BODY_DEADLINE + MARGIN:
            late.append(answered[sock] - started)
        if sock in answered and sock not in closed:
            left_open += 1
        sock.close()
    selector.close()
    slowest = max((answered[sock] - sent[sock] for sock in answered), default=0.0)
    print(f"  slow bodies answered: {dict(sorted(statuses.items(), key=str))}, slowest after {slowest:.1f} s")
    print(f"  GET /skills meanwhile: {dict(sorted(watch.skills_statuses.items(), key=str))}")
    back = watch.skills_back - last_sent if watch.skills_back is not None else None
    print(f"  GET /skills answered 200 again {back:.1f} s after the last slow body" if back is not None
          else "  GET /skills never answered 200 again")
    print(f"  slowest answers: { {path: round(took, 2) for path, took in watch.slowest.items()} }")

    if set(statuses) - {408, 503}:
        failures.append(f"slow bodies answered other than 408 and 503, or not at all: {statuses}")
    if statuses.get(408, 0) < SLOW_BODIES // 2:
        failures.append(f"fewer than half of the slow bodies reached the body deadline: {statuses}")
    if late:
        failures.append(f"{len(late)} slow bodies answered after the body deadline, the last after {max(late):.1f} s")
    if left_open:
        failures.append(f"{left_open} slow bodies' connections stayed open after their answers")
    if back is None or back > BODY_DEADLINE + MARGIN:
        failures.append(f"GET /skills waited beyond the body deadline: 200 again after {back} s")
    failures.extend(f"with slow bodies: {problem}" for problem in watch.problems[:10])


def read_head(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """What arrives on `sock` until a whole response head (or the connection closes, or `limit`
    passes), and when."""
    started = time.monotonic()
    data = b""
    while b"\r\n\r\n" not in data:
        remaining = limit - (time.monotonic() - started)
        if remaining <= 0:
            break
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(4096)
        except (TimeoutError, socket.timeout):
            break
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - started


def expect_continue(server: Server, failures: list[str]) -> None:
    lengths = [MAX_BODY_BYTES + 1, 1 << 20, 1 << 30]
    statuses: dict[int | None, int] = {}
    slowest = 0.0
    wrong: list[str] = []
    for index in range(EXPECT_REQUESTS):
        length = lengths[index % len(lengths)]
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(load_head(server, f"Content-Length: {length}\r\nExpect: 100-continue\r\n"))
            head, took = read_head(sock, EXPECT_LIMIT + MARGIN)
        status = status_of(head)
        statuses[status] = statuses.get(status, 0) + 1
        slowest = max(slowest, took)
        if status != 413 or took > EXPECT_LIMIT:
            wrong.append(f"Content-Length {length}: {head[:60]!r} after {took:.2f} s")
    print(f"  Expect over the bound: {dict(sorted(statuses.items(), key=str))}, slowest after {slowest:.2f} s")
    if wrong:
        failures.append(f"{len(wrong)} of {EXPECT_REQUESTS} Expect over the bound not 413 within {EXPECT_LIMIT} s: "
                        + "; ".join(wrong[:3]))

    # Within the bound, Expect still works.
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(load_head(server, "Content-Length: 10\r\nExpect: 100-continue\r\n"))
        head, _ = read_head(sock, 5)
        if status_of(head) != 100:
            failures.append(f"Expect within the bound: {head[:60]!r} instead of 100 Continue")
            return
        sock.sendall(b"{}" + b" " * 8)
        head, _ = read_head(sock, 5)
        if status_of(head) != 200:
            failures.append(f"Expect within the bound: {head[:60]!r} after the body, not 200")
    print("  Expect within the bound: 100 Continue, then 200")


def main() -> int:
    args = harness.parse_arguments(harness.argument_parser(__doc__))
    harness.raise_descriptor_limit(SLOW_BODIES + 256)
    failures: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="skillcat-requests-"))
    root = workdir / "skills"
    tree(root)
    # Descriptors for every slow body and then some: the connection cap is not what is tested.
    with Server(args.binary, [root], workdir, nofile=4096) as server:
        for name, part in (("slow bodies", slow_bodies), ("Expect", expect_continue)):
            started = time.monotonic()
            print(f"{name}:")
            try:
                part(server, failures)
            except (CheckFailed, OSError) as error:
                failures.append(f"{name}: {error!r}")
            print(f"  {time.monotonic() - started:.1f} s")
        errors, _ = harness.log_problems(server.log_lines())
        failures.extend(f"server error: {line}" for line in errors[:5])
    return harness.verdict("hostile requests", failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
