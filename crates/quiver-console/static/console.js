// The console's one script (no inline script anywhere: CSP `script-src 'self'`). One
// Server-Sent Events stream per tab; each event is only a hint, after which the fragments
// that listen for it re-fetch themselves (`hx-trigger="qv-approvals from:body"`). Without
// JavaScript every page still works: forms post and the server redirects.
(function () {
  "use strict";
  if (!window.EventSource || !window.htmx) {
    return;
  }
  var source = new EventSource("/events");
  ["approvals", "control", "audit"].forEach(function (hint) {
    source.addEventListener(hint, function () {
      window.htmx.trigger(document.body, "qv-" + hint);
    });
  });
  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
