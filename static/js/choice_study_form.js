// The multiple-choice study form shows only the chosen benchmark's settings. Without
// JavaScript every field shows, each labelled with its benchmark; hidden fields are
// still posted, and the server ignores the other benchmark's.
document.addEventListener("DOMContentLoaded", () => {
  const benchmark = document.getElementById("id_benchmark");
  if (!benchmark) return;
  const sync = () => {
    for (const block of document.querySelectorAll("[data-for-benchmark]")) {
      // A block may serve several benchmarks: data-for-benchmark="dyntom generic".
      block.hidden = !block.dataset.forBenchmark.split(" ").includes(benchmark.value);
    }
  };
  benchmark.addEventListener("change", sync);
  sync();
});
