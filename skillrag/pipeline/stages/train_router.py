"""Stage `train_router`: skill exploration on train questions, and what it feeds: the learned
router and the prompt router's label offsets (data/router/), and each gated method's retry
evidence for the prober's after-evidence cut (data/router_traces/retries.json)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillrag.config import Params
from skillrag.paths import Paths
from skillrag.pipeline import runtime
from skillrag.pipeline.settings import run_settings

if TYPE_CHECKING:
    from skillrag.methods import Components, Trace
    from skillrag.methods.exploration import ExploredState


def train_router(params: Params, paths: Paths) -> dict[str, Any]:
    """On train questions, one of each dataset in turn (each pool sized on its own knob, the
    smaller a prefix of the larger):

    1. on the first `train_router.train_questions`, skill exploration (skillrag.methods.exploration: from every wrong single-step answer,
       each query skill; traces in data/router_traces/train.jsonl, resumable);
    2. the learned router, a logistic regression from the failure state (mean hidden state over
       the resolved `lm.layers`) to the first skill that answered right, else exit (below
       `train_router.min_examples_per_skill` for any label a note instead of weights), and the
       prompt router's label offsets fitted on the same states (data/router/);
    3. on the first `train_router.retry_questions`, each gated method's own first retry after
       its single-step answer, with the router as
       configured (`methods.router`; traces in data/router_traces/<method>.jsonl), summarised in
       data/router_traces/retries.json, which train_probe's after-evidence cuts read.

    The single-step answers are computed once and shared by the three runs (ReusingLM). Needs no
    prober. reports/router_metrics.json: examples per label, the routers' choices on the
    explored failure states against the skills that fixed them (accuracy beside the majority
    baseline), the learned router's cross-validated accuracy, the retry rates and the LLM calls."""
    from skillrag.data.splits import load_split
    from skillrag.eval.runner import run_method
    from skillrag.files import write_json
    from skillrag.lm.base import resolve_layers
    from skillrag.methods import Components, ReusingLM
    from skillrag.methods.checked import CHECKED_METHODS
    from skillrag.methods.exploration import (
        SkillExploration,
        build_router_dataset,
        explored_states,
        retry_rates,
    )
    from skillrag.metrics import accuracy
    from skillrag.pipeline.stages.training_questions import round_robin
    from skillrag.skills.learned_router import (
        cross_validate_router,
        fit_router,
        record_untrained,
        too_few_examples,
    )

    by_dataset = load_split(paths.questions, "train", params.prepare.max_question_chars)
    train = round_robin(by_dataset, params.train_router.train_questions)
    retried = round_robin(by_dataset, params.train_router.retry_questions)
    lm = ReusingLM(runtime.open_lm(params), params.lm.reuse_cache)
    layers = resolve_layers(params.lm.layers, lm.num_layers)
    components = Components.from_params(params, lm, runtime.open_retriever(params, paths), state_layers=layers)
    files = [paths.question_file("train", dataset) for dataset in sorted(by_dataset)]
    # Exploration's first round is single_step's; it adds the state layers.
    settings = run_settings(params, paths, "single_step", files, {"lm.layers": layers})
    settings["method"] = SkillExploration.name
    run = {"concurrency": params.lm.concurrency, "batch_size": params.lm.batch_size}
    traces = run_method(SkillExploration(components, accuracy), train, paths.router_traces, settings, **run)
    x, labels = build_router_dataset(traces, accuracy)
    states = explored_states(traces, accuracy)
    counts = {skill: labels.count(skill) for skill in sorted(set(labels))}
    report: dict[str, Any] = {"questions": len(traces), "examples": len(labels), "by_skill": counts}
    reason = too_few_examples(labels, params.train_router.min_examples_per_skill)
    learned = None
    if reason is not None:
        record_untrained(paths.router, f"{reason} ({len(traces)} questions run)")
        report.update(trained=False, reason=reason, cv_folds=0, cv_accuracy=None)
    else:
        learned = fit_router(x, labels, layers, params.train_router.c)
        learned.save(paths.router, runtime.model_identity(params))
        report.update(trained=True, **cross_validate_router(x, labels, params.train_router.c))
    offsets, report["prompt_router"] = _prompt_offsets(lm, states, paths, params)
    retries: dict[str, Any] = {}
    retry_traces: dict[str, list[Trace]] = {}
    for method in CHECKED_METHODS:
        gated = _gated(method, params, components, learned, offsets, layers, reason)
        if isinstance(gated, str):
            retries[method] = {"unavailable": gated}
            continue
        retry_settings = _retry_settings(params, paths, method, files, layers)
        retry_traces[method] = run_method(gated, retried, paths.retry_traces(method), retry_settings, **run)
        retries[method] = retry_rates(retry_traces[method], accuracy)
    write_json(paths.retry_rates, {"questions": len(retried), **retries})
    if "skill_rag" in retry_traces:
        report["router_as_run"] = _as_run(retry_traces["skill_rag"], states, params.methods.router)
    report["retries"] = retries
    report["llm_calls"] = {
        "exploration": sum(t.totals.llm_calls for t in traces),
        **{f"{method}_retries": sum(t.totals.llm_calls for t in ts) for method, ts in retry_traces.items()},
        "computed": lm.stats.lookups - lm.stats.hits,  # generate calls' prompts the model ran (the others were reused)
        "reused": lm.stats.hits,
    }
    write_json(paths.router_metrics, report)
    return report


def _prompt_offsets(lm: Any, states: Sequence[ExploredState], paths: Paths, params: Params) -> tuple[dict[str, float], dict[str, Any]]:
    """The prompt router's label offsets fitted on the explored failure states (from the
    content-free calibration; skillrag.skills.calibration), stored in data/router/, and how the
    router chooses on those states with each (the fitted ones in sample, and cross-validated)."""
    import numpy as np

    from skillrag.skills import SKILL_NAMES
    from skillrag.skills.calibration import (
        choice_report,
        cross_validated_choices,
        fit_offsets,
        right_choices,
    )
    from skillrag.skills.router import content_free_offsets, save_offsets

    scored = [s for s in states if s.raw is not None]
    start = np.array(list(content_free_offsets(lm).values()))
    raw = np.array([s.raw for s in scored], dtype=float).reshape(len(scored), len(SKILL_NAMES))
    right = right_choices([s.fixers for s in scored])
    fitted = fit_offsets(raw, right, start)

    def chosen(offsets: np.ndarray) -> list[str]:
        return [SKILL_NAMES[i] for i in np.argmax(raw + offsets, axis=1)]

    fixers = [s.fixers for s in scored]
    held_out = cross_validated_choices(raw, right, start)
    record = {
        "rule": "per-label offsets added to the raw label log-likelihoods, fitted on the explored train failure states "
        "(skillrag.skills.calibration.fit_offsets: the most states fixed, then the most stops where nothing fixed) "
        "from the content-free calibration",
        "states": len(scored),
        "content_free": dict(zip(SKILL_NAMES, start.tolist())),
        "content_free_choices": choice_report(chosen(start), fixers),
        "fitted_choices": choice_report(chosen(fitted), fixers),  # in sample
        "fitted_cv_choices": None if held_out is None else choice_report(held_out, fixers),  # each state unseen by its fit
    }
    offsets = dict(zip(SKILL_NAMES, fitted.tolist()))
    save_offsets(paths.router, offsets, runtime.model_identity(params), {k: record[k] for k in ("rule", "states", "content_free")})
    return offsets, {"offsets": offsets, **record}


def _gated(
    method: str,
    params: Params,
    components: Components,
    learned: Any,
    offsets: dict[str, float],
    layers: Sequence[int],
    untrained: str | None,
) -> Any:
    """The method's `FirstRetry` over `components` with its router as configured (the learned router
    just fitted, or the prompt router with the fitted offsets), or why it cannot run."""
    from dataclasses import replace

    from skillrag.methods import build_method
    from skillrag.methods.exploration import NEVER_ACCEPTS, FirstRetry

    router = learned if method == "skill_rag" and params.methods.router == "learned" else None
    if method == "skill_rag" and params.methods.router == "learned" and learned is None:
        return f"methods.router is learned and no router was trained: {untrained}"
    # The learned router reads the failure state's hidden vector; nothing else needs it kept.
    kept = tuple(layers) if router is not None else ()
    gated = build_method(method, replace(components, prober=NEVER_ACCEPTS, router=router, router_offsets=offsets, state_layers=kept))
    return FirstRetry(gated)


def _retry_settings(params: Params, paths: Paths, method: str, files: Sequence[Path], layers: Sequence[int]) -> dict[str, Any]:
    """What a method's first retries depend on: its own settings without the prober (none is
    trained yet, none is consulted)."""
    settings = run_settings(params, paths, method, files, {"lm.layers": layers})
    settings["params"].pop("probe.threshold", None)
    settings["inputs"].pop("prober", None)
    settings["method"] = f"{method}:first_retry"
    return settings


def _as_run(retries: Sequence[Trace], states: Sequence[ExploredState], configured: str) -> dict[str, Any]:
    """The configured router's choices in skill_rag's own first retries on the explored failure
    states, against the skills that fixed them."""
    from skillrag.skills.calibration import choice_report

    fixed = {s.question_id: s.fixers for s in states}
    chosen = {t.question_id: t.rounds[1].stage for t in retries if t.question_id in fixed and len(t.rounds) > 1}
    ids = [qid for qid in fixed if qid in chosen]
    return {"router": configured, **choice_report([chosen[q] for q in ids], [fixed[q] for q in ids])}
