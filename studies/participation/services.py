"""Writes of taking part, for every study kind: invitations, joining by a public link,
consent, finishing, withdrawal, and the check that a participant is still active.
"""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.roles import RATER, has_role
from studies.errors import (
    StudyError,  # views, commands and tests import it from here
)
from studies.models import (
    Participant,
    Study,
)
from studies.participation.ledger import exclusions_refresh
from studies.participation.signals import participant_finished, participant_withdrawn
from studies.slots import slots_free, slots_rebalance


def participants_invite(*, study: Study, labels: list[str]) -> list[Participant]:
    """One participant per label, each with its own unguessable token."""
    return Participant.objects.bulk_create(
        Participant(study=study, label=label.strip(), token=secrets.token_urlsafe(32))
        for label in labels
    )


class JoinRefused(StudyError):
    """This account may not join this study (the message says why)."""


def participant_join_check(*, study: Study, user) -> Participant | None:
    """What the join page offers, without writing anything: the account's participation
    if it has one, None if it may join, :class:`JoinRefused` (saying why) if not."""
    existing = Participant.objects.filter(study=study, user=user).first()
    if existing is not None:
        return existing
    if not has_role(user, RATER):
        raise JoinRefused("only rater accounts can join studies; ask the researcher for a link")
    if not study.open_join or study.imported:
        raise JoinRefused("this study is by invitation only: use the link you were sent")
    if study.status not in (Study.Status.LIVE, Study.Status.PAUSED):
        raise JoinRefused(f"this study is {study.get_status_display()}: it takes no new raters")
    return None


def participant_for_user(*, study: Study, user) -> Participant:
    """The logged-in rater's participation (created on first visit).

    Who may join: anyone holding an invite link (that is ``participants_invite``, not
    this); an account joins only if it has the rater role and the study is open to
    joining (``Study.open_join``), live or paused, and not imported annotations.
    An account that already takes part always gets its participation back.
    """
    existing = participant_join_check(study=study, user=user)
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            participant, _ = Participant.objects.get_or_create(
                study=study,
                user=user,
                defaults={"token": secrets.token_urlsafe(32), "label": user.get_username()},
            )
    except IntegrityError:  # two tabs joined at once
        participant = Participant.objects.get(study=study, user=user)
    return participant


def participant_withdraw(*, participant: Participant) -> Participant:
    """Stop a rater: responses stay, but quotas and reports leave them out."""
    with transaction.atomic():
        Participant.objects.filter(pk=participant.pk, withdrawn_at__isnull=True).update(
            withdrawn_at=timezone.now()
        )
        slots_rebalance(slots_free(participant_id=participant.pk))
    participant.refresh_from_db()
    participant_withdrawn.send(sender=Participant, participant=participant)
    return participant


def participant_report_jobs_rebuilt_record(*, participant: Participant, jobs: int) -> None:
    """The ledger's note that, after this participant's withdrawal, ``jobs`` stored
    report results that could hold their rows were deleted and queued to be built
    again (called by the reports app's receiver of ``participant_withdrawn``)."""
    Participant.objects.filter(pk=participant.pk).update(
        report_jobs_rebuilt_at=timezone.now(), report_jobs_rebuilt=F("report_jobs_rebuilt") + jobs
    )


def check_active(participant: Participant) -> None:
    if participant.withdrawn_at is not None:
        raise StudyError("you have been withdrawn from this study; thank you for your time")
    if participant.study.status != Study.Status.LIVE:
        raise StudyError(f"this study is {participant.study.get_status_display()} at the moment")


def participant_consent(*, participant: Participant) -> Participant:
    check_active(participant)
    Participant.objects.filter(pk=participant.pk).update(
        consented_at=timezone.now(), consented_version=participant.study.instructions_version
    )
    participant.refresh_from_db()
    return participant


@transaction.atomic
def participant_finish(*, participant: Participant) -> Participant:
    """The ledger's "finished": the participant has done everything the study has for
    them, the exit questionnaire included (the caller knows: the last page is shown only
    then). The first time stands; the exclusion rule is applied then, since the cohort's
    times change only as participants answer.
    """
    if participant.finished_at is not None:
        return participant
    first = Participant.objects.filter(pk=participant.pk, finished_at__isnull=True).update(
        finished_at=timezone.now()
    )
    exclusions_refresh(study=participant.study)
    participant.refresh_from_db()
    if first:  # a second tab finishing at the same moment announces nothing
        participant_finished.send(sender=Participant, participant=participant)
    return participant
