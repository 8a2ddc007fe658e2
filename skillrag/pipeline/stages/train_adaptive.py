"""Stage `train_adaptive`: Adaptive-RAG's query-complexity classifier on silver labels (data/adaptive/)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.pipeline import runtime
from skillrag.pipeline.settings import run_settings
from skillrag.pipeline.stages.training_questions import round_robin

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pathlib import Path

    from skillrag.data.schema import Question


def train_adaptive(params: Params, paths: Paths) -> dict[str, Any]:
    """The classifier of skillrag.methods.complexity: on the first `train_adaptive.train_questions`
    train and `dev_questions` dev questions that extract answered (round-robin over the datasets),
    label each with the simplest strategy that answered right (else its dataset's default). The
    closed-book and single-step answers are extract's (data/states: the same prompts, budget and
    passages as those methods'); IRCoT runs only where the label depends on it
    (`complexity.needs_multi_step`: a single-hop question neither answered) and, on dev, where the
    classifier routes to it (the routed ACC): traces in data/adaptive_traces/<split>/ircot.jsonl,
    resumable, questions answered concurrently with their LM calls batched. A question whose
    labelling IRCoT run failed is left out (counted: `ircot_failed`); a routed one that fails counts as
    wrong, as in evaluate. Train labels of one strategy only give a constant classifier (`constant`,
    with a warning).
    Then each question's state is read in batched prefills, the logistic regression fit on train
    (data/adaptive/) and measured on dev: accuracy against always the majority train label,
    confusion matrix, and the ACC of routing by it against the two strategies every question has
    (reports/adaptive_metrics.json). Needs no prober."""
    from skillrag.data.splits import load_split
    from skillrag.files import DataError, write_json
    from skillrag.lm.base import resolve_layers
    from skillrag.methods import Components, ReusingLM, build_method
    from skillrag.methods.complexity import fit_classifier, needs_multi_step, silver_label

    lm = ReusingLM(runtime.open_lm(params), params.lm.reuse_cache)
    ircot = build_method("ircot", Components.from_params(params, lm, runtime.open_retriever(params, paths)))
    layers = resolve_layers(params.lm.layers, lm.num_layers)
    answered = _extract_answers(paths)
    sizes = {"train": params.train_adaptive.train_questions, "dev": params.train_adaptive.dev_questions}
    data: dict[str, tuple[Any, list[str], list[dict[str, bool]], list[Question]]] = {}
    files: dict[str, list[Path]] = {}
    distribution: dict[str, dict[str, Any]] = {}
    for split, size in sizes.items():
        by_dataset = load_split(paths.questions, split, params.prepare.max_question_chars)
        files[split] = [paths.question_file(split, dataset) for dataset in sorted(by_dataset)]
        questions = round_robin({d: [q for q in qs if q.id in answered] for d, qs in by_dataset.items()}, size)
        multi = _ircot(ircot, [q for q in questions if needs_multi_step(answered[q.id], q.dataset)], params, paths, split, files[split])
        kept = [q for q in questions if multi.get(q.id, False) is not None]
        correct = [{**answered[q.id], **({"ircot": bool(multi[q.id])} if q.id in multi else {})} for q in kept]
        labels = [silver_label(c, q.dataset) for c, q in zip(correct, kept)]
        distribution[split] = {**_distribution(labels, correct), "ircot_failed": len(questions) - len(kept)}
        data[split] = (_states(lm, kept, layers, params.lm.batch_size), labels, correct, kept)
    (x, labels, _, _), (x_dev, dev_labels, dev_correct, dev_questions) = data["train"], data["dev"]
    if not labels:
        raise DataError(
            f"no train question to label: extract answered none closed-book and single-step ({paths.states}), "
            f"or IRCoT failed on each ({paths.adaptive_traces('train', 'ircot')})"
        )
    if len(set(labels)) == 1:
        log.warning(
            "train_adaptive: every train question has the silver label %r, so the classifier always routes there "
            "(adaptive_rag becomes that strategy; reports/adaptive_metrics.json says so)", labels[0],
        )
    classifier = fit_classifier(x, labels, layers, runtime.model_identity(params), params.train_adaptive.c)
    classifier.save(paths.adaptive)
    predicted = classifier.predict(x_dev) if dev_labels else []
    routed = [i for i, p in enumerate(predicted) if p == "ircot" and "ircot" not in dev_correct[i]]
    found = _ircot(ircot, [dev_questions[i] for i in routed], params, paths, "dev", files["dev"])
    for i in routed:
        dev_correct[i]["ircot"] = bool(found[dev_questions[i].id])
    report = {
        "model": lm.name,
        "layers": layers,
        "constant": labels[0] if len(set(labels)) == 1 else None,  # the one label it learned, if only one
        "train": distribution["train"],
        "dev": {**distribution["dev"], **_dev_scores(predicted, dev_labels, dev_correct, labels)},
    }
    write_json(paths.adaptive_metrics, report)
    return report


def _extract_answers(paths: Paths) -> dict[str, dict[str, bool]]:
    """Question id -> {no_retrieval: right?, single_step: right?} from extract's rows (the strict
    answer's ACC, as evaluate scores it), for the questions extract answered both ways."""
    from skillrag.probe.state_store import read_rows

    rows = read_rows(paths.states)
    simpler = ("no_retrieval", "single_step")
    answers: dict[str, dict[str, bool]] = {}
    for row in rows[rows["strategy"].isin(simpler)].itertuples():
        answers.setdefault(row.id, {})[row.strategy] = bool(row.acc)
    return {qid: {s: found[s] for s in simpler} for qid, found in answers.items() if len(found) == len(simpler)}


def _ircot(
    ircot: Any, questions: Sequence[Question], params: Params, paths: Paths, split: str, files: Sequence[Path]
) -> dict[str, bool | None]:
    """IRCoT's ACC on each question (None: it failed), resuming data/adaptive_traces/<split>/ircot.jsonl."""
    from skillrag.eval.runner import run_method
    from skillrag.metrics import accuracy

    traces = run_method(
        ircot, questions, paths.adaptive_traces(split, "ircot"), run_settings(params, paths, "ircot", files),
        concurrency=params.lm.concurrency, batch_size=params.lm.batch_size,
    )
    return {
        q.id: None if t.termination == "error" else accuracy(t.answer, q.answers) for q, t in zip(questions, traces)
    }


def _states(lm: Any, questions: Sequence[Question], layers: Sequence[int], batch_size: int) -> Any:
    """The questions' feature rows, `batch_size` prefills per LM call."""
    import numpy as np
    from tqdm import tqdm

    from skillrag.methods.complexity import question_states

    chunks = [questions[i : i + batch_size] for i in range(0, len(questions), batch_size)]
    rows = [question_states(lm, [q.question for q in chunk], layers) for chunk in tqdm(chunks, desc="question states")]
    return np.concatenate(rows) if rows else np.zeros((0, lm.hidden_size), dtype=np.float32)


def _distribution(labels: Sequence[str], correct: Sequence[Mapping[str, bool]]) -> dict[str, Any]:
    """Questions labelled, per label, how many took their dataset's default because no strategy
    run on them answered (a multi-hop question neither simpler strategy answered is one: IRCoT is
    not run on it, its label is IRCoT's either way), and on how many IRCoT ran to label them."""
    from skillrag.methods.complexity import STRATEGIES

    counts = Counter(labels)
    return {
        "questions": len(labels),
        "labels": {s: counts[s] for s in STRATEGIES},
        "defaulted": sum(not any(c.values()) for c in correct),
        "ircot_runs": sum("ircot" in c for c in correct),
    }


def _dev_scores(
    predicted: Sequence[str], labels: Sequence[str], correct: Sequence[Mapping[str, bool]], train_labels: Sequence[str]
) -> dict[str, Any]:
    """Accuracy against the silver labels (and of always the majority train label), the confusion
    matrix (silver label -> predicted -> count), and the ACC of routing by the classifier (IRCoT's
    answer known wherever it routes to it) and of the strategies every question has an answer of."""
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
            **{s: share(sum(c[s] for c in correct)) for s in STRATEGIES[:-1]},
        },
    }
