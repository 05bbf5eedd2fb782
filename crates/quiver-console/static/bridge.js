// The package-page bridge (docs/console.md, "The package-page bridge"). A package's page runs
// in a sandboxed frame (an opaque origin that can send no request); it asks this page, by
// postMessage, to call one of its own package's items:
//   parent.postMessage({quiver: "call", id: 1, item: "forecast", arguments: {city: "Beijing"}}, "*")
// and gets back, from this page:
//   {quiver: "result", id: 1, ok: true, status: "ok", call: "call-...", result: {...}}
//   {quiver: "result", id: 1, ok: false, status: "refused", error: "...", result: ...}
// This script takes only messages from that frame (the frame's own window, origin "null"),
// and only calls; it posts each with the package id this page was served for and this page's
// bridge token (good for that package's bridge only) to /packages/<id>/bridge/call. The server
// refuses any item that is not that package's own, and runs the rest through the same checks as
// every call. It loads before the frame, so no message of the page is missed.
(function () {
  "use strict";
  var seen = 0;

  function reply(target, message) {
    message.quiver = "result";
    // The frame's origin is opaque: "*" is the only target that reaches it. The reply goes to
    // the window that asked, with what its own call returned.
    target.postMessage(message, "*");
  }

  function show(text) {
    var status = document.getElementById("bridge-status");
    if (status) {
      status.textContent = text;
    }
  }

  window.addEventListener("message", function (event) {
    var frame = document.getElementById("package-frame");
    if (!frame || event.source !== frame.contentWindow || event.origin !== "null") {
      return;
    }
    var source = event.source;
    var m = event.data;
    var id = m !== null && typeof m === "object" ? m.id : undefined;
    if (m === null || typeof m !== "object" || m.quiver !== "call" || typeof m.item !== "string") {
      show("refused a message that is not a call");
      reply(source, {
        id: id,
        ok: false,
        status: "refused",
        error: "the bridge only calls this package's items: {quiver: \"call\", id, item, arguments}"
      });
      return;
    }
    var args;
    try {
      args = JSON.stringify(m.arguments === undefined ? {} : m.arguments);
    } catch (e) {
      reply(source, { id: id, ok: false, status: "invalid", error: "the arguments are not JSON" });
      return;
    }
    var body = new URLSearchParams();
    body.set("item", m.item);
    body.set("arguments", args);
    body.set("csrf", frame.getAttribute("data-bridge") || "");
    var pkg = frame.getAttribute("data-package") || "";
    seen += 1;
    show("call " + seen + ": " + m.item + "…");
    fetch("/packages/" + encodeURIComponent(pkg) + "/bridge/call", {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { Accept: "application/json" }
    }).then(function (response) {
      return response.text().then(function (text) {
        if (response.ok) {
          var answer = JSON.parse(text);
          show("call " + seen + ": " + m.item + ": " + answer.status);
          var message = {
            id: id,
            ok: answer.ok,
            status: answer.status,
            call: answer.call,
            result: answer.result
          };
          if (!answer.ok) {
            // The pipeline's message (a refusal, a failed tool) is the result's `error`.
            message.error = (answer.result && answer.result.error) || answer.status;
          }
          reply(source, message);
        } else {
          show("call " + seen + ": " + m.item + ": refused (" + response.status + ")");
          reply(source, {
            id: id,
            ok: false,
            status: response.status === 403 ? "refused" : "error",
            error: text.trim()
          });
        }
      });
    }).catch(function (e) {
      reply(source, { id: id, ok: false, status: "error", error: String(e) });
    });
  });
})();
