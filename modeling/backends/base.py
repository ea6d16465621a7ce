"""The backend interface: a chat request in, a completion with token counts out."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.utils.module_loading import import_string

from .secrets import mask_secrets


class BackendConfig(Protocol):
    """What a backend reads of its configuration: a ``modeling.models.Backend`` row, or any
    object with these attributes. Plain attributes, so this layer never imports the model.
    """

    name: str
    kind: str
    base_url: str
    api_key: str
    api_key_env: str
    model_path: str
    max_concurrency: int
    max_retries: int
    timeout_s: float
    options: dict[str, Any]

    def get_api_key(self) -> str: ...

    def get_options(self) -> dict[str, Any]: ...


class BackendError(Exception):
    """A call that failed for good (after the backend's own retries)."""


class BackendConfigError(BackendError):
    """The backend row cannot work as configured (no key, no model path…)."""


@dataclass(frozen=True)
class ChatRequest:
    """Everything that determines a completion, so it doubles as the cache key."""

    messages: tuple[tuple[str, str], ...]  # (role, content) pairs
    model: str
    params: tuple[tuple[str, Any], ...] = ()  # sorted sampling parameters
    sample_index: int = 0

    @classmethod
    def build(
        cls,
        messages: list[dict[str, str]],
        *,
        model: str,
        params: dict[str, Any],
        sample_index: int = 0,
    ) -> ChatRequest:
        return cls(
            messages=tuple((m["role"], m["content"]) for m in messages),
            model=model,
            params=tuple(sorted((k, v) for k, v in params.items() if v is not None)),
            sample_index=sample_index,
        )

    @property
    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.message_dicts,
            "model": self.model,
            "params": self.param_dict,
            "sample_index": self.sample_index,
        }

    def cache_key(self, backend_name: str) -> str:
        payload = json.dumps({"backend": backend_name, **self.as_json()}, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def estimated_prompt_tokens(self) -> int:
        # ~4 characters per token: only used to stop *before* a call that would
        # break the budget; real counts come back with each response.
        return sum(len(content) for _, content in self.messages) // 4 + 4 * len(self.messages)


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    finish_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ChatBackend:
    """Base class: subclasses implement :meth:`complete`; batching is optional.

    A subclass that sends credentials lists them in :attr:`secrets`, and raises
    :class:`BackendError` with text passed through :meth:`mask`: error text a server
    sent back is stored, shown and logged, and servers echo the key they were sent.
    """

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self.name = config.name
        self.secrets: list[str] = []

    def mask(self, text: str) -> str:
        """``text`` with this backend's secrets (and any secret-shaped string) masked."""
        return mask_secrets(text, self.secrets)

    def complete(self, request: ChatRequest) -> ChatResult:  # pragma: no cover - interface
        raise NotImplementedError

    def complete_many(
        self, requests: Iterable[ChatRequest]
    ) -> Iterator[tuple[ChatRequest, ChatResult | BackendError]]:
        """Yield (request, result or error) as calls finish, at most ``max_concurrency`` at once."""
        requests = list(requests)
        workers = max(1, min(self.config.max_concurrency, len(requests) or 1))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"llm-{self.name}") as pool:
            futures = {pool.submit(self.complete, r): r for r in requests}
            for future in as_completed(futures):
                request = futures[future]
                try:
                    yield request, future.result()
                except BackendError as exc:
                    yield request, exc

    def warm(self, calls: int) -> None:
        """Get ready for ``calls`` calls at once (clients made ahead); optional."""

    def prepare(self, requests: Iterable[ChatRequest]) -> None:
        """Do ahead what sending ``requests`` will need (each is sent once), while the
        caller waits for other calls anyway; optional."""

    def close(self) -> None:
        """Release clients or model weights."""


_KINDS = {
    "openai": "modeling.backends.openai_backend.OpenAIChatBackend",
    "transformers": "modeling.backends.transformers_backend.TransformersChatBackend",
}


def backend_class(config: BackendConfig) -> type[ChatBackend]:
    """The class of the backend object for a Backend row (or any :class:`BackendConfig`)."""
    try:
        return import_string(_KINDS[config.kind])
    except KeyError:
        raise BackendConfigError(f"backend {config.name}: unknown kind {config.kind!r}") from None


# Kinds a worker imports when it starts: the HTTP client (openai, httpx) costs about
# 0.9 s of CPU to import, which a worker's first run would otherwise pay inside its
# first wave. transformers is left out: it brings torch, whose import and memory only
# the GPU queue's workers should pay, and they pay them once for a run of minutes.
PRELOADED_KINDS = ("openai",)


def backends_preload() -> list[str]:
    """Import the classes of the PRELOADED_KINDS now; their import paths."""
    paths = [_KINDS[kind] for kind in PRELOADED_KINDS]
    for path in paths:
        import_string(path)
    return paths


def batches_itself(config: BackendConfig) -> bool:
    """True for backends that take a batch of requests at once (``complete_many``)."""
    return backend_class(config).complete_many is not ChatBackend.complete_many


def get_backend(config: BackendConfig) -> ChatBackend:
    """The backend object for a Backend row (or any :class:`BackendConfig`)."""
    return backend_class(config)(config)
