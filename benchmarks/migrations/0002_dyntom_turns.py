"""DynToM dialogues as ordered turns, with the source shape remembered.

Rows imported before this migration hold the release's list of rounds
(``[{speaker: line, ...}, ...]``); they become turns ``[{"speaker", "text"}]`` with
``dialogue_shape = "rounds"`` and the rounds' sizes in ``extra["round_sizes"]``, so
the exporter still writes them back as they were. Reversing regroups the turns.

On PostgreSQL, jsonb had already put each round's speakers in its own key order
(shorter names first), so turns within a round follow that order; importing the
source again restores the file's order (the rows then count as updated).
"""

from django.db import migrations, models

import benchmarks.fields

BATCH = 500


def _rounds_to_turns(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    Scenario = apps.get_model("benchmarks", "DynToMScenario")
    changed = []
    for scenario in Scenario.objects.using(db).only("pk", "dialogue", "extra").iterator(chunk_size=BATCH):
        rounds = scenario.dialogue
        if not isinstance(rounds, list) or not all(isinstance(r, dict) for r in rounds):
            continue
        # A row already in turns (e.g. migrated, unapplied, re-applied) is left alone.
        if rounds and set(rounds[0]) == {"speaker", "text"}:
            continue
        scenario.dialogue = [
            {"speaker": speaker, "text": text} for r in rounds for speaker, text in r.items()
        ]
        scenario.extra = {**(scenario.extra or {}), "round_sizes": [len(r) for r in rounds]}
        changed.append(scenario)
        if len(changed) >= BATCH:
            Scenario.objects.using(db).bulk_update(changed, ["dialogue", "extra"])
            changed = []
    Scenario.objects.using(db).bulk_update(changed, ["dialogue", "extra"])


def _turns_to_rounds(apps, schema_editor):
    db = schema_editor.connection.alias  # the database migrated, not always the default
    # The old schema only knew lists of rounds: object and text dialogues become one
    # round per turn (their source shape cannot be kept there).
    Scenario = apps.get_model("benchmarks", "DynToMScenario")
    changed = []
    for scenario in Scenario.objects.using(db).only("pk", "dialogue", "dialogue_shape", "extra").iterator(
        chunk_size=BATCH
    ):
        turns = scenario.dialogue or []
        extra = dict(scenario.extra or {})
        sizes = extra.pop("round_sizes", None) if scenario.dialogue_shape == "rounds" else None
        extra.pop("dialogue_text", None)
        sizes = list(sizes or [])
        rounds, start = [], 0
        for size in sizes:
            rounds.append({t["speaker"]: t["text"] for t in turns[start : start + size]})
            start += size
        rounds.extend({t["speaker"]: t["text"]} for t in turns[start:])
        scenario.dialogue, scenario.extra = rounds, extra
        changed.append(scenario)
        if len(changed) >= BATCH:
            Scenario.objects.using(db).bulk_update(changed, ["dialogue", "extra"])
            changed = []
    Scenario.objects.using(db).bulk_update(changed, ["dialogue", "extra"])


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="dyntomscenario",
            name="dialogue_shape",
            field=models.CharField(
                choices=[
                    ("rounds", "list of rounds (objects speaker -> line)"),
                    ("object", "one object speaker -> line"),
                    ("text", "one string of Name: 'line' lines"),
                ],
                default="rounds",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="dyntomscenario",
            name="dialogue",
            field=benchmarks.fields.BulkJSONField(
                blank=True, default=list, help_text='[{"speaker": …, "text": …}]'
            ),
        ),
        migrations.RunPython(_rounds_to_turns, _turns_to_rounds, elidable=True),
    ]
