"""Adaptive-RAG's query-complexity classifier (Jeong et al. 2024), trained here because the
original T5 checkpoint is no longer published.

Three strategies, simplest first: A = no_retrieval, B = single_step, C = ircot. A question's
silver label is the simplest strategy that answered it right; a question none answers gets its
dataset's default (C for the multi-hop sets, else B), as in the paper. So IRCoT's answer decides
a label only for a single-hop question neither simpler strategy answered (`needs_multi_step`):
a multi-hop one is labelled C whatever IRCoT answers.

Features: the question's hidden state from the same LM, read in one call the LM already offers:
`generate` on the closed-book CoT prompt with one new token and the resolved `lm.layers`
captured, so the state is that of the prompt's end and the first answer token (mean over the
layers). One prefill and one step, its few-shot prefix KV shared with no_retrieval's prompt; no
new LM call type, so batching (skillrag.eval.batching), reuse and metering pass it through
unchanged. The classifier is the learned router's linear model (a standardised logistic
regression, stored as safetensors: loading runs no code), which records the identity of the
model whose states it read and refuses any other (`skillrag.provenance.check_identity`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillrag.errors import ArtifactError
from skillrag.files import atomic_path, write_json
from skillrag.lm.base import LM, state_vector
from skillrag.prompts.cot import STOP, cot_prompt
from skillrag.provenance import digest
from skillrag.registry import ADAPTIVE_REBUILD as REBUILD
from skillrag.skills.base import Routing
from skillrag.skills.learned_router import LearnedRouter, fit_router, load_learned_router

STRATEGIES = ("no_retrieval", "single_step", "ircot")  # A, B, C: simplest first
MULTI_HOP = frozenset({"hotpotqa", "musique", "2wiki"})
RECORD, LINEAR = "classifier.json", "linear"


def default_strategy(dataset: str) -> str:
    """The label of a question no strategy answers: multi-step for multi-hop sets, else single-step."""
    return "ircot" if dataset in MULTI_HOP else "single_step"


def silver_label(correct: Mapping[str, bool], dataset: str) -> str:
    """The simplest strategy that answered right (`correct`: strategy -> right?, a strategy not
    run counting as not right), else the default."""
    return next((s for s in STRATEGIES if correct.get(s)), default_strategy(dataset))


def needs_multi_step(correct: Mapping[str, bool], dataset: str) -> bool:
    """Whether the silver label depends on IRCoT's answer, given the simpler strategies' in
    `correct`: when neither answered right and the dataset's default is not IRCoT itself.
    Elsewhere `silver_label` gives the same label whatever IRCoT answers."""
    return not any(correct[s] for s in STRATEGIES[:-1]) and default_strategy(dataset) != STRATEGIES[-1]


def question_states(lm: LM, questions: Sequence[str], layers: Sequence[int]) -> np.ndarray:
    """[len(questions), hidden] features, one generate call for all of them (see the module docstring)."""
    prompts = [cot_prompt(question) for question in questions]
    generations = lm.generate(
        [p.text for p in prompts], 1, stop=STOP, capture=list(layers), prefix=prompts[0].prefix
    )
    if any(g.hidden is None for g in generations):
        raise RuntimeError(f"LM {lm.name!r} returned no hidden states for layers {list(layers)}")
    return np.stack([state_vector(g.hidden, layers) for g in generations])


@dataclass(frozen=True, eq=False)
class ComplexityClassifier:
    """The linear model over question states and the identity of the model whose states it reads
    (`skillrag.lm.loading.model_identity`)."""

    identity: Mapping[str, Any]
    linear: LearnedRouter

    def predict(self, x: np.ndarray) -> list[str]:
        return [self.linear.classes[i] for i in self.linear.probabilities(x).argmax(axis=-1)]

    def choose(self, lm: LM, question: str) -> Routing:
        """The strategy for `question`, with every strategy's probability."""
        probs = self.linear.probabilities(question_states(lm, [question], self.linear.layers))[0]
        scores = {strategy: float(p) for strategy, p in zip(self.linear.classes, probs)}
        return Routing(self.linear.classes[int(probs.argmax())], scores)

    def save(self, directory: str | Path) -> None:
        with atomic_path(directory) as tmp:
            tmp.mkdir()
            self.linear.save(tmp / LINEAR, self.identity)
            files = sorted((tmp / LINEAR).glob("*"))
            write_json(
                tmp / RECORD,
                {
                    "strategies": list(self.linear.classes),
                    "layers": list(self.linear.layers),
                    "hidden_size": int(self.linear.mean.shape[0]),
                    "sha256": digest(*files),
                },
            )


def fit_classifier(
    x: np.ndarray, labels: Sequence[str], layers: Sequence[int], identity: Mapping[str, Any], c: float = 1.0
) -> ComplexityClassifier:
    """Fit on states `x` read from the model `identity` names."""
    return ComplexityClassifier(dict(identity), fit_router(x, labels, layers, c))


def load_classifier(directory: str | Path, identity: Mapping[str, Any]) -> ComplexityClassifier:
    """The saved classifier, refused when missing, altered, or trained on the states of another
    model than `identity` (the running one)."""
    directory = Path(directory)
    if not (directory / RECORD).is_file():
        raise ArtifactError(f"no query-complexity classifier at {directory}: run {REBUILD}")
    record = json.loads((directory / RECORD).read_text())
    if digest(*sorted((directory / LINEAR).glob("*"))) != record.get("sha256"):
        raise ArtifactError(f"{directory} is altered (its sha256 differs from {RECORD}): retrain it with {REBUILD}")
    return ComplexityClassifier(dict(identity), load_learned_router(directory / LINEAR, identity, rebuild=REBUILD))
