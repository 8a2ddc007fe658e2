from skillrag.text import normalize, normalized_tokens


def test_normalize_follows_squad():
    assert normalize("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize("An apple, a pear") == "apple pear"
    assert normalize("Theatre") == "theatre"


def test_normalized_tokens_are_the_words_of_normalize():
    assert normalized_tokens("The Kingdom of Norway.") == ["kingdom", "of", "norway"]
    assert normalized_tokens("  ") == []
