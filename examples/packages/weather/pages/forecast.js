// Calls this package's own `forecast` through the console's message bridge: one message to the
// parent (the console page hosting this sandboxed page), one answer back. See docs/console.md,
// "The package-page bridge".
(function () {
  "use strict";
  var next = 0;

  function quiverCall(item, args) {
    return new Promise(function (resolve) {
      next += 1;
      var id = "forecast-" + next;
      window.addEventListener("message", function on(e) {
        if (e.source !== window.parent || !e.data || e.data.quiver !== "result" || e.data.id !== id) {
          return;
        }
        window.removeEventListener("message", on);
        resolve(e.data);
      });
      window.parent.postMessage({ quiver: "call", id: id, item: item, arguments: args }, "*");
    });
  }

  var out = document.getElementById("out");
  document.getElementById("ask").addEventListener("click", function () {
    if (window.parent === window) {
      out.textContent = "Open this page from the console (Packages → 天气 Weather → the package's own page).";
      return;
    }
    var args = { city: document.getElementById("city").value.trim() };
    var date = document.getElementById("date").value.trim();
    if (date) {
      args.date = date;
    }
    out.removeAttribute("class");
    out.textContent = "…";
    quiverCall("forecast", args).then(function (r) {
      out.className = r.status;
      out.textContent = r.ok ? JSON.stringify(r.result, null, 2) : r.status + ": " + r.error;
    });
  });
})();
