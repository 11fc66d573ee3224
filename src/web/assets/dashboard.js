// gitfleet's dashboard: live updates without reloading. Every page is whole without this
// script; it asks for the page it is on again, with the ETag of the last answer, and swaps
// <main> when the daemon's status changed (304 otherwise: nothing is sent). Between changes
// it counts down the times left (`data-ends`, `data-now`: the daemon's Unix seconds) every
// second.
"use strict";
(function () {
  const every = 2000;
  let etag = null;
  const state = document.getElementById("live-state");
  function say(text) {
    if (state) state.textContent = text;
  }
  // When each countdown was rendered, by the daemon's clock and by this browser's.
  const seen = new WeakMap();
  function duration(secs) {
    const h = Math.floor(secs / 3600), m = Math.floor(secs / 60) % 60, s = secs % 60;
    if (h === 0 && m === 0) return s + "s";
    if (h === 0) return m + "m" + s + "s";
    return h + "h" + m + "m";
  }
  function tick() {
    for (const el of document.querySelectorAll("[data-ends]")) {
      if (!seen.has(el)) seen.set(el, { daemon: Number(el.dataset.now), at: Date.now() });
      const { daemon, at } = seen.get(el);
      const now = daemon + Math.floor((Date.now() - at) / 1000);
      el.textContent = duration(Math.max(0, Number(el.dataset.ends) - now));
    }
  }
  // A page that differs only in its countdowns is the same page: they tick here.
  function settled(main) {
    const copy = main.cloneNode(true);
    for (const el of copy.querySelectorAll("[data-ends]")) {
      el.textContent = "";
      el.removeAttribute("data-now");
    }
    return copy.innerHTML;
  }
  function editing() {
    const a = document.activeElement;
    return a && a.closest("main") && (a.tagName === "INPUT" || a.tagName === "SELECT");
  }
  async function poll() {
    try {
      const headers = etag ? { "If-None-Match": etag } : {};
      const r = await fetch(location.href, { headers, credentials: "same-origin", cache: "no-store" });
      if (r.status === 200) {
        const fresh = r.headers.get("ETag");
        const doc = new DOMParser().parseFromString(await r.text(), "text/html");
        const main = doc.querySelector("main");
        const here = document.querySelector("main");
        // The first answer only learns the ETag unless the page changed since it was loaded.
        if (main && here && !editing() && settled(main) !== settled(here)) {
          here.innerHTML = main.innerHTML;
          const branch = doc.querySelector("header .branch");
          const mine = document.querySelector("header .branch");
          if (branch && mine) mine.innerHTML = branch.innerHTML;
          say("updated " + new Date().toLocaleTimeString());
        } else if (etag === null) {
          say("live");
        }
        etag = fresh;
      } else if (r.status === 304) {
        say("live");
      } else {
        say("the daemon answered " + r.status);
      }
    } catch (e) {
      say("cannot reach the daemon; retrying");
    }
    setTimeout(poll, every);
  }
  setTimeout(poll, every);
  tick();
  setInterval(tick, 1000);
})();
