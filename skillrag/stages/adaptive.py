"""Stage `train_adaptive`: Adaptive-RAG's query-complexity classifier on silver labels (data/adaptive/)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.stages.settings import run_settings

if TYPE_CHECKING:
    from skillrag.data.schema import Question


def train_adaptive(params: Params, paths: Paths) -> dict[str, Any]:
    """The classifier of skillrag.methods.complexity: on the first `train_adaptive.train_questions`
    train and `dev_questions` dev questions (round-robin over the datasets), run each strategy
    (no_retrieval, single_step, ircot; traces in data/adaptive_traces/, resumable, questions
    answered concurrently with their LM calls batched, ircot's first step reusing single_step's
    answer), label each question with the simplest strategy that answered right (else its
    dataset's default), read each question's state in batched prefills, fit the logistic
    regression on train (data/adaptive/) and measure it on dev: accuracy against always the
    majority train label, confusion matrix, and the ACC of routing by it against each strategy
    alone and the oracle (reports/adaptive_metrics.json). Needs no prober."""
    from skillrag.data.splits import load_split
    from skillrag.eval.runner import run_method
    from skillrag.files import DataError, write_json
    from skillrag.methods import Components, ReusingLM, build_method
    from skillrag.methods.complexity import STRATEGIES, fit_classifier, silver_label
    from skillrag.metrics import accuracy
    from skillrag.probe.extract import resolve_layers

    lm = ReusingLM(runtime.open_lm(params), params.lm.reuse_cache)
    parts = Components.from_params(params, lm, runtime.open_retriever(params, paths))
    layers = resolve_layers(params.lm.layers, lm.num_layers)
    sizes = {"train": params.train_adaptive.train_questions, "dev": params.train_adaptive.dev_questions}
    data: dict[str, tuple[Any, list[str], list[dict[str, bool]]]] = {}
    for split, size in sizes.items():
        by_dataset = load_split(paths.questions, split, params.prepare.max_question_chars)
        questions = _round_robin(by_dataset, size)
        files = [paths.question_file(split, dataset) for dataset in sorted(by_dataset)]
        traces = {
            strategy: run_method(
                build_method(strategy, parts), questions, paths.adaptive_traces(split, strategy),
                run_settings(params, paths, strategy, files),
                concurrency=params.lm.concurrency, batch_size=params.lm.batch_size,
            )
            for strategy in STRATEGIES
        }
        rows = [i for i in range(len(questions)) if all(traces[s][i].termination != "error" for s in STRATEGIES)]
        correct = [{s: accuracy(traces[s][i].answer, questions[i].answers) for s in STRATEGIES} for i in rows]
        labels = [silver_label(c, questions[i].dataset) for c, i in zip(correct, rows)]
        x = _states(lm, [questions[i] for i in rows], layers, params.lm.batch_size)
        data[split] = (x, labels, correct)
    (x, labels, _), (x_dev, dev_labels, dev_correct) = data["train"], data["dev"]
    if not labels:
        raise DataError(f"no train question was answered without an error by every strategy: see {paths.adaptive_traces('train', 'ircot').parent}")
    classifier = fit_classifier(x, labels, layers, runtime.model_identity(params), params.train_adaptive.c)
    classifier.save(paths.adaptive)
    report = {
        "model": lm.name,
        "layers": layers,
        "train": _distribution(labels, data["train"][2]),
        "dev": {
            **_distribution(dev_labels, dev_correct),
            **_dev_scores(classifier.predict(x_dev) if dev_labels else [], dev_labels, dev_correct, labels),
        },
    }
    write_json(paths.adaptive_metrics, report)
    return report


def _round_robin(by_dataset: Mapping[str, Sequence[Question]], size: int) -> list[Question]:
    """The first `size` questions taking one of each dataset in turn (each sorted by id)."""
    columns = [sorted(questions, key=lambda q: q.id) for _, questions in sorted(by_dataset.items())]
    return [q for row in zip_longest(*columns) for q in row if q is not None][:size]


def _states(lm: Any, questions: Sequence[Question], layers: Sequence[int], batch_size: int) -> Any:
    """The questions' feature rows, `batch_size` prefills per LM call."""
    import numpy as np
    from tqdm import tqdm

    from skillrag.methods.complexity import question_states

    chunks = [questions[i : i + batch_size] for i in range(0, len(questions), batch_size)]
    rows = [question_states(lm, [q.question for q in chunk], layers) for chunk in tqdm(chunks, desc="question states")]
    return np.concatenate(rows) if rows else np.zeros((0, lm.hidden_size), dtype=np.float32)


def _distribution(labels: Sequence[str], correct: Sequence[Mapping[str, bool]]) -> dict[str, Any]:
    """Questions labelled, per label, and how many none of the strategies answered (defaulted)."""
    from skillrag.methods.complexity import STRATEGIES

    counts = Counter(labels)
    return {
        "questions": len(labels),
        "labels": {s: counts[s] for s in STRATEGIES},
        "unanswered": sum(not any(c.values()) for c in correct),
    }


def _dev_scores(
    predicted: Sequence[str], labels: Sequence[str], correct: Sequence[Mapping[str, bool]], train_labels: Sequence[str]
) -> dict[str, Any]:
    """Accuracy against the silver labels (and of always the majority train label), the confusion
    matrix (silver label -> predicted -> count), and the ACC each way of choosing a strategy gets."""
    from skillrag.methods.complexity import STRATEGIES

    n = len(labels)
    majority = Counter(train_labels).most_common(1)[0][0]

    def share(hits: int) -> float | None:
        return hits / n if n else None

    return {
        "accuracy": share(sum(p == y for p, y in zip(predicted, labels))),
        "majority_label": majority,
        "majority_accuracy": share(sum(y == majority for y in labels)),
        "confusion": {y: {p: sum(1 for a, b in zip(labels, predicted) if (a, b) == (y, p)) for p in STRATEGIES} for y in STRATEGIES},
        "acc": {
            "adaptive": share(sum(c[p] for c, p in zip(correct, predicted))),
            **{s: share(sum(c[s] for c in correct)) for s in STRATEGIES},
            "oracle": share(sum(any(c.values()) for c in correct)),
        },
    }
