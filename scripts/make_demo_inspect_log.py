"""Write the demo's Inspect log (fixtures/demo/harness/): Inspect itself, offline, on
the demo's Mini ToM item set exported as a multiple-choice task.

Run once, by hand, on a database with the demo loaded (``make setup``):

    DJANGO_DEBUG=1 .venv/bin/python scripts/make_demo_inspect_log.py

The model is Inspect's own ``mockllm/model`` with scripted replies (no model server, no
network): two epochs, mostly right, a few wrong, one reply in no answer format and one
empty, so the imported run shows what every case looks like. The demo imports the log
as it would import one a lab brought (``demo.runs``).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django  # noqa: E402

django.setup()

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from interop.export import ExportRequest, build_export  # noqa: E402

OUT = ROOT / "fixtures/demo/harness/mini-tom-mockllm.eval"
# Per epoch: the items answered wrong (the next option after the gold), in no answer
# format, and not at all; every other item gets its gold letter.
WRONG = ({"mt-03", "mt-07"}, {"mt-07", "mt-11"})
UNREADABLE = ({"mt-05"}, set())
EMPTY = ({"mt-10"}, set())


def scripted(item: str, gold: str, options: int, epoch: int) -> str:
    if item in UNREADABLE[epoch]:
        return "I am not sure what she would think."
    if item in EMPTY[epoch]:
        return ""
    if item in WRONG[epoch]:
        return "ANSWER: " + chr(ord("A") + (ord(gold) - ord("A") + 1) % options)
    return f"ANSWER: {gold}"


def main() -> None:
    bundle = build_export(ExportRequest(source="item_set", work="mini-tom@1"))
    by_question = {}
    for sample in bundle.samples:
        by_question[sample.input.splitlines()[-1]] = sample
    seen: Counter[str] = Counter()

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        prompt = messages[-1].text
        sample = next(s for q, s in by_question.items() if q in prompt)
        item = sample.metadata["item"]
        epoch = seen[item]
        seen[item] += 1
        content = scripted(item, sample.target[0], len(sample.choices), epoch)
        output = ModelOutput.from_content(model="mockllm/model", content=content)
        # Usage given: without it mockllm counts tokens with tiktoken, which downloads
        # its encoding at run time.
        words = len(prompt.split())
        output.usage = ModelUsage(
            input_tokens=words, output_tokens=len(output.completion.split()), total_tokens=words
        )
        return output

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes())) as archive:
            archive.extractall(folder)
        # Inspect reads a task path relative to the working directory, as its CLI does.
        os.chdir(folder / bundle.name)
        (log,) = inspect_eval(
            "task.py",
            model=get_model("mockllm/model", custom_outputs=reply),
            epochs=2,
            max_samples=1,
            log_dir=str(folder / "logs"),
            display="none",
        )
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log.location, OUT)
        os.chdir(ROOT)
    print(f"{OUT.relative_to(ROOT)}: {log.results.scores[0].metrics['accuracy'].value:.3f}")


if __name__ == "__main__":
    main()
