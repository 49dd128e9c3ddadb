"""The pages in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
driven with Selenium against the real `skillcat serve` binary.

Environment:
  SKILLCAT_BIN          the server binary (default: built with cargo)
  SKILLCAT_CHROMIUM     the browser (default /usr/bin/chromium)
  SKILLCAT_CHROMEDRIVER its driver (default /usr/bin/chromedriver)
  SKILLCAT_SCREENSHOTS  where the screenshots of the two pages go (default: the test's temporary folder)
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "tests/data/collections"
# Never through a proxy: the server is on loopback.
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


def write_skill(folder, text):
    """Writes folder/SKILL.md beside and renames it in place, so a scan never sees half of it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / ".SKILL.md.tmp"
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(folder / "SKILL.md")


def skill_md(name, description, body="Body.\n"):
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


class Server:
    """`skillcat serve` on a free loopback port; stopped by `stop`."""

    def __init__(self, binary, dirs, token_file=None, builtin=False):
        command = [str(binary), "serve", "--listen", "127.0.0.1:0", "--rescan-interval", "0", "--log-format", "json"]
        if not builtin:
            command.append("--no-builtin")
        if token_file is not None:
            command += ["--token-file", str(token_file)]
        for directory in dirs:
            command += ["--dir", str(directory)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.log = []
        self.url = None
        self._address = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _drain(self):
        for line in self.process.stdout:
            self.log.append(line)
            if self.url is None:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("message") == "serving" and record.get("address"):
                    self.url = f"http://{record['address']}"
                    self._address.set()

    def _wait_ready(self):
        deadline = time.monotonic() + 60
        while not self._address.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("skillcat serve did not start:\n" + "".join(self.log))
        while True:
            try:
                if http_get(self.url + "/readyz", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("skillcat serve did not become ready:\n" + "".join(self.log))
            time.sleep(0.02)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="session")
def skillcat_bin():
    configured = os.environ.get("SKILLCAT_BIN")
    if configured:
        binary = Path(configured)
    else:
        subprocess.run(["cargo", "build", "--locked", "--bin", "skillcat"], cwd=REPO, check=True)
        target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
        binary = (target if target.is_absolute() else REPO / target) / "debug" / "skillcat"
    if not binary.is_file() or not os.access(binary, os.X_OK):
        pytest.fail(f"no skillcat binary at {binary}")
    return binary


@pytest.fixture
def serve(skillcat_bin):
    """serve(dir, ..., token_file=None, builtin=False) starts a server; stopped after the test."""
    servers = []

    def start(*dirs, token_file=None, builtin=False):
        server = Server(skillcat_bin, dirs, token_file, builtin)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def chromium(width=1280, height=900):
    """Headless Chromium with a fresh profile, nothing on the network but what a page asks for,
    and its console (CSP reports included) readable from the test."""
    profile = tempfile.mkdtemp(prefix="skillcat-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("SKILLCAT_CHROMIUM", "/usr/bin/chromium")
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("SKILLCAT_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver, profile


@pytest.fixture
def browser():
    driver, profile = chromium()
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def screenshots(tmp_path):
    folder = Path(os.environ.get("SKILLCAT_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def wait(driver, condition, timeout=10.0, message=""):
    """Polls `condition(driver)` until it holds; elements a page update replaced meanwhile are
    looked up again at the next poll."""
    ignored = (StaleElementReferenceException, NoSuchElementException)
    waiting = WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=ignored)
    return waiting.until(lambda d: condition(d), message)


def console(driver):
    """The browser console's messages since the last call."""
    return [entry["message"] for entry in driver.get_log("browser")]
