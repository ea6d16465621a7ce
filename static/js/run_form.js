// The run form offers only the methods of the chosen benchmark (the method select's
// data-methods maps each benchmark to its methods). Without JavaScript every method
// shows, and the server names the right ones if another is posted. The item-set
// fieldset (mapped benchmarks) shows only for "generic"; without JavaScript it always
// shows, and the server refuses its fields for the built-in benchmarks.
document.addEventListener("DOMContentLoaded", () => {
  const benchmark = document.getElementById("id_benchmark");
  const method = document.getElementById("id_method");
  const generic = document.querySelector('[data-testid="generic-fields"]');
  if (benchmark && generic) {
    const showGeneric = () => { generic.hidden = benchmark.value !== "generic"; };
    benchmark.addEventListener("change", showGeneric);
    showGeneric();
  }
  if (!benchmark || !method || !method.dataset.methods) return;
  const methods = JSON.parse(method.dataset.methods);
  const sync = () => {
    const allowed = methods[benchmark.value] || [];
    for (const option of method.options) {
      const ok = allowed.includes(option.value);
      option.hidden = !ok;
      option.disabled = !ok;
    }
    if (!allowed.includes(method.value) && allowed.length) method.value = allowed[0];
  };
  benchmark.addEventListener("change", sync);
  sync();
});
