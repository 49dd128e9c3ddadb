"""What one client can make the server hold: memory and log, measured against bounds. Loopback
only, a server without a token file (as a local host runs it), the send deadline set to 5 s.

What must hold:
1. stalled readers: 100 clients that ask for a 15 MiB file, read 64 KiB and stop reading add less
   than 300 MiB to the server's RSS, and each connection is closed by the server within the send
   deadline (plus a margin);
2. MCP stalled readers: 20 `resources/read` and 20 `read_skill_file` calls of that file whose
   answers nobody reads add less than 300 MiB;
3. host names: a skill page whose SKILL.md is 3.9 MB, asked for under 80 `Host` names one after the
   other and then 16 at once, adds less than 300 MiB at its peak, and each page names its own host;
4. MCP sessions: 3,000 initialize / initialized / DELETE cycles, each with a 60 KB `capabilities`
   object, leave less than 30 MiB behind;
5. abandoned MCP clients: 30,000 `initialize` calls never followed by anything, then 5,000 clients
   that initialize with a 60 KB `capabilities` object, send `initialized` and a `skills/list` and
   go without a `DELETE`, add less than 30 MiB at any time (the server keeps no session);
6. log: 300 MCP requests whose unknown method is 65,000 characters write less than 1 MB of log.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
from harness import CheckFailed, Server

MIB = 1024
FILE_BYTES = 15 * 1024 * 1024
STALLED_READERS = 100
STALLED_MCP = 20
SEND_DEADLINE = 5
PAGE_BYTES = 3_900_000
HOST_NAMES = 80
HOSTS_AT_ONCE = 16
SESSIONS = 3000
INITIALIZE_ONLY = 30_000
ABANDONED = 5_000
CAPABILITIES_BYTES = 60_000
UNKNOWN_METHODS = 300
METHOD_CHARS = 65_000


def tree(root: Path) -> None:
    big = root / "big-file"
    harness.write_skill(big, harness.skill_md("big-file", "A skill with one large file.", "See data/large.txt.\n"))
    (big / "data").mkdir()
    line = ("0123456789abcdef" * 4 + "\n").encode()
    (big / "data" / "large.txt").write_bytes(line * (FILE_BYTES // len(line)))
    body = "Words of a long skill, over and over. " * (PAGE_BYTES // 38)
    harness.write_skill(root / "big-page", harness.skill_md("big-page", "A skill with a long SKILL.md.", body))


def settled_rss(server: Server, seconds: float = 1.0) -> int:
    """The server's RSS once it has had `seconds` to settle."""
    time.sleep(seconds)
    return server.rss_kib()


def stalled_file_readers(server: Server, failures: list[str]) -> None:
    before = settled_rss(server)
    readers: list[socket.socket] = []
    request = (
        f"GET /skills/big-file/files/data/large.txt HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n"
    ).encode()
    for _ in range(STALLED_READERS):
        sock = socket.create_connection((server.host, server.port), timeout=10)
        # A small receive buffer, as a client that stopped reading leaves it full.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(request)
        received = 0
        while received < 64 * 1024:
            chunk = sock.recv(64 * 1024 - received)
            if not chunk:
                break
            received += len(chunk)
        readers.append(sock)
    started = time.monotonic()
    peak = before
    while time.monotonic() - started < 3:
        peak = max(peak, server.rss_kib())
        time.sleep(0.2)
    print(f"  {STALLED_READERS} stalled readers: RSS {before // MIB} -> {peak // MIB} MiB")
    if peak - before > 300 * MIB:
        failures.append(f"{STALLED_READERS} stalled readers of a 15 MiB file added {(peak - before) // MIB} MiB")
    # Closed by the server within the deadline: draining what is buffered ends in EOF (or a reset).
    time.sleep(SEND_DEADLINE + 3 - (time.monotonic() - started))
    open_ones = 0
    for sock in readers:
        sock.settimeout(5)
        try:
            while sock.recv(1 << 20):
                pass
        except (socket.timeout, TimeoutError):
            open_ones += 1
        except OSError:
            pass
        sock.close()
    if open_ones:
        failures.append(f"{open_ones} of {STALLED_READERS} stalled connections were still open past the send deadline")
    after = settled_rss(server, 2)
    print(f"  after the deadline: RSS {after // MIB} MiB, {open_ones} still open")


class Mcp:
    """One MCP session over its own connection (Streamable HTTP, JSON answers read whole)."""

    def __init__(self, server: Server, capabilities: dict | None = None) -> None:
        self.server = server
        self.connection = server.connection(timeout=30)
        self.session: str | None = None
        self.next_id = 1
        answer = self.call("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "held-memory", "version": "1"},
        })
        if "result" not in answer:
            raise CheckFailed(f"initialize: {answer}")
        self.notify("notifications/initialized")

    def headers(self) -> dict[str, str]:
        headers = {
            "Host": f"127.0.0.1:{self.server.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        return headers

    def send(self, message: dict) -> http.client.HTTPResponse:
        self.connection.request("POST", "/mcp", body=json.dumps(message).encode(), headers=self.headers())
        response = self.connection.getresponse()
        self.session = response.getheader("mcp-session-id") or self.session
        return response

    def call(self, method: str, params: dict) -> dict:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        response = self.send(message)
        return parse_answer(response.read(), response.getheader("content-type") or "")

    def notify(self, method: str) -> None:
        response = self.send({"jsonrpc": "2.0", "method": method})
        response.read()

    def close(self) -> None:
        self.connection.request("DELETE", "/mcp", headers=self.headers())
        self.connection.getresponse().read()
        self.connection.close()


def parse_answer(body: bytes, content_type: str) -> dict:
    """The JSON-RPC message of an answer, sent as JSON or as one server-sent event."""
    if content_type.startswith("text/event-stream"):
        for line in body.split(b"\n"):
            if line.startswith(b"data:") and line[5:].strip():
                return json.loads(line[5:])
        raise CheckFailed(f"an event stream without a message: {body[:200]!r}")
    return json.loads(body)


def stalled_mcp_readers(server: Server, failures: list[str]) -> None:
    before = settled_rss(server)
    stalled = []
    calls = [("resources/read", {"uri": "skill://big-file/data/large.txt"})] * STALLED_MCP + [
        ("tools/call", {"name": "read_skill_file", "arguments": {"name": "big-file", "path": "data/large.txt"}})
    ] * STALLED_MCP
    for method, params in calls:
        session = Mcp(server)
        session.connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        message = {"jsonrpc": "2.0", "id": 99, "method": method, "params": params}
        session.connection.request("POST", "/mcp", body=json.dumps(message).encode(), headers=session.headers())
        # The answer is never read.
        stalled.append(session)
    peak = before
    started = time.monotonic()
    while time.monotonic() - started < 6:
        peak = max(peak, server.rss_kib())
        time.sleep(0.2)
    print(f"  {len(calls)} stalled MCP reads: RSS {before // MIB} -> {peak // MIB} MiB")
    if peak - before > 300 * MIB:
        failures.append(f"{len(calls)} stalled MCP reads of a 15 MiB file added {(peak - before) // MIB} MiB")
    for session in stalled:
        session.connection.close()


def many_host_names(server: Server, failures: list[str]) -> None:
    before = settled_rss(server)

    def page(host: str) -> str | None:
        connection = server.connection(timeout=60)
        try:
            connection.request("GET", "/ui/skills/big-page", headers={"Host": host})
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status != 200:
            return f"{host}: status {response.status}"
        if f"http://{host}/skills/big-page/content".encode() not in body:
            return f"{host}: the page does not name its host"
        return None

    peak = [before]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], server.rss_kib())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    for index in range(HOST_NAMES):
        if (problem := page(f"host-{index}.example:{server.port}")) is not None:
            failures.append(problem)
    problems: list[str] = []
    threads = [
        threading.Thread(target=lambda index=index: problems.append(page(f"at-once-{index}.example") or ""))
        for index in range(HOSTS_AT_ONCE)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failures.extend(problem for problem in problems if problem)
    after = settled_rss(server)
    sampling.set()
    sampler.join()
    peak = max(peak[0], after)
    print(
        f"  a 3.9 MB page under {HOST_NAMES + HOSTS_AT_ONCE} host names: RSS {before // MIB} -> peak "
        f"{peak // MIB} MiB, {after // MIB} MiB after"
    )
    if peak - before > 300 * MIB:
        failures.append(f"a skill page under many host names added {(peak - before) // MIB} MiB")


def closed_sessions(server: Server, failures: list[str]) -> None:
    capabilities = {"experimental": {"padding": {"text": "x" * CAPABILITIES_BYTES}}}
    Mcp(server, capabilities).close()
    before = settled_rss(server)
    for _ in range(SESSIONS):
        Mcp(server, capabilities).close()
    # The tasks that announce changes look at their sessions once a second.
    after = settled_rss(server, 3)
    print(f"  {SESSIONS} closed sessions: RSS {before // MIB} -> {after // MIB} MiB")
    if after - before > 30 * MIB:
        failures.append(f"{SESSIONS} closed MCP sessions left {(after - before) // MIB} MiB behind")


def abandoned_clients(server: Server, failures: list[str]) -> None:
    before = settled_rss(server)
    peak = before
    connection = server.connection(timeout=30)
    headers = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "abandoned", "version": "1"}},
    }).encode()
    for sent in range(1, INITIALIZE_ONLY + 1):
        connection.request("POST", "/mcp", body=initialize, headers=headers)
        response = connection.getresponse()
        answer = parse_answer(response.read(), response.getheader("content-type") or "")
        if "result" not in answer:
            raise CheckFailed(f"initialize {sent}: {answer}")
        if sent % 5000 == 0:
            peak = max(peak, server.rss_kib())
    connection.close()
    capabilities = {"experimental": {"padding": {"text": "x" * CAPABILITIES_BYTES}}}
    for left in range(1, ABANDONED + 1):
        client = Mcp(server, capabilities)
        if "result" not in client.call("skills/list", {}):
            raise CheckFailed("skills/list of an abandoned client failed")
        client.connection.close()
        if left % 1000 == 0:
            peak = max(peak, server.rss_kib())
    after = settled_rss(server, 2)
    peak = max(peak, after)
    print(f"  {INITIALIZE_ONLY} initialize calls and {ABANDONED} abandoned clients: "
          f"RSS {before // MIB} -> peak {peak // MIB} -> {after // MIB} MiB")
    if peak - before > 30 * MIB:
        failures.append(f"abandoned MCP clients added {(peak - before) // MIB} MiB")


def unknown_methods(server: Server, failures: list[str]) -> None:
    session = Mcp(server)
    before = server.log_path.stat().st_size
    method = "m" * METHOD_CHARS
    for _ in range(UNKNOWN_METHODS):
        answer = session.call(method, {})
        if answer.get("error", {}).get("code") != -32601:
            failures.append(f"an unknown method answered {str(answer)[:200]}")
            break
    session.close()
    time.sleep(0.5)
    grown = server.log_path.stat().st_size - before
    print(f"  {UNKNOWN_METHODS} unknown methods of {METHOD_CHARS} characters: the log grew {grown} bytes")
    if grown > 1_000_000:
        failures.append(f"{UNKNOWN_METHODS} unknown methods grew the log by {grown} bytes")


def main() -> int:
    args = harness.parse_arguments(harness.argument_parser(__doc__))
    harness.raise_descriptor_limit(4096)
    workdir = Path(tempfile.mkdtemp(prefix="skillcat-held-"))
    root = workdir / "skills"
    tree(root)
    failures: list[str] = []
    parts = (
        ("stalled readers", stalled_file_readers),
        ("stalled MCP readers", stalled_mcp_readers),
        ("host names", many_host_names),
        ("closed MCP sessions", closed_sessions),
        ("abandoned MCP clients", abandoned_clients),
        ("unknown methods", unknown_methods),
    )
    server = Server(args.binary, [root], workdir, token=False, env={"SKILLCAT_SEND_TIMEOUT": str(SEND_DEADLINE)})
    with server:
        for name, part in parts:
            started = time.monotonic()
            print(f"{name}:")
            try:
                part(server, failures)
            except (CheckFailed, OSError, http.client.HTTPException, ValueError) as error:
                failures.append(f"{name}: {type(error).__name__}: {error}")
            print(f"  {time.monotonic() - started:.1f} s")
    return harness.verdict("held memory", failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
