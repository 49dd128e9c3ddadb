"""Hostile load: a server with 1,024 descriptors under floods of event streams, idle connections
and unfinished request heads. Loopback only; every flood is bounded in count and time.

What must hold:
1. streams: of 1,000 `GET /events` from 40 loopback addresses, at most the stream cap are
   accepted, the others refused with 429 (per client) or 503 (in all), never a dropped connection;
   while they are held, probes and `GET /skills` answer at once, and a skill added meanwhile is
   published (the scanner has its descriptors);
2. idle connections: 900 connections that send nothing fill the connection cap; a skill added
   meanwhile is published once they are gone, and no catalog version ever lists fewer skills than
   the first (a scan out of descriptors fails, it never empties the catalog);
3. memory: once the floods are over and 10,000 more streams came and went, the server's RSS comes
   back near its idle level;
4. unfinished heads: 1,500 connections each sending up to 400 KB of headers that never end cost
   the server less than 150 MiB, and it answers probes afterwards;
5. failed accepts are logged a few times, not in a loop.
"""

from __future__ import annotations

import http.client
import selectors
import socket
import sys
import tempfile
import time
from pathlib import Path

import harness
from harness import CheckFailed, Server

STREAM_ATTEMPTS = 1000
STREAM_CLIENTS = 40
# Streams that come and go after the floods, in waves within the caps.
STREAM_CHURN = 10_000
STREAM_WAVE = 320
IDLE_CONNECTIONS = 900
HEAD_CONNECTIONS = 1500
HEAD_BYTES = 400 * 1024
HEAD_MEMORY_LIMIT_KIB = 150 * 1024
SKILLS = 60


def tree(root: Path) -> None:
    for index in range(SKILLS):
        folder = root / f"group-{index % 6}" / f"skill-{index:03}"
        harness.write_skill(folder, harness.skill_md(f"skill-{index:03}", f"Skill {index}.", "Body.\n"))


def add_skill(root: Path, name: str) -> None:
    harness.write_skill(root / "added" / name, harness.skill_md(name, "Added under load.", "Body.\n"))


def open_stream(server: Server, source: str) -> tuple[int | None, socket.socket | None]:
    """`GET /events` from `source`: its status and, when accepted, the open socket."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.bind((source, 0))
        sock.connect((server.host, server.port))
        sock.sendall(f"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(1024)
            if not chunk:
                break
            head += chunk
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else None
    except OSError:
        sock.close()
        return None, None
    if status != 200:
        sock.close()
        return status, None
    return status, sock


def answers_at_once(server: Server, path: str, limit: float = 2.0) -> str | None:
    """None if `path` answers 200 within `limit` seconds, else what went wrong."""
    started = time.monotonic()
    try:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=limit)
        response = harness.exchange(connection, "GET", path, server.auth)
        connection.close()
    except OSError as error:
        return f"{path}: {error!r}"
    if response.status != 200:
        return f"{path}: status {response.status}"
    if time.monotonic() - started > limit:
        return f"{path}: took {time.monotonic() - started:.1f} s"
    return None


def catalog_names(server: Server) -> tuple[set[str], dict]:
    response = server.get("/skills")
    if response.status != 200:
        raise CheckFailed(f"GET /skills answered {response.status}")
    catalog = response.json()
    return {skill["name"] for skill in catalog["skills"]}, catalog


def wait_for(what: str, check, limit: float = 15.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    print(f"  not within {limit} s: {what}")
    return False


def published_sizes(server: Server) -> list[int]:
    return [
        line["skills"]
        for line in server.log_lines()
        if line.get("message") == "published a new catalog version" and "skills" in line
    ]


def exhaustion(binary: Path, workdir: Path, failures: list[str]) -> None:
    root = workdir / "skills"
    tree(root)
    with Server(binary, [root], workdir, nofile=1024) as server:
        names, _ = catalog_names(server)
        if len(names) != SKILLS:
            failures.append(f"the first catalog lists {len(names)} skills, not {SKILLS}")
        for _ in range(20):
            server.get("/skills")
        time.sleep(1)
        idle_kib = server.rss_kib()

        # 1. Streams.
        statuses: dict[int | None, int] = {}
        held: list[socket.socket] = []
        for attempt in range(STREAM_ATTEMPTS):
            source = f"127.0.0.{1 + attempt * STREAM_CLIENTS // STREAM_ATTEMPTS}"
            status, sock = open_stream(server, source)
            statuses[status] = statuses.get(status, 0) + 1
            if sock is not None:
                held.append(sock)
        print(f"  streams: {dict(sorted(statuses.items(), key=str))}")
        if set(statuses) - {200, 429, 503}:
            failures.append(f"stream answers other than 200, 429 and 503: {statuses}")
        if not statuses.get(429) or not statuses.get(503):
            failures.append(f"the per-client and the total stream caps were not both met: {statuses}")
        for path in ("/healthz", "/readyz", "/skills", "/manifest"):
            if (problem := answers_at_once(server, path)) is not None:
                failures.append(f"with the streams held: {problem}")
        add_skill(root, "added-with-streams")
        if not wait_for("the skill added with the streams held is published",
                        lambda: "added-with-streams" in catalog_names(server)[0]):
            failures.append("a skill added while the streams were held was not published")
        peak_kib = server.rss_kib()

        # 2. Idle connections.
        idle: list[socket.socket] = []
        for _ in range(IDLE_CONNECTIONS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect_ex((server.host, server.port))
            except OSError:
                pass
            idle.append(sock)
        time.sleep(1)
        add_skill(root, "added-with-idle-connections")
        time.sleep(2)
        peak_kib = max(peak_kib, server.rss_kib())
        for sock in idle:
            sock.close()
        if not wait_for("the skill added with idle connections is published",
                        lambda: "added-with-idle-connections" in catalog_names(server)[0]):
            failures.append("a skill added while idle connections filled the cap was not published")
        for sock in held:
            sock.close()
        names, catalog = catalog_names(server)
        if len(names) != SKILLS + 2 or "error" in catalog:
            failures.append(f"after the floods the catalog lists {len(names)} skills, error {catalog.get('error')}")
        sizes = published_sizes(server)
        if any(size < SKILLS for size in sizes):
            failures.append(f"a published catalog shrank below {SKILLS} skills: {sizes}")

        # 3. Memory back near idle, also after waves of streams that come and go.
        churned = 0
        while churned < STREAM_CHURN:
            wave = []
            for index in range(STREAM_WAVE):
                status, sock = open_stream(server, f"127.0.1.{1 + index * 16 // STREAM_WAVE}")
                if sock is not None:
                    wave.append(sock)
            churned += STREAM_WAVE
            peak_kib = max(peak_kib, server.rss_kib())
            for sock in wave:
                sock.close()
        print(f"  {churned} more streams came and went")
        limit_kib = idle_kib * 3 // 2 + 16 * 1024
        if not wait_for(f"RSS back under {limit_kib} KiB", lambda: server.rss_kib() <= limit_kib, limit=20):
            failures.append(f"RSS stayed at {server.rss_kib()} KiB after the floods (idle {idle_kib} KiB)")
        print(f"  RSS: idle {idle_kib} KiB, peak {peak_kib} KiB, after {server.rss_kib()} KiB")

        # 5. Accept failures back off.
        accept_failures = [line for line in server.log_lines() if line.get("message") == "accept failed"]
        if len(accept_failures) > 20:
            failures.append(f"'accept failed' logged {len(accept_failures)} times")
        problems = [line for line in server.log_lines() if "Too many open files" in str(line)]
        if any(line.get("message") != "accept failed" for line in problems):
            failures.append(f"out of descriptors outside accept: {problems[:3]}")


def unfinished_heads(binary: Path, workdir: Path, failures: list[str]) -> None:
    root = workdir / "skills"
    tree(root)
    with Server(binary, [root], workdir, nofile=4096) as server:
        for _ in range(20):
            server.get("/skills")
        time.sleep(1)
        idle_kib = server.rss_kib()
        selector = selectors.DefaultSelector()
        head = b"GET /skills HTTP/1.1\r\nHost: x\r\n"
        line = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        sent: dict[socket.socket, int] = {}
        for _ in range(HEAD_CONNECTIONS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex((server.host, server.port))
            selector.register(sock, selectors.EVENT_WRITE)
            sent[sock] = 0
        peak_kib = idle_kib
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and selector.get_map():
            for key, _ in selector.select(timeout=0.2):
                sock = key.fileobj
                try:
                    data = head if sent[sock] == 0 else line
                    sent[sock] += sock.send(data)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    selector.unregister(sock)
                    continue
                if sent[sock] >= HEAD_BYTES:
                    selector.unregister(sock)
            peak_kib = max(peak_kib, server.rss_kib())
        print(f"  unfinished heads: RSS idle {idle_kib} KiB, peak {peak_kib} KiB")
        if peak_kib - idle_kib > HEAD_MEMORY_LIMIT_KIB:
            failures.append(f"unfinished heads cost {peak_kib - idle_kib} KiB, over {HEAD_MEMORY_LIMIT_KIB} KiB")
        for sock in sent:
            sock.close()
        selector.close()
        for path in ("/healthz", "/readyz", "/skills"):
            if (problem := answers_at_once(server, path, limit=5.0)) is not None:
                failures.append(f"after unfinished heads: {problem}")


def main() -> int:
    args = harness.parse_arguments(harness.argument_parser(__doc__))
    harness.raise_descriptor_limit(IDLE_CONNECTIONS + STREAM_ATTEMPTS + HEAD_CONNECTIONS + 256)
    workdir = Path(tempfile.mkdtemp(prefix="skillcat-hostile-"))
    failures: list[str] = []
    parts = (("descriptor exhaustion", "exhaustion", exhaustion), ("unfinished heads", "heads", unfinished_heads))
    for name, folder, part in parts:
        started = time.monotonic()
        print(f"{name}:")
        (workdir / folder).mkdir()
        try:
            part(args.binary, workdir / folder, failures)
        except CheckFailed as error:
            failures.append(f"{name}: {error}")
        print(f"  {time.monotonic() - started:.1f} s")
    return harness.verdict("hostile load", failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
