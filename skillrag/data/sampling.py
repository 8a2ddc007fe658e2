"""Seeded, deterministic sampling of the paper's splits.

- eval: `eval_size` questions per evaluation dataset, drawn first and only from the dataset's
  original dev/test split (never its train split, see `skillrag.data.origin`), preferring
  questions whose evidence is in the corpus (gold paragraphs present, else the answer string);
- train / dev: the prober pools, split evenly across the in-domain datasets, drawn from
  original-train questions first; when those run out they take leftover dev/test questions
  (ones the evaluation sets did not take), which never overlap an evaluation set.

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
    return {
        "eval": {dataset: params.eval_size for dataset in params.eval_datasets},
        "dev": _even_shares(params.dev_size, params.train_datasets),
        "train": _even_shares(params.train_size, params.train_datasets),
    }


def make_splits(questions: Mapping[str, Sequence[Question]], params: PrepareParams) -> dict[str, dict[str, list[Question]]]:
    """split -> dataset -> questions. Raises ConfigError naming the dataset, the split and the
    size parameter when a dataset has too few usable questions."""
    taken: set[str] = set()  # normalised question texts already used
    splits: dict[str, dict[str, list[Question]]] = {name: {} for name in SPLITS}
    sizes = split_sizes(params)
    for split in SPLITS[::-1]:  # eval first: it gets the pick of the evidence-backed questions
        for dataset, count in sizes[split].items():
            pool = _shuffled(questions[dataset], params.seed, f"{split}:{dataset}")
            if split == "eval":
                pool = [q for q in pool if _eval_side(q)]
                if params.prefer_evidence_in_corpus:
                    pool.sort(key=evidence_rank)  # stable: keeps the seeded order within each rank
            else:
                pool.sort(key=_eval_side)  # original-train questions first, seeded order kept
            chosen = []
            for q in pool:
                if len(chosen) == count:
                    break
                key = normalize(q.question)
                if key not in taken:
                    taken.add(key)
                    chosen.append(replace(q, split=split))
            if len(chosen) < count:
                origin = " from its original dev/test split" if split == "eval" else ""
                raise ConfigError(
                    f"{dataset}: only {len(chosen)} unused questions{origin} for {split} (need {count}): "
                    f"lower prepare.{split}_size or add questions to the dataset"
                )
            splits[split][dataset] = sorted(chosen, key=lambda q: q.id)
    return splits
