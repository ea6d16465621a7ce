from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from modeling.models import Backend


class Command(BaseCommand):
    help = "Create or update an LLM backend (the API key is read from --api-key-env at run time)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--kind", choices=Backend.Kind.values, required=True)
        parser.add_argument("--base-url", default="")
        parser.add_argument("--model", default="", help="default model name")
        parser.add_argument("--model-path", default="", help="local model directory (transformers)")
        parser.add_argument("--api-key-env", default="", help="environment variable with the key")
        parser.add_argument("--max-concurrency", type=int, default=4)
        parser.add_argument("--max-retries", type=int, default=5)
        parser.add_argument("--timeout", type=float, default=120.0)

    def handle(self, *args, **o) -> None:
        if o["kind"] == Backend.Kind.TRANSFORMERS and not o["model_path"]:
            raise CommandError("--model-path is required for a transformers backend")
        # The name is stored and shown everywhere; a key passed here by mistake must not be.
        try:
            Backend._meta.get_field("api_key_env").run_validators(o["api_key_env"])
        except ValidationError as exc:
            raise CommandError(f"--api-key-env: {' '.join(exc.messages)}") from None
        # The server's rules on key variables and hosts (TOMLAB_BACKEND_KEY_ENVS, _HOSTS).
        try:
            Backend(kind=o["kind"], base_url=o["base_url"], api_key_env=o["api_key_env"]).clean()
        except ValidationError as exc:
            raise CommandError(
                "; ".join(
                    f"--{field.replace('_', '-')}: {' '.join(messages)}"
                    for field, messages in exc.message_dict.items()
                )
            ) from None
        backend, created = Backend.objects.update_or_create(
            name=o["name"],
            defaults=dict(
                kind=o["kind"],
                base_url=o["base_url"],
                default_model=o["model"],
                model_path=o["model_path"],
                api_key_env=o["api_key_env"],
                max_concurrency=o["max_concurrency"],
                max_retries=o["max_retries"],
                timeout_s=o["timeout"],
            ),
        )
        self.stdout.write(f"backend {backend.name} {'created' if created else 'updated'}")
