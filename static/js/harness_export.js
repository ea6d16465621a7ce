// The harness export page shows only the chosen source's fields, the chosen item set's
// languages and categories, and the prompt method only for Inspect with our prompt.
// Without JavaScript everything shows, each part labelled; the server passes on only
// the chosen source's fields. A refused preview answers 400 with the form and its
// errors: htmx does not swap a 4xx by default, so it is swapped here.
(() => {
  const checked = (name) => {
    const input = document.querySelector(`#export-form input[name="${name}"]:checked`);
    return input ? input.value : "";
  };
  const sync = () => {
    const form = document.getElementById("export-form");
    if (!form) return;
    const source = checked("source");
    for (const block of form.querySelectorAll("[data-for-source]")) {
      block.hidden = !block.dataset.forSource.split(" ").includes(source);
    }
    const harness = checked("harness");
    for (const block of form.querySelectorAll("[data-for-harness]")) {
      block.hidden = block.dataset.forHarness !== harness;
    }
    const work = form.querySelector('select[name="work"]');
    for (const facts of form.querySelectorAll("[data-work]")) {
      facts.hidden = !work || facts.dataset.work !== work.value;
    }
  };
  document.addEventListener("DOMContentLoaded", sync);
  document.addEventListener("change", (event) => {
    if (event.target.closest("#export-form")) sync();
  });
  document.addEventListener("htmx:afterSettle", sync);
  document.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.xhr.status === 400 && event.detail.target.id === "harness-export") {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
