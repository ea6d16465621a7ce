"""The studies app's one error type, in a module of its own so that ``services`` and
``leaks`` (which ``services`` calls when a study goes live) can both raise it."""


class StudyError(Exception):
    """A request the study cannot accept; the message is safe to show the rater."""
