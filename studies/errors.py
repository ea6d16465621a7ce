"""The studies app's one error type, in a module of its own so that ``services`` and
``leaks`` (which ``services`` calls when a study goes live) can both raise it."""


class StudyError(Exception):
    """A request the study cannot accept; the message is safe to show the rater."""


class SubmitIncomplete(StudyError):
    """A scene that cannot be submitted yet: ``code`` says why, ``missing`` which speakers.

    Codes: ``missing`` (speakers unanswered), ``history`` (the earlier-scenes flag),
    ``one_to_one`` (two speakers given the same character). The rater page is
    redirected to with these, never with the message text.
    """

    def __init__(self, message: str, *, code: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.missing = missing
