"""A nagents skill source backed by a skillcat server, in the standard library only.

``RemoteSkillDiscoverer`` implements nagents' ``SkillDiscoverer`` protocol (``nagents.skills``,
0.25.2) over skillcat's HTTP API, so an agent uses a remote catalog exactly like a local one::

    import os

    from nagents import Agent
    from nagents.skills import CompositeSkillDiscoverer, DirectorySkillDiscoverer
    from skillcat_remote import RemoteSkillDiscoverer

    remote = RemoteSkillDiscoverer("http://skillcat.internal:8080", token=os.environ.get("SKILLCAT_TOKEN"))
    agent = Agent(provider, session, skill_discoverer=remote)
    # or, local skills first and the shared catalog behind them:
    agent = Agent(provider, session, skill_discoverer=CompositeSkillDiscoverer(
        [DirectorySkillDiscoverer(["./skills"]), remote]))

Behaviour:

* ``discover()`` sends ``GET /skills`` with ``If-None-Match`` once it holds a catalog; a 304
  returns the cached descriptors (the same tuple, nothing parsed). Descriptors are nagents'
  ``Skill`` (validated on construction), in name order, as nagents' own sources return them.
* ``load(skill)`` accepts only the current descriptor of this discoverer (as nagents' sources do)
  and sends ``GET /skills/{name}/content`` with ``If-Match: <the skill's etag>``, so it returns
  exactly the version that was discovered or fails.
* Blocking socket I/O runs in a worker thread (``asyncio.to_thread``); the event loop never waits
  on the network.

Errors:

* ``ValueError``: what nagents raises for the same condition locally.
  - a descriptor that is not this discoverer's current one:
    "Skill 'x' is not in this remote catalog; refresh discovery";
  - the skill changed or vanished on the server (404, 409 or 412 on load):
    "Skill 'x' changed; refresh discovery and retry";
  - a source of the server failed before it had any good catalog (503
    ``urn:skillcat:problem:catalog-unavailable``): the problem's ``detail``, which is nagents'
    own message, e.g. "Duplicate skill name 'x' at /p". Once the server has had a good catalog it
    keeps serving it through failures: ``discover()`` returns it, and ``catalog_error`` says what
    failed (naming both files of a duplicate) and since when;
  - a descriptor the server sent that nagents' ``Skill`` rejects.
* ``SkillcatError`` (an ``OSError``): the server could not be reached, broke the protocol, or
  answered another error (401, 503 not ready / at capacity / shutting down, ...); it carries
  ``status``, ``kind`` (the problem type after ``urn:skillcat:problem:``), ``detail`` and
  ``retry_after`` where the answer had them.
* ``SkillcatTimeout`` (a ``SkillcatError`` and a ``TimeoutError``): no complete answer within
  ``timeout`` seconds. The whole exchange (connect, request, reading the body) shares that one
  deadline, and the awaiting coroutine is released at the deadline even if name resolution hangs.

Connections go straight to ``base_url`` (proxy environment variables are not consulted;
redirects are not followed, so the token never leaves that origin). One idle keep-alive
connection is reused between calls; ``close()`` drops it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass

from nagents.skills import Skill

__all__ = ["CatalogFailure", "RemoteSkillDiscoverer", "SkillcatError", "SkillcatTimeout"]

# A whole catalog (thousands of descriptors) fits easily; a larger answer is refused.
_MAX_CATALOG_BYTES = 64 * 1024 * 1024
# nagents and skillcat skip a SKILL.md over 4,000,000 bytes, so no content is larger.
_MAX_CONTENT_BYTES = 4_000_000
_PROBLEM_PREFIX = "urn:skillcat:problem:"
_USER_AGENT = "skillcat-remote-python/1"
# Failures of a reused keep-alive connection that mean the server had closed it: retry once.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class SkillcatError(OSError):
    """The server could not be reached, broke the protocol, or answered an unexpected error."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        kind: str | None = None,
        detail: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.detail = detail
        self.retry_after = retry_after


class SkillcatTimeout(SkillcatError, TimeoutError):
    """No complete answer within the discoverer's timeout."""


class _Secret:
    """Holds the bearer token so that no repr, vars() dump or traceback local shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<redacted>"


@dataclass(frozen=True)
class _Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class _Catalog:
    etag: str | None
    skills: tuple[Skill, ...]
    entries: Mapping[str, tuple[Skill, str]]
    diagnostics: tuple[str, ...]
    error: CatalogFailure | None


@dataclass(frozen=True)
class CatalogFailure:
    """Why the server serves its last good catalog rather than what its files say now: a scan
    failed (a source could not be read, or listed a name twice). The catalog is complete and
    usable; this says that it is not current."""

    source: str
    """The label of the server-side source that failed."""
    message: str
    """The source's message."""
    since: str
    """When the scans started failing this way (RFC 3339)."""


class RemoteSkillDiscoverer:
    """nagents ``SkillDiscoverer`` over a skillcat server's ``/skills`` routes.

    Args:
        base_url: ``http://`` or ``https://`` URL of the server, optionally with a path prefix
            (``https://gateway/skillcat/``); a trailing slash is optional.
        token: sent as ``Authorization: Bearer <token>``; never shown by ``repr``.
        timeout: seconds allowed for each whole request (connect, send, read the answer).
        ssl_context: for ``https``, the context to verify the server with (default: the
            system's trusted certificates).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if not isinstance(base_url, str):
            raise TypeError("base_url must be a str")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL with a host, not {base_url!r}")
        if parts.username is not None or parts.password is not None:
            raise ValueError("base_url must not carry credentials; pass token= instead")
        if parts.query or parts.fragment:
            raise ValueError("base_url must not have a query or a fragment")
        try:
            port = parts.port
        except ValueError as error:
            raise ValueError(f"base_url has an invalid port: {base_url!r}") from error
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout):
            raise ValueError("timeout must be a positive number of seconds")
        if timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        if token is not None:
            if not isinstance(token, str) or not token or not token.isprintable() or token != token.strip():
                raise ValueError("token must be nonblank printable text without surrounding whitespace")
            if not token.isascii():
                raise ValueError("token must be ASCII")
        self.base_url = base_url
        self.timeout = float(timeout)
        self._token = _Secret(token) if token is not None else None
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port
        self._prefix = parts.path.rstrip("/")
        self._ssl_context = ssl_context
        self._catalog: _Catalog | None = None
        self._idle: http.client.HTTPConnection | None = None
        self._idle_lock = threading.Lock()

    def __repr__(self) -> str:
        token = "<redacted>" if self._token is not None else None
        return f"RemoteSkillDiscoverer({self.base_url!r}, token={token}, timeout={self.timeout!r})"

    @property
    def diagnostics(self) -> tuple[str, ...]:
        """The server's messages for files it skipped, as of the last successful discovery."""
        return self._catalog.diagnostics if self._catalog is not None else ()

    @property
    def catalog_error(self) -> CatalogFailure | None:
        """Set while the server's scans fail, as of the last successful discovery: the catalog
        ``discover()`` returned is then the server's last good one, not its files' current state."""
        return self._catalog.error if self._catalog is not None else None

    async def discover(self) -> Sequence[Skill]:
        """The server's current catalog, in name order; a 304 answer reuses the cached one."""
        cached = self._catalog
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip"}
        if cached is not None and cached.etag is not None:
            headers["If-None-Match"] = cached.etag
        response = await self._request("skills", headers, _MAX_CATALOG_BYTES)
        if response.status == 304 and "If-None-Match" in headers:
            return cached.skills
        if response.status != 200:
            raise _error(response)
        catalog = _parse_catalog(response)
        self._catalog = catalog
        return catalog.skills

    async def load(self, skill: Skill) -> str:
        """The full current ``SKILL.md`` of ``skill``, which must be a current descriptor."""
        catalog = self._catalog
        entry = catalog.entries.get(getattr(skill, "name", None)) if catalog is not None else None
        if entry is None or entry[0] != skill:
            name = getattr(skill, "name", skill)
            raise ValueError(f"Skill {name!r} is not in this remote catalog; refresh discovery")
        expected = entry[1]
        path = "skills/" + urllib.parse.quote(skill.name, safe="") + "/content"
        headers = {"Accept": "text/markdown", "If-Match": expected}
        response = await self._request(path, headers, _MAX_CONTENT_BYTES)
        if response.status in (404, 409, 412):
            raise ValueError(f"Skill {skill.name!r} changed; refresh discovery and retry")
        if response.status != 200:
            raise _error(response)
        if response.headers.get("etag", expected) != expected:
            raise ValueError(f"Skill {skill.name!r} changed; refresh discovery and retry")
        try:
            return response.body.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SkillcatError(f"skillcat sent skill {skill.name!r} content that is not UTF-8") from error

    def close(self) -> None:
        """Close the idle keep-alive connection, if any (a later call opens a new one)."""
        with self._idle_lock:
            idle, self._idle = self._idle, None
        if idle is not None:
            idle.close()

    async def _request(self, path: str, headers: dict[str, str], limit: int) -> _Response:
        headers = {"User-Agent": _USER_AGENT, **headers}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.reveal()}"
        target = f"{self._prefix}/{path}"
        deadline = time.monotonic() + self.timeout
        try:
            # The worker thread honours the same deadline on its sockets; wait_for also releases
            # the caller when something outside them (name resolution) hangs.
            exchange = asyncio.to_thread(self._exchange, target, headers, limit, deadline)
            return await asyncio.wait_for(exchange, self.timeout)
        except SkillcatError:
            raise
        except TimeoutError as error:
            raise SkillcatTimeout(f"skillcat at {self.base_url} did not answer within {self.timeout:g}s") from error

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._idle_lock:
            idle, self._idle = self._idle, None
        if idle is not None:
            return idle, True
        if self._https:
            if self._ssl_context is None:
                self._ssl_context = ssl.create_default_context()
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout, context=self._ssl_context
            )
            return connection, False
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout), False

    def _exchange(self, target: str, headers: dict[str, str], limit: int, deadline: float) -> _Response:
        """Blocking: one GET within the deadline, retried once if a reused connection was stale."""
        while True:
            connection, reused = self._connection()
            try:
                response = self._exchange_on(connection, target, headers, limit, deadline)
            except _STALE_CONNECTION as error:
                connection.close()
                if reused:
                    continue
                raise SkillcatError(f"could not reach skillcat at {self.base_url}: {error}") from error
            except TimeoutError as error:
                connection.close()
                raise SkillcatTimeout(f"skillcat at {self.base_url} did not answer within {self.timeout:g}s") from error
            except SkillcatError:
                connection.close()
                raise
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                raise SkillcatError(f"could not reach skillcat at {self.base_url}: {error}") from error
            return response

    def _exchange_on(
        self, connection: http.client.HTTPConnection, target: str, headers: dict[str, str], limit: int, deadline: float
    ) -> _Response:
        def remaining() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("deadline reached")
            return left

        if connection.sock is None:
            connection.timeout = remaining()
            connection.connect()
        sock = connection.sock
        sock.settimeout(remaining())
        # A socket timeout bounds each read, not their sum: a server sending a byte now and then
        # would hold this thread (and asyncio.run's exit, which joins it) for ever. At the deadline
        # the watchdog shuts the socket down, which ends any blocked read at once.
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        watchdog = threading.Timer(remaining(), expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request("GET", target, headers=headers)
            response = connection.getresponse()
            chunks: list[bytes] = []
            size = 0
            while chunk := response.read(64 * 1024):
                size += len(chunk)
                if size > limit:
                    raise SkillcatError(f"skillcat's answer for {target} exceeds {limit} bytes")
                chunks.append(chunk)
            if response.length:
                raise http.client.IncompleteRead(b"".join(chunks), response.length)
        except (OSError, http.client.HTTPException) as error:
            if expired.is_set():
                raise TimeoutError("deadline reached") from error
            raise
        finally:
            watchdog.cancel()
        if expired.is_set():
            raise TimeoutError("deadline reached")
        body = b"".join(chunks)
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        response.close()
        if response.will_close:
            connection.close()
        else:
            with self._idle_lock:
                previous, self._idle = self._idle, connection
            if previous is not None:
                previous.close()
        encoding = answer_headers.get("content-encoding", "identity").strip().lower()
        return _Response(response.status, answer_headers, _decode(body, encoding, limit, target))


def _decode(body: bytes, encoding: str, limit: int, target: str) -> bytes:
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise SkillcatError(f"skillcat answered {target} with an unsupported content encoding {encoding!r}")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        plain = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise SkillcatError(f"skillcat answered {target} with corrupt gzip data") from error
    if len(plain) > limit or inflater.unconsumed_tail:
        raise SkillcatError(f"skillcat's answer for {target} exceeds {limit} bytes")
    if not inflater.eof:
        raise SkillcatError(f"skillcat answered {target} with truncated gzip data")
    return plain


def _problem(response: _Response) -> tuple[str | None, str | None]:
    """The problem kind and detail of an error answer, where it has them."""
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in ("application/problem+json", "application/json"):
        return None, None
    try:
        problem = json.loads(response.body.decode("utf-8"))
    except ValueError:
        return None, None
    if not isinstance(problem, dict):
        return None, None
    kind, detail = problem.get("type"), problem.get("detail")
    if isinstance(kind, str) and kind.startswith(_PROBLEM_PREFIX):
        kind = kind[len(_PROBLEM_PREFIX) :]
    return (kind if isinstance(kind, str) else None), (detail if isinstance(detail, str) else None)


def _error(response: _Response) -> Exception:
    kind, detail = _problem(response)
    if response.status == 503 and kind == "catalog-unavailable" and detail:
        # A source failed: nagents raises this same message (e.g. a duplicate name) locally.
        return ValueError(detail)
    reason = http.client.responses.get(response.status, "")
    message = f"skillcat answered {response.status} {reason}".rstrip()
    if detail:
        message += f": {detail}"
    return SkillcatError(
        message, status=response.status, kind=kind, detail=detail, retry_after=response.headers.get("retry-after")
    )


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise SkillcatError(f"skillcat sent a catalog whose {what} is not a string")
    return value


def _parse_catalog(response: _Response) -> _Catalog:
    try:
        data = json.loads(response.body.decode("utf-8"))
    except ValueError as error:
        raise SkillcatError("skillcat sent a catalog that is not UTF-8 JSON") from error
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        raise SkillcatError("skillcat sent a catalog without a skills list")
    entries: dict[str, tuple[Skill, str]] = {}
    for item in data["skills"]:
        if not isinstance(item, dict):
            raise SkillcatError("skillcat sent a catalog entry that is not an object")
        skill = Skill(
            _text(item.get("name"), "name"),
            _text(item.get("description"), "description"),
            _text(item.get("location"), "location"),
        )
        if skill.name in entries:
            raise ValueError(f"Duplicate skill name {skill.name!r} at {skill.location}")
        entries[skill.name] = (skill, _text(item.get("etag"), "etag"))
    entries = dict(sorted(entries.items()))
    diagnostics = tuple(
        item["message"]
        for item in data.get("diagnostics") or ()
        if isinstance(item, dict) and isinstance(item.get("message"), str)
    )
    error = None
    failure = data.get("error")
    if isinstance(failure, dict):
        error = CatalogFailure(
            _text(failure.get("source"), "error source"),
            _text(failure.get("message"), "error message"),
            _text(failure.get("since"), "error time"),
        )
    etag = response.headers.get("etag")
    if etag is None and isinstance(data.get("etag"), str):
        etag = data["etag"]
    return _Catalog(etag, tuple(skill for skill, _ in entries.values()), entries, diagnostics, error)
