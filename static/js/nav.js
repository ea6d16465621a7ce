// The navigation's menus are <details>: one open at a time, closed by Escape or a click
// elsewhere, so they behave like menus without giving up keyboard and no-JS use.
(function () {
  function groups() { return document.querySelectorAll("details.navgroup"); }
  document.addEventListener("toggle", function (event) {
    var opened = event.target;
    if (!opened.matches || !opened.matches("details.navgroup") || !opened.open) return;
    groups().forEach(function (d) { if (d !== opened) d.open = false; });
  }, true);
  document.addEventListener("click", function (event) {
    groups().forEach(function (d) { if (d.open && !d.contains(event.target)) d.open = false; });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    groups().forEach(function (d) {
      if (d.open) { d.open = false; d.querySelector("summary").focus(); }
    });
  });
})();
