// The scv web UI's one script: it keeps the page current without a
// reload. Every data-poll-ms milliseconds it asks the daemon whether
// what the page shows changed (GET the URL in #app's data-poll, which
// answers {"version":…});
// when the version differs from the page's (data-version), it fetches
// the page again and swaps its #app for the new one. Nothing else: the
// pages work without it (forms post and redirect), and it never builds
// markup from data, only adopts what the server rendered and escaped.
(function () {
  "use strict";
  var busy = false;

  function app() { return document.getElementById("app"); }

  function status(text) {
    var el = document.getElementById("live");
    if (!el) { return; }
    el.textContent = text;
    el.hidden = !text;
  }

  function refresh() {
    return fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("page " + r.status); }
        return r.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("app");
        var old = app();
        if (!fresh || !old) { return; }
        var x = window.scrollX, y = window.scrollY;
        // What the reader opened (a task's description) stays open.
        old.querySelectorAll("details[open][id]").forEach(function (d) {
          var same = fresh.querySelector("details#" + CSS.escape(d.id));
          if (same) { same.open = true; }
        });
        old.replaceWith(document.adoptNode(fresh));
        window.scrollTo(x, y);
        document.title = doc.title;
        document.documentElement.dataset.refreshed = String(Number(document.documentElement.dataset.refreshed || 0) + 1);
      });
  }

  function tick() {
    var a = app();
    if (busy || !a || !a.dataset.poll) { return; }
    busy = true;
    fetch(a.dataset.poll, { credentials: "same-origin", cache: "no-store", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (r.status === 401) {
          status("This page's token is no longer valid (the daemon restarted?): open the address `scv ui` prints.");
          return null;
        }
        if (!r.ok) { throw new Error("poll " + r.status); }
        return r.json();
      })
      .then(function (v) {
        if (v === null) { return; }
        status("");
        if (v.version !== app().dataset.version) { return refresh(); }
      })
      .catch(function () { status("The daemon does not answer: updates are paused."); })
      .finally(function () { busy = false; });
  }

  function loop() {
    tick();
    var a = app();
    var ms = a ? Number(a.dataset.pollMs) : 0;
    setTimeout(loop, ms >= 100 ? ms : 1000);
  }
  setTimeout(loop, 0);
})();
