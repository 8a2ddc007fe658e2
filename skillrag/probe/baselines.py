"""The logit baselines a prober must beat, scored from the token rows extract stores (no model,
no hidden state): each is higher where an answer is more likely right.

- `entropy`: minus the mean token entropy of the generation;
- `min_token_prob`: the lowest probability the model gave a token it generated (FLARE's trigger
  reads the same);
- `answer_logprob`: the mean log-probability of the tokens of the answer on the `Answer:` line
  (the tokens the `answer_*` poolings read, `skillrag.lm.base.answer_tokens`; the last token
  when the line is missing or empty).

Token boundaries come from the stored token texts (`pieces`), which join to the generated text.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import numpy as np
import pandas as pd

from skillrag.lm.base import answer_tokens

BASELINES = ("entropy", "min_token_prob", "answer_logprob")


def answer_logprob(text: str, pieces: Sequence[str], logprobs: Sequence[float]) -> float:
    """Mean log-probability of the answer-line tokens of one generation (0.0 with no token)."""
    values = np.asarray(logprobs, dtype=float)
    if not len(values):
        return 0.0
    return float(values[answer_tokens(text, list(accumulate(len(p) for p in pieces)))].mean())


def baseline_scores(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """name -> one score per row (in `BASELINES` order), from the rows' `mean_entropy`,
    `logprobs`, `pieces` and `text`."""
    return {
        "entropy": -rows["mean_entropy"].to_numpy(dtype=float),
        "min_token_prob": np.array([float(np.exp(np.min(lp))) if len(lp) else 0.0 for lp in rows["logprobs"]]),
        "answer_logprob": np.array(
            [answer_logprob(text, list(pieces), lp) for text, pieces, lp in zip(rows["text"], rows["pieces"], rows["logprobs"])]
        ),
    }
