"""Every model change has its migration (nothing left for ``makemigrations``)."""

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    # --check exits 1 when a migration would be written; --dry-run writes none.
    try:
        call_command("makemigrations", "--check", "--dry-run", verbosity=0)
    except SystemExit as exc:
        pytest.fail(f"makemigrations would write a migration (exit {exc.code})")
