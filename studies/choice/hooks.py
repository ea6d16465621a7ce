"""Reactions of multiple-choice studies to participation events.

The events are declared in ``studies.participation.signals``.
"""

from django.dispatch import receiver

from studies.participation.signals import participant_withdrawn

from .services import design_rebalance_if_applied


@receiver(participant_withdrawn, dispatch_uid="studies.choice.rebalance_on_withdrawal")
def rebalance_on_withdrawal(sender, *, participant, **kwargs) -> None:
    """The withdrawn participant's unstarted questions go to others."""
    design_rebalance_if_applied(study=participant.study)
