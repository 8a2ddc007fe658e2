"""Which original split a question comes from, and whether it may be an evaluation question.

Evaluation questions come only from a dataset's original dev/test split ("eval" side); questions
from an original train split ("train" side) may only feed the prober's train/dev pools. Each
`orig_split` value is classified explicitly below; a value not in the table is an error, never
a guess.

Local bundle (`orig_split` as the shared data bundle writes it, see its README):
- `train` / `dev` / `test`: that split of the original dataset (HotpotQA, MuSiQue, 2Wiki use
  `dev` and `train`). Original test sets with gold answers count as eval side.
- NQ: "nq-open dev" is NQ's dev set (the split DPR and most RAG papers call NQ *test*): eval.
  "DPR nq-dev" was carved out of NQ *train*: train side.
- TriviaQA: "DPR trivia-test" is TriviaQA's unfiltered dev set: eval. "DPR trivia-dev" was
  carved out of TriviaQA *train*: train side. The RetrievalQA subset: eval, because every one of
  its 50 questions was matched to the DPR trivia-test file (their `source` names it).

Hub (FlashRAG_datasets, recorded as "FlashRAG <split>"): FlashRAG follows DPR, so for NQ and
TriviaQA its `test` is the original dev set (eval) and its `dev` is held out of the original
train set (train side); for HotpotQA, MuSiQue and 2Wiki `dev` is the original dev set.
"""

from __future__ import annotations

from typing import Literal

from skillrag.errors import DataError

Side = Literal["eval", "train"]

# Values that mean the same for every dataset: the original dataset's own split.
_GENERIC: dict[str, Side] = {"train": "train", "dev": "eval", "test": "eval"}

# dataset -> orig_split value -> side, for values whose meaning depends on the dataset.
ORIG_SPLITS: dict[str, dict[str, Side]] = {
    "hotpotqa": {"FlashRAG train": "train", "FlashRAG dev": "eval"},
    "nq": {
        "nq-open dev (NQ dev; = DPR 'test')": "eval",
        "DPR nq-dev (held out of NQ train)": "train",
        "FlashRAG train": "train",
        "FlashRAG dev": "train",  # DPR's nq-dev: held out of NQ train
        "FlashRAG test": "eval",  # NQ-open test = NQ dev
    },
    "triviaqa": {
        "DPR trivia-test (= TriviaQA unfiltered dev)": "eval",
        "DPR trivia-dev (held out of TriviaQA train)": "train",
        "TriviaQA (RetrievalQA subset)": "eval",
        "FlashRAG train": "train",
        "FlashRAG dev": "train",  # DPR's trivia-dev: held out of TriviaQA train
        "FlashRAG test": "eval",  # TriviaQA unfiltered dev
    },
    "musique": {"FlashRAG train": "train", "FlashRAG dev": "eval"},
    "2wiki": {"FlashRAG train": "train", "FlashRAG dev": "eval"},
}


def origin_side(dataset: str, orig_split: object, where: str = "") -> Side:
    """"eval" or "train" for a question of `dataset` from original split `orig_split`; raises
    DataError naming `where` and the value when the value is missing or not in the table."""
    prefix = f"{where}: " if where else ""
    if not isinstance(orig_split, str) or not orig_split:
        raise DataError(f"{prefix}no orig_split: cannot tell whether this {dataset} question comes from a train split")
    side = ORIG_SPLITS.get(dataset, {}).get(orig_split) or _GENERIC.get(orig_split)
    if side is None:
        raise DataError(
            f"{prefix}unknown orig_split {orig_split!r} for {dataset}: classify it in "
            "skillrag/data/origin.py (ORIG_SPLITS) as eval or train side"
        )
    return side
