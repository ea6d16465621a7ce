/* Keyboard for the CharToM-QA note-check and judgement screens (both work without it).
 *
 * Note check:  1 / 2 / 3   accurate / subjective but consistent / inappropriate (submits)
 * Judgement:   0 - 9       score 0.0 - 0.9;  p or =  score 1.0
 *              Ctrl+Enter  submit (also from the comment box)
 * Review:      1 / 2 / 3 pick the settled label, or 0 - 9 / p the settled score
 *              (nothing is sent until) Ctrl+Enter decides, also from the reason box
 * Keys typed into the comment box are left alone. A refused submit answers 422 with
 * its message, which htmx swaps into the status line.
 */
(function () {
  "use strict";

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" || target.tagName === "SELECT" ||
      (target.tagName === "INPUT" && /^(text|search|number|email)$/.test(target.type)));
  }

  function submitOnce(form, button) {
    if (form.dataset.submitting) return;
    form.dataset.submitting = "1";
    // Let a refused submit (422) be tried again.
    setTimeout(function () { delete form.dataset.submitting; }, 1500);
    if (button) button.click(); else form.requestSubmit();
  }

  function noteKey(form, event) {
    var button = form.querySelector("button[data-key='" + event.key + "']");
    if (!button || button.disabled) return false;
    button.focus({ preventScroll: true });
    submitOnce(form, button);
    return true;
  }

  function scoreValue(key) {
    if (/^[0-9]$/.test(key)) return "0." + key;
    if (key === "p" || key === "P" || key === "=") return "1.0";
    return null;
  }

  function pick(radio) {
    if (!radio || radio.disabled) return false;
    radio.checked = true;
    radio.focus({ preventScroll: true });
    return true;
  }

  function reviewKey(form, event) {
    var label = form.querySelector("input[name=value][data-key='" + event.key + "']");
    if (label) return pick(label);
    var value = scoreValue(event.key);
    return value !== null && pick(form.querySelector("input[name=value][value='" + value + "']"));
  }

  function judgementKey(form, event) {
    var value = scoreValue(event.key);
    if (value === null) return false;
    return pick(form.querySelector("input[name=score][value='" + value + "']"));
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing) return;
    var judgement = document.getElementById("judgement-form");
    var note = document.getElementById("note-check-form");
    var review = document.getElementById("check-review-form");
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (judgement) {
        event.preventDefault();
        if (!judgement.querySelector("fieldset[disabled]")) submitOnce(judgement, null);
      } else if (review) {
        event.preventDefault();
        submitOnce(review, null);
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (event.key.length !== 1) return;
    if (note && noteKey(note, event)) event.preventDefault();
    else if (judgement && judgementKey(judgement, event)) event.preventDefault();
    else if (review && reviewKey(review, event)) event.preventDefault();
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
