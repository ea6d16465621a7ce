"""The run preview's prompt-token estimate: the backend's tokenizer when known (a
tokenizer trained here with ``tokenizers``), else the character heuristic, always
labelled an estimate with its method (issue 16: 35,627 estimated vs 22,627 used)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from modeling.backends import ChatRequest
from modeling.backends.token_count import HEURISTIC, TOKENS_PER_MESSAGE, prompt_token_counter
from modeling.models import Backend, Run

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# Words a DynToM prompt is made of.
CORPUS = [
    "Read the story below and answer every question with the letter of one option.",
    "Scenario Background Julia Mark office week emotion change belief intention",
    "How does the character's emotion change from scenario 1 to scenario 2?",
    "type_a_what type_d_whether type_d_why type_c_how type_d_how",
] * 20


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A small BPE trained on CORPUS, saved as a transformers tokenizer with a
    chat template (a model directory without weights is enough to count tokens)."""
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(
        CORPUS, trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"])
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    path = tmp_path_factory.mktemp("tok") / "tiny-tokenizer"
    tokenizer.save_pretrained(path)
    return path


def _requests() -> list[ChatRequest]:
    messages = [
        {"role": "system", "content": "Read the story below and answer every question."},
        {"role": "user", "content": "How does the character's emotion change? " * 30},
    ]
    return [ChatRequest.build(messages, model="m", params={}) for _ in range(3)]


def test_transformers_backend_counts_with_its_tokenizer_and_chat_template(tokenizer_dir):
    backend = Backend(name="local", kind=Backend.Kind.TRANSFORMERS, model_path=str(tokenizer_dir))
    counter = prompt_token_counter(backend=backend)
    assert counter.exact and "tokenizer" in counter.method and "tiny-tokenizer" in counter.method
    requests = _requests()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    text = tokenizer.apply_chat_template(
        requests[0].message_dicts, tokenize=False, add_generation_prompt=True
    )
    expected = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert counter.count(requests) == 3 * expected
    assert counter.count(requests) != sum(r.estimated_prompt_tokens() for r in requests)


def test_openai_backend_uses_a_configured_tokenizer_file(tokenizer_dir):
    path = tokenizer_dir / "tokenizer.json"
    backend = Backend(name="api", kind=Backend.Kind.OPENAI, options={"tokenizer": str(path)})
    counter = prompt_token_counter(backend=backend)
    assert counter.exact and "tokenizer.json" in counter.method
    bare = Tokenizer.from_file(str(path))
    request = _requests()[0]
    expected = sum(
        len(bare.encode(content, add_special_tokens=False).ids) + TOKENS_PER_MESSAGE
        for _, content in request.messages
    )
    assert counter.count([request]) == expected
    # A tokenizer directory works too, and gives the same count for the same vocabulary.
    as_dir = Backend(
        name="api", kind=Backend.Kind.OPENAI, options={"tokenizer": str(tokenizer_dir)}
    )
    assert prompt_token_counter(backend=as_dir).count([request]) == expected


def test_without_a_tokenizer_the_heuristic_is_used_and_said(tmp_path):
    request = _requests()[0]
    plain = prompt_token_counter(backend=Backend(name="api", kind=Backend.Kind.OPENAI))
    assert plain.method == HEURISTIC and not plain.exact
    assert plain.count([request]) == request.estimated_prompt_tokens()
    missing = Backend(name="api", kind=Backend.Kind.OPENAI, options={"tokenizer": str(tmp_path)})
    broken = prompt_token_counter(backend=missing)
    assert not broken.exact and "could not be loaded" in broken.method
    assert broken.count([request]) == request.estimated_prompt_tokens()


@pytest.mark.django_db
def test_preview_labels_the_tokenizer_estimate(client, researcher, dyntom_stages, tokenizer_dir):
    backend = Backend.objects.create(
        name="local-tok",
        kind=Backend.Kind.TRANSFORMERS,
        model_path=str(tokenizer_dir),
        default_model="tiny",
    )
    client.force_login(researcher)
    form = {
        "benchmark": "dyntom",
        "method": "vanilla",
        "backend": str(backend.pk),
        "limit": "2",
        "samples": "1",
        "action": "preview",
    }
    response = client.post(reverse("modeling:run-new"), form)
    plan = response.context["plan"]
    content = response.content.decode()
    assert plan.token_method.startswith("the model's tokenizer")
    assert (
        f"\N{ALMOST EQUAL TO} {plan.estimated_prompt_tokens} tokens "
        f'<span class="muted">(estimate, the model&#x27;s tokenizer (tiny-tokenizer))</span>'
    ) in content
    assert Run.objects.count() == 0
    # The same selection through a backend without a tokenizer: the heuristic, labelled.
    other = Backend.objects.create(name="api", kind=Backend.Kind.OPENAI, default_model="m")
    response = client.post(reverse("modeling:run-new"), {**form, "backend": str(other.pk)})
    assert f"(estimate, {HEURISTIC})" in response.content.decode()
    # (This tiny vocabulary splits the stories' unseen words finely: a different count.)
    assert response.context["plan"].estimated_prompt_tokens != plan.estimated_prompt_tokens
