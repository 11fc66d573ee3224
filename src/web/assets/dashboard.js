// gitfleet's dashboard: live updates without reloading. Every page is whole without this
// script; it asks for the page it is on again, with the ETag of the last answer, and swaps
// <main> when the daemon's status changed (304 otherwise: nothing is sent).
"use strict";
(function () {
  const every = 2000;
  let etag = null;
  const state = document.getElementById("live-state");
  function say(text) {
    if (state) state.textContent = text;
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
        if (main && here && !editing() && main.innerHTML !== here.innerHTML) {
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
})();
