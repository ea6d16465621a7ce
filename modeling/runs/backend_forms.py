"""The backend form, shared by the backend pages and the admin.

A backend's API key is write-only: the form offers an empty password input that is
never filled back in, a blank submission keeps the stored key, and "remove" drops it.
Secret option values are shown masked and kept when the mask is sent back. Which
hosts and key variables are allowed is checked by ``Backend.clean`` (the server's
policy), which a ModelForm runs on every save.
"""

from __future__ import annotations

from typing import Any

from django import forms

from ..credentials import REDACTED, contains_ciphertext, restore_redacted
from ..models import Backend
from .backend_services import backend_apply_key


def _holds_placeholder(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_placeholder(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_placeholder(item) for item in value)
    return value == REDACTED


class BackendForm(forms.ModelForm):
    # Local servers speak plain http; say so rather than rely on Django 6's https default.
    base_url = forms.URLField(
        required=False,
        max_length=200,
        assume_scheme="http",
        label="Base URL",
        help_text=f"{Backend._meta.get_field('base_url').help_text}. A stored API key and "
        "secret options belong to this server: changing the scheme, host or port removes "
        "them, and they must be entered again.",
    )
    # render_value=False: the stored key never reaches the page, not even masked.
    # Not the model field's name: that column holds ciphertext and is not editable.
    new_api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only, stored encrypted. Leave blank to keep the stored key (it is "
        "removed when the base URL moves to another server). Prefer “API key env”: the "
        "key then stays out of the database.",
    )
    clear_api_key = forms.BooleanField(
        label="Remove the stored API key", required=False, initial=False
    )

    class Meta:
        model = Backend
        fields = (
            "name",
            "kind",
            "base_url",
            "default_model",
            "model_path",
            "api_key_env",
            "max_concurrency",
            "max_retries",
            "timeout_s",
            "price_input_per_1k",
            "price_output_per_1k",
            "options",
        )
        labels = {"api_key_env": "API key env"}
        help_texts = {
            "api_key_env": "Preferred: the name of the server's environment variable that "
            "holds the key (e.g. OPENAI_API_KEY or TOMLAB_KEY_<NAME>); the key then never "
            "enters the database.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The page shows options masked; clean_options puts the stored secrets back.
        if self.instance.pk:
            self.initial["options"] = self.instance.redacted_options()

    def clean_options(self) -> Any:
        submitted = self.cleaned_data.get("options") or {}
        if not isinstance(submitted, dict):
            raise forms.ValidationError("Options must be a JSON object.")
        if contains_ciphertext(submitted):
            raise forms.ValidationError("Values starting with “fernet:” cannot be entered.")
        stored = self.instance.options if self.instance.pk else {}
        options = restore_redacted(submitted, stored)
        if _holds_placeholder(options):
            raise forms.ValidationError(
                f"{REDACTED} stands for a stored secret; there is none at that place: "
                "type the value."
            )
        return options

    def save(self, commit: bool = True) -> Backend:
        backend_apply_key(
            backend=self.instance,
            new_key=self.cleaned_data.get("new_api_key") or "",
            clear=bool(self.cleaned_data.get("clear_api_key")),
        )
        return super().save(commit=commit)
