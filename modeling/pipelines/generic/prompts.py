# ruff: noqa: RUF001
"""Default templates of the generic multiple-choice pipeline, written in our own words.

One item per prompt: the context, the question and the options lettered A, B, … in
the order shown (shuffled when the run says so). The vanilla prompt asks for the
letter alone; the chain-of-thought one asks for reasoning first and a last line
"Answer: X". One English and one Chinese text per method; a run in another language
gets the English instructions around the item's own text. The reply parser
(modeling.pipelines.generic.answers) also takes the option's text, so a revised
wording need not insist on letters.
"""

from __future__ import annotations

from typing import Any

_GENERIC_FIELDS = ["context", "question", "options", "letters"]

_GENERIC_BODY = {
    "en": "Story:\n{context}\n\nQuestion: {question}\n\nOptions:\n{options}\n\n",
    "zh": "故事：\n{context}\n\n问题：{question}\n\n选项：\n{options}\n\n",
}
_GENERIC_INTRO = {
    "en": "Read the story and answer the question about it by choosing exactly one of "
    "the options.\n\n",
    "zh": "请阅读下面的故事，并从选项中选出唯一一个答案来回答关于它的问题。\n\n",
}
_GENERIC_ASK = {
    ("vanilla", "en"): "Reply with the letter of the option you choose ({letters}) and "
    "nothing else.",
    ("vanilla", "zh"): "只回答你所选选项的字母（{letters}），不要写其他内容。",
    ("cot", "en"): "Before answering, think it through step by step: what each person in "
    "the story knows, believes, wants and feels, and what that means for the question. "
    "Weigh every option. Then finish your reply with one last line of the form "
    '"Answer: X", where X is the letter of the option you choose ({letters}).',
    ("cot", "zh"): "回答之前，请一步一步地思考：故事中的每个人知道什么、相信什么、想要什么、"
    "有什么感受，这对问题意味着什么；并逐一权衡每个选项。最后单独用一行写出"
    "“答案：X”，其中 X 是你所选选项的字母（{letters}）。",
}
_GENERIC_OUTPUT = {
    "vanilla": "One option letter (the option's text also parses)",
    "cot": 'Reasoning, then a last line "Answer: X" (答案：X) with one option letter',
}
_GENERIC_NOTES = {
    "vanilla": "Default: one multiple-choice item per prompt, answered with its letter; "
    "our wording.",
    "cot": "Default: zero-shot chain of thought over one multiple-choice item, ending "
    "with the letter; our wording.",
}
GENERIC_TEMPLATE_LANGUAGES = ("en", "zh")
TEMPLATES: list[dict[str, Any]] = []

for _method in ("vanilla", "cot"):
    for _language in GENERIC_TEMPLATE_LANGUAGES:
        TEMPLATES.append(
            {
                "name": f"generic-{_method}-{_language}",
                "version": 1,
                "benchmark": "generic",
                "method": _method,
                "system": "",
                "user": _GENERIC_INTRO[_language]
                + _GENERIC_BODY[_language]
                + _GENERIC_ASK[(_method, _language)],
                "fields": _GENERIC_FIELDS,
                "output_format": _GENERIC_OUTPUT[_method],
                "notes": _GENERIC_NOTES[_method]
                + (" Chinese text, for items in Chinese." if _language == "zh" else ""),
            }
        )
