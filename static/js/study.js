/* Keyboard for the scene-guessing page (no framework, nothing needed without it).
 *
 * 1–9   choose that candidate for the masked speaker in focus; focus then moves on
 * h     toggle "I needed earlier scenes"
 * Enter submit the scene
 * Keys typed into a text field (the evidence note) are left alone; Tab and the arrow
 * keys move between and within the radio groups natively.
 */
(function () {
  "use strict";

  var TEXT_TYPES = ["text", "search", "email", "number", "url", "tel", "password"];

  function typing(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && TEXT_TYPES.indexOf(el.type) >= 0;
  }

  function speakers(form) {
    return Array.prototype.slice.call(form.querySelectorAll("[data-speaker]"));
  }

  function answered(speaker) {
    return !!speaker.querySelector("input[type=radio]:checked");
  }

  function focusSpeaker(speaker, scroll) {
    var radio = speaker.querySelector("input[type=radio]:checked") ||
      speaker.querySelector("input[type=radio]");
    if (radio) {
      radio.focus({ preventScroll: true });
      if (scroll) speaker.scrollIntoView({ block: "nearest" });
    }
  }

  // The speaker a digit applies to: the one holding focus, else the first unanswered.
  function currentSpeaker(form) {
    var active = document.activeElement;
    var inside = active && active.closest ? active.closest("[data-speaker]") : null;
    if (inside && form.contains(inside)) return inside;
    var all = speakers(form);
    return all.filter(function (s) { return !answered(s); })[0] || all[0];
  }

  function choose(form, digit) {
    var speaker = currentSpeaker(form);
    if (!speaker) return false;
    var radio = speaker.querySelectorAll("input[type=radio]")[digit - 1];
    if (!radio) return false;
    if (!radio.checked) {
      radio.checked = true;
      // htmx saves on "change"; setting .checked alone fires nothing.
      radio.dispatchEvent(new Event("change", { bubbles: true }));
    }
    var all = speakers(form);
    var next = all[all.indexOf(speaker) + 1];
    if (next) {
      focusSpeaker(next, true);
    } else {
      var flag = form.querySelector("#history-needed");
      (flag || radio).focus({ preventScroll: true });
    }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    var form = document.getElementById("guess-form");
    if (!form || event.defaultPrevented || event.isComposing) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (typing(target)) return;
    if (/^[1-9]$/.test(event.key)) {
      if (choose(form, Number(event.key))) event.preventDefault();
    } else if (event.key === "h" || event.key === "H") {
      var flag = form.querySelector("#history-needed");
      if (flag) {
        event.preventDefault();
        flag.click();
      }
    } else if (event.key === "Enter") {
      // Buttons, links and <summary> keep their own Enter.
      if (target.closest && target.closest("button, a, summary")) return;
      event.preventDefault();
      if (form.dataset.submitting) return;
      form.dataset.submitting = "1";
      form.requestSubmit();
    }
  });

  // The history panel (re)loads its body each time it is opened, through this event:
  // htmx's own toggle[target.open] filter is compiled with eval, which the
  // Content-Security-Policy refuses. "toggle" does not bubble, hence the capture.
  document.addEventListener("toggle", function (event) {
    var panel = event.target;
    if (panel.classList && panel.classList.contains("history-panel") && panel.open) {
      panel.dispatchEvent(new CustomEvent("history-open"));
    }
  }, true);

  // One-to-one studies: say at once when two speakers are given the same character
  // (the server checks it again at submit). "Can't tell" never clashes.
  function checkOneToOne(form) {
    if (!form.hasAttribute("data-one-to-one")) return;
    var chosen = speakers(form).map(function (s) {
      var radio = s.querySelector("input[type=radio]:checked");
      if (!radio || radio.value === "cant") return null;
      var name = radio.closest("label").querySelector("span");
      return name ? name.textContent.trim() : radio.value;
    });
    speakers(form).forEach(function (s, i) {
      var clash = chosen[i] !== null && chosen.some(function (c, j) { return j !== i && c === chosen[i]; });
      var warning = s.querySelector(".one-to-one-warning");
      if (warning) warning.hidden = !clash;
    });
  }
  document.addEventListener("change", function (event) {
    var form = document.getElementById("guess-form");
    if (form && form.contains(event.target) && event.target.type === "radio") checkOneToOne(form);
  });

  // Start on the first speaker still to answer, without scrolling past the scene.
  // Clues and evidence are folded on narrow screens (a 6-speaker scene is long) and
  // open on wide ones. On one column (a phone) the speakers come after the scene, so
  // the focus moves there without scrolling: the page opens at the scene's heading and
  // first lines, and the digit keys still answer.
  function init() {
    var form = document.getElementById("guess-form");
    if (!form) return;
    var wide = window.matchMedia("(min-width: 821px)").matches;
    if (wide) {
      form.querySelectorAll("details.speaker-more").forEach(function (d) { d.open = true; });
    }
    checkOneToOne(form);
    // Tests (and scripts driving the page) wait on this before typing: keys pressed
    // before this deferred script runs would be lost.
    form.dataset.keys = "ready";
    if (form.querySelector("[autofocus]")) return;
    var refused = form.querySelector(".unanswered");
    var pending = refused || speakers(form).filter(function (s) { return !answered(s); })[0];
    // After a refused submit the speaker still to answer is what the rater needs to see.
    if (pending) focusSpeaker(pending, wide || !!refused);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
