"""Events of the run engine that higher apps react to (``reports.hooks``).

Data flows one way (benchmarks <- modeling <- reports), so modeling announces what
changed and never calls into reports.
"""

from django.dispatch import Signal

# A run left "running" (succeeded, failed, stopped, ...). Keyword: ``run_id``.
run_finished = Signal()

# Predictions of these runs were written or changed outside the engine's recording of
# replies: an import (which may change answers in place), judge verdicts or text
# scores merged into their details. Sent inside the writing transaction.
# Keyword: ``run_ids``.
predictions_changed = Signal()

# A direct-call run's page asks which job makes its calls (a DynToM generation job, a
# CharToM-QA construction batch), so it can name and link it without modeling
# importing the apps above it. Keyword: ``run``. A receiver that owns the run returns
# ``(label, url)``; the others return None.
run_owner_wanted = Signal()
