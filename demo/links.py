"""Where to go in the demo: the pages and invite links of every demo part, as lines.

``load_demo`` prints them after loading; ``demo_links`` prints them again with the
server's address in front, for ``scripts/run_embedded.py``, which knows the port.
Every part is found by its demo name, so a part that is missing is simply left out.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.chartom.board import annotator_cards
from annotation.chartom.check_review import check_disputes
from annotation.chartom.models import NoteBatch, QualificationSet
from annotation.dyntom.validation.review import batch_disputes
from annotation.models import ValidationBatch
from modeling.models import Run
from studies.models import Study

from . import studies
from .runs import RUN_NAME

CONSTRUCTION_BATCH = "Demo: CharToM-QA construction"
VALIDATION_BATCH = "Demo: validate the DynToM stage"
DISPUTES_BATCH = "Demo: DynToM disagreements to settle"


def demo_links(*, base_url: str = "") -> list[str]:
    """The demo's pages, one block per part; full URLs when ``base_url`` is given."""
    base = base_url.rstrip("/")

    def url(path: str) -> str:
        return f"{base}{path}"

    return [
        *_runs(url),
        *_studies(url),
        *_construction(url),
        *_validation(url),
        *_disputes(url),
    ]


def _runs(url: Callable[[str], str]) -> list[str]:
    runs = list(Run.objects.filter(name__startswith=RUN_NAME, imported=True).order_by("pk"))
    if not runs:
        return []
    lines = ["Demo model runs (made-up model demo-recorded, predictions imported):"]
    for run in runs:
        page = url(reverse("modeling:run-detail", args=[run.pk]))
        lines.append(f"  {run.benchmark}: {run.name} ({run.get_status_display()}): {page}")
    reports = " ".join(
        url(reverse("reports:report", args=[b])) for b in sorted({r.benchmark for r in runs})
    )
    lines.append(f"  reports, humans beside the model: {reports}")
    return lines


def _studies(url: Callable[[str], str]) -> list[str]:
    lines = []
    names = (
        studies.SCENE_STUDY,
        studies.CHARTOM_STUDY,
        studies.DYNTOM_STUDY,
        studies.GENERIC_STUDY,
        studies.BALANCED_STUDY,
    )
    found = {s.name: s for s in Study.objects.filter(name__in=names)}
    for name in names:
        study = found.get(name)
        if study is None:
            continue
        details = [study.get_status_display()]
        if study.one_to_one:
            details.append("one-to-one")
        if study.design_applied_at is not None:
            details.append("read/not-read design applied")
        lines.append(f"Demo study: {study.name} ({'; '.join(details)})")
        lines.append(f"  researcher's page: {url(reverse('studies:detail', args=[study.pk]))}")
        if study.benchmark == "chartom-qa":
            design = reverse("studies:choice-design", args=[study.pk])
            lines.append(f"  read/not-read design: {url(design)}")
        for participant in studies.invite_participants(study):
            lines.append(f"  invite link: {url(reverse('rater:start', args=[participant.token]))}")
        if study.open_join:
            lines.append(f"  logged-in raters: {url(reverse('rater:join', args=[study.pk]))}")
    return lines


def _construction(url: Callable[[str], str]) -> list[str]:
    batch = NoteBatch.objects.filter(name=CONSTRUCTION_BATCH).first()
    if batch is None:
        return []
    lines = [
        f"Demo CharToM-QA construction: {batch.name} (replies of backend demo-recorded): "
        f"{url(reverse('annotation:chartom'))}"
    ]
    annotator = get_user_model().objects.filter(username="annotator").first()
    if annotator is not None:
        queues = ", ".join(f"{card.label} {card.open}" for card in annotator_cards(annotator))
        lines.append(f"  open tasks for annotator: {queues}")
    if QualificationSet.objects.filter(is_active=True).exists():
        trial = url(reverse("annotation:chartom-qualification"))
        lines.append(f"  qualification trial: {trial}")
    return lines


def _validation(url: Callable[[str], str]) -> list[str]:
    if not ValidationBatch.objects.filter(name=VALIDATION_BATCH).exists():
        return []
    return [f"Demo DynToM validation: {VALIDATION_BATCH}: {url(reverse('annotation:validation'))}"]


def _disputes(url: Callable[[str], str]) -> list[str]:
    """Both reviewer queues with their disputed count, read as the queue pages read it."""
    batch = ValidationBatch.objects.filter(name=DISPUTES_BATCH).first()
    if batch is None:
        return []
    dyntom = sum(1 for d in batch_disputes(batch) if d.disputed)
    checks = sum(1 for d in check_disputes() if d.disputed)
    return [
        "Demo disagreements to settle (sign in as researcher):",
        f"  DynToM validation, {batch.name}: {dyntom} disputed: "
        f"{url(reverse('annotation:review-queue', args=[batch.pk]))}",
        f"  CharToM-QA checks: {checks} disputed: "
        f"{url(reverse('annotation:chartom-check-review'))}",
    ]
