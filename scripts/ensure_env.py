"""Write a local .env with a fresh secret key on first set-up; never overwrite one."""

import secrets
from pathlib import Path

ENV_FILE = Path(__file__).resolve().parent.parent / ".env"

if not ENV_FILE.exists():
    ENV_FILE.write_text(
        "# Written by `make setup`. Settings are read from the environment; see README.\n"
        f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}\n"
        "DJANGO_DEBUG=0\n"
    )
    ENV_FILE.chmod(0o600)
    print(f"wrote {ENV_FILE}")
