"""A draft study (no answers, maybe never run) is not listed as a system in reports by
default; asked for by id it still is (issue 16)."""

from __future__ import annotations

import pytest

from reports.selectors import report_studies
from reports.tables import build_report
from studies.services import study_create, study_go_live
from tests.studies.conftest import friends  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_draft_study_is_not_a_system(friends):  # noqa: F811
    draft = study_create(name="Draft friends", benchmark="tvshowguess", works=[friends])
    live = study_go_live(
        study=study_create(name="Live friends", benchmark="tvshowguess", works=[friends])
    )
    assert [s["id"] for s in report_studies("tvshowguess")] == [live.pk]
    assert [s["id"] for s in report_studies("tvshowguess", study_ids=[draft.pk])] == [draft.pk]
    text = str(build_report("tvshowguess").as_json())
    assert "Humans: Draft friends" not in text and "Humans: Live friends" in text
