"""Events of taking part that the study kinds react to (``studies.choice.hooks``).

Participation is shared by every study kind, so it announces a withdrawal and never
calls into a kind's own services.
"""

from django.dispatch import Signal

# A participant withdrew (or withdrew their data), inside the withdrawing transaction.
# Keyword: ``participant``.
participant_withdrawn = Signal()

# Participants were excluded, or taken back in (the rule or a researcher), inside the
# changing transaction. Keywords: ``study``, ``participants`` (those whose state changed).
participants_exclusion_changed = Signal()
