"""Hostile token files: the token file rewritten in place, swapped for a FIFO, and reached through
a symlink whose target is replaced, against the debug server on loopback.

Parts, each bounded in count and time:
1. REWRITES in-place rewrites of the token file with the same tokens, the way `vault ... > tokens`
   does it: truncated, then written after a pause of up to MAX_WRITE_DELAY (the command fetching
   the secret), REWRITE_GAP apart. Meanwhile a client loops `GET /skills` with a valid token on a
   kept-alive connection, and an `/events` stream opened with that token is held open.
   Must hold: every request is answered 200 (no 401, no error); the stream never ends, and after
   the rewrites it still carries the event of a catalog change; and the part proves something:
   the server read the file while it was empty at least once (its debug lines say so).
2. The token file swapped for a FIFO (renamed over it in one step). Must hold: the server logs that
   the FIFO is no regular file, keeps answering requests with the token for FIFO_SECONDS, and
   exits with status 0 within EXIT_LIMIT of SIGTERM; the stream of part 1 then ends cleanly.
3. A fresh server whose token file is a symlink into another folder (`config/tokens -> secrets/x`;
   nothing else changes in either folder, as in a real deployment). The
   target is replaced ROTATIONS times (written beside it and renamed over it), each time adding a
   token, then revoking it. Must hold: each new token is accepted, and each revoked one refused,
   within REVOCATION_LIMIT, while the kept token is accepted throughout.

Prints one summary line; exits 1 on any violation (listed, with the work folder kept).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path

import harness
from harness import CheckFailed, Server

REWRITES = 50
MAX_WRITE_DELAY = 0.15
REWRITE_GAP = 0.05
FIFO_SECONDS = 1.0
EXIT_LIMIT = 10.0
ROTATIONS = 5
REVOCATION_LIMIT = 1.0
EVENT_WAIT = 5.0
# The start of the server's debug line for a reload that found the file empty (src/auth.rs).
EMPTY_SEEN = "the token file is being written"


class Asker(threading.Thread):
    """Loops `GET /skills` with a token on one kept-alive connection until told to stop."""

    def __init__(self, server: Server, token: str) -> None:
        super().__init__(name="asker", daemon=True)
        self.server = server
        self.token = token
        self.stop_event = threading.Event()
        self.answers = 0
        self.refusals: list[str] = []

    def run(self) -> None:
        connection = self.server.connection(timeout=10)
        while not self.stop_event.is_set():
            try:
                response = harness.exchange(connection, "GET", "/skills", {"Authorization": f"Bearer {self.token}"})
            except (OSError, http.client.HTTPException) as error:
                self.refusals.append(f"{type(error).__name__}: {error}")
                connection.close()
                connection = self.server.connection(timeout=10)
                time.sleep(0.02)
                continue
            self.answers += 1
            if response.status != 200:
                self.refusals.append(f"answered {response.status}: {response.body[:200]!r}")
        connection.close()


def status_with(server: Server, token: str) -> int:
    """The status of `GET /skills` with `token` on a new connection; 0 for a connection error."""
    connection = server.connection(timeout=10)
    try:
        return harness.exchange(connection, "GET", "/skills", {"Authorization": f"Bearer {token}"}).status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        connection.close()


def until(check, limit: float) -> float | None:
    """Polls `check` until it holds; how long that took, or None after `limit`."""
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > limit:
            return None
        time.sleep(0.01)


def add_skill(root: Path, name: str) -> None:
    harness.write_skill(root / name, harness.skill_md(name, f"the {name} skill", "# body\n"))


def rewrites_and_fifo(binary: Path, workdir: Path, failures: list[str]) -> str:
    """Parts 1 and 2, on one server."""
    root = workdir / "skills"
    root.mkdir()
    add_skill(root, "alpha")
    rng = random.Random(16)
    # The token file in a folder of its own, as in a deployment (the server's log, in workdir,
    # changes all the time); the reloads' debug lines tell when the server met the emptied file.
    (workdir / "auth").mkdir()
    server = Server(binary, [root], workdir, rust_log="info,skillcat::auth=debug")
    server.token_file = workdir / "auth" / "tokens"
    with server:
        assert server.token_file is not None and server.token is not None
        contents = f"{server.token}\n".encode()
        stream = harness.EventStream(server, timeout=60)
        stream.start()
        if not stream.wait_for_events(1, EVENT_WAIT):
            failures.append(f"events: no first event ({stream.outcome})")
        asker = Asker(server, server.token)
        asker.start()
        for _ in range(REWRITES):
            descriptor = os.open(server.token_file, os.O_WRONLY | os.O_TRUNC)
            try:
                time.sleep(rng.uniform(0, MAX_WRITE_DELAY))
                os.write(descriptor, contents)
            finally:
                os.close(descriptor)
            time.sleep(REWRITE_GAP)
        asker.stop_event.set()
        asker.join(15)
        rewrite_answers = asker.answers
        for refusal in asker.refusals[:20]:
            failures.append(f"during the rewrites: {refusal}")
        if len(asker.refusals) > 20:
            failures.append(f"... {len(asker.refusals)} refusals in all")
        if rewrite_answers < REWRITES:
            failures.append(f"only {rewrite_answers} requests answered during the rewrites")
        met_empty = sum(1 for line in server.log_lines() if line.get("message", "").startswith(EMPTY_SEEN))
        if met_empty == 0:
            failures.append("the server never read the emptied file: the rewrites proved nothing")
        stream_state = "open" if stream.ended is None else f"ended ({stream.outcome})"
        if stream.ended is not None:
            failures.append(f"the event stream ended during the rewrites ({stream.outcome})")
        else:
            seen = stream.events
            add_skill(root, "beta")
            if not stream.wait_for_events(seen + 1, EVENT_WAIT):
                failures.append(f"the event stream carried no event of a change after the rewrites ({stream.outcome})")

        # Part 2: a FIFO where the file was.
        fifo = workdir / "tokens.fifo"
        os.mkfifo(fifo, 0o600)
        os.replace(fifo, server.token_file)
        refused = until(
            lambda: any("not a regular file" in json.dumps(line) for line in server.log_lines()), EVENT_WAIT
        )
        if refused is None:
            failures.append(f"the FIFO was not reported as no regular file within {EVENT_WAIT:.0f} s")
        fifo_answers = 0
        started = time.monotonic()
        while time.monotonic() - started < FIFO_SECONDS:
            status = status_with(server, server.token)
            if status != 200:
                failures.append(f"with the FIFO in place: answered {status or 'with a connection error'}")
                break
            fifo_answers += 1
        code, took = server.stop(EXIT_LIMIT)
        if code != 0:
            failures.append(f"SIGTERM with the FIFO in place: exit {code} after {took:.1f} s (killed if None)")
        stream.join(5)
        if stream.outcome != "clean":
            failures.append(f"the event stream did not end cleanly at shutdown ({stream.outcome})")
        errors, _ = harness.log_problems(server.log_lines())
        for line in errors[:5]:
            failures.append(f"server ERROR: {line}")
    return (
        f"{REWRITES} in-place rewrites ({met_empty} read while empty), {rewrite_answers} requests, "
        f"{len(asker.refusals)} refused, "
        f"stream {stream_state}; FIFO: {fifo_answers} requests answered, exit {code} in "
        f"{took:.1f} s"
    )


def symlinked(binary: Path, workdir: Path, failures: list[str]) -> str:
    """Part 3: a token file behind a symlink whose target is replaced."""
    root = workdir / "skills"
    root.mkdir()
    add_skill(root, "alpha")
    secrets_folder = workdir / "secrets"
    secrets_folder.mkdir()
    target = secrets_folder / "x"
    target.write_text("placeholder\n")
    # The link in a folder of its own: nothing else changes there (the server's log, in workdir,
    # would make any watch of that folder fire all the time).
    config = workdir / "config"
    config.mkdir()
    os.symlink(target, config / "tokens")
    seen: list[float] = []
    server = Server(binary, [root], workdir)
    server.token_file = config / "tokens"
    with server:
        assert server.token is not None
        kept = server.token
        for rotation in range(ROTATIONS):
            extra = secrets.token_urlsafe(18)
            harness.write_atomic(target, f"{kept}\n{extra}\n")
            took = until(lambda: status_with(server, extra) == 200, REVOCATION_LIMIT)
            if took is None:
                failures.append(f"rotation {rotation}: a token added to the target not accepted in {REVOCATION_LIMIT} s")
                continue
            seen.append(took)
            harness.write_atomic(target, f"{kept}\n")
            took = until(lambda: status_with(server, extra) == 401, REVOCATION_LIMIT)
            if took is None:
                failures.append(f"rotation {rotation}: a token revoked in the target accepted after {REVOCATION_LIMIT} s")
                continue
            seen.append(took)
            if status_with(server, kept) != 200:
                failures.append(f"rotation {rotation}: the kept token refused")
        code, took = server.stop(EXIT_LIMIT)
        if code != 0:
            failures.append(f"symlinked: exit {code} after {took:.1f} s")
    slowest = f", the slowest in {max(seen):.2f} s" if seen else ""
    return f"symlink: {len(seen)} of {2 * ROTATIONS} additions and revocations seen in {REVOCATION_LIMIT:.0f} s{slowest}"


def main() -> int:
    args = harness.parse_arguments(harness.argument_parser(__doc__))

    workdir = Path(tempfile.mkdtemp(prefix="skillcat-hostile-tokens-"))
    failures: list[str] = []
    started = time.monotonic()
    try:
        (workdir / "plain").mkdir()
        (workdir / "linked").mkdir()
        summary = rewrites_and_fifo(args.binary, workdir / "plain", failures)
        summary += "; " + symlinked(args.binary, workdir / "linked", failures)
    except CheckFailed as error:
        failures.append(str(error))
        summary = "stopped early"
    print(f"hostile_tokens in {time.monotonic() - started:.0f} s: {summary}", flush=True)
    return harness.verdict("hostile token files", failures, workdir)


if __name__ == "__main__":
    sys.exit(main())
