/* Keyboard for the validation scoring screen (nothing needed without it).
 *
 * 1–5   score the criterion in focus (or the first unscored one); focus moves on
 * y / n yes / no on a yes/no criterion
 * Tab   moves between criteria natively (one radio group each)
 * Enter submit the object
 * Keys typed into the comment box are left alone. Each choice fires "change", which
 * htmx turns into an autosave of that criterion (see the hx-post on the radios).
 */
(function () {
  "use strict";

  function criteria(form) {
    return Array.prototype.slice.call(form.querySelectorAll("fieldset[data-criterion]"));
  }

  function scored(fieldset) {
    return !!fieldset.querySelector("input[type=radio]:checked");
  }

  function focusCriterion(fieldset) {
    var radio = fieldset.querySelector("input[type=radio]:checked") ||
      fieldset.querySelector("input[type=radio]");
    if (radio) {
      radio.focus({ preventScroll: true });
      fieldset.scrollIntoView({ block: "nearest" });
    }
  }

  function current(form) {
    var active = document.activeElement;
    var inside = active && active.closest ? active.closest("fieldset[data-criterion]") : null;
    if (inside && form.contains(inside)) return inside;
    var all = criteria(form);
    return all.filter(function (c) { return !scored(c); })[0] || all[0];
  }

  function valueFor(fieldset, key) {
    if (fieldset.dataset.scale === "yes_no") {
      if (key === "y" || key === "Y") return "1";
      if (key === "n" || key === "N") return "0";
      return null;
    }
    return /^[1-5]$/.test(key) ? key : null;
  }

  function choose(form, key) {
    var fieldset = current(form);
    if (!fieldset || fieldset.disabled) return false;
    var value = valueFor(fieldset, key);
    if (value === null) return false;
    var radio = fieldset.querySelector("input[type=radio][value='" + value + "']");
    if (!radio) return false;
    if (!radio.checked) {
      radio.checked = true;
      // htmx saves on "change"; setting .checked alone fires nothing.
      radio.dispatchEvent(new Event("change", { bubbles: true }));
    }
    var all = criteria(form);
    var next = all[all.indexOf(fieldset) + 1];
    if (next) {
      focusCriterion(next);
    } else {
      var comment = form.querySelector("button[type=submit]") || radio;
      comment.focus({ preventScroll: true });
    }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var form = document.getElementById("score-form");
    if (!form || event.defaultPrevented || event.isComposing) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" && target.type === "text")) return;
    if (event.key === "Enter") {
      if (target.closest && target.closest("a, summary")) return;
      event.preventDefault();
      if (form.dataset.submitting) return;
      form.dataset.submitting = "1";
      form.requestSubmit();
      return;
    }
    if (event.key.length === 1 && choose(form, event.key)) event.preventDefault();
  });

  // A refused save answers 422 with its message; htmx does not swap 4xx by default.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function init() {
    var form = document.getElementById("score-form");
    if (!form) return;
    var pending = criteria(form).filter(function (c) { return !scored(c) && !c.disabled; })[0];
    if (pending) focusCriterion(pending);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
