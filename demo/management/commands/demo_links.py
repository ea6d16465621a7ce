"""Print the demo's logins, pages and invite links, in full on the given server.

``scripts/run_embedded.py`` runs it once the server is up (it knows the port);
``load_demo`` prints the same links after loading.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from demo.links import demo_links

from .load_demo import DEMO_USERS


class Command(BaseCommand):
    help = "Print the demo's logins, pages and invite links (run load_demo first)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--base-url",
            default="",
            help="the server the links are on, e.g. http://127.0.0.1:8000",
        )

    def handle(self, *args, **options) -> None:
        lines = demo_links(base_url=options["base_url"])
        if not lines:
            self.stdout.write("No demo loaded: run manage.py load_demo.")
            return
        logins = ", ".join(f"{name} / {password}" for name, password, _ in DEMO_USERS)
        self.stdout.write(f"Demo logins: {logins}")
        for line in lines:
            self.stdout.write(line)
