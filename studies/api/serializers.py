"""Query and row shapes of the study export API.

The rows are the exports' own dicts (``studies.exports.response_export`` and
``exit_export``), returned as they are so the API, responses.json and exit.json cannot
differ; these serializers describe them for the schema at /api/docs/, and a test holds
their fields to the export columns.
"""

from __future__ import annotations

from rest_framework import serializers


class ExportQuerySerializer(serializers.Serializer):
    include_excluded = serializers.BooleanField(
        required=False,
        default=False,
        help_text="1: excluded participants' rows too, marked (left out by default)",
    )


class _ParticipantColumns(serializers.Serializer):
    participant_id = serializers.IntegerField()
    participant = serializers.CharField(help_text="the invite's label, account or id")
    withdrawn = serializers.BooleanField()
    excluded = serializers.BooleanField(help_text="left out of reports and exports by default")
    exclusion_reason = serializers.CharField()


class _RoleColumns(serializers.Serializer):
    role = serializers.ChoiceField(choices=("test", "practice", "attention"))
    practice = serializers.BooleanField()
    attention_check = serializers.BooleanField()


class SceneResponseRowSerializer(_ParticipantColumns, _RoleColumns):
    """A masked speaker's answer in a ToM-in-AMC or TVShowGuess study."""

    work = serializers.CharField()
    scene = serializers.CharField()
    seen = serializers.BooleanField(help_text="the rater had seen the work")
    code = serializers.CharField(help_text="the masked speaker, P0, P1, …")
    answer = serializers.CharField()
    answer_shown = serializers.CharField(help_text="the name shown when names were perturbed")
    cant_tell = serializers.BooleanField()
    gold = serializers.CharField()
    correct = serializers.BooleanField(allow_null=True)
    confidence = serializers.IntegerField(allow_null=True, help_text="1 to 5, when asked")
    history_needed = serializers.BooleanField(allow_null=True)
    tags = serializers.CharField(help_text="ToM dimensions, ;-separated")
    evidence = serializers.CharField()
    seconds_total = serializers.FloatField(allow_null=True, help_text="first shown to submit")
    seconds_active = serializers.FloatField(allow_null=True, help_text="idle gaps cut")
    total_ms = serializers.IntegerField(allow_null=True)
    active_ms = serializers.IntegerField(allow_null=True)
    first_shown_at = serializers.CharField()
    submitted_at = serializers.CharField()
    item_set_hash = serializers.CharField()
    instructions_version = serializers.CharField()
    assignment_seed = serializers.CharField()
    app_version = serializers.CharField()
    names = serializers.CharField()


class ChoiceResponseRowSerializer(_ParticipantColumns, _RoleColumns):
    """A pick in a CharToM-QA or DynToM study (the columns the choice import reads first)."""

    item = serializers.CharField()
    work = serializers.CharField()
    read = serializers.CharField(help_text="CharToM-QA: had read the book")
    round = serializers.IntegerField(help_text="1, or 2 for a CharToM-QA revision")
    option = serializers.IntegerField()
    shown = serializers.IntegerField()
    kept = serializers.CharField()
    correct = serializers.CharField()
    ms = serializers.IntegerField()
    shown_at = serializers.CharField()
    answered_at = serializers.CharField()
    question = serializers.CharField()
    dimension = serializers.CharField()
    question_type = serializers.CharField()
    mental_state = serializers.CharField()
    directness = serializers.CharField()
    confidence = serializers.IntegerField(allow_null=True)
    seconds = serializers.FloatField(help_text="question shown to this pick")
    seconds_total = serializers.FloatField(allow_null=True, help_text="the whole item")
    seconds_active = serializers.FloatField(allow_null=True)


class ExitAnswerRowSerializer(serializers.Serializer):
    """One exit question as a participant saw it (that version's wording) and their answer."""

    participant_id = serializers.IntegerField()
    status = serializers.CharField(help_text="the participant ledger's status")
    withdrawn = serializers.BooleanField()
    excluded = serializers.BooleanField()
    exclusion_reason = serializers.CharField()
    version = serializers.IntegerField(help_text="version of the exit questions answered")
    key = serializers.CharField()
    question = serializers.CharField()
    choices = serializers.CharField(help_text="the choices offered, |-separated; none: free text")
    answer = serializers.CharField(help_text="empty: skipped")
    answered_at = serializers.CharField()
