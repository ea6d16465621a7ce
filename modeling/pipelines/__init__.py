"""Benchmark pipelines: which calls a run makes and how outputs become predictions."""

from django.utils.module_loading import import_string

from .base import CallUnit, Chain, ParsedItem, Pipeline, PrepareSteps, Step, run_chains

_REGISTRY = {
    "chartom-qa": "modeling.pipelines.chartom_qa.CharToMQAPipeline",
    "dyntom": "modeling.pipelines.dyntom.DynToMPipeline",
    "generic": "modeling.pipelines.generic.GenericPipeline",
    "tom-in-amc": "modeling.pipelines.speaker_guess.ToMInAMCPipeline",
    "tvshowguess": "modeling.pipelines.speaker_guess.TVShowGuessPipeline",
}


def get_pipeline(benchmark: str) -> Pipeline:
    try:
        return import_string(_REGISTRY[benchmark])()
    except KeyError:
        raise ValueError(
            f"no model pipeline for {benchmark!r}; available: {', '.join(sorted(_REGISTRY))}"
        ) from None


def pipeline_benchmarks() -> list[str]:
    return sorted(_REGISTRY)


__all__ = [
    "CallUnit",
    "Chain",
    "ParsedItem",
    "Pipeline",
    "PrepareSteps",
    "Step",
    "get_pipeline",
    "pipeline_benchmarks",
    "run_chains",
]
