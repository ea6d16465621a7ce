"""Events of taking part that the study kinds react to (``studies.choice.hooks``).

Participation is shared by every study kind, so it announces a withdrawal and never
calls into a kind's own services.
"""

from django.dispatch import Signal

from . import webhooks

# A participant withdrew (or withdrew their data), inside the withdrawing transaction.
# Keyword: ``participant``.
participant_withdrawn = Signal()

# A participant finished the study (``services.participant_finish``, the first time
# only), inside the finishing transaction. Keyword: ``participant``.
participant_finished = Signal()

# Participants were excluded, or taken back in (the rule or a researcher), inside the
# changing transaction. Keywords: ``study``, ``participants`` (those whose state changed).
participants_exclusion_changed = Signal()

# The study's webhook (participation's own): connected here, where the events are
# declared, so every process that can send them announces them.
participant_finished.connect(
    webhooks.on_participant_finished, dispatch_uid="studies.participation.webhook_finished"
)
participant_withdrawn.connect(
    webhooks.on_participant_withdrawn, dispatch_uid="studies.participation.webhook_withdrawn"
)
