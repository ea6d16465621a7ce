"""The README.md written inside every replication package: what each file is, and how
the report's numbers are computed, with the paper sections the app follows."""

from __future__ import annotations

from typing import Any

from studies.models import Study

FILES = {
    "datapackage.json": "the Frictionless Data Package descriptor: every file, and a Table "
    "Schema (column names and types) for every CSV. `frictionless validate datapackage.json` "
    "checks the package.",
    "manifest.json": "package id, when and by which ToMLab version it was exported, the "
    "options, row counts and warnings.",
    "study.json": "the study's settings: kind (benchmark), instructions, consent, exit "
    "questions (current version), quotas, reveal, seed, item-set hash, the exclusion rule "
    "(`exclusion_rule`), and for a mapped benchmark's study how its answers were allocated "
    "(`allocation`: the design, stratum field, phase one, runs, target half-width, the "
    "design in words, and a widest-comparison design's model side per item). Completion "
    "codes and URLs, public links and webhook settings are "
    "never exported.",
    "data/text_versions.csv": "every version of the instructions, consent, exit questions "
    "and a scene study's attention-check instruction that participants were shown (`kind`: "
    "instructions, consent, exit_questions, attention_instruction; `content` is JSON; "
    "`created_at` empty for the current text when the study never snapshotted it).",
    "data/study_works.csv": "the works of the study, in order (`name_map`: the names shown "
    "when names were perturbed).",
    "data/study_items.csv": "what each assignment covers (a scene, a CharToM-QA question, a "
    "DynToM stage or a multiple-choice item), its role (test, practice, attention check) and, "
    "for DynToM, the questions asked. `item` points into items.csv; an attention check the "
    "researcher wrote has kind `instructed`, no `item`, and its question, options and the "
    "index of the option to pick in `instructed` (JSON); its picks in choices.csv have no "
    "`item` either.",
    "data/items.csv": "every item the package names, by natural key, one row per hashed "
    "field with the sha256 of its text (see below). Package ids `I1`, `I2`, … are local to "
    "this package.",
    "data/participants.csv": "one row per participant under a random id made for this package "
    "(`P-…`): status in the participant ledger, consent, finish, withdrawal, exclusion (time, "
    "source, reason, a researcher's override), exit answers. No invite token, user name or "
    "label; recruiting-platform ids only when exported with `--with-platform-ids`.",
    "data/familiarities.csv": "whether each participant had seen / read each work.",
    "data/sessions.csv": "each participant's pass over a work (declared familiarity, the "
    "seed that ordered their items, when it started and finished).",
    "data/assignments.csv": "one row per item given to a participant: position, status, "
    "timings (`total_ms`, `active_ms`, server clock), confidence, history-needed flag, and "
    "the version stamps of what they saw (`version`: item-set hash, instructions version, "
    "assignment seed, app version, names shown).",
    "data/guesses.csv": "masked-speaker answers (scene studies): name, can't tell, "
    "correctness, ToM tags, evidence.",
    "data/choices.csv": "multiple-choice picks (CharToM-QA rounds 1 and 2, DynToM "
    "questions), in the order they were given: option, position shown, kept, times, "
    "correctness.",
    "data/responses.csv": "the study's response export (the researcher's responses.csv) "
    "with participants under their package ids: a flat view of the same answers, for "
    "reading. It is not read back by the import.",
    "data/templates.csv": "the prompt templates the runs used: name, version, system and "
    "user text, fields, output format.",
    "data/runs.csv": "the model runs: backend kind and model name (never a key or a base "
    "URL), method, template, parameters (temperature, samples, seeds…), status, tokens, "
    "cost.",
    "data/calls.csv": "every prompt a run sent: unit, sample, raw reply, tokens, latency.",
    "data/predictions.csv": "every prediction: item, raw reply (empty when the reply is "
    "kept once on its call), parsed answer, parse status (ok, unparseable, refused, "
    "missing), correctness, judge details.",
    "reports/report.json": "the report of the study's benchmark over these runs and this "
    "study, as computed at export; excluded participants left out.",
    "reports/report-include-excluded.json": "the same report counting excluded participants.",
    "README.md": "this file.",
}

NUMBERS = """\
## How the numbers are computed

The reports are ToMLab's report tables (`manage.py report BENCHMARK --runs … --study …
--format json`), built from the rows in `data/` with bootstrap seed 0 and 1,000
resamples, so importing the package (`manage.py import_study`) builds the same JSON.

- **Accuracy and 95% CIs**: the share of correct answers; unparseable, refused and
  missing model answers count as wrong. Intervals are percentile bootstraps: over scenes
  (ToM-in-AMC, TVShowGuess), over questions (CharToM-QA multiple choice, DynToM),
  over responses (CharToM-QA bonus points).
- **ToM-in-AMC / TVShowGuess** (ToM-in-AMC paper §4 the benchmark, §7.2 human and
  §7.3 machine performance, Appendix E the human study): instance accuracy over masked
  speakers and scene accuracy (a scene is right when all its speakers are); Random is
  the expected accuracy of a uniform guess among the candidates, Majority the candidate
  most often a masked speaker in the work's history scenes. Human agreement: percent
  agreement, Fleiss' kappa and Krippendorff's alpha over units rated by two raters or
  more.
- **CharToM-QA** (paper §5-§6; §6.3 the read / not-read design and Table 3):
  multiple-choice accuracy by ToM dimension; generative answers scored by bonus-point
  coverage (BPC) and penalty rate (PR). People's c = 0 is their first pick with the
  short window, c = 2k their final pick after the long one.
- **DynToM** (paper §4.1 and Table 3): accuracy per mental state for understanding (U)
  and transformation (T) questions, by question type, by time span, and the
  compositional analysis of transformation answers; people as the mean and sample sd
  across participants.
- **A benchmark imported through a field mapping** (`generic`, one named benchmark):
  item-level accuracy (each item's share of correct answers over its participants or a
  run's samples, averaged over items) overall and per category value, with 95% CIs by
  bootstrap over items; chance is the mean of 1 / number of options; each run beside
  the people on the items both answered; agreement among people (majority share,
  pairwise agreement, Krippendorff's alpha, Fleiss' kappa where every item has as many
  answers) and the items where most people disagree with the gold.

Participants who withdrew are listed in participants.csv with their status, but their
answers are not in the package (reports leave them out too). Excluded participants'
answers are in it with their exclusion; `report.json` leaves them out and
`report-include-excluded.json` counts them. The report is built as the study reads once
imported: participants under their package ids, the study closed and the runs marked
imported; database ids are written as package ids (`#R1 <run name>`, study `S`).

## Item hashes

An item's natural key is its benchmark, its work's key and: a scene's source id; a
masked speaker's scene source id and code; a CharToM-QA item's natural key (sha1 of
book, character and question); a DynToM question's key (a DynToM stage is its work); a
mapped benchmark's item id (its work's key holds the benchmark's name and version).
`sha256` is taken over each field's text in UTF-8, lists and objects as JSON with
sorted keys and no spaces: scene `heading`, `lines`; masked speaker `gold` (the gold
character's name), `candidates`; CharToM-QA `question`, `answer`, `misleading_choices`,
`bonus_points`, `context_0`, `context_1000`, `context_2000`; DynToM stage `scenarios`
(number, background, dialogue of each); DynToM question `text`, `options`,
`gold_letter`; mapped item `texts` (every language's context, question and options),
`answers` (0-based correct options), `categories`. An import refuses a package whose
item differs from its bank's by one character, naming the item and the field.
"""


SPREADSHEETS = """## Opening the CSVs in a spreadsheet

The CSVs are data for analysis tools (R, pandas, Frictionless), written verbatim so that
an import rebuilds exactly what was exported and the report comes out the same. Unlike
ToMLab's other CSV downloads they are not formula-escaped: a cell may begin with `=`,
`+`, `-` or `@` (a model's reply, a participant's free text), and a spreadsheet that
opens the file by double-click may run it as a formula. In a spreadsheet, use its import
wizard with every column set to Text."""


def readme_text(*, study: Study, manifest: dict[str, Any], files: list[str]) -> str:
    lines = [
        f"# Replication package: {study.name}",
        "",
        f"A ToMLab {study.benchmark} study with {len(manifest['runs'])} model run(s), exported "
        f"{manifest['exported_at']} by ToMLab {manifest['app_version'] or '(version unknown)'}.",
        f"Package id `{manifest['package_id']}`, format `{manifest['format']}`.",
        "",
    ]
    for warning in manifest["warnings"]:
        lines += [f"**Warning.** {warning}", ""]
    lines += ["## Files", ""]
    for path in files:
        if path in FILES:
            lines.append(f"- `{path}`: {FILES[path]}")
    bundled = [p for p in files if p.startswith("items/")]
    if bundled:
        lines.append(
            "- `items/<benchmark>/…`: the items of every work named, in the benchmark's own "
            "format (what `manage.py export_benchmark` writes; `import_benchmark` reads it): "
            + ", ".join(f"`{p}`" for p in bundled)
        )
    lines += ["", SPREADSHEETS, "", NUMBERS]
    return "\n".join(lines)
