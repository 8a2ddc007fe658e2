"""Stage `train_router`: the learned skill router on gold labels (data/router/)."""

from __future__ import annotations

from typing import Any

from skillrag import runtime
from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.stages.settings import run_settings


def train_router(params: Params, paths: Paths) -> dict[str, Any]:
    """The learned router, trained on gold labels: on the first `train_router.train_questions`
    train questions, one of each dataset in turn, skill exploration
    (skillrag.methods.exploration: from every wrong single-step answer, each query skill in turn,
    and one retry from every right one; traces in data/router_traces/, resumable; what a retry does to right and wrong answers in
    data/router_traces/retries.json, which train_probe's stage-2 cut reads),
    then a logistic regression from the failure state (mean hidden state over the resolved
    `lm.layers`) to the first skill that answered right, else exit (data/router/). Needs no
    prober. Below `train_router.min_examples_per_skill` for any label it writes a note instead
    of weights. Examples per label and, when trained, the cross-validated accuracy against the
    majority label go to reports/router_metrics.json."""
    from skillrag.data.splits import load_split
    from skillrag.eval.runner import run_method
    from skillrag.files import write_json
    from skillrag.lm.base import resolve_layers
    from skillrag.methods import Components
    from skillrag.methods.exploration import SkillExploration, build_router_dataset, retry_rates
    from skillrag.metrics import accuracy
    from skillrag.skills.learned_router import (
        cross_validate_router,
        fit_router,
        record_untrained,
        too_few_examples,
    )
    from skillrag.stages.selection import round_robin

    by_dataset = load_split(paths.questions, "train", params.prepare.max_question_chars)
    train = round_robin(by_dataset, params.train_router.train_questions)
    lm = runtime.open_lm(params)
    layers = resolve_layers(params.lm.layers, lm.num_layers)
    parts = Components.from_params(params, lm, runtime.open_retriever(params, paths), state_layers=layers)
    files = [paths.question_file("train", dataset) for dataset in sorted(load_split(paths.questions, "train"))]
    # Exploration's first round is single_step's; it adds the state layers.
    settings = run_settings(params, paths, "single_step", files, {"lm.layers": layers})
    settings["method"] = SkillExploration.name
    traces = run_method(
        SkillExploration(parts, accuracy), train, paths.router_traces, settings,
        concurrency=params.lm.concurrency, batch_size=params.lm.batch_size,
    )
    retries = retry_rates(traces, accuracy)
    write_json(paths.retry_rates, retries)
    x, labels = build_router_dataset(traces, accuracy)
    counts = {skill: labels.count(skill) for skill in sorted(set(labels))}
    report: dict[str, Any] = {"questions": len(traces), "examples": len(labels), "by_skill": counts, "retries": retries}
    reason = too_few_examples(labels, params.train_router.min_examples_per_skill)
    if reason is not None:
        record_untrained(paths.router, f"{reason} ({len(traces)} questions run)")
        report.update(trained=False, reason=reason, cv_folds=0, cv_accuracy=None)
    else:
        fit_router(x, labels, layers, params.train_router.c).save(paths.router, runtime.model_identity(params))
        report.update(trained=True, **cross_validate_router(x, labels, params.train_router.c))
    write_json(paths.router_metrics, report)
    return report
