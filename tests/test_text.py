import pytest

from skillrag.text import answer_span, normalize, normalized_tokens, split_sentences


def test_normalize_follows_squad():
    assert normalize("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize("An apple, a pear") == "apple pear"
    assert normalize("Theatre") == "theatre"


def test_normalized_tokens_are_the_words_of_normalize():
    assert normalized_tokens("The Kingdom of Norway.") == ["kingdom", "of", "norway"]
    assert normalized_tokens("  ") == []


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (" He directed it. Born in 1952!", [" He directed it.", " Born in 1952!"]),
        ("Who? Him.\nAnswer: X", ["Who?", " Him.", "\nAnswer: X"]),  # a line break ends one too
        ("No end here", ["No end here"]),
        ("3.5 m. Done", ["3.5 m.", " Done"]),  # a point inside a number ends nothing
        ("  \n", ["  \n"]),  # blanks alone: one sentence, no break before any text
        ("", []),
    ],
)
def test_split_sentences_cuts_after_an_end_mark_or_a_line_break_and_joins_back(text, sentences):
    assert split_sentences(text) == sentences
    assert "".join(split_sentences(text)) == text


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        (" Thinking.\nAnswer:  Robert Zemeckis \nMore", "Robert Zemeckis"),
        (" It is so. answer:Paris", "Paris"),
        (" First.\nAnswer: one\nAnswer: two", "one"),
    ],
)
def test_answer_span_is_the_answer_text_of_the_first_answer_line(text, answer):
    start, end = answer_span(text)
    assert text[start:end] == answer


@pytest.mark.parametrize("text", [" No label here.", " Ran out.\nAnswer:  \n", ""])
def test_answer_span_is_none_without_an_answer(text):
    assert answer_span(text) is None
