"""``python -m modeling.runs.engine_process RUN PARENT_PID DATABASE``: one engine process
of a run split across several (see ``processes``). Its parent starts it; not for people.
"""

import os
import sys


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    import django

    django.setup()
    from modeling.runs.processes import child_main

    return child_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
