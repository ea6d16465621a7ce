"""Reactions of multiple-choice studies to participation events.

The events are declared in ``studies.participation.signals``.
"""

from django.dispatch import receiver

from studies.participation.signals import participant_withdrawn, participants_exclusion_changed

from .allocation import is_adaptive, tallies_rebuild
from .services import design_rebalance_if_applied


@receiver(participant_withdrawn, dispatch_uid="studies.choice.rebalance_on_withdrawal")
def rebalance_on_withdrawal(sender, *, participant, **kwargs) -> None:
    """The withdrawn participant's unstarted questions go to others."""
    design_rebalance_if_applied(study=participant.study)


@receiver(participant_withdrawn, dispatch_uid="studies.choice.tallies_on_withdrawal")
def tallies_on_withdrawal(sender, *, participant, **kwargs) -> None:
    """A withdrawn participant's answers stop counting: an adaptive study's strata are
    counted again (their places reopen by themselves: takes count live places)."""
    if is_adaptive(participant.study):
        tallies_rebuild(study=participant.study)


@receiver(participants_exclusion_changed, dispatch_uid="studies.choice.tallies_on_exclusion")
def tallies_on_exclusion(sender, *, study, participants, **kwargs) -> None:
    """Excluded participants' answers stop counting, those taken back in count again."""
    if is_adaptive(study):
        tallies_rebuild(study=study)
