"""A run's settings read as a table of dotted keys (issue 29, part 4)."""

from __future__ import annotations

from modeling.runs.views import setting_rows


def test_setting_rows_flatten_nested_parameters_in_key_order():
    params = {
        "samples": 1,
        "options": {"perturb_names": True, "templates": {"system": 4}, "shots": [3, 5]},
        "config": {},
        "seed": None,
    }

    assert setting_rows(params) == [
        ("config", "{}"),
        ("options.perturb_names", "true"),
        ("options.shots", "3, 5"),
        ("options.templates.system", "4"),
        ("samples", "1"),
        ("seed", "null"),
    ]
