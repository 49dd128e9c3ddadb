// skillcat's pages: search as you type (through /search), live updates (from /events) and copy
// buttons. No inline script anywhere: the pages' Content-Security-Policy allows only this file.
// Everything from the server is put into the page as text, never as markup.
"use strict";

(function () {
  const body = document.body;
  // The catalog page follows the catalog's tag; a skill's page, its skill's tag.
  let etag = body.dataset.etag || null;
  const skill = body.dataset.skill || null;
  let query = 0;
  let timer = null;

  function badge(state, text) {
    const element = document.getElementById("live");
    if (element) {
      element.dataset.state = state;
      element.textContent = text;
    }
  }

  function text(tag, content, className) {
    const element = document.createElement(tag);
    element.textContent = content;
    if (className) element.className = className;
    return element;
  }

  function show(results, listing, status, message) {
    results.hidden = false;
    listing.hidden = true;
    status.textContent = message;
  }

  async function search() {
    const input = document.getElementById("search");
    const results = document.getElementById("results");
    const listing = document.getElementById("listing");
    const status = document.getElementById("search-status");
    if (!input || !results || !listing || !status) return;
    const q = input.value.trim();
    const mine = ++query;
    if (!q) {
      results.hidden = true;
      results.replaceChildren();
      listing.hidden = false;
      status.textContent = "";
      body.dataset.searched = "";
      return;
    }
    let answer;
    try {
      const response = await fetch("/search?limit=100&q=" + encodeURIComponent(q), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      answer = response.ok ? await response.json() : { total: 0, hits: [] };
    } catch (error) {
      if (mine === query) show(results, listing, status, "Search failed; retrying when you type.");
      return;
    }
    if (mine !== query) return; // a later query is on its way
    const items = answer.hits.map((hit) => {
      const item = document.createElement("li");
      item.dataset.name = hit.name;
      const link = text("a", hit.name, "name");
      link.href = "/ui/skills/" + encodeURIComponent(hit.name);
      item.append(link, text("span", hit.description, "description"));
      const excerpt = document.createElement("p");
      excerpt.className = "excerpt";
      for (const part of hit.excerpt) {
        excerpt.append(part.highlight ? text("mark", part.text) : document.createTextNode(part.text));
      }
      item.append(excerpt);
      return item;
    });
    results.replaceChildren(...items);
    const shown = answer.total > answer.hits.length ? `the best ${answer.hits.length} of ${answer.total}` : `${answer.total}`;
    show(results, listing, status, answer.total === 1 ? "1 skill matches" : `${shown} skills match`);
    body.dataset.searched = q;
  }

  // The page as the server renders it now, in place of the open one (keeping the search box's
  // text and focus): the server's HTML is parsed inert, never run.
  async function refresh() {
    const response = await fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" });
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.querySelector("main");
    const current = document.querySelector("main");
    if (!fresh || !current) return;
    const input = document.getElementById("search");
    const typed = input ? input.value : "";
    const focused = document.activeElement === input;
    current.replaceWith(document.adoptNode(fresh));
    document.title = page.title;
    body.dataset.skillEtag = page.body.dataset.skillEtag || "";
    const next = document.getElementById("search");
    if (next) {
      next.value = typed;
      if (focused) next.focus();
      if (typed.trim()) await search();
    }
  }

  // Whether this page's skill changed (or vanished) in a new catalog.
  async function skillChanged() {
    const response = await fetch("/skills/" + encodeURIComponent(skill), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    if (response.status !== 200) return true;
    const entry = await response.json();
    return entry.etag !== body.dataset.skillEtag;
  }

  // The event stream is open only while the page is shown: a browser allows a few connections per
  // server over HTTP/1.1, and hidden tabs must not hold them all. Shown again, the page catches up
  // at once (the stream's first event is the current tag).
  let events = null;

  function onCatalog(event) {
    let data;
    try {
      data = JSON.parse(event.data);
    } catch (error) {
      return;
    }
    badge("live", "live");
    if (!data || !data.etag || data.etag === etag) return;
    etag = data.etag;
    if (!skill) body.dataset.etag = etag;
    (skill ? skillChanged() : Promise.resolve(true))
      .then((changed) => (changed ? refresh().then(() => true) : false))
      .then(
        (updated) => updated && badge("updated", "updated " + new Date().toLocaleTimeString()),
        () => badge("offline", "update failed; reload"),
      );
  }

  function connect() {
    if (events || !document.getElementById("live") || !window.EventSource) return;
    events = new EventSource("/events");
    events.addEventListener("open", () => badge("live", "live"));
    events.addEventListener("error", () => badge("offline", "reconnecting…"));
    events.addEventListener("catalog", onCatalog);
  }

  function disconnect() {
    if (!events) return;
    events.close();
    events = null;
    badge("connecting", "paused");
  }

  document.addEventListener("visibilitychange", () => (document.hidden ? disconnect() : connect()));
  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", () => document.hidden || connect());

  document.addEventListener("input", (event) => {
    if (event.target && event.target.id === "search") {
      clearTimeout(timer);
      timer = setTimeout(search, 120);
    }
  });

  document.addEventListener("click", async (event) => {
    const button = event.target.closest && event.target.closest("button.copy");
    if (!button) return;
    const source = document.getElementById(button.dataset.copy);
    if (!source) return;
    try {
      await navigator.clipboard.writeText(source.textContent);
      button.textContent = "Copied";
    } catch (error) {
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = "Selected";
    }
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });

  if (!document.hidden) connect();
})();
