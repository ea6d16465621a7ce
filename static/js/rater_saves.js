// The rater pages' saves as they happen (htmx): a refused save answers 422 with its
// message, which htmx does not swap by default (4xx), so the rater would see nothing.
// A 503 (the server cannot reach its database for a moment: common.views.server_error)
// is retried after its Retry-After, up to MAX_RETRIES times, with a notice: saves are
// idempotent, so a retry of a save that did land stores nothing twice.
(function () {
  "use strict";
  var MAX_RETRIES = 6;
  var retries = new WeakMap();

  function notice(text) {
    var box = document.getElementById("save-retry");
    if (!box) {
      box = document.createElement("p");
      box.id = "save-retry";
      box.className = "notice";
      box.setAttribute("role", "status");
      (document.querySelector("main") || document.body).prepend(box);
    }
    box.textContent = text;
    box.hidden = !text;
  }

  // A rater who chooses before the deferred scripts ran (a slow connection, a fast
  // hand) changed a field htmx was not yet listening to: that save never left. Once
  // htmx has processed the page (its DOMContentLoaded handler runs before this one,
  // its script coming first), send each such field's save now.
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.htmx) return;
    document.querySelectorAll("[hx-post]").forEach(function (elt) {
      var changed = elt.type === "radio" || elt.type === "checkbox"
        ? elt.checked !== elt.defaultChecked
        : "defaultValue" in elt && elt.value !== elt.defaultValue;
      if (changed && (elt.type !== "radio" || elt.checked)) htmx.trigger(elt, "change");
    });
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      return;
    }
    var config = event.detail.requestConfig || {};
    var elt = config.elt;
    if (xhr.status !== 503 || !elt) {
      if (elt && retries.has(elt)) {
        retries.delete(elt);
        notice("");
      }
      return;
    }
    event.detail.shouldSwap = false;
    event.detail.isError = false;
    var tries = (retries.get(elt) || 0) + 1;
    if (tries > MAX_RETRIES) {
      retries.delete(elt);
      notice("The server is still unavailable. Your page is kept: press the button again in a minute.");
      return;
    }
    retries.set(elt, tries);
    var wait = parseInt(xhr.getResponseHeader("Retry-After") || "5", 10);
    notice("The server is busy for a moment; saving again in " + wait + " s…");
    var type = (config.triggeringEvent && config.triggeringEvent.type) || "click";
    window.setTimeout(function () {
      htmx.trigger(elt, type);
    }, Math.max(1, wait) * 1000);
  });
})();
