"""The catalog and skill pages in headless Chromium: what they list and render, search as you
type, changes on disk appearing on an open page, hostile Markdown that runs nothing, and the
login with a token file. The two pages are saved as screenshots (docs/ keeps the last ones)."""

from pathlib import Path

from conftest import COLLECTIONS, console, wait
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from skillcat_support import skill_md, write_skill

RELEASE_NOTES = """---
name: release-notes
description: Write release notes from the pull requests merged since the last tag. Use when preparing a release.
license: MIT
metadata:
  owner: platform-team
---
# Release notes

List the pull requests merged since the last tag, group them by area, and write one line for each.

## Steps

1. Collect the merged pull requests:

   ```sh
   scripts/merged-since.sh "$(git describe --tags --abbrev=0)"
   ```

2. Group them as [the style guide](references/style.md) says, and keep each line under 100 characters.

## Output

| Section | What goes in it |
|---|---|
| Features | New behaviour users can see |
| Fixes | Bugs that no longer happen |
"""

HOSTILE = """---
name: hostile
description: Tries <script>window.pwned='description'</script> everything
---
# Hostile

<script>window.pwned = 'script'</script>

<img src=x onerror="window.pwned = 'onerror'">

[click me](javascript:window.pwned='markdown-link')

<a href="javascript:window.pwned='html-link'" id="jslink">another link</a>

<iframe src="javascript:parent.pwned='iframe'"></iframe>

<iframe srcdoc="<script>parent.pwned='srcdoc'</script>"></iframe>

<svg><script>window.pwned = 'svg-script'</script><circle r="5" onload="window.pwned = 'svg-onload'"/></svg>

<object data="javascript:window.pwned='object'"></object>

<div onmouseover="window.pwned='mouseover'" id="cover">hover me</div>

<form action="javascript:window.pwned='form'"><button id="submit">go</button></form>

<meta http-equiv="refresh" content="0;url=javascript:window.pwned='refresh'">

The end.
"""


def release_notes(root):
    folder = Path(root) / "release-notes"
    write_skill(folder, RELEASE_NOTES)
    (folder / "scripts").mkdir()
    script = folder / "scripts/merged-since.sh"
    script.write_text('#!/bin/sh\ngit log --merges --oneline "$1"..HEAD\n')
    script.chmod(0o755)
    (folder / "references").mkdir()
    (folder / "references/style.md").write_text("# Style\n\nOne line per change.\n")
    (folder / "references/page.html").write_text("<script>window.pwned = 'raw-file'</script>\n")


def collections(tmp_path):
    """A served tree: the checked-in public collections and a skill with folders."""
    mine = tmp_path / "team"
    release_notes(mine)
    return [mine, COLLECTIONS / "anthropics-skills", COLLECTIONS / "obra-superpowers",
            COLLECTIONS / "K-Dense-AI-claude-scientific-skills"]


def rows(driver):
    return [row.get_attribute("data-name") for row in driver.find_elements(By.CSS_SELECTOR, "#listing tbody tr")]


def hits(driver):
    return [item.get_attribute("data-name") for item in driver.find_elements(By.CSS_SELECTOR, "#results > li")]


def test_the_catalog_lists_the_skills_and_search_narrows_them(serve, browser, tmp_path, screenshots):
    server = serve(*collections(tmp_path), builtin=True)
    browser.get(server.url + "/")
    wait(browser, lambda d: d.find_element(By.ID, "live").text == "live", message="the live badge")
    listed = rows(browser)
    assert "release-notes" in listed and "frontend-design" in listed and "peer-review" in listed
    assert listed == sorted(listed)
    browser.save_screenshot(str(screenshots / "catalog.png"))

    search = browser.find_element(By.ID, "search")
    search.send_keys("review")
    wait(browser, lambda d: not d.find_element(By.ID, "results").get_attribute("hidden") and hits(d),
         message="search results")
    first = hits(browser)
    assert "peer-review" in first
    assert not browser.find_element(By.ID, "listing").is_displayed()
    marks = [mark.text.lower() for mark in browser.find_elements(By.CSS_SELECTOR, "#results mark")]
    assert marks and all(mark.startswith("review") for mark in marks), marks
    # Another word narrows the list.
    search.send_keys(" manuscript")
    wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-searched") == "review manuscript")
    narrowed = hits(browser)
    assert narrowed and set(narrowed) < set(first), (narrowed, first)
    # Cleared, the whole catalog is back.
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(Keys.BACKSPACE)
    wait(browser, lambda d: d.find_element(By.ID, "listing").is_displayed())
    assert rows(browser) == listed
    # A hit leads to the skill's page.
    search.send_keys("release not")
    wait(browser, lambda d: hits(d)[:1] == ["release-notes"])
    browser.find_element(By.CSS_SELECTOR, "#results a.name").click()
    wait(browser, lambda d: d.current_url.endswith("/ui/skills/release-notes"))
    assert [entry for entry in console(browser) if "Content Security Policy" in entry] == []


def test_a_skill_page_renders_headings_code_and_the_file_tree(serve, browser, tmp_path, screenshots):
    server = serve(*collections(tmp_path))
    browser.get(server.url + "/ui/skills/release-notes")
    article = browser.find_element(By.CSS_SELECTOR, "article.markdown")
    assert [h.text for h in article.find_elements(By.TAG_NAME, "h1")] == ["Release notes"]
    assert [h.text for h in article.find_elements(By.TAG_NAME, "h2")] == ["Steps", "Output"]
    code = article.find_element(By.CSS_SELECTOR, "pre code").text
    assert code.startswith("scripts/merged-since.sh")
    assert len(article.find_elements(By.CSS_SELECTOR, "table tbody tr")) == 2
    frontmatter = {row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
                   for row in browser.find_elements(By.CSS_SELECTOR, "table.frontmatter tr")}
    assert frontmatter["license"] == "MIT" and frontmatter["metadata"] == "owner: platform-team"
    tree = browser.find_element(By.CSS_SELECTOR, "ul.tree")
    folders = [span.text for span in tree.find_elements(By.CSS_SELECTOR, "li.dir > span")]
    assert folders == ["references/", "scripts/"]
    links = {a.text: a.get_attribute("href") for a in tree.find_elements(By.TAG_NAME, "a")}
    assert links["merged-since.sh"] == server.url + "/skills/release-notes/files/scripts/merged-since.sh"
    assert set(links) == {"SKILL.md", "page.html", "style.md", "merged-since.sh"}
    snippets = {code.get_attribute("id"): code.text for code in browser.find_elements(By.CSS_SELECTOR, "#use pre code")}
    assert snippets["snippet-npx"].endswith(f"\nnpx skills add {server.url} --skill release-notes -y --agent claude-code")
    assert f'"url": "{server.url}/mcp"' in snippets["snippet-mcp"]
    # The whole page, down to the rendered SKILL.md.
    browser.set_window_size(1280, 2200)
    browser.save_screenshot(str(screenshots / "skill.png"))
    # The link in the Markdown leads to the file; its bytes are shown as text.
    article.find_element(By.LINK_TEXT, "the style guide").click()
    wait(browser, lambda d: d.current_url.endswith("/skills/release-notes/files/references/style.md"))
    assert "One line per change." in browser.find_element(By.TAG_NAME, "body").text


def test_a_change_on_disk_appears_on_the_open_page(serve, browser, tmp_path):
    root = tmp_path / "skills"
    write_skill(root / "alpha", skill_md("alpha", "The first skill"))
    server = serve(root)
    browser.get(server.url + "/")
    wait(browser, lambda d: d.find_element(By.ID, "live").text == "live", message="the live badge")
    assert rows(browser) == ["alpha"]
    # A mark that a reload would lose.
    browser.execute_script("window.stillTheSamePage = true")
    write_skill(root / "beta", skill_md("beta", "Appears without a reload"))
    wait(browser, lambda d: rows(d) == ["alpha", "beta"], timeout=15, message="the new skill on the open page")
    assert browser.execute_script("return window.stillTheSamePage") is True
    assert browser.find_element(By.ID, "live").text.startswith("updated")
    # And on an open skill page: its description changes in place.
    browser.get(server.url + "/ui/skills/alpha")
    wait(browser, lambda d: d.find_element(By.ID, "live").text == "live")
    browser.execute_script("window.stillTheSamePage = true")
    write_skill(root / "alpha", skill_md("alpha", "Edited on disk"))
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "p.description").text == "Edited on disk", timeout=15)
    assert browser.execute_script("return window.stillTheSamePage") is True


def test_a_hostile_skill_runs_nothing(serve, browser, tmp_path):
    root = tmp_path / "skills"
    write_skill(root / "hostile", HOSTILE)
    release_notes(root)
    server = serve(root)
    for path in ("/", "/ui/skills/hostile"):
        browser.get(server.url + path)
        wait(browser, lambda d: d.find_element(By.ID, "live").text == "live")
        assert browser.execute_script("return typeof window.pwned") == "undefined", path
    # What is left of the payload is inert: hover it, click what can be clicked.
    cover = browser.find_elements(By.ID, "cover")
    if cover:
        ActionChains(browser).move_to_element(cover[0]).perform()
    for link in browser.find_elements(By.CSS_SELECTOR, "article.markdown a"):
        link.click()
    for button in browser.find_elements(By.CSS_SELECTOR, "article.markdown button"):
        button.click()
    assert browser.current_url == server.url + "/ui/skills/hostile"
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    # The sanitizer stopped it all: the policy never had to.
    reports = [entry for entry in console(browser) if "Content Security Policy" in entry]
    assert reports == [], reports
    # A skill's HTML file is never a page of this origin: it is downloaded, not shown, and the
    # open page stays.
    browser.get(server.url + "/skills/release-notes/files/references/page.html")
    assert browser.current_url == server.url + "/ui/skills/hostile"
    assert browser.execute_script("return typeof window.pwned") == "undefined"


def test_the_login_with_a_token_file(serve, browser, tmp_path):
    root = tmp_path / "skills"
    write_skill(root / "alpha", skill_md("alpha", "The first skill"))
    tokens = tmp_path / "tokens"
    tokens.write_text("browser-token\n")
    tokens.chmod(0o600)
    server = serve(root, token_file=tokens)
    browser.get(server.url + "/ui/skills/alpha")
    # Nothing of the catalog, only the form.
    assert browser.find_element(By.TAG_NAME, "h1").text == "401 Unauthorized"
    assert "The first skill" not in browser.page_source
    assert not browser.find_elements(By.CSS_SELECTOR, "#listing, article.markdown")
    field = browser.find_element(By.ID, "token")
    field.send_keys("wrong-token")
    field.submit()
    wait(browser, lambda d: "That token is not valid." in d.find_element(By.TAG_NAME, "main").text)
    field = browser.find_element(By.ID, "token")
    field.send_keys("browser-token")
    field.submit()
    # Back where the login started, logged in.
    wait(browser, lambda d: d.current_url == server.url + "/ui/skills/alpha")
    assert browser.find_element(By.CSS_SELECTOR, "#skill h1").text == "alpha"
    # The cookie is out of reach of scripts.
    assert "browser-token" not in browser.execute_script("return document.cookie")
    # The page's own requests carry it: live events and search.
    wait(browser, lambda d: d.find_element(By.ID, "live").text == "live")
    browser.get(server.url + "/")
    browser.find_element(By.ID, "search").send_keys("first")
    wait(browser, lambda d: hits(d) == ["alpha"])
    # Logged out, the form again.
    browser.find_element(By.CSS_SELECTOR, "header form button").click()
    wait(browser, lambda d: d.find_elements(By.ID, "token"))
    assert not browser.find_elements(By.ID, "listing")
