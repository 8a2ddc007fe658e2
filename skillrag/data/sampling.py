"""Seeded, deterministic sampling of the paper's splits.

- eval: `eval_size` questions per evaluation dataset, preferring questions whose evidence is in
  the corpus (gold paragraphs present, else the answer string present), drawn first;
- train / dev: the prober pools, drawn from what is left of the in-domain datasets, split
  evenly across them.

Results depend only on the seed and the set of questions (not on file order), and no question
text appears in two splits.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from skillrag.config import PrepareParams
from skillrag.data.schema import Question
from skillrag.text import normalize

SPLITS = ("train", "dev", "eval")


def evidence_rank(question: Question) -> int:
    """0 = gold paragraphs in the corpus, 1 = answer string in the corpus, 2 = unknown/absent."""
    if question.meta.get("gold_context_in_corpus"):
        return 0
    if question.meta.get("answer_in_corpus"):
        return 1
    return 2


def _shuffled(questions: Sequence[Question], seed: int, salt: str) -> list[Question]:
    ordered = sorted(questions, key=lambda q: q.id)
    random.Random(f"{seed}:{salt}").shuffle(ordered)
    return ordered


def _even_shares(total: int, names: Sequence[str]) -> dict[str, int]:
    base, rest = divmod(total, len(names))
    return {name: base + (i < rest) for i, name in enumerate(names)}


def split_sizes(params: PrepareParams) -> dict[str, dict[str, int]]:
    """split -> dataset -> how many questions it must hold."""
    return {
        "eval": {dataset: params.eval_size for dataset in params.eval_datasets},
        "dev": _even_shares(params.dev_size, params.train_datasets),
        "train": _even_shares(params.train_size, params.train_datasets),
    }


def make_splits(questions: Mapping[str, Sequence[Question]], params: PrepareParams) -> dict[str, dict[str, list[Question]]]:
    """split -> dataset -> questions. Raises ValueError when a dataset is too small."""
    taken: set[str] = set()  # normalised question texts already used
    splits: dict[str, dict[str, list[Question]]] = {name: {} for name in SPLITS}
    sizes = split_sizes(params)
    for split in SPLITS[::-1]:  # eval first: it gets the pick of the evidence-backed questions
        for dataset, count in sizes[split].items():
            pool = _shuffled(questions[dataset], params.seed, f"{split}:{dataset}")
            if split == "eval" and params.prefer_evidence_in_corpus:
                pool.sort(key=evidence_rank)  # stable: keeps the seeded order within each rank
            chosen = []
            for q in pool:
                if len(chosen) == count:
                    break
                key = normalize(q.question)
                if key not in taken:
                    taken.add(key)
                    chosen.append(replace(q, split=split))
            if len(chosen) < count:
                raise ValueError(f"{dataset}: only {len(chosen)} unused questions for {split} (need {count})")
            splits[split][dataset] = sorted(chosen, key=lambda q: q.id)
    return splits
