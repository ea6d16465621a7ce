// The rater pages' saves as they happen (htmx): a refused save answers 422 with its
// message, which htmx does not swap by default (4xx), so the rater would see nothing.
(function () {
  "use strict";
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
