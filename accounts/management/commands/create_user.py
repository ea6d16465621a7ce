from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.roles import ROLES
from accounts.services import user_create_with_role


class Command(BaseCommand):
    help = "Create or reset a user with one role (researcher, annotator, rater)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--email", default="")

    def handle(self, *args, **options) -> None:
        try:
            user = user_create_with_role(
                username=options["username"],
                password=options["password"],
                role=options["role"],
                email=options["email"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"user {user.username} is a {options['role']}")
