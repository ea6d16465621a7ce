"""Events of a study's life that higher apps react to (``reports.hooks``).

Data flows one way (studies <- reports), so studies announce what changed and never
call into reports.
"""

from django.dispatch import Signal

# A study was closed (``services.study_close``), inside the closing transaction: its
# answers no longer grow. Keyword: ``study``.
study_closed = Signal()
