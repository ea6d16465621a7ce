// The exit questionnaire's conditional questions: each is shown only while the earlier
// answer it waits for is given (and that question is itself shown). Without this script
// every question is shown with its condition written under it, and the server drops the
// answers to those whose condition is unmet, so the page works the same.
(function () {
  function update(box, items) {
    const shown = new Set();
    items.forEach(function (item) {
      const on = item.dataset.showIf;
      let visible = true;
      if (on) {
        const chosen = Array.from(box.querySelectorAll('[name="' + on + '"]:checked'));
        visible = shown.has(on) && chosen.some(function (input) {
          return input.value === item.dataset.showIfValue;
        });
      }
      item.hidden = !visible;
      // A hidden question sends nothing; what was typed comes back if it is shown again.
      item.querySelectorAll("input, textarea").forEach(function (input) {
        input.disabled = !visible;
      });
      if (visible) shown.add(item.dataset.key);
    });
  }

  document.querySelectorAll("[data-exit-questions]").forEach(function (box) {
    const items = Array.from(box.querySelectorAll(".exit-item"));
    box.querySelectorAll("[data-condition-hint]").forEach(function (hint) {
      hint.hidden = true;
    });
    box.addEventListener("change", function () { update(box, items); });
    update(box, items);
  });
})();
