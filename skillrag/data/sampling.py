"""Seeded, deterministic sampling of the paper's splits.

- eval: `eval_size` questions per evaluation dataset, drawn first and only from the dataset's
  original dev/test split (never its train split, see `skillrag.data.origin`), preferring
  questions whose evidence is in the corpus (gold paragraphs present, else the answer string);
- train / dev: the prober pools, split evenly across the in-domain datasets, drawn from
  original-train questions first; when those run out they take leftover dev/test questions
  (ones the evaluation sets did not take), which never overlap an evaluation set.

Nested: a larger sample holds a smaller one, so the answers of a run at the smaller sizes can be
read question by question in the larger run. The sample is drawn in two passes over fixed,
seeded orders, each only appending:

1. the first draw, `prepare.first_draw` (the committed run's sizes, or the asked ones where
   smaller): the original rule, eval then dev then train, each split walking its own shuffle.
   That rule alone is not nested: dev takes its questions first, so a larger dev moves train's
   (at 1,000 / 300 / 100 it kept 17 of the committed 34 HotpotQA train questions);
2. growth to the asked sizes: eval walks on in its own order; train and dev share one order of
   the dataset's original-train questions, train reading it from the front and dev from the
   back, and spill into evaluation-side leftovers from the end of eval's order. So a split's
   sample does not move when another split grows, until two of them meet in an order (then the
   split drawn first keeps the question).

Results depend only on the seed and the set of questions (not on file order), and no question
text appears in two splits.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from skillrag.config import PrepareParams
from skillrag.data.origin import origin_side
from skillrag.data.schema import Question
from skillrag.data.splits import SPLITS
from skillrag.errors import ConfigError
from skillrag.text import normalize


def evidence_rank(question: Question) -> int:
    """0 = gold paragraphs in the corpus, 1 = answer string in the corpus, 2 = unknown/absent."""
    if question.meta.get("gold_context_in_corpus"):
        return 0
    if question.meta.get("answer_in_corpus"):
        return 1
    return 2


def _eval_side(question: Question) -> bool:
    return origin_side(question.dataset, question.meta.get("orig_split"), question.id) == "eval"


def _shuffled(questions: Sequence[Question], seed: int, salt: str) -> list[Question]:
    ordered = sorted(questions, key=lambda q: q.id)
    random.Random(f"{seed}:{salt}").shuffle(ordered)
    return ordered


def _even_shares(total: int, names: Sequence[str]) -> dict[str, int]:
    base, rest = divmod(total, len(names))
    return {name: base + (i < rest) for i, name in enumerate(names)}


def split_sizes(params: PrepareParams) -> dict[str, dict[str, int]]:
    """split -> dataset -> how many questions it must hold."""
    return _sizes(params.train_size, params.dev_size, params.eval_size, params)


def _sizes(train: int, dev: int, eval_: int, params: PrepareParams) -> dict[str, dict[str, int]]:
    return {
        "eval": {dataset: eval_ for dataset in params.eval_datasets},
        "dev": _even_shares(dev, params.train_datasets),
        "train": _even_shares(train, params.train_datasets),
    }


def _first_draw_sizes(params: PrepareParams) -> dict[str, dict[str, int]]:
    first = params.first_draw
    return _sizes(
        min(params.train_size, first.train_size), min(params.dev_size, first.dev_size), min(params.eval_size, first.eval_size), params
    )


def _orders(questions: Sequence[Question], dataset: str, split: str, params: PrepareParams) -> tuple[list[Question], list[Question]]:
    """A dataset's (first-draw order, growth order) for `split` (see the module docstring)."""
    evaluation = [q for q in _shuffled(questions, params.seed, f"eval:{dataset}") if _eval_side(q)]
    if params.prefer_evidence_in_corpus:
        evaluation.sort(key=evidence_rank)  # stable: keeps the seeded order within each rank
    if split == "eval":
        return evaluation, evaluation
    own = sorted(_shuffled(questions, params.seed, f"{split}:{dataset}"), key=_eval_side)  # original-train first, seeded order kept
    shared = [q for q in _shuffled(questions, params.seed, f"train:{dataset}") if not _eval_side(q)]
    return own, (shared if split == "train" else shared[::-1]) + evaluation[::-1]


def _take(chosen: list[Question], order: Sequence[Question], count: int, taken: set[str], split: str) -> None:
    """Append to `chosen` the next questions of `order` whose text no split holds yet, up to `count`."""
    for q in order:
        if len(chosen) >= count:
            return
        key = normalize(q.question)
        if key not in taken:
            taken.add(key)
            chosen.append(replace(q, split=split))


def make_splits(questions: Mapping[str, Sequence[Question]], params: PrepareParams) -> dict[str, dict[str, list[Question]]]:
    """split -> dataset -> questions. Raises ConfigError naming the dataset, the split and the
    size parameter when a dataset has too few usable questions."""
    taken: set[str] = set()  # normalised question texts already used
    chosen: dict[str, dict[str, list[Question]]] = {split: {} for split in SPLITS}
    orders = {
        (split, dataset): _orders(questions[dataset], dataset, split, params)
        for split, by_dataset in split_sizes(params).items()
        for dataset in by_dataset
    }
    for sizes, which in ((_first_draw_sizes(params), 0), (split_sizes(params), 1)):
        for split in SPLITS[::-1]:  # eval first: it gets the pick of the evidence-backed questions
            for dataset, count in sizes[split].items():
                _take(chosen[split].setdefault(dataset, []), orders[split, dataset][which], count, taken, split)
    for split, by_dataset in split_sizes(params).items():
        for dataset, count in by_dataset.items():
            if len(chosen[split][dataset]) < count:
                origin = " from its original dev/test split" if split == "eval" else ""
                raise ConfigError(
                    f"{dataset}: only {len(chosen[split][dataset])} unused questions{origin} for {split} (need {count}): "
                    f"lower prepare.{split}_size or add questions to the dataset"
                )
    return {split: {d: sorted(qs, key=lambda q: q.id) for d, qs in by_dataset.items()} for split, by_dataset in chosen.items()}
