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

A skill is also a folder (``scripts/``, ``references/``...), and the same discoverer fetches it::

    listing = await remote.list_files(skill)         # GET /skills/{name}/files, If-Match: its etag
    data = await remote.read_file(skill, listing.files[0])   # size and SHA-256 checked
    done = await remote.download(skill, ".agents/skills/" + skill.name)   # all or nothing

* ``list_files(skill)`` accepts only a current descriptor (as ``load``) and returns a
  ``FileListing`` whose every path was checked as a clean relative path (no ``..``, no leading
  ``/``, no hidden segment, no backslash or NUL): a listing with any other path, beyond the
  bounds (512 files, 16 MiB), naming a path twice or a file where another's folder is, is refused
  whole (``SkillcatError``). A skill over the bounds on the server is a ``SkillcatError`` with
  ``status`` 422 and ``kind`` ``files-unavailable``.
* ``read_file(skill, file)`` sends ``If-Match: "<digest>"`` and returns the bytes only if their
  size and SHA-256 are the listed ones (``SkillcatCorruptFile`` otherwise).
* ``download(skill, target_dir, replace=False)`` fetches and checks every file, writes them into
  a hidden staging folder beside ``target_dir`` (mode 0700 while it is written), each created
  relative to its open parent folder with ``O_EXCL | O_NOFOLLOW``, gives files 0644 (0755 when
  executable) and folders 0755, syncs, and renames the folder onto ``target_dir`` in one step. An
  existing ``target_dir`` raises ``FileExistsError`` unless ``replace``, and is replaced only if
  it is a folder (exchanged atomically where Linux's ``renameat2`` allows, then removed). On any
  failure the staging folder is removed and ``target_dir`` is as it was. Missing folders above
  ``target_dir`` are created, as ``skillcat download`` creates its ``--into``.

A skill can be pinned to a version, the digest of its folder (``sha256:<hex>`` of the lines
``<mode> <sha256 hex> <path>\\n`` of its files, in code-point path order, as ``GET /skills/{name}``
and ``/files`` give it), by name, or through a lock file as ``skillcat download --lock`` writes it::

    remote = RemoteSkillDiscoverer(url, pins={"pdf": "sha256:9f86d0..."}, lock="skills-lock.json")

* The lock's entries whose ``source`` is not this discoverer's ``base_url`` (trailing slashes
  aside) are ignored; a ``pins`` entry overrides the lock's for the same name.
* ``discover()`` returns a pinned skill's descriptor as it was at its version
  (``GET /skills/{name}?version=V``), also when the current catalog no longer has the skill or
  has another version of it. Pinned descriptors are immutable: each is fetched once.
* ``load``, ``list_files``, ``read_file`` and ``download`` of a pinned skill ask for its version
  (``?version=V``) and check what they get against it: the listing's lines must hash to ``V``,
  and ``SKILL.md`` (and every file read) must have the listed SHA-256 and size.
* A version the server no longer has (404 ``version-not-found``), or an answer that is not that
  version, raises ``PinnedVersionError`` (a ``ValueError``) naming the skill and the version; a
  pinned skill is never served at another version instead.
* ``listing_version(listing.files)`` computes a version from a listing, as the server does.

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
  - a descriptor the server sent that nagents' ``Skill`` rejects;
  - ``PinnedVersionError``: a pinned skill's version is not on the server, or what the server
    sent is not that version.
* ``SkillcatError`` (an ``OSError``): the server could not be reached, broke the protocol, or
  answered another error (401, 503 not ready / at capacity / shutting down, ...); it carries
  ``status``, ``kind`` (the problem type after ``urn:skillcat:problem:``), ``detail`` and
  ``retry_after`` where the answer had them.
* ``SkillcatCorruptFile`` (a ``SkillcatError``): a file's bytes are not what its listing says (of
  a pinned skill, also a ``PinnedVersionError``).
* ``SkillcatTimeout`` (a ``SkillcatError`` and a ``TimeoutError``): no complete answer within
  ``timeout`` seconds. The whole exchange (connect, request, reading the body) shares that one
  deadline, and the awaiting coroutine is released at the deadline even if name resolution hangs.

Connections go straight to ``base_url`` (proxy environment variables are not consulted;
redirects are not followed, so the token never leaves that origin). One idle keep-alive
connection is reused between calls; ``close()`` drops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import http.client
import json
import math
import os
import re
import shutil
import socket
import stat
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass

from nagents.skills import Skill

__all__ = [
    "CatalogFailure",
    "Downloaded",
    "FileListing",
    "PinnedVersionError",
    "RemoteFile",
    "RemoteSkillDiscoverer",
    "SearchHit",
    "SearchResults",
    "SkillcatCorruptFile",
    "SkillcatError",
    "SkillcatTimeout",
    "SkippedFile",
    "listing_version",
]

# A whole catalog (thousands of descriptors) fits easily; a larger answer is refused.
_MAX_CATALOG_BYTES = 64 * 1024 * 1024
# nagents and skillcat skip a SKILL.md over 4,000,000 bytes, so no content is larger.
_MAX_CONTENT_BYTES = 4_000_000
# The bounds every skillcat server keeps for a skill's files (SEP-2640's): a listing beyond them
# is refused rather than fetched.
_MAX_SKILL_FILES = 512
_MAX_SKILL_BYTES = 16 * 1024 * 1024
_MAX_SKILL_DEPTH = 32
_MAX_FILE_PATH_BYTES = 4096
# 512 entries of 4 KiB paths and the skipped entries fit many times over.
_MAX_LISTING_BYTES = 16 * 1024 * 1024
# At most 100 hits of a few KiB each.
_MAX_SEARCH_BYTES = 4 * 1024 * 1024
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A skill's name as the server's routes accept it.
_SKILL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# One skill's descriptor (GET /skills/{name}): a name, a description of at most 1,024 characters,
# a location, a source label and two digests.
_MAX_DESCRIPTOR_BYTES = 1024 * 1024
# An error's problem+json body: a type, a title, a status and a detail of a line or two.
_MAX_PROBLEM_BYTES = 64 * 1024
# A lock file names a few skills; thousands fit many times over.
_MAX_LOCK_BYTES = 16 * 1024 * 1024
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


class SkillcatCorruptFile(SkillcatError):
    """A file's bytes are not what its listing says (another size or SHA-256); they are dropped."""


class PinnedVersionError(ValueError):
    """A pinned skill's version is not on the server (any longer), or what the server sent for it
    is not that version. Never answered by serving another version instead."""

    def __init__(self, message: str, *, name: str, version: str) -> None:
        super().__init__(message)
        self.name = name
        self.version = version


class _PinnedCorruptFile(SkillcatCorruptFile, PinnedVersionError):
    """A file of a pinned skill whose bytes are not the listed ones: both a corrupt file and not
    the pinned version."""

    def __init__(self, message: str, *, name: str, version: str) -> None:
        SkillcatCorruptFile.__init__(self, message)
        self.name = name
        self.version = version


class _TooLarge(SkillcatError):
    """An answer longer than the caller allowed."""


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


@dataclass(frozen=True)
class RemoteFile:
    """One file of a remote skill, as its listing names it."""

    path: str
    """Relative to the skill's folder, ``/``-separated; checked to name nothing outside it."""
    size: int
    digest: str
    """``sha256:<64 hex digits>`` of the bytes."""
    media_type: str
    executable: bool
    """Written with mode 0755 when downloaded (otherwise 0644)."""


@dataclass(frozen=True)
class SkippedFile:
    """Something beneath the skill's folder on the server that is not served, and why."""

    path: str
    """As the server reports it; only shown, never used as a path."""
    reason: str


@dataclass(frozen=True)
class FileListing:
    """The files of one version of a skill, in code-point order of their paths."""

    name: str
    etag: str
    """The skill's etag: the version listed."""
    files: tuple[RemoteFile, ...]
    skipped: tuple[SkippedFile, ...]
    version: str | None = None
    """The version listed (``sha256:<hex>``), where the server says it; of a pinned skill, the pin,
    checked against the files."""

    @property
    def size(self) -> int:
        """The bytes of all files together."""
        return sum(file.size for file in self.files)


@dataclass(frozen=True)
class Downloaded:
    """What ``download`` wrote."""

    path: str
    name: str
    etag: str
    """The skill's etag: the version downloaded."""
    files: int
    size: int
    """The bytes of all files together."""
    replaced: bool
    """An existing folder was replaced."""
    leftover: str | None
    """Where the replaced folder was left when it could not be removed (a read-only folder in
    it, say); the new folder is in place all the same."""
    version: str | None = None
    """The version downloaded (``sha256:<hex>``), where the server says it; of a pinned skill, the
    pin, checked against every file."""


@dataclass(frozen=True)
class SearchHit:
    """A skill a search found."""

    name: str
    description: str
    source: str
    """The label of the server-side source that owns the skill."""
    etag: str
    """The skill's etag, as the catalog lists it."""
    score: float
    """Relevance; higher is better, comparable within one answer only."""
    excerpt: tuple[tuple[str, bool], ...]
    """Where the query matched, as ``(text, highlighted)`` pieces; plain text, not HTML."""

    @property
    def excerpt_text(self) -> str:
        """The excerpt as plain text."""
        return "".join(text for text, _ in self.excerpt)


@dataclass(frozen=True)
class SearchResults:
    """The answer to a search: the best hits, and how many skills matched in all."""

    etag: str
    """The tag of the catalog searched."""
    total: int
    hits: tuple[SearchHit, ...]


class RemoteSkillDiscoverer:
    """nagents ``SkillDiscoverer`` over a skillcat server's ``/skills`` routes.

    Args:
        base_url: ``http://`` or ``https://`` URL of the server, optionally with a path prefix
            (``https://gateway/skillcat/``); a trailing slash is optional.
        token: sent as ``Authorization: Bearer <token>``; never shown by ``repr``.
        timeout: seconds allowed for each whole request (connect, send, read the answer).
        ssl_context: for ``https``, the context to verify the server with (default: the
            system's trusted certificates).
        pins: ``{name: "sha256:<64 hex>"}``: skills discovered, loaded and fetched at that
            version only.
        lock: a lock file (``{"lockfile_version": 1, "skills": {name: {"source", "version"}}}``),
            read now: its entries for this ``base_url`` pin their skills (``pins`` wins a name).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        pins: Mapping[str, str] | None = None,
        lock: str | os.PathLike[str] | None = None,
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
        effective = _read_lock(lock, base_url) if lock is not None else {}
        effective.update(_check_pins(pins))
        self._pins: Mapping[str, str] = dict(sorted(effective.items()))
        # name -> (descriptor at the pinned version, its etag); fetched once, immutable.
        self._pinned: dict[str, tuple[Skill, str]] = {}
        # name -> the pinned version's listing, checked against the version.
        self._pinned_listings: dict[str, FileListing] = {}

    def __repr__(self) -> str:
        token = "<redacted>" if self._token is not None else None
        return f"RemoteSkillDiscoverer({self.base_url!r}, token={token}, timeout={self.timeout!r})"

    @property
    def pins(self) -> Mapping[str, str]:
        """The pinned skills and their versions (``pins`` over the lock's), by name."""
        return dict(self._pins)

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
        """The server's current catalog, in name order, with each pinned skill's descriptor at its
        version in place of (or beside) the current one; a 304 answer reuses the cached one."""
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
        if self._pins:
            for name, version in self._pins.items():
                if name not in self._pinned:
                    self._pinned[name] = await self._pinned_descriptor(name, version)
            entries = {**catalog.entries, **self._pinned}
            entries = dict(sorted(entries.items()))
            skills = tuple(skill for skill, _ in entries.values())
            catalog = _Catalog(catalog.etag, skills, entries, catalog.diagnostics, catalog.error)
        self._catalog = catalog
        return catalog.skills

    async def load(self, skill: Skill) -> str:
        """The full current ``SKILL.md`` of ``skill``, which must be a current descriptor; of a
        pinned skill, its ``SKILL.md`` at the pinned version, checked against it."""
        expected = self._current_etag(skill)
        version = self._pins.get(skill.name)
        if version is not None:
            return await self._load_pinned(skill.name, version)
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

    async def list_files(self, skill: Skill) -> FileListing:
        """The files of ``skill`` (a current descriptor), exactly the version discovered (of a
        pinned skill, its pinned version: the listing's lines must hash to it)."""
        expected = self._current_etag(skill)
        version = self._pins.get(skill.name)
        if version is not None:
            return await self._pinned_listing(skill.name, version)
        path = "skills/" + urllib.parse.quote(skill.name, safe="") + "/files"
        headers = {"Accept": "application/json", "If-Match": expected}
        try:
            response = await self._request(path, headers, _MAX_LISTING_BYTES)
        except _TooLarge as error:
            too_large = f"skillcat sent a file listing of {skill.name!r} over {_MAX_LISTING_BYTES} bytes"
            raise SkillcatError(too_large) from error
        if response.status in (404, 409, 412):
            raise ValueError(f"Skill {skill.name!r} changed; refresh discovery and retry")
        if response.status != 200:
            raise _error(response)
        return _parse_listing(response.body, skill.name, expected)

    async def _pinned_descriptor(self, name: str, version: str) -> tuple[Skill, str]:
        """``GET /skills/{name}?version=V``: the skill's descriptor at ``version``, and its etag."""
        response = await self._pinned_request(name, version, "", "application/json", _MAX_DESCRIPTOR_BYTES)
        try:
            data = json.loads(response.body.decode("utf-8"))
        except ValueError as error:
            raise SkillcatError(f"skillcat sent a descriptor of {name!r} that is not UTF-8 JSON") from error
        if not isinstance(data, dict):
            raise SkillcatError(f"skillcat sent a descriptor of {name!r} that is not an object")
        if data.get("name") != name or data.get("version") != version:
            sent = f"{data.get('name')!r} at version {data.get('version')}"
            raise _not_the_version(name, version, f"the server sent the descriptor of {sent}")
        skill = Skill(
            _text(data.get("name"), "name"),
            _text(data.get("description"), "description"),
            _text(data.get("location"), "location"),
        )
        etag = data.get("etag")
        return skill, etag if isinstance(etag, str) else f'"{version}"'

    async def _pinned_listing(self, name: str, version: str) -> FileListing:
        """The files of ``name`` at ``version`` (``GET /skills/{name}/files?version=V``), whose lines
        ``<mode> <sha256 hex> <path>`` hash to ``version``; kept once checked."""
        listing = self._pinned_listings.get(name)
        if listing is not None:
            return listing
        try:
            response = await self._pinned_request(name, version, "/files", "application/json", _MAX_LISTING_BYTES)
        except _TooLarge as error:
            too_large = f"skillcat sent a file listing of {name!r} over {_MAX_LISTING_BYTES} bytes"
            raise SkillcatError(too_large) from error
        listing = _parse_listing(response.body, name, None, version)
        computed = listing_version(listing.files)
        if computed != version:
            raise _not_the_version(name, version, f"the files the server listed are version {computed}")
        if not any(file.path == _SKILL_FILE for file in listing.files):
            raise _not_the_version(name, version, "the server listed no SKILL.md")
        self._pinned_listings[name] = listing
        return listing

    async def _load_pinned(self, name: str, version: str) -> str:
        """``SKILL.md`` of ``name`` at ``version``: the bytes must be the checked listing's."""
        listing = await self._pinned_listing(name, version)
        entry = next(file for file in listing.files if file.path == _SKILL_FILE)
        limit = min(entry.size, _MAX_CONTENT_BYTES)
        try:
            response = await self._pinned_request(name, version, "/content", "text/markdown", limit)
        except _TooLarge as error:
            longer = f"its SKILL.md is longer than the {entry.size} bytes listed"
            raise _not_the_version(name, version, longer) from error
        digest = "sha256:" + hashlib.sha256(response.body).hexdigest()
        if len(response.body) != entry.size or digest != entry.digest:
            raise _not_the_version(name, version, f"its SKILL.md hashes to {digest}, not the listed {entry.digest}")
        try:
            return response.body.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SkillcatError(f"skillcat sent skill {name!r} content that is not UTF-8") from error

    async def _pinned_request(self, name: str, version: str, route: str, accept: str, limit: int) -> _Response:
        """``GET /skills/{name}{route}?version=V``: a 200; ``PinnedVersionError`` where the server
        has no such version of the skill (404); or the error answered."""
        path = f"skills/{urllib.parse.quote(name, safe='')}{route}?version={urllib.parse.quote(version, safe=':')}"
        # An error's problem may be longer than a small file: read up to that much, then apply
        # ``limit`` to what the answer is, a 200.
        response = await self._request(path, {"Accept": accept}, max(limit, _MAX_PROBLEM_BYTES))
        if response.status == 200 and len(response.body) > limit:
            raise _TooLarge(f"skillcat's answer for {path} exceeds {limit} bytes")
        if response.status == 404:
            kind, detail = _problem(response)
            why = f"skillcat at {self.base_url} does not have it ({kind or 'not found'}"
            why += f": {detail})" if detail else ")"
            raise _not_the_version(name, version, why)
        if response.status != 200:
            raise _error(response)
        return response

    async def read_file(self, skill: Skill, file: RemoteFile) -> bytes:
        """The bytes of ``file`` of ``skill``, if their size and SHA-256 are the listed ones."""
        if not isinstance(file, RemoteFile):
            raise TypeError("file must be a RemoteFile of a listing")
        _file_path(file.path, skill.name)
        segments = [urllib.parse.quote(segment, safe="") for segment in file.path.split("/")]
        version = self._pins.get(skill.name)
        if version is not None:
            return await self._read_pinned(skill.name, version, "/files/" + "/".join(segments), file)
        path = "skills/" + urllib.parse.quote(skill.name, safe="") + "/files/" + "/".join(segments)
        try:
            response = await self._request(path, {"If-Match": f'"{file.digest}"'}, file.size)
        except _TooLarge as error:
            raise SkillcatCorruptFile(f"file {file.path!r} of skill {skill.name!r} is longer than listed") from error
        if response.status in (404, 409, 412):
            raise ValueError(f"Skill {skill.name!r} changed; refresh discovery and retry")
        if response.status != 200:
            raise _error(response)
        data = response.body
        if len(data) != file.size:
            raise SkillcatCorruptFile(
                f"file {file.path!r} of skill {skill.name!r} is {len(data)} bytes, not the {file.size} listed"
            )
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if digest != file.digest:
            raise SkillcatCorruptFile(
                f"file {file.path!r} of skill {skill.name!r} hashes to {digest}, not {file.digest}"
            )
        return data

    async def _read_pinned(self, name: str, version: str, route: str, file: RemoteFile) -> bytes:
        """``file`` of ``name`` at ``version``: its bytes only if they are the listed ones."""

        def corrupt(what: str) -> _PinnedCorruptFile:
            message = f"file {file.path!r} of skill {name!r} at pinned version {version} {what}"
            return _PinnedCorruptFile(message, name=name, version=version)

        try:
            response = await self._pinned_request(name, version, route, "*/*", file.size)
        except _TooLarge as error:
            raise corrupt("is longer than listed") from error
        data = response.body
        if len(data) != file.size:
            raise corrupt(f"is {len(data)} bytes, not the {file.size} listed")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if digest != file.digest:
            raise corrupt(f"hashes to {digest}, not {file.digest}")
        return data

    async def download(self, skill: Skill, target_dir: str | os.PathLike[str], replace: bool = False) -> Downloaded:
        """Downloads the folder of ``skill`` (a current descriptor) as ``target_dir``, all or nothing."""
        target = os.fspath(target_dir)
        # Refused before anything is fetched; checked again when the folder is put in place.
        await asyncio.to_thread(_check_target, target, replace)
        listing = await self.list_files(skill)
        if not any(file.path == "SKILL.md" for file in listing.files):
            raise SkillcatError(f"skillcat sent a file listing of {skill.name!r} without SKILL.md")
        contents = [(file, await self.read_file(skill, file)) for file in listing.files]
        replaced, leftover = await asyncio.to_thread(_install, target, contents, replace)
        return Downloaded(
            target, listing.name, listing.etag, len(listing.files), listing.size, replaced, leftover, listing.version
        )

    async def search(self, query: str, limit: int | None = None) -> SearchResults:
        """The skills that best match ``query`` (``GET /search``), at most ``limit`` (1 to 100;
        ``None``: the server's default, 20), ranked by relevance to their names, descriptions and
        ``SKILL.md`` texts. A query without a letter or digit matches nothing; one over 256
        characters is refused with a ``SkillcatError`` of kind ``invalid-query``."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100):
            raise ValueError(f"a search limit is an integer from 1 to 100, not {limit!r}")
        parameters = {"q": query} if limit is None else {"q": query, "limit": str(limit)}
        path = "search?" + urllib.parse.urlencode(parameters, quote_via=urllib.parse.quote)
        response = await self._request(path, {"Accept": "application/json"}, _MAX_SEARCH_BYTES)
        if response.status != 200:
            raise _error(response)
        return _parse_search(response.body)

    def _current_etag(self, skill: Skill) -> str:
        catalog = self._catalog
        entry = catalog.entries.get(getattr(skill, "name", None)) if catalog is not None else None
        if entry is None or entry[0] != skill:
            name = getattr(skill, "name", skill)
            raise ValueError(f"Skill {name!r} is not in this remote catalog; refresh discovery")
        return entry[1]

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
                    raise _TooLarge(f"skillcat's answer for {target} exceeds {limit} bytes")
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
        raise _TooLarge(f"skillcat's answer for {target} exceeds {limit} bytes")
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


def _parse_search(body: bytes) -> SearchResults:
    try:
        data = json.loads(body.decode("utf-8"))
    except ValueError as error:
        raise SkillcatError("skillcat sent a search answer that is not UTF-8 JSON") from error
    if not isinstance(data, dict) or not isinstance(data.get("hits"), list) or not isinstance(data.get("total"), int):
        raise SkillcatError("skillcat sent a search answer without hits and a total")
    hits = []
    for item in data["hits"]:
        if not isinstance(item, dict) or not isinstance(item.get("excerpt"), list):
            raise SkillcatError("skillcat sent a search hit that is not an object with an excerpt")
        score = item.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise SkillcatError("skillcat sent a search hit whose score is not a number")
        excerpt = tuple(
            (_text(part.get("text"), "excerpt text"), part.get("highlight") is True)
            for part in item["excerpt"]
            if isinstance(part, dict)
        )
        hits.append(
            SearchHit(
                _text(item.get("name"), "name"),
                _text(item.get("description"), "description"),
                _text(item.get("source"), "source"),
                _text(item.get("etag"), "etag"),
                float(score),
                excerpt,
            )
        )
    return SearchResults(_text(data.get("etag"), "etag"), data["total"], tuple(hits))


def _unsafe(name: str, what: str) -> SkillcatError:
    return SkillcatError(f"skillcat sent a file listing of {name!r} that {what}")


def _file_path(value: object, name: str) -> str:
    """``value`` if it is a clean relative path, as skillcat-core's ``SkillFilePath``: not empty,
    at most 4096 UTF-8 bytes, no leading ``/``, and no segment that is empty, ``.``, ``..``, hidden
    (``.`` first), or holds a backslash or NUL. Such a path names nothing outside the folder."""
    if not isinstance(value, str) or not value:
        raise _unsafe(name, f"names an unsafe path {value!r}: not a nonempty string")
    try:
        length = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _unsafe(name, f"names an unsafe path {value!r}: not valid Unicode") from None
    if length > _MAX_FILE_PATH_BYTES:
        raise _unsafe(name, f"names an unsafe path {value[:80]!r}...: longer than {_MAX_FILE_PATH_BYTES} bytes")
    if value.startswith("/"):
        raise _unsafe(name, f"names an unsafe path {value!r}: absolute")
    for segment in value.split("/"):
        if segment in ("", ".", "..") or segment.startswith(".") or "\\" in segment or "\0" in segment:
            raise _unsafe(name, f"names an unsafe path {value!r}: segment {segment!r}")
    return value


def _parse_listing(body: bytes, name: str, etag: str | None, version: str | None = None) -> FileListing:
    """A ``GET /skills/{name}/files`` body for the tag ``etag`` of ``name`` (or, pinned, for the
    version ``version``, whatever its tag), checked whole."""
    try:
        data = json.loads(body.decode("utf-8"))
    except ValueError as error:
        raise _unsafe(name, "is not UTF-8 JSON") from error
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise _unsafe(name, "has no files list")
    if version is not None:
        if data.get("name") != name or data.get("version") != version:
            sent = f"{data.get('name')!r} at version {data.get('version')}"
            raise _not_the_version(name, version, f"the server sent the file listing of {sent}")
        etag = _text(data.get("etag"), "etag")
    if data.get("name") != name:
        raise _unsafe(name, f"names another skill, {data.get('name')!r}")
    if data.get("etag") != etag:
        raise _unsafe(name, f"is of another version ({data.get('etag')!r}, not {etag!r})")
    listed = data.get("version")
    if version is None and isinstance(listed, str) and _DIGEST.fullmatch(listed):
        version = listed
    if len(data["files"]) > _MAX_SKILL_FILES:
        raise _unsafe(name, f"has {len(data['files'])} files, more than {_MAX_SKILL_FILES}")
    files: dict[str, RemoteFile] = {}
    total = 0
    for item in data["files"]:
        if not isinstance(item, dict):
            raise _unsafe(name, "has an entry that is not an object")
        path = _file_path(item.get("path"), name)
        if path.count("/") > _MAX_SKILL_DEPTH:
            raise _unsafe(name, f"names a path more than {_MAX_SKILL_DEPTH} folders deep, {path!r}")
        size, digest = item.get("size"), item.get("digest")
        media_type, executable = item.get("media_type"), item.get("executable")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise _unsafe(name, f"has a bad size for {path!r}")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise _unsafe(name, f"has a bad digest for {path!r}")
        if not isinstance(media_type, str) or not isinstance(executable, bool):
            raise _unsafe(name, f"has a bad media type or executable flag for {path!r}")
        if path in files:
            raise _unsafe(name, f"names a path twice, {path!r}")
        total += size
        if total > _MAX_SKILL_BYTES:
            raise _unsafe(name, f"adds up to more than {_MAX_SKILL_BYTES} bytes")
        files[path] = RemoteFile(path, size, digest, media_type, executable)
    for path in files:
        parts = path.split("/")
        for end in range(1, len(parts)):
            folder = "/".join(parts[:end])
            if folder in files:
                raise _unsafe(name, f"names {folder!r} both as a file and as a folder")
    skipped = tuple(
        SkippedFile(item["path"], item["reason"])
        for item in data.get("skipped") or ()
        if isinstance(item, dict) and isinstance(item.get("path"), str) and isinstance(item.get("reason"), str)
    )
    ordered = tuple(files[path] for path in sorted(files))
    return FileListing(name, etag, ordered, skipped, version)


def listing_version(files: Sequence[RemoteFile]) -> str:
    """The version of a skill made of ``files``: ``sha256:<hex>`` of one line
    ``<mode> <sha256 hex> <path>\\n`` per file (mode ``755`` when executable, else ``644``) in
    code-point order of the paths, as the server computes it."""
    lines = hashlib.sha256()
    for file in sorted(files, key=lambda file: file.path):
        mode = "755" if file.executable else "644"
        lines.update(f"{mode} {file.digest.removeprefix('sha256:')} {file.path}\n".encode())
    return "sha256:" + lines.hexdigest()


def _not_the_version(name: str, version: str, why: str) -> PinnedVersionError:
    return PinnedVersionError(f"Skill {name!r} at pinned version {version}: {why}", name=name, version=version)


def _check_pins(pins: Mapping[str, str] | None) -> dict[str, str]:
    if pins is None:
        return {}
    if not isinstance(pins, Mapping):
        raise TypeError("pins must be a mapping of skill names to versions")
    checked = {}
    for name, version in pins.items():
        if not isinstance(name, str) or not _SKILL_NAME.fullmatch(name):
            raise ValueError(f"pins: {name!r} is not a skill name")
        if not isinstance(version, str) or not _DIGEST.fullmatch(version):
            digest = "'sha256:' and 64 lowercase hex digits"
            raise ValueError(f"pins: the version of {name!r} must be {digest}, not {version!r}")
        checked[name] = version
    return checked


def _read_lock(path: str | os.PathLike[str], base_url: str) -> dict[str, str]:
    """The pins of a lock file (``{"lockfile_version": 1, "skills": {name: {"source", "version"}}}``)
    for the server ``base_url``: entries of other sources are left out."""
    with open(path, "rb") as stream:
        data = stream.read(_MAX_LOCK_BYTES + 1)
    if len(data) > _MAX_LOCK_BYTES:
        raise ValueError(f"lock file {os.fspath(path)!r} is over {_MAX_LOCK_BYTES} bytes")
    try:
        lock = json.loads(data.decode("utf-8"))
    except ValueError as error:
        raise ValueError(f"lock file {os.fspath(path)!r} is not UTF-8 JSON: {error}") from error
    if not isinstance(lock, dict) or lock.get("lockfile_version") != 1 or not isinstance(lock.get("skills"), dict):
        raise ValueError(f"lock file {os.fspath(path)!r} is not a lockfile_version 1 object with skills")
    source = base_url.strip().rstrip("/")
    pins = {}
    for name, entry in lock["skills"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            raise ValueError(f"lock file {os.fspath(path)!r}: the entry of {name!r} has no source")
        try:
            # Every entry is checked, this server's or not: a lock with a broken entry is broken.
            (version,) = _check_pins({name: entry.get("version")}).values()
        except ValueError as error:
            raise ValueError(f"lock file {os.fspath(path)!r}: {error}") from None
        if entry["source"].strip().rstrip("/") == source:
            pins[name] = version
    return pins


# Writing a download. Everything is opened relative to an open folder, without following
# symlinks, and files are created with O_EXCL: nothing is re-resolved from a path string and
# nothing that exists is written through. The staging folder is private (0700) while it is
# filled, so no other user can put anything in it. A hidden name does not hide it from skill
# discovery (nagents walks hidden folders), and a scan meeting a SKILL.md there would see the
# skill twice and fail: every SKILL.md is written under a hidden name and renamed only once all
# else is written and synced, and a replaced folder loses its SKILL.md first when removed.
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SKILL_FILE = "SKILL.md"
# Hidden, so no listed path can be this name.
_SKILL_FILE_PART = ".SKILL.md.skillcat-part"
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_renameat2_function: object = None


def _renameat2(parent: int, old: str, new: str, flags: int) -> bool:
    """Linux's renameat2 within the folder ``parent``, through ctypes: True once done, False where
    the system or the filesystem does not have it (the caller then falls back on plain renames)."""
    global _renameat2_function
    if _renameat2_function is None:
        _renameat2_function = False
        try:
            import ctypes

            function = ctypes.CDLL(None, use_errno=True).renameat2
            function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            function.restype = ctypes.c_int
            _renameat2_function = (function, ctypes.get_errno)
        except (ImportError, AttributeError, OSError):
            pass
    if not _renameat2_function:
        return False
    function, get_errno = _renameat2_function
    if function(parent, os.fsencode(old), parent, os.fsencode(new), flags) == 0:
        return True
    code = get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), new)


def _split_target(target: str) -> tuple[str, str]:
    parent, name = os.path.split(target.rstrip("/") or target)
    if name in ("", ".", ".."):
        raise ValueError(f"target_dir must end in a folder name, not {target!r}")
    return parent or ".", name


def _existing(parent: int, name: str) -> bool | None:
    """None if nothing is at ``name``, else whether it is a folder (a symlink is not followed)."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    return stat.S_ISDIR(mode)


def _refuse(target: str, parent: int, name: str, replace: bool) -> None:
    existing = _existing(parent, name)
    if existing is None or (existing and replace):
        return
    if existing:
        raise FileExistsError(errno.EEXIST, "the folder exists; pass replace=True to replace it", target)
    raise FileExistsError(errno.EEXIST, "it exists and is not a folder; a download never replaces it", target)


def _check_target(target: str, replace: bool) -> None:
    parent_path, name = _split_target(target)
    try:
        parent = os.open(parent_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        # Nothing is there yet: the download creates the folders above it.
        return
    try:
        _refuse(target, parent, name, replace)
    finally:
        os.close(parent)


def _hidden_name(name: str, kind: str) -> str:
    # Hidden, beside the target, saying what it is to whoever finds one after a crash; the
    # target's part is cut so that the whole stays within a name's 255 bytes.
    stem = os.fsencode(name)[:200]
    return os.fsdecode(b"." + stem + f".skillcat-{kind}-{os.urandom(8).hex()}".encode())


def _remove(parent: int, name: str) -> None:
    """Removes ``name`` and all beneath it without following symlinks (a symlink is removed, never
    what it points to); a SKILL.md directly in it first."""
    if not _existing(parent, name):
        os.unlink(name, dir_fd=parent)
        return
    folder = os.open(name, _FOLDER, dir_fd=parent)
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(_SKILL_FILE, dir_fd=folder)
    finally:
        os.close(folder)
    shutil.rmtree(name, dir_fd=parent)


def _remove_or_keep(parent: int, parent_path: str, name: str) -> str | None:
    """Removes a replaced folder; where that fails, says where it was left."""
    try:
        _remove(parent, name)
    except OSError:
        return os.path.join(parent_path, name)
    return None


def _write_file(root: int, path: str, data: bytes, executable: bool) -> None:
    *folders, name = path.split("/")
    fd = root
    try:
        for segment in folders:
            try:
                os.mkdir(segment, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            # A name there that is not a folder fails here rather than being written through.
            child = os.open(segment, _FOLDER, dir_fd=fd)
            if fd != root:
                os.close(fd)
            fd = child
        out = os.open(_SKILL_FILE_PART if name == _SKILL_FILE else name, _NEW_FILE, 0o600, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            os.fchmod(out, 0o755 if executable else 0o644)
            os.fsync(out)
        finally:
            os.close(out)
    finally:
        if fd != root:
            os.close(fd)


def _seal(fd: int) -> None:
    os.fchmod(fd, 0o755)
    os.fsync(fd)


@contextlib.contextmanager
def _folder(root: int, segments: Sequence[str]):
    """The folder whose ``segments`` lead from ``root``, open (``root`` itself for none)."""
    fd = root
    try:
        for segment in segments:
            child = os.open(segment, _FOLDER, dir_fd=fd)
            if fd != root:
                os.close(fd)
            fd = child
        yield fd
    finally:
        if fd != root:
            os.close(fd)


def _seal_folders(root: int, paths: Sequence[str]) -> None:
    folders = {"/".join(parts[:end]) for parts in (p.split("/") for p in paths) for end in range(1, len(parts))}
    for folder in sorted(folders):
        with _folder(root, folder.split("/")) as fd:
            _seal(fd)
    _seal(root)


def _publish_skill_file(root: int, path: str) -> None:
    """Renames the SKILL.md at ``path``, written as _SKILL_FILE_PART, to its name; syncs its folder."""
    with _folder(root, path.split("/")[:-1]) as fd:
        # The staging folder holds only what was written into it: a plain rename replaces nothing.
        os.rename(_SKILL_FILE_PART, _SKILL_FILE, src_dir_fd=fd, dst_dir_fd=fd)
        os.fsync(fd)


def _fill(root: int, contents: Sequence[tuple[RemoteFile, bytes]]) -> None:
    for file, data in contents:
        _write_file(root, file.path, data, file.executable)
    _seal_folders(root, [file.path for file, _ in contents])
    for file, _ in contents:
        if file.path.split("/")[-1] == _SKILL_FILE:
            _publish_skill_file(root, file.path)


def _install(target: str, contents: Sequence[tuple[RemoteFile, bytes]], replace: bool) -> tuple[bool, str | None]:
    """Writes ``contents`` as the folder ``target``: (whether a folder was replaced, where the
    replaced one was left if it could not be removed)."""
    parent_path, name = _split_target(target)
    for file, _ in contents:
        # The listing was checked; this keeps the writing safe on its own (a '..' segment is a
        # real folder to openat, O_NOFOLLOW or not).
        _file_path(file.path, name)
    # Missing folders above the target are created, as `skillcat download` creates its --into.
    os.makedirs(parent_path, exist_ok=True)
    parent = os.open(parent_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _refuse(target, parent, name, replace)
        for _ in range(16):
            staging = _hidden_name(name, "tmp")
            try:
                os.mkdir(staging, 0o700, dir_fd=parent)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(errno.EEXIST, "no free name for a staging folder", target)
        placed = False
        try:
            root = os.open(staging, _FOLDER, dir_fd=parent)
            try:
                _fill(root, contents)
            finally:
                os.close(root)
            result = _swap_in(target, parent, parent_path, staging, name, replace)
            placed = True
        finally:
            if not placed:
                # Best effort: the error that got here is the one to report.
                with contextlib.suppress(OSError):
                    _remove(parent, staging)
        try:
            # The renames are durable once the parent is synced; the target has changed already,
            # so a failure here is no reason to report the download as failed.
            os.fsync(parent)
        except OSError:
            pass
        return result
    finally:
        os.close(parent)


def _swap_in(
    target: str, parent: int, parent_path: str, staging: str, name: str, replace: bool
) -> tuple[bool, str | None]:
    if replace:
        try:
            exchanged = _renameat2(parent, staging, name, _RENAME_EXCHANGE)
        except FileNotFoundError:
            exchanged = None  # the target went away meanwhile: put in place as if it never was
        if exchanged:
            # The old folder now has the staging folder's name.
            return True, _remove_or_keep(parent, parent_path, staging)
        if exchanged is False and _existing(parent, name) is not None:
            # No atomic exchange here: the old folder is moved aside, the new one onto its name
            # (the old one goes back if that fails). Between the two the name is briefly free.
            aside = _hidden_name(name, "old")
            os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=parent)
            try:
                os.rename(staging, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                os.rename(aside, name, src_dir_fd=parent, dst_dir_fd=parent)
                raise
            return True, _remove_or_keep(parent, parent_path, aside)
    try:
        if _renameat2(parent, staging, name, _RENAME_NOREPLACE):
            return False, None
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "it appeared while the skill was downloaded", target) from None
    # Without RENAME_NOREPLACE a rename would replace an empty folder made since the check; this
    # narrows the window to the two calls.
    if _existing(parent, name) is not None:
        raise FileExistsError(errno.EEXIST, "it appeared while the skill was downloaded", target)
    os.rename(staging, name, src_dir_fd=parent, dst_dir_fd=parent)
    return False, None
