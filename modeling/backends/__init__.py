"""LLM backends behind one interface, used by modeling and annotation alike."""

from .base import (
    BackendError,
    ChatBackend,
    ChatRequest,
    ChatResult,
    batches_itself,
    get_backend,
)

__all__ = [
    "BackendError",
    "ChatBackend",
    "ChatRequest",
    "ChatResult",
    "batches_itself",
    "get_backend",
]
