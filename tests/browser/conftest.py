"""The pages in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
driven with Selenium against the real `skillcat serve` binary.

Environment:
  SKILLCAT_BIN          the server binary (default: built with cargo)
  SKILLCAT_CHROMIUM     the browser (default /usr/bin/chromium)
  SKILLCAT_CHROMEDRIVER its driver (default /usr/bin/chromedriver)
  SKILLCAT_SCREENSHOTS  where the screenshots of the two pages go (default: the test's temporary folder)
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "tests/data/collections"
# The servers, skills and files, as every Python test and benchmark has them.
sys.path.insert(0, str(REPO / "tests/support"))
from skillcat_support import Servers, skillcat_binary  # noqa: E402 - needs the path above


@pytest.fixture(scope="session")
def skillcat_bin():
    return skillcat_binary()


@pytest.fixture
def serve(skillcat_bin):
    """serve(dir, ..., token_file=None, builtin=False) starts a server; stopped after the test."""
    servers = Servers(skillcat_bin)
    yield servers.start
    servers.close()


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
