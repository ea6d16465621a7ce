// Multiple-choice questions: digits (or letters) pick an option, Enter presses the form's default
// button (Submit answer / Keep answer; Change answer once another option is picked).
(function () {
  "use strict";
  // The long window ends where the question's moment is: start the reader there.
  const passage = document.querySelector("[data-scroll-end]");
  if (passage) passage.scrollTop = passage.scrollHeight;
  const form = document.getElementById("choice-form");
  if (!form) return;
  const radios = Array.from(form.querySelectorAll('input[type="radio"][name="option"]'));
  const initial = radios.find(function (r) { return r.checked; });
  const change = form.querySelector('button[value="change"]');
  function preferred() {
    const picked = radios.find(function (r) { return r.checked; });
    if (change && picked && picked !== initial) return change;
    return form.querySelector("button[data-default]");
  }
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const tag = (event.target.tagName || "").toLowerCase();
    if (tag === "textarea" || (tag === "input" && event.target.type === "text")) return;
    // Digits pick the option at that place; on a form with data-letters, so do its
    // letter keys (A, B, C…: a mapped benchmark's item).
    let index = -1;
    if (/^[1-9]$/.test(event.key)) index = Number(event.key) - 1;
    else if (form.dataset.letters === "on" && /^[a-z]$/i.test(event.key)) {
      index = event.key.toLowerCase().charCodeAt(0) - 97;
    }
    if (index >= 0) {
      const radio = radios[index];
      if (radio) {
        if (!radio.checked) {
          radio.checked = true;
          // A DynToM pick is saved on "change" (htmx); setting .checked alone fires nothing.
          radio.dispatchEvent(new Event("change", { bubbles: true }));
        }
        radio.focus();
        event.preventDefault();
      }
    } else if (event.key === "Enter" && tag !== "button") {
      const button = preferred();
      if (button) {
        event.preventDefault();
        button.click();
      }
    }
  });
  // Tests (and scripts driving the page) wait on this: a key pressed before this
  // deferred script runs would be lost.
  form.dataset.keys = "ready";
})();
