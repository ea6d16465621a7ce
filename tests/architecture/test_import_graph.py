"""The import graph beside import-linter's contracts: no circles between files.

import-linter holds the layers between apps (``.importlinter``); a circle inside one
app (a service importing its task module, which imports the service) passes its
layers contract, so ``scripts/import_graph.py`` counts those from the source.
"""

import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _import_graph():
    spec = importlib.util.spec_from_file_location(
        "import_graph", REPO_ROOT / "scripts" / "import_graph.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_circles_between_files_even_through_lazy_imports():
    graph = _import_graph()
    assert graph.strongly_connected(graph.file_graph(top_level_only=False)) == []


def test_the_circle_finder_sees_a_circle():
    graph = _import_graph()
    circle = {"a.one": {"a.two"}, "a.two": {"a.three"}, "a.three": {"a.one"}, "a.four": {"a.one"}}
    assert graph.strongly_connected(circle) == [["a.one", "a.three", "a.two"]]


def test_the_graph_reads_relative_and_function_level_imports():
    graph = _import_graph()
    modeling_runs = graph.file_graph(top_level_only=False)["modeling.runs.tasks"]
    assert "modeling.runs.services" in modeling_runs  # `from .services import ...`
    lazy = graph.file_graph(top_level_only=True)
    assert "studies.models" not in lazy["reports.home"]  # imported inside the view
    assert "studies.models" in graph.file_graph(top_level_only=False)["reports.home"]
