# ruff: noqa: RUF001
"""Reading a multiple-choice reply (modeling.pipelines.generic.answers): a pure function,
over the reply shapes models write: letters, option texts, Chinese answers, chains of
thought, ambiguity and replies that name nothing."""

from __future__ import annotations

import pytest

from modeling.pipelines.generic.answers import read_choice

OPTIONS = ["In the red box", "In the cupboard under the stairs", "In the garden", "At the shop"]
ZH_OPTIONS = ["在红盒子里", "在楼梯下的柜子里", "在花园里", "在商店"]


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        # A letter alone, however it is dressed.
        ("B", "B"),
        ("b", "B"),
        ("B.", "B"),
        ("(B)", "B"),
        ("[C]", "C"),
        ("  D\n", "D"),
        ("**A**", "A"),
        ("`C`", "C"),
        ("\\boxed{D}", "D"),
        ("Option C", "C"),
        ("Ｂ", "B"),  # full-width
        ("（Ｃ）", "C"),
        ("【A】", "A"),
        # Answer statements.
        ("Answer: C", "C"),
        ("answer: c", "C"),
        ("Answer: (b)", "B"),
        ("ANSWER - D", "D"),
        ("The answer is (D).", "D"),
        ("The answer is: B", "B"),
        ("Final answer: B", "B"),
        ("The correct option is C.", "C"),
        ("The answer is A because Noor did not see the kite move.", "A"),
        ("Answer: B. In the cupboard under the stairs", "B"),
        ("**Answer:** C", "C"),
        # Choice statements.
        ("I choose B", "B"),
        ("I'd go with (A).", "A"),
        ("I pick option C", "C"),
        ("I'd pick b.", "B"),
        # A labelled option.
        ("B. In the cupboard under the stairs", "B"),
        ("(c) In the garden, I think", "C"),
        ("D: at the shop", "D"),
        # Chinese.
        ("答案：C", "C"),
        ("答案:C", "C"),
        ("答案是 B", "B"),
        ("答案为：(D)", "D"),
        ("正确答案应该是B。", "B"),
        ("最终答案：A", "A"),
        ("选项C", "C"),
        ("选C", "C"),
        ("我选择B", "B"),
        ("我的答案是：B。理由如下……", "B"),
        # Chains of thought: the reasoning names other options, the answer comes last.
        (
            "Noor put the kite in the red box (A). Emil moved it to the cupboard (B), but "
            "she did not see that. So she will look where she left it.\nAnswer: A",
            "A",
        ),
        (
            "Let's think step by step. Option A is where she left it; option B is where "
            "Emil put it. The answer is not about the garden.\n\nFinal answer: (A)",
            "A",
        ),
        ("First, consider B. Then consider A. The answer is B, not A.\nAnswer: A", "A"),
        ("诺尔把风筝放在红盒子里，选项B是埃米尔放的地方。\n答案：A", "A"),
        ("Thinking about what she saw...\n\n**B**", "B"),
        ("Thinking about what she saw...\nB. In the cupboard under the stairs", "B"),
        ("option B seems right. Yes, option B.", "B"),
        # To answer the question, "A's" is a word, not an option.
        ("To answer the question, A's belief matters. The answer is B.", "B"),
        # An earlier statement with a letter, a later one without.
        ("Answer: C\nThe answer is that she does not know where it is.", "C"),
    ],
)
def test_letters_in_every_shape(reply, letter):
    reading = read_choice(reply, OPTIONS)
    assert (reading.status, reading.letter) == ("ok", letter), reading


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("In the garden", "C"),
        ("in the GARDEN", "C"),
        ("  In   the  cupboard under the stairs. ", "B"),
        ('"At the shop"', "D"),
        ("Answer: in the red box", "A"),
        ("I'm not sure.\nAt the shop", "D"),
    ],
)
def test_the_option_text_exactly(reply, letter):
    reading = read_choice(reply, OPTIONS)
    assert (reading.status, reading.letter, reading.how) != ("ok", "", "")
    assert (reading.status, reading.letter) == ("ok", letter)


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("在花园里", "C"),
        ("答案：在商店", "D"),
        ("答案：B", "B"),
        ("在 楼梯下的 柜子里。", "B"),  # spaces and the full stop do not count
    ],
)
def test_chinese_option_texts(reply, letter):
    reading = read_choice(reply, ZH_OPTIONS)
    assert (reading.status, reading.letter) == ("ok", letter)


@pytest.mark.parametrize(
    "reply",
    [
        "A or B",
        "A, B",
        "A/B",
        "A and C",
        "Answer: A or B",
        "The answer is B or C.",
        "答案：A和B",
        "答案：A或C",
        "Option A or option B, it is hard to say.",
        "Maybe (A), maybe (B).",
    ],
)
def test_two_options_named_is_no_choice(reply):
    reading = read_choice(reply, OPTIONS)
    assert (reading.status, reading.index) == ("unparseable", None)
    assert reading.reason == "names more than one option"


def test_text_equal_to_two_options_is_no_choice():
    reading = read_choice("the same", ["The same", "Different", "the  same"])
    assert (reading.status, reading.reason) == ("unparseable", "names more than one option")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("   \n ", "empty reply"),
        ("I don't know.", "no option letter (A–D) or option text found"),
        ("The answer is a bit unclear", "no option letter (A–D) or option text found"),
        ("A person would look in the box.", "no option letter (A–D) or option text found"),
        ("In the red box or in the garden", "no option letter (A–D) or option text found"),
        ("In the box", "no option letter (A–D) or option text found"),  # no option's whole text
        ("E", "'E' is not one of the option letters A–D"),
        ("Answer: F", "'F' is not one of the option letters A–D"),
        ("答案：E", "'E' is not one of the option letters A–D"),
    ],
)
def test_unparseable_replies_say_why(reply, reason):
    reading = read_choice(reply, OPTIONS)
    assert (reading.status, reading.index, reading.letter) == ("unparseable", None, "")
    assert reading.reason == reason


@pytest.mark.parametrize(
    "reply", ["I'm sorry, but I can't help with that.", "抱歉，我无法回答这个问题。"]
)
def test_refusals(reply):
    reading = read_choice(reply, OPTIONS)
    assert (reading.status, reading.index) == ("refused", None)


def test_letters_follow_the_number_of_options():
    two = ["Yes", "No"]
    assert read_choice("B", two).letter == "B"
    assert read_choice("C", two).status == "unparseable"
    assert read_choice("C", two).reason == "'C' is not one of the option letters A–B"
    six = [f"option {i}" for i in range(6)]
    assert read_choice("Answer: F", six).letter == "F"


def test_the_reading_says_how():
    assert read_choice("B", OPTIONS).how == "letter"
    assert read_choice("In the garden", OPTIONS).how == "text"
    assert read_choice("Because...\nAnswer: B", OPTIONS).how == "answer"
    assert read_choice("I choose B", OPTIONS).how == "choice"
