"""Events of the item bank that higher apps answer (``annotation.chartom.hooks``).

The item bank sits below the apps that build benchmarks, so it asks instead of
importing them.
"""

from django.dispatch import Signal

# Sent by the CharToM-QA importer when it cuts plot windows (``--books``): which books
# are already imported? Each receiver returns an iterable of
# ``benchmarks.books.BookSource`` (the construction workflow's BookText rows). No
# keyword arguments.
book_sources_wanted = Signal()
