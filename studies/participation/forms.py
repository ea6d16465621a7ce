"""Forms for running a study with recruited participants.

The pages are ``studies.participation.researcher_views``.
"""

from __future__ import annotations

from typing import Any

from django import forms

from ..errors import StudyError
from ..forms import NumberField
from ..models import Study, StudyItem
from ..services import ATTENTION_INSTRUCTION_MAX, NAME_PLACEHOLDER, attention_instruction_check
from .ledger import instructed_checks
from .questionnaire import QuestionnaireSyntaxError
from .recruitment import exit_questions_parse, exit_questions_text
from .webhooks import WebhookError, webhook_url_check

PARAM_HELP = "query parameter of the platform's link; blank: not read"
FLOOR_MAX_SHARE = Study._meta.get_field("floor_max_share").default


class RunningForm(forms.Form):
    """Recruitment, consent texts around the answers, pacing and quality options."""

    param_participant = forms.CharField(
        label="Participant id parameter", max_length=40, required=False, help_text=PARAM_HELP
    )
    param_study = forms.CharField(
        label="Study id parameter", max_length=40, required=False, help_text=PARAM_HELP
    )
    param_session = forms.CharField(
        label="Session id parameter", max_length=40, required=False, help_text=PARAM_HELP
    )
    completion_code = forms.CharField(max_length=100, required=False)
    completion_url = forms.URLField(
        label="Completion URL", max_length=500, required=False, assume_scheme="https"
    )
    no_work_url = forms.URLField(
        label="Return URL for no work",
        max_length=500,
        required=False,
        assume_scheme="https",
        help_text="where a participant with nothing to answer goes back to, e.g. the platform's "
        "'screened out' URL; blank: the completion URL's site, without its path and code",
    )
    public_cap = NumberField(
        label="Places on the public link",
        min_value=0,
        max_value=100000,
        initial=0,
        help_text="participants who count (not withdrawn or excluded): an exclusion "
        "frees a place for someone new; 0: no public link",
    )
    signup_ceiling = NumberField(
        label="Most sign-ups on the public link",
        min_value=0,
        max_value=1000000,
        initial=0,
        required=False,
        help_text="in all, counted or not: past it the link says the study is full; 0: no ceiling",
    )
    minutes_estimate = NumberField(
        label="Time estimate (minutes)",
        min_value=1,
        max_value=600,
        required=False,
        help_text="blank: computed from the words to read and the items",
    )
    session_cap = NumberField(
        label="Scenes per sitting",
        min_value=0,
        max_value=1000,
        initial=0,
        help_text="a break screen after this many; 0: no break",
    )
    idle_timeout_minutes = NumberField(
        label="Idle timeout (minutes)",
        min_value=0,
        max_value=10080,
        initial=0,
        help_text="open scenes of a participant idle this long go to others; 0: never",
    )
    allow_cant_tell = forms.BooleanField(label="Offer can't tell", required=False)
    ask_confidence = forms.BooleanField(label="Ask a confidence rating per scene", required=False)
    attention_max_failures = NumberField(
        label="Exclude raters failing more than … attention checks",
        min_value=0,
        max_value=100,
        initial=0,
    )
    fast_exclusion_share = forms.FloatField(
        label="Exclude raters faster than this share of the cohort's median time",
        min_value=0,
        max_value=1,
        initial=0,
        required=False,
        help_text="a share, e.g. 0.33: a median time per scene under it excludes; 0: off",
    )
    instructed_max_failures = NumberField(
        label="Exclude participants failing more than … instructed-response items",
        min_value=0,
        max_value=100,
        initial=0,
        required=False,
        help_text="the attention checks that say what to choose",
    )
    floor_wpm = NumberField(
        label="Reading floor (words a minute)",
        min_value=0,
        max_value=10000,
        initial=0,
        required=False,
        help_text="a page read faster than this is under the floor, e.g. 600 (very fast "
        "skimming); 0: off",
    )
    floor_max_share = forms.FloatField(
        label="Exclude above this share of pages under the floor",
        min_value=0,
        max_value=1,
        initial=0.5,
        required=False,
        help_text="a share of the history pages and items answered, e.g. 0.5; a whole part "
        "read under the floor excludes too",
    )
    debrief = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="shown on the final page",
    )

    FIELDS = (
        "param_participant",
        "param_study",
        "param_session",
        "completion_code",
        "completion_url",
        "no_work_url",
        "signup_ceiling",
        "minutes_estimate",
        "session_cap",
        "idle_timeout_minutes",
        "allow_cant_tell",
        "ask_confidence",
        "attention_max_failures",
        "fast_exclusion_share",
        "instructed_max_failures",
        "floor_wpm",
        "floor_max_share",
        "debrief",
    )

    # Only the scene pages pace and check: breaks, idle release, "can't tell", the
    # confidence rating and attention checks do nothing in a multiple-choice study.
    SCENE_ONLY = (
        "session_cap",
        "idle_timeout_minutes",
        "allow_cant_tell",
        "ask_confidence",
        "attention_max_failures",
        "fast_exclusion_share",
    )

    def __init__(self, *args: Any, study: Study | None = None, **kwargs: Any) -> None:
        """``study``: show only its kind's settings, worded for its items."""
        super().__init__(*args, **kwargs)
        if study is None:
            return
        if study.benchmark in ("tom-in-amc", "tvshowguess"):
            noun = "scenes"
        else:
            noun = "questions"
            for name in self.SCENE_ONLY:
                del self.fields[name]
        if not instructed_checks(study):
            del self.fields["instructed_max_failures"]
        elif "attention_max_failures" in self.fields:
            # A scene study whose checks carry an instruction: they count under it alone.
            del self.fields["attention_max_failures"]
        help_text = f"blank: computed from the words to read and the {noun} (shown above)"
        self.fields["minutes_estimate"].help_text = help_text

    @classmethod
    def for_study(cls, study: Study) -> RunningForm:
        initial = {name: getattr(study, name) for name in cls.FIELDS}
        initial["public_cap"] = study.public_cap
        return cls(initial=initial, study=study)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        url, code = data.get("no_work_url") or "", data.get("completion_code") or ""
        ceiling, cap = data.get("signup_ceiling") or 0, data.get("public_cap") or 0
        if ceiling and ceiling < cap:
            self.add_error(
                "signup_ceiling", "must be at least the places on the public link (or 0: none)"
            )
        if url and (url == data.get("completion_url") or (code and code in url)):
            self.add_error(
                "no_work_url",
                "must not be the completion URL or carry the completion code: "
                "it is for participants who answered nothing",
            )
        return data

    def study_fields(self) -> dict[str, Any]:
        d = self.cleaned_data
        fields = {name: d[name] for name in self.FIELDS if name in self.fields}
        for name in (
            "signup_ceiling",
            "session_cap",
            "idle_timeout_minutes",
            "attention_max_failures",
            "fast_exclusion_share",
            "instructed_max_failures",
            "floor_wpm",
        ):
            if name in fields:
                fields[name] = fields[name] or 0
        if fields.get("floor_max_share") is None:
            fields["floor_max_share"] = FLOOR_MAX_SHARE
        return fields


class ExitQuestionsForm(forms.Form):
    """The exit questionnaire, one question a line (``questionnaire`` has the syntax)."""

    text = forms.CharField(
        label="Questions, one a line",
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "true"}),
        required=False,
        max_length=50_000,
        help_text="one question a line; blank: no questionnaire",
    )

    @classmethod
    def for_study(cls, study: Study) -> ExitQuestionsForm:
        return cls(initial={"text": exit_questions_text(study.exit_questions)})

    def clean_text(self) -> list[dict[str, Any]]:
        try:
            return exit_questions_parse(self.cleaned_data["text"])
        except QuestionnaireSyntaxError as exc:
            # One message a faulty line, each naming its line, listed under the box.
            raise forms.ValidationError(exc.problems) from None


class CsvInviteForm(forms.Form):
    file = forms.FileField(label="CSV file", help_text="a 'label' column, one row per invite")


class ItemRolesForm(forms.Form):
    """Which of the study's scenes is the practice scene and which are attention checks.

    Choices come from one query of the study's items (the study page renders it).
    """

    practice = forms.TypedChoiceField(label="Practice scene", required=False, coerce=int)
    attention = forms.TypedMultipleChoiceField(
        label="Attention-check scenes",
        required=False,
        coerce=int,
        help_text="scenes whose answer is given away (the leak check lists them)",
        widget=forms.SelectMultiple(attrs={"size": 5}),
    )
    attention_instruction = forms.CharField(
        label="Attention-check instruction",
        required=False,
        max_length=ATTENTION_INSTRUCTION_MAX,
        widget=forms.TextInput(
            attrs={"placeholder": f"Attention check: select '{NAME_PLACEHOLDER}' for this speaker."}
        ),
        help_text=f"shown on each masked speaker of a check, {NAME_PLACEHOLDER} as the name to "
        "select; blank: checks are scored against the gold, nothing said",
    )

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.items = {
            item.pk: item
            for item in StudyItem.objects.filter(study=study)
            .select_related("scene", "study_work__work")
            .order_by("study_work__position", "position")
        }
        choices = [(pk, _item_label(item)) for pk, item in self.items.items()]
        self.fields["practice"].choices = [("", "none"), *choices]
        self.fields["attention"].choices = choices
        if not self.is_bound:
            roles = [i for i in self.items.values() if i.role != StudyItem.Role.TEST]
            practice = [i.pk for i in roles if i.role == StudyItem.Role.PRACTICE]
            self.initial = {
                "practice": practice[0] if practice else "",
                "attention": [i.pk for i in roles if i.role == StudyItem.Role.ATTENTION],
                "attention_instruction": study.attention_instruction,
            }

    def clean_attention_instruction(self) -> str:
        try:
            return attention_instruction_check(self.cleaned_data["attention_instruction"])
        except StudyError as exc:
            message = str(exc).removeprefix("attention_instruction: ")
            raise forms.ValidationError(_sentence(message)) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        practice = self.items.get(data.get("practice")) if data.get("practice") else None
        attention = [self.items[pk] for pk in data.get("attention") or []]
        if practice is not None and practice in attention:
            raise forms.ValidationError("a scene cannot be both the practice and a check")
        data["practice"], data["attention"] = practice, attention
        return data


def _sentence(message: str) -> str:
    """A service's message as a form shows it beside its field: capitalised, a full stop."""
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


def _item_label(item: StudyItem) -> str:
    held = " (held back: names leak)" if item.held_back else ""
    return f"{item.study_work.work.title} · {item.scene.source_id if item.scene else item.pk}{held}"


class ExclusionOverrideForm(forms.Form):
    """A researcher's decision on one participant's exclusion (``ledger``'s override)."""

    decision = forms.ChoiceField(
        choices=[
            ("include", "Include: keep in reports"),
            ("exclude", "Exclude: leave out of reports"),
            ("", "Clear: leave it to the study's rule"),
        ],
        required=False,
    )
    reason = forms.CharField(
        max_length=500, required=False, widget=forms.TextInput(), help_text="required to decide"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("decision") and not (data.get("reason") or "").strip():
            self.add_error("reason", "Say why you include or exclude this participant.")
        return data


class WebhookForm(forms.Form):
    """The study's webhook URL (``webhooks.webhook_url_check`` says what is accepted)."""

    # A CharField, not a URLField: the check's own messages say what a webhook needs
    # (https, a host), and no scheme is assumed for a URL that lacks one.
    webhook_url = forms.CharField(
        label="Webhook URL",
        max_length=500,
        help_text="receives a signed POST when a participant finishes or withdraws",
        widget=forms.URLInput(attrs={"placeholder": "https://example.org/tomlab-hook"}),
    )

    def clean_webhook_url(self) -> str:
        try:
            return webhook_url_check(self.cleaned_data["webhook_url"])
        except WebhookError as exc:
            raise forms.ValidationError(_sentence(str(exc))) from None
