"""The local transformers backend, on a tiny random Llama built and saved in the session.

The model is nonsense by design (random weights, a BPE vocabulary of a few hundred
tokens trained here on DynToM-like sentences): the tests check the plumbing — prompts,
padding, seeds, token counts, errors, a whole run — not the answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from modeling.backends import BackendError, ChatRequest, get_backend
from modeling.backends.base import BackendConfigError
from modeling.backends.transformers_backend import TransformersChatBackend
from modeling.models import Backend, Prediction, RunCall
from modeling.runs.executor import run_execute
from modeling.runs.services import run_create

CONTEXT = 1024
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CORPUS = [
    "Scenario 1 Background: Julia and Mark meet at the office after a long week.",
    "Julia: I was hoping you would finally notice how hard I have been working.",
    "Mark: I did notice, and I am sorry I never said so before today.",
    "How does Julia's emotion change from scenario 1 to scenario 2?",
    "a. happy to sad b. angry to calm c. calm to anxious d. it does not change",
    "Answer every question with the letter of one option, as a JSON object.",
]


@dataclass(frozen=True)
class TinyModels:
    plain: Path  # tokenizer without a chat template
    chat: Path  # the same weights, tokenizer with CHAT_TEMPLATE


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """A 2-layer Llama with hidden size 32 and a byte-level BPE trained on CORPUS."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        CORPUS * 3,
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=["<s>", "</s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    # No pad token on purpose: the backend must provide one.
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=CONTEXT,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    root = tmp_path_factory.mktemp("tiny-llama")
    paths = TinyModels(plain=root / "plain", chat=root / "chat")
    model.save_pretrained(paths.plain)
    tokenizer.save_pretrained(paths.plain)
    model.save_pretrained(paths.chat)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(paths.chat)
    return paths


def _backend(path: Path, **options) -> TransformersChatBackend:
    """A backend over an unsaved row: only the end-to-end test needs the database."""
    row = Backend(
        name="tiny", kind=Backend.Kind.TRANSFORMERS, model_path=str(path), options=options
    )
    backend = get_backend(row)
    assert isinstance(backend, TransformersChatBackend)
    return backend


def _request(text: str = "How does Julia feel?", *, sample_index: int = 0, **params):
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": text},
    ]
    return ChatRequest.build(messages, model="tiny", params=params, sample_index=sample_index)


def _results(backend: TransformersChatBackend, requests: list[ChatRequest]) -> dict:
    outcomes = dict(backend.complete_many(requests))
    assert set(outcomes) == set(requests)
    errors = [o for o in outcomes.values() if isinstance(o, BackendError)]
    assert not errors
    return outcomes


def test_complete_returns_text_and_token_counts(tiny_models):
    backend = _backend(tiny_models.plain)
    request = _request(max_tokens=8, temperature=0)
    result = backend.complete(request)

    prompt = backend.render_prompt(request)
    assert result.prompt_tokens == len(backend._tokenizer(prompt)["input_ids"]) > 0
    assert 1 <= result.completion_tokens <= 8
    assert result.text.strip()
    assert result.finish_reason in ("length", "stop")
    if result.finish_reason == "length":
        assert result.completion_tokens == 8
    assert backend._tokenizer.pad_token is not None  # set by the backend

    backend.close()
    assert backend._model is None
    assert backend.complete(request).text == result.text  # reloads after close


def test_complete_many_pads_prompts_of_different_lengths(tiny_models):
    backend = _backend(tiny_models.plain, batch_size=3)
    texts = [" ".join(["Julia noticed Mark."] * n) for n in (1, 4, 2, 7, 3)]
    requests = [_request(t, max_tokens=6, temperature=0) for t in texts]
    batched = _results(backend, requests)

    lengths = [batched[r].prompt_tokens for r in requests]
    assert len(set(lengths)) == len(requests)  # real lengths, not the padded width
    assert sorted(batched[r].extra["batch_size"] for r in requests) == [2, 2, 3, 3, 3]
    # Left padding with its attention mask must not change what greedy decoding says.
    for request in requests:
        alone = backend.complete(request)
        assert alone.extra["batch_size"] == 1
        assert (batched[request].text, batched[request].completion_tokens) == (
            alone.text,
            alone.completion_tokens,
        )


def test_chat_template_is_used_when_the_tokenizer_has_one(tiny_models):
    request = _request("Hi", max_tokens=4, temperature=0)
    chat = _backend(tiny_models.chat)
    plain = _backend(tiny_models.plain)

    assert chat.render_prompt(request) == (
        "<s><|system|>Answer briefly.</s><|user|>Hi</s><|assistant|>"
    )
    assert plain.render_prompt(request) == "system: Answer briefly.\nuser: Hi\nassistant:"
    chat_tokens = chat.complete(request).prompt_tokens
    # One BOS, from the template: the tokenizer must not add another.
    assert chat_tokens == len(chat._tokenizer(chat.render_prompt(request))["input_ids"])
    assert chat_tokens != plain.complete(request).prompt_tokens


def test_sampling_is_reproducible_per_sample_index(tiny_models):
    backend = _backend(tiny_models.chat)
    first, second = (
        _request(max_tokens=12, temperature=0.7, top_p=0.9, sample_index=i) for i in (0, 1)
    )
    run_a = _results(backend, [first, second])
    run_b = _results(backend, [second, first])

    assert run_a[first].text == run_b[first].text
    assert run_a[second].text == run_b[second].text
    assert run_a[first].text != run_a[second].text
    assert run_a[first].extra["seed"] != run_a[second].extra["seed"]
    # A different seed parameter gives a different sample for the same index.
    reseeded = _request(max_tokens=12, temperature=0.7, top_p=0.9, seed=5)
    assert backend.complete(reseeded).text != run_a[first].text


def test_greedy_decoding_ignores_the_sample_index(tiny_models):
    backend = _backend(tiny_models.plain)
    results = _results(
        backend, [_request(max_tokens=8, temperature=0, sample_index=i) for i in (0, 1)]
    )
    assert len({r.text for r in results.values()}) == 1


def test_stop_string_ends_the_reply_before_it(tiny_models):
    backend = _backend(tiny_models.plain)
    full = backend.complete(_request(max_tokens=16, temperature=0)).text
    assert len(full) >= 8
    stop = full[4:7]
    stopped = backend.complete(_request(max_tokens=16, temperature=0, stop=[stop]))
    assert stopped.finish_reason == "stop"
    assert stopped.text == full[: full.find(stop)]


def test_missing_model_path_is_a_config_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(BackendConfigError, match=r"backend tiny: model path .*no-such-model"):
        _backend(missing)


def test_unloadable_directory_is_a_config_error_naming_it(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    backend = _backend(tmp_path)
    with pytest.raises(
        BackendConfigError, match=f"cannot load a model from {re.escape(str(tmp_path))}"
    ):
        backend.complete(_request())


def test_bad_options_are_config_errors(tiny_models):
    with pytest.raises(BackendConfigError, match="dtype 'float8'"):
        _backend(tiny_models.plain, dtype="float8")
    with pytest.raises(BackendConfigError, match="batch_size must be a positive integer"):
        _backend(tiny_models.plain, batch_size=0)


def test_prompt_beyond_the_context_fails_unless_truncation_is_asked_for(tiny_models):
    long_text = "Julia noticed Mark. " * 400  # well over CONTEXT tokens
    request = _request(long_text, max_tokens=4, temperature=0)
    outcomes = dict(_backend(tiny_models.plain).complete_many([request, _request(max_tokens=4)]))
    assert isinstance(outcomes[request], BackendError)
    assert "exceeds the model's context of 1024" in str(outcomes[request])
    assert not isinstance(outcomes[_request(max_tokens=4)], BackendError)  # others go on

    result = _backend(tiny_models.plain, max_input_tokens=64).complete(request)
    assert result.prompt_tokens == 64
    assert result.extra["truncated_prompt_tokens"] > CONTEXT - 64


def test_generation_errors_fail_only_their_requests(tiny_models, monkeypatch):
    backend = _backend(tiny_models.plain)
    backend.render_prompt(_request())  # loads the model

    def broken(**kwargs):
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(backend._model, "generate", broken)
    outcomes = dict(backend.complete_many([_request("a"), _request("b")]))
    assert len(outcomes) == 2
    assert all(isinstance(o, BackendError) for o in outcomes.values())
    assert "device-side assert" in str(next(iter(outcomes.values())))


def test_out_of_memory_splits_the_batch(tiny_models, monkeypatch):
    backend = _backend(tiny_models.plain)
    backend.render_prompt(_request())
    real_generate = backend._model.generate
    widths = []

    def tight_memory(**kwargs):
        widths.append(len(kwargs["input_ids"]))
        if len(kwargs["input_ids"]) > 1:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real_generate(**kwargs)

    monkeypatch.setattr(backend._model, "generate", tight_memory)
    requests = [_request(t, max_tokens=3, temperature=0) for t in ("a", "bb", "c c c")]
    results = _results(backend, requests)
    assert all(r.completion_tokens >= 1 for r in results.values())
    assert widths == [3, 1, 2, 1, 1]


@pytest.mark.django_db
def test_dyntom_run_end_to_end(tiny_models, dyntom_stages):
    row = Backend.objects.create(
        name="tiny-llama",
        kind=Backend.Kind.TRANSFORMERS,
        model_path=str(tiny_models.chat),
        options={"max_input_tokens": 256, "batch_size": 2},
    )
    run = run_create(
        benchmark="dyntom",
        method="vanilla",
        backend=row,
        selection={"limit": 1},
        params={"max_tokens": 16},
        enqueue=False,
    )
    # A random tiny model answers nothing readable: the run ran to the end, and fails
    # saying so (issue 25) rather than claiming success.
    assert run_execute(run_id=run.pk) == "failed"

    run.refresh_from_db()
    assert run.error.startswith("no parseable reply: none of the")
    stage = dyntom_stages.first()  # limit 1 takes the first work by key
    call = RunCall.objects.get(run=run)
    assert (call.status, call.prompt_tokens) == (RunCall.Status.DONE, 256)
    assert 1 <= call.completion_tokens <= 16
    assert run.prompt_tokens == 256 and run.done_calls == 1
    predictions = Prediction.objects.filter(run=run)
    assert sorted(p.dyntom_question_id for p in predictions) == sorted(
        stage.questions.values_list("pk", flat=True)
    )
    assert {(p.parse_status, p.correct) for p in predictions} == {
        (Prediction.ParseStatus.UNPARSEABLE, False)
    }
