from skillrag.eval.metrics import accuracy, exact_match, f1, normalize


def test_squad_normalisation():
    assert normalize("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize("An apple, a pear") == "apple pear"


def test_em_acc_f1_read_the_answer_line():
    golds = ["Chief of Protocol", "chief"]
    assert exact_match("chief of protocol.", golds)
    assert not exact_match("She was Chief of Protocol", golds)
    assert accuracy("She was Chief of Protocol", golds)
    assert not accuracy("", golds)  # an empty answer is never correct
    assert abs(f1("Chief Protocol", ["Chief of Protocol"]) - 0.8) < 1e-9  # P 2/2, R 2/3
    assert abs(f1("chief of staff", ["Chief of Protocol"]) - 2 / 3) < 1e-9
