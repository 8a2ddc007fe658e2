"""The logit baselines, scored from the token rows extract stores."""

import numpy as np
import pandas as pd
import pytest

from skillrag.probe.baselines import BASELINES, answer_logprob, baseline_scores


def test_answer_logprob_reads_only_the_answer_lines_tokens():
    pieces = ["Paris", " is", " big", ".\n", "Answer", ":", " Par", "is"]
    logprobs = [-5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -0.2, -0.4]
    assert answer_logprob("".join(pieces), pieces, logprobs) == pytest.approx(-0.3)


def test_without_an_answer_line_it_reads_the_last_token_and_without_tokens_zero():
    assert answer_logprob("no answer here", ["no", " answer", " here"], [-1.0, -2.0, -3.0]) == -3.0
    assert answer_logprob("", [], []) == 0.0


def test_each_baseline_is_higher_for_the_more_confident_answer():
    rows = pd.DataFrame({
        "mean_entropy": [0.1, 2.0],
        "logprobs": [[-0.01, -0.05], [-0.01, -3.0]],
        "pieces": [["Answer:", " A"], ["Answer:", " B"]],
        "text": ["Answer: A", "Answer: B"],
    })
    scores = baseline_scores(rows)
    assert list(scores) == list(BASELINES)
    assert all(scores[name][0] > scores[name][1] for name in BASELINES)
    assert scores["min_token_prob"] == pytest.approx(np.exp([-0.05, -3.0]))
