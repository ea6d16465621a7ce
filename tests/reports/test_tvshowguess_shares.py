"""The TVShowGuess authors' annotation shares, from the real friends.tsv.

The expected numbers are the shares the TVShowGuess paper reports for Friends; they
come out of the imported SpeakerAnnotation rows, through the report builder.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from metrics.tvshowguess import annotation_shares, dependence_type, evidence_types, reasoning_type
from reports.tables import build_report, report_json
from tests.module_rows import build_friends

EXPECTED = {
    "dependence": {"direct": 26.49, "indirect": 19.87, "none": 53.64},
    "reasoning": {
        "default conjunction": 15.89,
        "multihop-character": 3.97,
        "multihop-textual": 5.30,
        "commonsense": 4.64,
        "not required": 70.20,
    },
    "evidence": {
        "linguistic style": 0.66,
        "personality": 7.28,
        "fact(attribute)": 2.65,
        "fact(relation)": 16.56,
        "fact(status)": 1.32,
        "fact (any)": 20.53,
        "memory": 36.42,
        "inside scene(background)": 32.45,
        "inside scene(mention)": 15.23,
        "inside scene(exclusion)": 8.61,
    },
}


def _group(*evidence: str, reasoning: str = "") -> dict:
    cells = [*evidence, "", "", ""][:3]
    return {"evidence": cells, "reasoning": reasoning}


def test_dependence_rules() -> None:
    assert dependence_type("yes", "yes") == "direct"  # need-history wins
    assert dependence_type("no", "yes") == "indirect"
    assert dependence_type("no", "no") == "none"
    assert dependence_type("Unsolvable", "yes") is None


def test_reasoning_rules_read_the_first_group() -> None:
    assert reasoning_type([_group("personality", reasoning="commonsense")]) == "commonsense"
    assert reasoning_type([_group("personality", reasoning="no")]) == "not required"
    # A blank cell: default conjunction only when a second evidence entry is there.
    assert reasoning_type([_group("personality", "fact(status)")]) == "default conjunction"
    assert reasoning_type([_group("personality")]) == "not required"
    # The second group's reasoning and evidence do not count.
    assert (
        reasoning_type([_group("personality"), _group("memory", "x", reasoning="commonsense")])
        == "not required"
    )


def test_evidence_counts_every_entry_of_the_first_three_columns() -> None:
    groups = [
        _group("history event", "inside_scene(exclusive)", "fact(relation)"),
        _group("personality"),
    ]
    assert evidence_types(groups) == ["memory", "inside scene(exclusion)", "fact(relation)"]
    shares = annotation_shares(
        [
            {"need_history": "no", "facts_from_memory": "no", "evidence_groups": groups},
            {
                "need_history": "Unsolvable",
                "facts_from_memory": "no",
                "evidence_groups": [_group("fact(status)", "fact(status)", "telepathy")],
            },
        ]
    )
    # 2 rows: the Unsolvable one has no dependence type, so none = 1/2 and direct = 0.
    assert shares.dependence == {"direct": 0.0, "indirect": 0.0, "none": 50.0}
    # fact (any): relation 1 + status 2 = 3 entries over 2 rows = 150%.
    assert shares.evidence["fact (any)"] == 150.0
    assert shares.evidence["fact(status)"] == 100.0
    assert shares.unrecognised == {"evidence: telepathy": 1}


@pytest.fixture
def friends(db, shared_data):
    build_friends(shared_data)


@pytest.mark.django_db
def test_friends_shares_match_the_paper(friends) -> None:
    report = build_report("tvshowguess")
    data = report_json(report)
    for attribute, expected in EXPECTED.items():
        assert data[attribute] == expected, attribute
    # The tables carry the same numbers plus counts: 151 rows, 40 need history.
    dependence = report.table("annotation-dependence")
    assert dependence.rows[0] == ["direct", 40, 26.49]
    assert "151 annotated" in dependence.note
    assert sum(row[1] for row in dependence.rows) == 151


@pytest.mark.django_db
def test_tbbt_shaped_sheet_gives_the_shares_counted_by_hand(tmp_path) -> None:
    from tests.benchmarks.tbbt_sheet import EXPECTED_COUNTS, EXPECTED_SHARES, write_tbbt

    raw = write_tbbt(tmp_path)
    call_command("import_benchmark", "tvshowguess", str(raw), "--no-progress", verbosity=0)

    report = build_report("tvshowguess")
    data = report_json(report)
    for attribute, expected in EXPECTED_SHARES.items():
        assert data[attribute] == expected, attribute
    dependence = report.table("annotation-dependence")
    assert {row[0]: row[1] for row in dependence.rows} == EXPECTED_COUNTS
    assert (
        "6 annotated" in dependence.note and "Unsolvable (no dependence type): 1" in dependence.note
    )
    assert report.table("annotation-evidence").note.count("Not counted") == 0


def test_evidence_labels_follow_the_authors_kind_sub_rule() -> None:
    from metrics.tvshowguess import evidence_label

    assert evidence_label("history event") == "memory"
    assert evidence_label("inside_scene(exclusive)") == "inside scene(exclusion)"
    assert evidence_label("inside_scene(exclusion)") == "inside scene(exclusion)"
    assert evidence_label("Fact(Attribute)") == "fact(attribute)"
    assert evidence_label("telepathy") == "telepathy"


@pytest.mark.django_db
def test_each_sheet_keeps_its_own_shares_beside_the_pooled_ones(friends, tmp_path) -> None:
    from tests.benchmarks.tbbt_sheet import EXPECTED_SHARES, write_tbbt

    call_command(
        "import_benchmark", "tvshowguess", str(write_tbbt(tmp_path)), "--no-progress", verbosity=0
    )

    report = build_report("tvshowguess")
    for attribute in EXPECTED:
        table = report.table(f"annotation-{attribute}")
        assert table.columns[3:] == ["friends/friends.tsv %", "tbbt/tbbt.tsv %"]
        by_label = {row[0]: row for row in table.rows}
        # The authors' per-show figures, each over its own sheet's rows ...
        assert {k: by_label[k][3] for k in EXPECTED[attribute]} == EXPECTED[attribute]
        assert {k: by_label[k][4] for k in EXPECTED_SHARES[attribute]} == (
            EXPECTED_SHARES[attribute]
        )
    # ... and the pooled share over all 157 rows: direct = (40 + 2) / 157.
    assert report.table("annotation-dependence").rows[0][:3] == ["direct", 42, 26.75]
