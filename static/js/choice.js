// Multiple-choice questions: digits pick an option, Enter presses the form's default
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
    if (/^[1-9]$/.test(event.key)) {
      const radio = radios[Number(event.key) - 1];
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
