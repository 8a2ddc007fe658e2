"""The CoT prompt (passages cut to a word bound, ending on the cue) and reading answers back from
its generations: strict (`Answer:` only) and flexible extraction."""

from __future__ import annotations

import pytest

from skillrag.data.schema import Passage
from skillrag.prompts.cot import (
    FLEXIBLE_MAX_WORDS,
    STOP,
    ParsedAnswer,
    cot_prompt,
    format_passages,
    parse_answer,
)
from tests.fakes import CORPUS

PROMPT = cot_prompt("Who directed Cast Away?", CORPUS[:2]).text


@pytest.mark.parametrize(
    ("generated", "reasoning", "answer"),
    [
        (" He directed it.\nAnswer: Robert Zemeckis", "He directed it.", "Robert Zemeckis"),
        (" He directed it. Answer: Robert Zemeckis\nMore text.", "He directed it.", "Robert Zemeckis"),
        (" Thinking.\nanswer:Paris", "Thinking.", "Paris"),
        (" First.\nAnswer: one\nAnswer: two", "First.", "one"),  # the first Answer: counts
        (" It ran out.\nAnswer:", "It ran out.", ""),  # a label with nothing after it
        ("", "", ""),
    ],
)
def test_strict_answer_is_the_text_after_the_first_answer_label(generated, reasoning, answer):
    parsed = parse_answer(generated, PROMPT)
    assert (parsed.reasoning, parsed.answer) == (reasoning, answer)


def test_without_an_answer_label_the_strict_answer_is_empty():
    parsed = parse_answer(" The film was directed by him.\nRobert Zemeckis", PROMPT)
    assert parsed == ParsedAnswer("The film was directed by him.\nRobert Zemeckis", "", "Robert Zemeckis")


def test_flexible_is_the_strict_answer_when_there_is_one():
    assert (
        parse_answer(" Zemeckis made it. He was born in 1952.\nAnswer: Zemeckis", PROMPT).flexible
        == "Zemeckis"
    )


def test_flexible_takes_a_short_final_sentence_of_the_models_own():
    parsed = parse_answer(" The film is by a director. So the director is Zemeckis.", PROMPT)
    assert (parsed.answer, parsed.flexible) == ("", "So the director is Zemeckis.")


@pytest.mark.parametrize(
    "said", [" The answer is Zemeckis.", " So the answer is Zemeckis.", " the answer is: Zemeckis."]
)
def test_flexible_drops_a_leading_the_answer_is(said):
    assert parse_answer(said, PROMPT).flexible == "Zemeckis."
    assert parse_answer(" The answer is", PROMPT).flexible == ""


def test_flexible_never_returns_text_copied_from_the_passages_or_the_prompt():
    copied = " I read the passages. Cast Away is a 2000 film directed by Robert Zemeckis."
    assert parse_answer(copied, PROMPT).flexible == ""
    exemplar = " They are on different continents."  # from the few-shot block of the prompt
    assert parse_answer(exemplar, PROMPT).flexible == ""
    assert parse_answer(" Who directed Cast Away?", PROMPT).flexible == ""  # the question


def test_flexible_is_bounded_in_words():
    long = " " + " ".join(f"w{i}" for i in range(FLEXIBLE_MAX_WORDS + 1)) + "."
    short = " " + " ".join(f"w{i}" for i in range(FLEXIBLE_MAX_WORDS)) + "."
    assert parse_answer(long, PROMPT).flexible == ""
    assert parse_answer(short, PROMPT).flexible == short.strip()


def test_a_budget_cut_fragment_is_not_a_flexible_answer():
    text = " The director is Zemeckis. He was born in the"
    assert parse_answer(text, PROMPT, truncated=True).flexible == "The director is Zemeckis."
    assert parse_answer(" He was born in the", PROMPT, truncated=True).flexible == ""
    assert parse_answer(text, PROMPT, truncated=True).answer == ""


LONG = Passage("p9", "Long", " ".join(f"w{i}" for i in range(150)))


def test_passages_are_cut_to_the_word_bound_and_marked():
    [line] = format_passages([LONG], 100).splitlines()
    assert line == "[1] Long: " + " ".join(f"w{i}" for i in range(100)) + " ..."
    assert format_passages([LONG], None) == "[1] Long: " + LONG.text  # None: the whole passage
    short = Passage("p1", "Short", "two  words")
    assert format_passages([short], 2) == "[1] Short: two words"  # within the bound: no mark


def test_the_answer_prompt_applies_the_passage_bound_and_ends_with_the_cue():
    prompt = cot_prompt("Q?", [LONG, CORPUS[0]], passage_words=5)
    assert "[1] Long: w0 w1 w2 w3 w4 ...\n[2] " in prompt.body
    assert prompt.body.endswith("\nQuestion: Q?\nRationale:")
    assert prompt.prefix.rstrip().splitlines()[-1].startswith("Answer: ")  # exemplars show the Answer: line
    assert "w5" not in prompt.text


@pytest.mark.parametrize(
    ("generated", "kept"),
    [
        (" Paris is the capital.\nAnswer: Paris\nTo answer these questions, I", " Paris is the capital.\nAnswer: Paris"),
        (" It is Paris. answer: Paris\n", " It is Paris. answer: Paris"),
        (" Paris is the capital.\nAnswer: Par", None),  # the line is not finished yet
        (" Paris is the capital.\n", None),
    ],
)
def test_a_finished_answer_line_ends_the_generation_and_is_kept(generated, kept):
    [pattern] = [stop for stop in STOP if not isinstance(stop, str)]
    match = pattern.search(generated)
    assert (generated[: match.end()] if match else None) == kept
    if kept:
        assert parse_answer(kept).answer == parse_answer(generated).answer
