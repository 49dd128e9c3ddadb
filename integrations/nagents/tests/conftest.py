"""Fixtures: the skillcat binary (built with cargo unless SKILLCAT_BIN names one) and real
`skillcat serve` processes over temporary trees, each on a port the server picks itself."""

import contextlib
import hashlib
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
# The module under test, and the servers, skills and files as every Python test and benchmark has
# them (tests/support); neither is installed.
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(REPO / "tests" / "support"))
from skillcat_support import Server  # noqa: E402 - needs the path above
from skillcat_support import Servers  # noqa: E402
from skillcat_support import skillcat_binary  # noqa: E402

# Never send the tests' own requests through a proxy from the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url, headers=None, timeout=10.0):
    """(status, headers, body) of a GET, error statuses included."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with OPENER.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers, error.read()


class CatalogServer(Server):
    """A server with what the tests wait for and count: new catalog versions and metrics."""

    def catalog_etag(self):
        status, headers, _ = http_get(self.url + "/skills")
        return status, headers.get("ETag")

    def wait_for_change(self, before, timeout=15.0):
        """Waits until the server publishes a catalog other than `before` (status, etag)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.catalog_etag()
            if now != before:
                return now
            time.sleep(0.02)
        raise AssertionError(f"skillcat did not notice the change within {timeout}s")

    @contextlib.contextmanager
    def expecting_a_new_catalog(self, timeout=15.0):
        """Around a change to the served tree: once the block is done, waits until the server
        publishes a catalog other than the one before it."""
        before = self.catalog_etag()
        yield
        self.wait_for_change(before, timeout)

    def metric(self, route, status):
        _, _, body = http_get(self.url + "/metrics")
        prefix = f'skillcat_http_requests_total{{route="{route}",status="{status}"}} '
        for line in body.decode().splitlines():
            if line.startswith(prefix):
                return int(float(line[len(prefix) :]))
        return 0


@pytest.fixture(scope="session")
def skillcat_bin():
    return skillcat_binary()


@pytest.fixture
def serve(skillcat_bin):
    """serve(dir, ..., token_file=None) starts `skillcat serve` over those directory sources (and
    that bearer-token file); stopped after the test."""
    servers = Servers(skillcat_bin, CatalogServer)
    yield servers.start
    servers.close()


class FakeSkillcat:
    """A scripted stand-in that records every request (path and headers)."""

    def __init__(self):
        self.requests = []
        self.answers = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.requests.append((self.path, dict(self.headers.items())))
                status, headers, body = fake.answer(self.path, self.headers)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def answer(self, path, headers):
        if path in self.answers:
            return self.answers[path]
        if path.endswith("/skills"):
            if headers.get("If-None-Match") == '"v1"':
                return 304, {"ETag": '"v1"'}, b""
            catalog = {
                "etag": '"v1"',
                "skills": [{"name": "fake", "description": "A fake", "location": "/f", "source": "s", "etag": '"e1"'}],
                "shadowed": [],
                "diagnostics": [],
            }
            return 200, {"ETag": '"v1"', "Content-Type": "application/json"}, json.dumps(catalog).encode()
        if path.endswith("/skills/fake/content"):
            if headers.get("If-Match") != '"e1"':
                return 412, {"Content-Type": "application/problem+json"}, b"{}"
            return 200, {"ETag": '"e1"', "Content-Type": "text/markdown; charset=utf-8"}, "Fake ✓\n".encode()
        return 404, {}, b""

    def serve_files(self, listed, sent=None):
        """Lists the files ``listed`` ({path: (bytes, executable)}) for the skill ``fake`` at its
        version '"e1"' and serves each one's bytes, or those in ``sent`` ({path: bytes}) instead."""
        entries = [
            {
                "path": path,
                "size": len(data),
                "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "media_type": "application/octet-stream",
                "executable": executable,
            }
            for path, (data, executable) in listed.items()
        ]
        listing = {"name": "fake", "etag": '"e1"', "files": entries, "skipped": []}
        headers = {"ETag": '"e1"', "Content-Type": "application/json"}
        self.answers["/skills/fake/files"] = (200, headers, json.dumps(listing).encode())
        served = {path: data for path, (data, _) in listed.items()}
        served.update(sent or {})
        for path, data in served.items():
            target = "/skills/fake/files/" + "/".join(urllib.parse.quote(part, safe="") for part in path.split("/"))
            self.answers[target] = (200, {"Content-Type": "application/octet-stream"}, data)

    def problem(self, path, status, kind, detail, **headers):
        body = {"type": f"urn:skillcat:problem:{kind}", "title": kind, "status": status, "detail": detail}
        headers = {"Content-Type": "application/problem+json", **headers}
        self.answers[path] = (status, headers, json.dumps(body).encode())

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeSkillcat()
    yield server
    server.close()
