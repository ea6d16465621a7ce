"""Any multiple-choice benchmark, read through a field mapping (format ``generic``).

A researcher names the benchmark and its version; the mapping says which source field
holds what (docs/formats.md, "Other benchmarks: a field mapping"). One import makes
one :class:`~benchmarks.models.Work` (kind item set, key ``<slug>@<version>``) and its
:class:`~benchmarks.models.MCItem` rows.

Sources: JSON Lines, JSON (an array, or a list under a key), CSV/TSV, XLSX (each
sheet a source), or a folder or ``.zip`` of these. Every record is parsed before
anything is written, and every failing record is collected (not only the first), so
the dry run can show all of them; :class:`RecordErrors` carries them, with the
source fields found, the first items that did parse and the category counts.
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import io
import json
import math
import re
import string
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.text import slugify

from common.csv_safe import read_with_field_limit

from ..models import Benchmark, MCItem, Work
from .base import (
    MAX_JSON_DEPTH,
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    ProgressCallback,
    input_size_check,
    json_value_check,
    upsert,
)
from .generic_preview import PREVIEW_ITEMS, item_preview

LIMIT = "generic"  # the settings.TOMLAB_IMPORT_MAX_BYTES entry of each file
DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".xlsx")
SUFFIXES = (*DATA_SUFFIXES, ".zip")
ERRORS_LISTED = 200  # failing records kept for the dry run; the rest are counted
LETTERS = string.ascii_uppercase
ITEM_ID_MAX = MCItem._meta.get_field("item_id").max_length
KEY_MAX = Work._meta.get_field("key").max_length
NAME_MAX = 200
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,49}$")
LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")
FIELD_MAX = 500
# Record values that are not source fields: where the record came from.
SPECIALS = {
    "$file": "the file's name without its suffix",
    "$sheet": "the sheet's name (empty outside a spreadsheet)",
    "$source": "the sheet's name in a spreadsheet, else the file's name without its suffix",
    "$n": "the record's number in its file or sheet (1, 2, …; blank lines and rows skipped)",
    "$line": "the record's line (JSONL), row (CSV, XLSX) or position (JSON)",
}
ANSWER_AS = ("auto", "letter", "index0", "index1", "text")
CASES = ("none", "lower", "upper", "title")
ZIP_JUNK_PREFIXES = ("__MACOSX/", ".")


# -- the mapping ----------------------------------------------------------------------


class MappingError(ValueError):
    """A mapping that cannot be used, naming the key that is wrong."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"mapping key {self.key!r}: {self.message}" if self.key else self.message


@dataclass(frozen=True)
class ContextPart:
    field: str
    label: str


@dataclass(frozen=True)
class OptionsSpec:
    # One of: a list of columns (one option each), or one field holding a list or a
    # labelled string ("A. x, B. y").
    columns: tuple[str, ...] = ()
    field: str = ""
    shape: str = "auto"  # for ``field``: auto, list or labelled

    @property
    def label(self) -> str:
        return self.field or ", ".join(self.columns)

    @property
    def fields(self) -> tuple[str, ...]:
        return self.columns or (self.field,)


@dataclass(frozen=True)
class LanguageSpec:
    code: str
    context: tuple[ContextPart, ...]
    context_labelled: bool
    question: str
    options: OptionsSpec
    gold: str = ""


@dataclass(frozen=True)
class CategorySpec:
    name: str
    field: str
    case: str = "none"
    # casefolded value -> the value stored (a list of spellings maps each to itself)
    values: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TemplatePart:
    text: str = ""
    name: str = ""  # a placeholder: a category's name, a field or a $special
    filter: str = ""  # slug, lower or upper


@dataclass(frozen=True)
class Mapping:
    raw: dict[str, Any]
    languages: tuple[LanguageSpec, ...]
    answer_field: str
    answer_as: str
    categories: tuple[CategorySpec, ...] = ()
    id_field: str = ""
    id_template: tuple[TemplatePart, ...] = ()
    records: str = ""
    delimiter: str = ""
    sheets_include: tuple[str, ...] = ()
    sheets_exclude: tuple[str, ...] = ()
    files_include: tuple[str, ...] = ()
    files_exclude: tuple[str, ...] = ()
    metadata: str | tuple[str, ...] = "rest"
    strip_option_labels: bool = True
    drop_mismatched_languages: bool = False

    @property
    def language_codes(self) -> list[str]:
        return [spec.code for spec in self.languages]

    @cached_property
    def used_fields(self) -> set[str]:
        """The source fields the mapping reads (they are not kept again as metadata)."""
        used = {self.answer_field, self.id_field}
        for spec in self.languages:
            used.update(part.field for part in spec.context)
            used.update((spec.question, spec.gold, *spec.options.fields))
        used.update(category.field for category in self.categories)
        names = {category.name for category in self.categories}
        used.update(part.name for part in self.id_template if part.name not in names)
        return {name for name in used if name and name not in SPECIALS}


TOP_KEYS = (
    "records",
    "delimiter",
    "sheets",
    "files",
    "id",
    "language",
    "languages",
    "context",
    "question",
    "options",
    "gold",
    "answer",
    "categories",
    "metadata",
    "option_labels",
    "mismatched_languages",
)
LANGUAGE_KEYS = ("language", "context", "question", "options", "gold")


def _keys_check(value: Any, known: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MappingError(where, f"expected a JSON object, got {_type(value)}")
    for key in value:
        # Keys starting with "_" are comments: JSON has no other way to write one.
        if not isinstance(key, str) or (key not in known and not key.startswith("_")):
            path = f"{where}.{key}" if where else str(key)
            raise MappingError(path, f"unknown key; the keys here are {', '.join(known)}")
    return value


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else "null"
    )


def _field_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MappingError(where, f"expected a field name (a non-empty string), got {_type(value)}")
    if len(value) > FIELD_MAX:
        raise MappingError(where, f"a field name of at most {FIELD_MAX} characters")
    if value.startswith("$") and value not in SPECIALS:
        raise MappingError(where, f"{value!r} is not one of {', '.join(SPECIALS)}")
    return value


def _globs(value: Any, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``["*.jsonl"]`` (include) or ``{"include": [...], "exclude": [...]}``."""
    if isinstance(value, list):
        value = {"include": value}
    value = _keys_check(value, ("include", "exclude"), where)
    out = []
    for key in ("include", "exclude"):
        patterns = value.get(key, [])
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
            raise MappingError(f"{where}.{key}", "expected a list of names or patterns (* ?)")
        out.append(tuple(patterns))
    return out[0], out[1]


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise MappingError(where, f"{value!r} is not one of {', '.join(choices)}")
    return value


def _context(value: Any, where: str) -> tuple[tuple[ContextPart, ...], bool]:
    """The context's fields and labels; whether it is written with labels."""
    if value is None:
        return (), False
    items = value if isinstance(value, list) else [value]
    parts = []
    labelled = isinstance(value, list) and len(value) > 1
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, dict):
            item = _keys_check(item, ("field", "label"), at)
            name = _field_name(item.get("field"), f"{at}.field")
            label = item.get("label", name)
            if not isinstance(label, str):
                raise MappingError(f"{at}.label", "expected a string")
            labelled = labelled or "label" in item
        else:
            name = label = _field_name(item, at)
        parts.append(ContextPart(field=name, label=label.strip()))
    return tuple(parts), labelled


def _options(value: Any, where: str) -> OptionsSpec:
    if isinstance(value, str):
        return OptionsSpec(field=_field_name(value, where))
    if isinstance(value, list):
        columns = tuple(_field_name(v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(columns) < 2:
            raise MappingError(where, "name at least 2 option columns, or one field")
        return OptionsSpec(columns=columns)
    value = _keys_check(value, ("field", "columns", "shape"), where)
    if "columns" in value:
        if "field" in value:
            raise MappingError(where, "give columns or field, not both")
        return _options(value["columns"], f"{where}.columns")
    return OptionsSpec(
        field=_field_name(value.get("field"), f"{where}.field"),
        shape=_choice(value.get("shape", "auto"), ("auto", "list", "labelled"), f"{where}.shape"),
    )


def _language(value: dict[str, Any], code: Any, where: str) -> LanguageSpec:
    if not isinstance(code, str) or not LANGUAGE_RE.match(code):
        raise MappingError(
            f"{where}.language" if "language" in value else where,
            f"{code!r} is not a language code (en, zh, pt-BR…)",
        )
    for key in ("question", "options"):
        if key not in value:
            raise MappingError(f"{where}.{key}", "missing: every language needs one")
    context, labelled = _context(value.get("context"), f"{where}.context")
    gold = value.get("gold")
    return LanguageSpec(
        code=code,
        context=context,
        context_labelled=labelled,
        question=_field_name(value["question"], f"{where}.question"),
        options=_options(value["options"], f"{where}.options"),
        gold=_field_name(gold, f"{where}.gold") if gold is not None else "",
    )


def _languages(raw: dict[str, Any]) -> tuple[LanguageSpec, ...]:
    value = raw.get("languages")
    if value is None:
        if "question" not in raw:
            raise MappingError("question", "missing: say which field holds the question")
        if "options" not in raw:
            raise MappingError("options", "missing: say which field(s) hold the options")
        return (_language(raw, raw.get("language", "en"), "language" if "language" in raw else ""),)
    for key in LANGUAGE_KEYS:
        if key in raw:
            raise MappingError(key, "with languages, give it inside each language")
    specs = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            at = f"languages[{i}]"
            item = _keys_check(item, LANGUAGE_KEYS, at)
            if "language" not in item:
                raise MappingError(f"{at}.language", "missing: the language's code (en, zh…)")
            specs.append(_language(item, item["language"], at))
    elif isinstance(value, dict):
        # A JSON object's key order may not survive a database (PostgreSQL's jsonb sorts
        # keys): the list form says which language comes first for sure.
        for code, item in value.items():
            at = f"languages.{code}"
            item = _keys_check(item, LANGUAGE_KEYS[1:], at)
            specs.append(_language(item, code, at))
    else:
        raise MappingError("languages", "expected a list of languages (or an object by code)")
    if not specs:
        raise MappingError("languages", "name at least one language")
    codes = [spec.code for spec in specs]
    for code in codes:
        if codes.count(code) > 1:
            raise MappingError("languages", f"{code!r} is given twice")
    return tuple(specs)


def _categories(value: Any) -> tuple[CategorySpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise MappingError("categories", "expected an object: category name -> field")
    out = []
    for name, spec in value.items():
        where = f"categories.{name}"
        if not name.strip() or len(name) > 100 or name.startswith("$"):
            raise MappingError(where, "a category's name: 1-100 characters, not starting with $")
        if isinstance(spec, str):
            spec = {"field": spec}
        spec = _keys_check(spec, ("field", "case", "values"), where)
        values = spec.get("values", [])
        if isinstance(values, list):
            if not all(isinstance(v, str) for v in values):
                raise MappingError(f"{where}.values", "expected a list of strings")
            pairs = [(v, v) for v in values]
        elif isinstance(values, dict):
            if not all(isinstance(v, str) for v in values.values()):
                raise MappingError(f"{where}.values", "expected an object of strings")
            pairs = list(values.items())
        else:
            raise MappingError(f"{where}.values", "expected a list or an object")
        out.append(
            CategorySpec(
                name=name,
                field=_field_name(spec.get("field"), f"{where}.field"),
                case=_choice(spec.get("case", "none"), CASES, f"{where}.case"),
                values=tuple((_fold(k), _squash(v)) for k, v in pairs),
            )
        )
    return tuple(out)


TEMPLATE_RE = re.compile(r"\{([^{}]*)\}")


def _template(value: Any, where: str) -> tuple[TemplatePart, ...]:
    if not isinstance(value, str) or not value.strip():
        raise MappingError(where, 'expected a template such as "{task}-{$n}"')
    parts: list[TemplatePart] = []
    last = 0
    for match in TEMPLATE_RE.finditer(value):
        if match.start() > last:
            parts.append(TemplatePart(text=value[last : match.start()]))
        name, _, filter_ = match.group(1).partition("|")
        if filter_ and filter_ not in ("slug", "lower", "upper"):
            raise MappingError(where, f"{{{match.group(1)}}}: the filters are slug, lower, upper")
        parts.append(TemplatePart(name=_field_name(name, where), filter=filter_))
        last = match.end()
    if last < len(value):
        parts.append(TemplatePart(text=value[last:]))
    if not any(part.name for part in parts):
        raise MappingError(where, "a template needs at least one {field}")
    if any("{" in part.text or "}" in part.text for part in parts):
        raise MappingError(where, "unbalanced { or }")
    return tuple(parts)


def mapping_parse(raw: Any) -> Mapping:
    """Check a mapping (a JSON object, or its text) and return it parsed.

    Raises :class:`MappingError` naming the key that is wrong, so a researcher writing
    one in the browser sees which line to fix.
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise MappingError(
                "", f"the mapping is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        except RecursionError:
            raise MappingError("", "the mapping is nested too deep") from None
    raw = _keys_check(raw, TOP_KEYS, "")
    for key in ("answer",):
        if key not in raw:
            raise MappingError(key, "missing: say which field holds the answer")
    answer = raw["answer"]
    if isinstance(answer, str):
        answer = {"field": answer}
    answer = _keys_check(answer, ("field", "as"), "answer")
    id_field, id_template = "", ()
    id_value = raw.get("id")
    if isinstance(id_value, str):
        id_field = _field_name(id_value, "id")
    elif id_value is not None:
        id_value = _keys_check(id_value, ("field", "template"), "id")
        if ("field" in id_value) == ("template" in id_value):
            raise MappingError("id", "give field or template")
        if "field" in id_value:
            id_field = _field_name(id_value["field"], "id.field")
        else:
            id_template = _template(id_value["template"], "id.template")
    metadata = raw.get("metadata", "rest")
    if isinstance(metadata, list):
        metadata = tuple(_field_name(v, f"metadata[{i}]") for i, v in enumerate(metadata))
    elif metadata not in ("rest", "none"):
        raise MappingError("metadata", 'expected "rest", "none" or a list of fields')
    records = raw.get("records", "")
    if not isinstance(records, str):
        raise MappingError("records", 'expected the key holding the records ("data", "a.b")')
    delimiter = raw.get("delimiter", "")
    if not isinstance(delimiter, str) or len(delimiter) > 1:
        raise MappingError("delimiter", "expected one character")
    sheets = _globs(raw["sheets"], "sheets") if "sheets" in raw else ((), ())
    files = _globs(raw["files"], "files") if "files" in raw else ((), ())
    mapping = Mapping(
        raw=raw,
        languages=_languages(raw),
        answer_field=_field_name(answer.get("field"), "answer.field"),
        answer_as=_choice(answer.get("as", "auto"), ANSWER_AS, "answer.as"),
        categories=_categories(raw.get("categories")),
        id_field=id_field,
        id_template=id_template,
        records=records.strip(),
        delimiter=delimiter,
        sheets_include=sheets[0],
        sheets_exclude=sheets[1],
        files_include=files[0],
        files_exclude=files[1],
        metadata=metadata,
        strip_option_labels=_choice(
            raw.get("option_labels", "strip"), ("strip", "keep"), "option_labels"
        )
        == "strip",
        drop_mismatched_languages=_choice(
            raw.get("mismatched_languages", "error"), ("error", "drop"), "mismatched_languages"
        )
        == "drop",
    )
    return mapping


# -- values ---------------------------------------------------------------------------


def _squash(text: str) -> str:
    return " ".join(text.split())


def _fold(text: str) -> str:
    return _squash(text).casefold()


def plain(value: Any) -> Any:
    """A source value as JSON can store it: NaN (pandas' empty cell) is null, dates are
    ISO strings; lists and objects are cleaned all the way down."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


class _Bad(Exception):
    """One record's problem, raised inside its parse and located by the caller."""

    def __init__(self, message: str, field: str | None) -> None:
        self.message = message
        self.field = field


def text_of(value: Any, field: str) -> str:
    """A source value as text: trimmed; numbers written plainly; empty when missing."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    raise _Bad(f"expected text, got {_type(value)}", field)


def _case(value: str, case: str) -> str:
    if case == "lower":
        return value.lower()
    if case == "upper":
        return value.upper()
    if case == "title":
        # Each word's first letter (after a space or a hyphen) up, the rest down:
        # "Faux-pas recognition test" and "Faux-Pas Recognition Test" agree.
        return re.sub(r"(^|[\s-])(\w)", lambda m: m.group(1) + m.group(2).upper(), value.lower())
    return value


# -- options written in one string -----------------------------------------------------

# Full-width punctuation of Chinese and Japanese text, escaped so that the source
# shows which character is meant: ( ) . : , ; and the ideographic comma.
_FW_OPEN, _FW_CLOSE, _FW_STOP, _FW_COLON = "\uff08", "\uff09", "\uff0e", "\uff1a"
_FW_COMMA, _FW_SEMI, _IDEO_COMMA = "\uff0c", "\uff1b", "\u3001"
_SEPARATORS = f",;{_FW_COMMA}{_FW_SEMI}{_IDEO_COMMA}"
_AFTER_LETTER = f".):{_FW_CLOSE}{_FW_STOP}{_FW_COLON}{_IDEO_COMMA}"
# A label before an option: "A." "A:" "A)" "(A)" "[A]" and their full-width forms, or
# a lower-case letter in brackets or before ")" ("(a)", "a)").
_LABEL_FORMS = {
    "upper": rf"(?:\(\s*{{U}}\s*\)|\[\s*{{U}}\s*\]|{_FW_OPEN}\s*{{U}}\s*{_FW_CLOSE}"
    rf"|{{U}}\s*[{re.escape(_AFTER_LETTER)}])",
    "lower": rf"(?:\(\s*{{L}}\s*\)|\[\s*{{L}}\s*\]|{_FW_OPEN}\s*{{L}}\s*{_FW_CLOSE}"
    rf"|{{L}}\s*[){_FW_CLOSE}])",
}
# Where a label may start: the start, or after a space, a line break or a separator.
_LABEL_START = rf"(?:^|(?<=[\s{re.escape(_SEPARATORS)}]))"


@lru_cache(maxsize=128)
def _label_re(letter_index: int, style: str) -> re.Pattern[str]:
    letter = LETTERS[letter_index]
    form = _LABEL_FORMS[style].format(U=re.escape(letter), L=re.escape(letter.lower()))
    return re.compile(_LABEL_START + form)


def options_split(text: str) -> list[str] | None:
    """Options written in one string with letter labels, in order; None when the string
    does not start with the label A.

    ``"A. x, B. y, C. z"``, ``"(a) x (b) y"`` and ``"A) x\\nB) y"`` all give
    ``["x", "y", "z"]``-like lists. The labels must run A, B, C… in order, so a comma
    or a letter inside an option's text does not split it; the separator before the
    next label ("," ";" a line break) is not part of the option.
    """
    text = text.strip()
    for style in ("upper", "lower"):
        first = _label_re(0, style).match(text)
        if first:
            break
    else:
        return None
    starts = [(first.start(), first.end())]
    for index in range(1, len(LETTERS)):
        match = _label_re(index, style).search(text, starts[-1][1])
        if not match:
            break
        starts.append((match.start(), match.end()))
    options = []
    for i, (_, end) in enumerate(starts):
        stop = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        options.append(text[end:stop].strip().rstrip(_SEPARATORS).strip())
    return options


def label_strip(option: str, index: int) -> str:
    """``option`` without its own label ("A. x" as option A is "x"); other text is kept."""
    option = option.strip()
    if index >= len(LETTERS):
        return option
    for style in ("upper", "lower"):
        match = _label_re(index, style).match(option)
        if match:
            rest = option[match.end() :].strip()
            return rest or option
    return option


# -- answers --------------------------------------------------------------------------

_ANSWER_LETTER = re.compile(
    rf"\s*(?:\(\s*([A-Za-z])\s*\)|{_FW_OPEN}\s*([A-Za-z])\s*{_FW_CLOSE}|\[\s*([A-Za-z])\s*\]"
    rf"|([A-Za-z])(?:\s*[{re.escape(_AFTER_LETTER)}]|(?=\s*$)))\s*(.*?)\s*",
    re.S,
)
_ANSWER_LIST = re.compile(r"\s*[A-Za-z]\s*(?:[,;/&]\s*[A-Za-z]\s*)+")
_NUMBER = re.compile(r"\s*-?\d+\s*")


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return int(value)
    return None


def _text_matches(value: str, options: list[list[str]]) -> set[int]:
    """Indices of the options (in any language) whose text is ``value``."""
    wanted = _squash(value)
    found = {i for texts in options for i, t in enumerate(texts) if _squash(t) == wanted}
    if not found:
        wanted = wanted.casefold()
        found = {i for texts in options for i, t in enumerate(texts) if _fold(t) == wanted}
    return found


def _letters(count: int) -> str:
    return f"A to {LETTERS[count - 1]}" if count <= len(LETTERS) else f"{count} options"


def answer_index(value: Any, *, kind: str, options: list[list[str]], field: str) -> int:
    """The 0-based option index one answer value names; raises :class:`_Bad`.

    ``options`` are the item's options in each language (the same count in each).
    """
    count = len(options[0])

    def bad(message: str) -> _Bad:
        return _Bad(message, field)

    def in_range(index: int, shown: Any) -> int:
        if not 0 <= index < count:
            raise bad(f"answer {shown!r} names no option (the item has {count}: {_letters(count)})")
        return index

    value = plain(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise bad("the answer is empty")
    if isinstance(value, (dict, list)):
        raise bad(f"expected an answer, got {_type(value)}")
    number = _number(value)
    if kind in ("index0", "index1"):
        if number is None:
            raise bad(f"answer {value!r} is not a whole number (the mapping says {kind})")
        return in_range(number - (kind == "index1"), value)
    text = text_of(value, field)
    if kind == "letter" and len(text) == 1 and text in string.ascii_letters:  # the usual case
        return in_range(LETTERS.index(text.upper()), text)
    matches = _text_matches(text, options)
    if kind == "text":
        if len(matches) != 1:
            raise bad(
                f"answer {text!r} is the text of " + ("several options" if matches else "no option")
            )
        return matches.pop()
    if number is not None:
        if kind == "letter":
            raise bad(
                f"answer {text!r} is a number, but the mapping says a letter "
                '(set the answer\'s "as" to "index0" or "index1")'
            )
        # auto: a number is an option's text only when it cannot be read as an index.
        if len(matches) == 1 and not (0 <= number < count or 0 <= number - 1 < count):
            return matches.pop()
        raise bad(
            f"answer {text!r} is a number: say whether it is a 0- or 1-based index "
            '(set the answer\'s "as" to "index0" or "index1", or to "text")'
        )
    letter_match = _ANSWER_LETTER.fullmatch(text)
    if letter_match:
        letter = next(g for g in letter_match.groups()[:4] if g).upper()
        index = LETTERS.index(letter)
        rest = letter_match.group(5)
        # "A. text" must be option A's text: a letter with another option's text is a typo.
        if rest and (index >= count or index not in _text_matches(rest, options)):
            raise bad(f"answer {text!r} gives the letter {letter} but not option {letter}'s text")
        if kind == "auto" and not rest and matches and matches != {index}:
            raise bad(f"answer {text!r} is the letter of one option and the text of another")
        return in_range(index, text)
    if kind == "letter":
        raise bad(f"answer {text!r} is not a letter ({_letters(count)})")
    if len(matches) == 1:
        return matches.pop()
    raise bad(
        f"answer {text!r} is the text of several options"
        if matches
        else f"answer {text!r} names no option: not a letter ({_letters(count)}) nor an "
        "option's text"
    )


def answers_of(value: Any, *, kind: str, options: list[list[str]], field: str) -> list[int]:
    """Every option the answer names (a list, or letters like "A, C"), sorted, once each."""
    value = plain(value)
    if isinstance(value, str) and kind in ("auto", "letter") and _ANSWER_LIST.fullmatch(value):
        value = re.split(r"[,;/&]", value)
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _Bad("the answer is an empty list", field)
    return sorted({answer_index(v, kind=kind, options=options, field=field) for v in values})


# -- sources --------------------------------------------------------------------------


@dataclass
class Record:
    values: dict[str, Any]
    path: str  # the file as shown (a zip member as "archive.zip: member")
    where: str  # "line 3", "row 4", "sheet 'X' row 4", "item 2"
    n: int
    line: int
    file: str
    sheet: str = ""


@dataclass
class Source:
    """A file or a sheet records come from, and the fields found in it."""

    name: str
    fields: dict[str, None] = field(default_factory=dict)
    records: int = 0


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportDataError(
            f"not UTF-8 text (byte {exc.start}); save the file as UTF-8", path=shown
        ) from None
    except OSError as exc:
        raise ImportDataError(f"cannot read file: {exc.strerror or exc}", path=shown) from None


def _jsonl(path: Path, shown: str, source: Source) -> Iterator[Record | ImportDataError]:
    n = 0
    for number, raw in enumerate(_read_text(path, shown).split("\n"), start=1):
        if not raw.strip():
            continue
        n += 1
        where = f"line {number}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield ImportDataError(
                f"malformed JSON: {exc.msg} (column {exc.colno})", path=shown, record=where
            )
            continue
        except RecursionError:
            yield ImportDataError(
                f"nested deeper than {MAX_JSON_DEPTH} levels", path=shown, record=where
            )
            continue
        yield from _object(
            data, shown=shown, where=where, n=n, line=number, path=path, source=source
        )


def _object(
    data: Any, *, shown: str, where: str, n: int, line: int, path: Path, source: Source
) -> Iterator[Record | ImportDataError]:
    if not isinstance(data, dict):
        yield ImportDataError(
            f"expected a JSON object, got {_type(data)}", path=shown, record=where
        )
        return
    try:
        json_value_check(data, path=shown, record=where)
    except ImportDataError as exc:
        yield exc
        return
    source.fields.update(dict.fromkeys(data))
    source.records += 1
    yield Record(values=data, path=shown, where=where, n=n, line=line, file=path.stem)


def _json(
    path: Path, shown: str, source: Source, records_key: str
) -> Iterator[Record | ImportDataError]:
    try:
        value = json.loads(_read_text(path, shown))
    except json.JSONDecodeError as exc:
        raise ImportDataError(
            f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            path=shown,
            record=f"line {exc.lineno}",
        ) from None
    except RecursionError:
        raise ImportDataError(f"nested deeper than {MAX_JSON_DEPTH} levels", path=shown) from None
    items = _records_at(value, records_key, shown)
    for i, item in enumerate(items, start=1):
        yield from _object(
            item, shown=shown, where=f"item {i}", n=i, line=i, path=path, source=source
        )


def _records_at(value: Any, key: str, shown: str) -> list[Any]:
    """The list of records: the file itself, under ``key`` ("data", "a.b"), or under the
    one key of an object that holds a list."""
    if key:
        here = value
        walked = []
        for part in key.split("."):
            walked.append(part)
            if isinstance(here, dict) and part in here:
                here = here[part]
            elif isinstance(here, list) and part.isdigit() and int(part) < len(here):
                here = here[int(part)]
            else:
                raise ImportDataError(
                    f"no {'.'.join(walked)!r} in the file (the mapping's records)",
                    path=shown,
                    field="records",
                )
        if not isinstance(here, list):
            raise ImportDataError(
                f"{key!r} holds {_type(here)}, not a list of records", path=shown, field="records"
            )
        return here
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        lists = [k for k, v in value.items() if isinstance(v, list)]
        if len(lists) == 1:
            return value[lists[0]]
        raise ImportDataError(
            "the file is a JSON object: name the key that holds the records in the "
            f'mapping ("records": …); keys holding lists: {", ".join(lists) or "none"}',
            path=shown,
        )
    raise ImportDataError(f"expected a list of records, got {_type(value)}", path=shown)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _header(cells: tuple[Any, ...], shown: str, where: str) -> list[str | None]:
    names: list[str | None] = []
    for cell in cells:
        name = text_of(cell, "") if not _empty(cell) else ""
        if name and name in names:
            raise ImportDataError(f"two columns are named {name!r}", path=shown, record=where)
        names.append(name or None)
    return names


def _row_values(header: list[str | None], cells: tuple[Any, ...], column: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for i, cell in enumerate(cells):
        name = header[i] if i < len(header) else None
        if name is None:
            if _empty(cell):
                continue
            name = f"column {column(i)}"  # a value under no header: kept, not lost
        values[name] = cell
    for name in header[len(cells) :]:
        if name is not None:
            values[name] = None
    return values


def _csv(
    path: Path, shown: str, source: Source, delimiter: str
) -> Iterator[Record | ImportDataError]:
    delimiter = delimiter or ("\t" if path.suffix.lower() == ".tsv" else ",")
    text = _read_text(path, shown)

    def read() -> tuple[list[list[str]], str | None]:
        rows: list[list[str]] = []
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        try:
            rows.extend(reader)
        except csv.Error as exc:
            return rows, str(exc)
        return rows, None

    # A story is longer than csv's default 128 KiB cell limit only in a broken file; the
    # stored-field limit bounds it instead, for this read only: the limit is the
    # process's, and another CSV reader there (an invite list) keeps its default.
    rows, error = read_with_field_limit(
        max(csv.field_size_limit(), settings.TOMLAB_IMPORT_MAX_FIELD_BYTES), read
    )
    if not rows:
        if error:
            raise ImportDataError(f"unreadable CSV: {error}", path=shown, record="row 1")
        return
    header = _header(tuple(rows[0]), shown, "row 1")
    source.fields.update(dict.fromkeys(n for n in header if n))
    n = 0
    for row, cells in enumerate(rows[1:], start=2):
        if all(_empty(c) for c in cells):
            continue
        n += 1
        values = _row_values(header, tuple(c if c != "" else None for c in cells), lambda i: i + 1)
        try:
            json_value_check(values, path=shown, record=f"row {row}")
        except ImportDataError as exc:
            yield exc
            continue
        source.records += 1
        yield Record(values=values, path=shown, where=f"row {row}", n=n, line=row, file=path.stem)
    if error:
        yield ImportDataError(f"unreadable CSV: {error}", path=shown, record=f"row {len(rows) + 1}")


def _sheet_wanted(title: str, mapping: Mapping) -> bool:
    names = (title, title.strip())
    if mapping.sheets_include and not any(
        fnmatch.fnmatchcase(name, pattern) for name in names for pattern in mapping.sheets_include
    ):
        return False
    return not any(
        fnmatch.fnmatchcase(name, pattern) for name in names for pattern in mapping.sheets_exclude
    )


def _xlsx(
    path: Path, shown: str, mapping: Mapping, sources: list[Source], skipped: list[str]
) -> Iterator[Record | ImportDataError]:
    import openpyxl
    from openpyxl.utils import get_column_letter

    try:
        # read_only streams rows instead of building every cell object; data_only reads
        # a formula's last value, not its text.
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds on a file that is not a workbook
        raise ImportDataError(f"not a readable .xlsx workbook ({exc})", path=shown) from None
    try:
        for sheet in workbook.worksheets:
            title = sheet.title
            if not _sheet_wanted(title, mapping):
                skipped.append(f"{shown}: sheet {title!r}")
                continue
            source = Source(name=f"{shown}: sheet {title!r}")
            sources.append(source)
            rows = sheet.iter_rows(values_only=True)
            header_cells = next(rows, None)
            if header_cells is None:
                continue
            header = _header(header_cells, shown, f"sheet {title!r} row 1")
            source.fields.update(dict.fromkeys(n for n in header if n))
            n = 0
            for row, cells in enumerate(rows, start=2):
                if all(_empty(c) for c in cells):
                    continue
                n += 1
                where = f"sheet {title!r} row {row}"
                values = _row_values(header, cells, lambda i: get_column_letter(i + 1))
                try:
                    json_value_check(values, path=shown, record=where)
                except ImportDataError as exc:
                    yield exc
                    continue
                source.records += 1
                yield Record(
                    values=values,
                    path=shown,
                    where=where,
                    n=n,
                    line=row,
                    file=path.stem,
                    sheet=title,
                )
    finally:
        workbook.close()


def _wanted_file(relative: str, mapping: Mapping) -> bool:
    name = relative.rsplit("/", 1)[-1]
    if not name.lower().endswith(DATA_SUFFIXES):
        return False

    def hit(patterns: tuple[str, ...]) -> bool:
        return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(name, p) for p in patterns)

    if mapping.files_include and not hit(mapping.files_include):
        return False
    return not hit(mapping.files_exclude)


def _folder_files(root: Path, prefix: str) -> list[tuple[Path, str, str]]:
    """Files under ``root`` as (path, relative name, name shown), in name order."""
    out = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        relative = path.relative_to(root).as_posix()
        if any(part.startswith(".") or part == "__MACOSX" for part in relative.split("/")):
            continue
        if path.is_file():
            out.append((path, relative, f"{prefix}{relative}"))
    return out


def _unzip(archive: Path, shown: str, stack: ExitStack) -> Path:
    """The archive's data files unpacked in a temporary folder (the uploads' checks:
    no links or ``..``, each member within the size limit, the total within the
    upload limit), removed when ``stack`` closes."""
    from ..uploads import UploadRefused, zip_extract

    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tomlab-generic-")))
    limit = settings.TOMLAB_IMPORT_MAX_BYTES[LIMIT]
    try:
        zip_extract(
            archive,
            folder,
            member_limit=lambda name: limit if name.lower().endswith(DATA_SUFFIXES) else None,
            budget=settings.TOMLAB_UPLOAD_MAX_BYTES,
        )
    except UploadRefused as exc:
        raise ImportDataError(exc.message, path=exc.file or shown) from None
    return folder


# -- the importer ---------------------------------------------------------------------


@dataclass
class ParsedItem:
    row: dict[str, Any]  # MCItem fields but work and position
    path: str
    where: str


@dataclass
class GenericImportReport(ImportReport):
    """The counts and warnings, plus what a dry run shows of a mapped import."""

    notes: list[str] = field(default_factory=list)
    fields: list[dict[str, Any]] = field(default_factory=list)
    categories: dict[str, list[list[Any]]] = field(default_factory=dict)
    work_id: int | None = None

    def summary_lines(self) -> list[str]:
        return [*super().summary_lines(), *self.notes]

    def as_dict(self) -> dict[str, Any]:
        return {
            **super().as_dict(),
            "notes": list(self.notes),
            "fields": list(self.fields),
            "categories": dict(self.categories),
        }


class RecordErrors(ImportDataError):
    """Every record that failed (the first :data:`ERRORS_LISTED`), and what the others
    parsed to: the dry run shows all of it, and nothing was written."""

    def __init__(self, errors: list[ImportDataError], *, total: int, details: dict[str, Any]):
        first = errors[0]
        self.errors = errors
        self.total = total
        self.details = details
        super().__init__(first.message, path=first.path, record=first.record, field=first.field)

    def __str__(self) -> str:
        first = super().__str__()
        more = self.total - 1
        return f"{first} (and {more} more failing record{'s' * (more != 1)})" if more else first


def benchmark_key(name: str, version: str) -> str:
    """The work's key: the name's slug and the version, ``tombench@1.0``."""
    slug = slugify(name) or slugify(name, allow_unicode=True)
    return f"{slug}@{version}"


def content_hash(texts: dict, answers: list[int], categories: dict) -> str:
    data = json.dumps([texts, answers, categories], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class GenericImporter(BenchmarkImporter):
    """Import any multiple-choice benchmark through a field mapping."""

    format_name = Benchmark.GENERIC
    help = "any multiple-choice benchmark through a field mapping (JSONL, JSON, CSV/TSV, XLSX)"
    takes_mapping = True

    def __init__(
        self,
        *,
        split: str = "",
        progress: ProgressCallback | None = None,
        mapping: Mapping | dict[str, Any] | str,
        name: str,
        version: str = "1",
    ) -> None:
        super().__init__(split=split, progress=progress)
        self.report = GenericImportReport()
        self.mapping = mapping if isinstance(mapping, Mapping) else mapping_parse(mapping)
        self.name = _squash(name or "")
        self.version = (version or "").strip()
        if not self.name or len(self.name) > NAME_MAX:
            raise ValueError(f"name the benchmark (1-{NAME_MAX} characters)")
        if not VERSION_RE.match(self.version):
            raise ValueError(
                f"version {self.version!r}: letters, digits, '.', '_' or '-', at most 50"
            )
        self.key = benchmark_key(self.name, self.version)
        if self.key.startswith("@") or len(self.key) > KEY_MAX:
            raise ValueError(f"the name {self.name!r} makes no usable key")
        self.sources: list[Source] = []
        self.files: list[str] = []  # relative names, for Work.source
        self.skipped: list[str] = []

    # -- reading --

    def _records(self, path: Path, stack: ExitStack) -> Iterator[Record | ImportDataError]:
        shown = str(path)
        try:
            is_dir = path.is_dir()
        except OSError as exc:
            raise ImportDataError(f"cannot read: {exc}", path=shown) from None
        if is_dir or path.suffix.lower() == ".zip":
            if is_dir:
                files = _folder_files(path, f"{shown}/")
            else:
                input_size_check(path, limit=LIMIT)
                files = _folder_files(_unzip(path, shown, stack), f"{shown}: ")
            for archive, relative, archive_shown in list(files):
                if relative.lower().endswith(".zip"):
                    input_size_check(archive, limit=LIMIT)
                    folder = _unzip(archive, archive_shown, stack)
                    files.extend(
                        (p, f"{relative}: {rel}", s)
                        for p, rel, s in _folder_files(folder, f"{archive_shown}: ")
                    )
            data = [(p, rel, s) for p, rel, s in files if _wanted_file(rel, self.mapping)]
            if not data:
                found = ", ".join(rel for _, rel, _ in files[:10]) or "nothing"
                raise ImportDataError(
                    f"no {', '.join(DATA_SUFFIXES)} file"
                    + (" that the mapping's files include" if self.mapping.files_include else "")
                    + f" (found: {found})",
                    path=shown,
                )
        else:
            if not path.name.lower().endswith(DATA_SUFFIXES):
                raise ImportDataError(f"expected a {', '.join(SUFFIXES)} file", path=shown)
            data = [(path, path.name, shown)]
        for file, relative, file_shown in data:
            self.files.append(relative)
            input_size_check(file, limit=LIMIT)  # before a byte is parsed
            suffix = file.suffix.lower()
            if suffix == ".xlsx":
                yield from _xlsx(file, file_shown, self.mapping, self.sources, self.skipped)
                continue
            source = Source(name=file_shown)
            self.sources.append(source)
            if suffix == ".jsonl":
                yield from _jsonl(file, file_shown, source)
            elif suffix == ".json":
                yield from _json(file, file_shown, source, self.mapping.records)
            else:
                yield from _csv(file, file_shown, source, self.mapping.delimiter)

    # -- one record --

    def _value(self, record: Record, name: str) -> Any:
        if name in SPECIALS:
            return {
                "$file": record.file,
                "$sheet": record.sheet,
                "$source": record.sheet or record.file,
                "$n": record.n,
                "$line": record.line,
            }[name]
        values = record.values
        if name in values:
            return values[name]
        if "." in name:  # a nested JSON field: "meta.order"
            here: Any = values
            for part in name.split("."):
                if not isinstance(here, dict) or part not in here:
                    break
                here = here[part]
            else:
                return here
        raise _Bad("missing: the record has no such field", name)

    def _options(self, record: Record, spec: OptionsSpec) -> list[str]:
        if spec.columns:
            options = [text_of(self._value(record, name), name) for name in spec.columns]
            while options and not options[-1]:
                options.pop()  # two-option items leave the last columns empty
            for i, option in enumerate(options):
                if not option:
                    raise _Bad(
                        f"option {LETTERS[i]} is empty but a later one is not", spec.columns[i]
                    )
        else:
            value = plain(self._value(record, spec.field))
            if isinstance(value, list) and spec.shape != "labelled":
                options = [text_of(v, spec.field) for v in value]
                if any(not o for o in options):
                    raise _Bad("an option in the list is empty", spec.field)
            elif isinstance(value, str) and spec.shape != "list":
                split = options_split(value)
                if split is None:
                    raise _Bad(
                        'expected options labelled "A. …, B. …" (or "(a) … (b) …"), '
                        f"got {value[:60]!r}",
                        spec.field,
                    )
                options = split
                if any(not o for o in options):
                    raise _Bad("an option in the string is empty", spec.field)
            elif value is None:
                options = []
            else:
                wanted = {"list": "a list", "labelled": "a labelled string"}.get(
                    spec.shape, "a list or a labelled string"
                )
                raise _Bad(f"expected {wanted} of options, got {_type(value)}", spec.field)
        if self.mapping.strip_option_labels:
            options = [label_strip(option, i) for i, option in enumerate(options)]
        if len(options) < 2:
            raise _Bad(
                f"{len(options)} option{'s' * (len(options) != 1)}: an item needs at least 2",
                spec.label,
            )
        return options

    def _category(self, record: Record, spec: CategorySpec) -> str:
        value = _squash(text_of(self._value(record, spec.field), spec.field))
        value = _case(value, spec.case)
        if spec.values:
            folded = _fold(value)
            for key, stored in spec.values:
                if key == folded:
                    return stored
        return value

    def _template_id(self, record: Record, categories: dict[str, str]) -> str:
        out = []
        for part in self.mapping.id_template:
            if not part.name:
                out.append(part.text)
                continue
            if part.name in categories:
                value = categories[part.name]
            else:
                value = _squash(text_of(self._value(record, part.name), part.name))
            if part.filter == "slug":
                value = slugify(value) or slugify(value, allow_unicode=True)
            elif part.filter == "lower":
                value = value.lower()
            elif part.filter == "upper":
                value = value.upper()
            out.append(value)
        return "".join(out)

    def _parse(self, record: Record) -> dict[str, Any]:
        mapping = self.mapping
        texts: dict[str, dict[str, Any]] = {}
        option_fields: dict[str, str] = {}
        for spec in mapping.languages:
            parts = [
                (part.label, text_of(self._value(record, part.field), part.field))
                for part in spec.context
            ]
            if spec.context_labelled:
                context = "\n\n".join(f"{label}: {value}" for label, value in parts if value)
            else:
                context = "\n\n".join(value for _, value in parts if value)
            question = text_of(self._value(record, spec.question), spec.question)
            if not question:
                raise _Bad("the question is empty", spec.question)
            entry: dict[str, Any] = {
                "context": context,
                "question": question,
                "options": self._options(record, spec.options),
            }
            if spec.gold:
                gold = text_of(self._value(record, spec.gold), spec.gold)
                if gold:
                    entry["gold"] = gold
            texts[spec.code] = entry
            option_fields[spec.code] = spec.options.label
        first, *others = mapping.language_codes
        count = len(texts[first]["options"])
        for code in others:
            if len(texts[code]["options"]) == count:
                continue
            message = (
                f"{len(texts[code]['options'])} options in {code}, {count} in {first}: every "
                "language of an item needs the same options"
            )
            if not mapping.drop_mismatched_languages:
                raise _Bad(message, option_fields[code])
            del texts[code]
            self.report.warn(
                f"{record.path}: record {record.where}: field {option_fields[code]!r}: {message}; "
                f"the item is kept without {code} (mapping: mismatched_languages drop)"
            )
        answers = answers_of(
            self._value(record, mapping.answer_field),
            kind=mapping.answer_as,
            options=[entry["options"] for entry in texts.values()],
            field=mapping.answer_field,
        )
        categories = {spec.name: self._category(record, spec) for spec in mapping.categories}
        digest = content_hash(texts, answers, categories)
        if mapping.id_field:
            item_id = _squash(text_of(self._value(record, mapping.id_field), mapping.id_field))
            id_field = mapping.id_field
        elif mapping.id_template:
            item_id = self._template_id(record, categories)
            id_field = "id.template"
        else:
            item_id, id_field = f"h-{digest[:16]}", None
        if not item_id:
            raise _Bad("the id is empty", id_field)
        if len(item_id) > ITEM_ID_MAX:
            raise _Bad(f"the id is over {ITEM_ID_MAX} characters", id_field)
        if mapping.metadata == "rest":
            used = mapping.used_fields
            metadata = {k: plain(v) for k, v in record.values.items() if k not in used}
        elif mapping.metadata == "none":
            metadata = {}
        else:
            metadata = {name: plain(record.values.get(name)) for name in mapping.metadata}
        return {
            "item_id": item_id,
            "texts": texts,
            "answers": answers,
            "categories": categories,
            "metadata": metadata,
            "content_hash": digest,
            "_id_field": id_field,
        }

    # -- the import --

    def parse(self, path: Path) -> list[ParsedItem]:
        """Every record parsed; raises :class:`RecordErrors` when any fails."""
        items: list[ParsedItem] = []
        errors: list[ImportDataError] = []
        total = 0
        first_seen: dict[str, ParsedItem] = {}
        with ExitStack() as stack:
            for record in self._records(Path(path), stack):
                self.progress(1)
                if isinstance(record, ImportDataError):
                    total += 1
                    if len(errors) < ERRORS_LISTED:
                        errors.append(record)
                    continue
                try:
                    row = self._parse(record)
                except _Bad as bad:
                    error = ImportDataError(
                        bad.message, path=record.path, record=record.where, field=bad.field
                    )
                else:
                    id_field = row.pop("_id_field")
                    item = ParsedItem(row=row, path=record.path, where=record.where)
                    first = first_seen.get(row["item_id"])
                    if first is None:
                        first_seen[row["item_id"]] = item
                        items.append(item)
                        continue
                    if first.row["content_hash"] == row["content_hash"]:
                        self.report.warn(
                            f"{record.path}: record {record.where}: id {row['item_id']!r} "
                            f"repeats {first.path} record {first.where} with the same "
                            "content; kept once"
                        )
                        continue
                    error = ImportDataError(
                        f"id {row['item_id']!r} is also the id of {first.path} record "
                        f"{first.where}, with different content",
                        path=record.path,
                        record=record.where,
                        field=id_field or "id",
                    )
                total += 1
                if len(errors) < ERRORS_LISTED:
                    errors.append(error)
        self._describe(items)
        if errors:
            raise RecordErrors(
                errors,
                total=total,
                details={
                    "fields": self.report.fields,
                    "categories": self.report.categories,
                    "preview": [item_preview(item.row) for item in items[:PREVIEW_ITEMS]],
                    "records": sum(source.records for source in self.sources),
                },
            )
        return items

    def _describe(self, items: list[ParsedItem]) -> None:
        """The dry run's picture: fields found per source, counts per category value."""
        used = self.mapping.used_fields
        groups: dict[tuple[str, ...], dict[str, Any]] = {}
        for source in self.sources:
            names = tuple(source.fields)
            group = groups.setdefault(
                names,
                {
                    "sources": [],
                    "records": 0,
                    "fields": [{"name": n, "mapped": n in used} for n in names],
                },
            )
            group["sources"].append(source.name)
            group["records"] += source.records
        self.report.fields = list(groups.values())
        for spec in self.mapping.categories:
            counts = Counter(item.row["categories"][spec.name] for item in items)
            self.report.categories[spec.name] = [
                [value, counts[value]] for value in sorted(counts, key=lambda v: (v.casefold(), v))
            ]

    def run(self, path: Path) -> GenericImportReport:
        path = Path(path)
        items = self.parse(path)
        if not items:
            raise ImportDataError("no records found", path=str(path))
        self._write(items, path)
        return self.report

    def _write(self, items: list[ParsedItem], path: Path) -> None:
        report = self.report
        mapping = self.mapping
        source_label = ", ".join(self.files)
        work_ids = upsert(
            Work,
            [
                {
                    "benchmark": Benchmark.GENERIC,
                    "key": self.key,
                    "title": self.name,
                    "kind": Work.Kind.ITEM_SET,
                    "split": self.split,
                    "source": source_label,
                    "extra": {
                        "name": self.name,
                        "version": self.version,
                        "languages": mapping.language_codes,
                        "category_fields": [spec.name for spec in mapping.categories],
                        "mapping": mapping.raw,
                    },
                }
            ],
            key_fields=["benchmark", "key"],
            scope={"benchmark": Benchmark.GENERIC, "key": self.key},
            report=report,
            source=path,
        )
        work_id = work_ids[(Benchmark.GENERIC, self.key)]
        report.work_id = work_id
        rows = [
            {"work_id": work_id, "position": position, **item.row}
            for position, item in enumerate(items)
        ]
        upsert(
            MCItem,
            rows,
            key_fields=["work_id", "item_id"],
            scope={"work_id": work_id},
            report=report,
            source=path,
        )
        kept = {item.row["item_id"] for item in items}
        stale = [
            item_id
            for item_id in MCItem.objects.filter(work_id=work_id).values_list("item_id", flat=True)
            if item_id not in kept
        ]
        if stale:
            report.warn(
                f"{len(stale)} item(s) of {self.key} are not in this import and were kept "
                f"({', '.join(sorted(stale)[:5])}{'…' if len(stale) > 5 else ''}); import as a "
                "new version to leave them out"
            )
        records = sum(source.records for source in self.sources)
        report.notes.append(
            f"{self.name} {self.version} ({self.key}): {len(items)} items from {records} "
            f"records in {len(self.sources)} source{'s' * (len(self.sources) != 1)}; "
            f"languages {', '.join(mapping.language_codes)}"
        )
        if self.skipped:
            report.notes.append(f"left out by the mapping: {', '.join(self.skipped)}")
