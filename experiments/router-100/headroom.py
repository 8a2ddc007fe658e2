"""How much any router could gain on the explored failure states, refitted offline from the traces.

Issue 28 item 3. Exploration tries every query skill from each failure state, so the states bound
every router: an oracle fixes each state some skill fixed; a constant choice fixes what one skill
fixes. Beside them: the prompt router (content-free and fitted offsets, in sample and
cross-validated), a learned router (logistic regression on the state vector, cross-validated) and
whether "some skill fixes it" can be read from the state or from the router's exit margin at all.
Uses the stage's own functions; the content-free start is the one this experiment's train_router
fitted (reports/router_metrics.json beside this script; no LM needed).

    python experiments/router-100/headroom.py experiments/router-100/router_traces

The traces in git carry no hidden vectors (experiments/strip_vectors.py), and a trace without its
first answer's vector holds no failure state (skillrag.methods.exploration.fixers): on them the
script says where the traces with their vectors are, and stops.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skillrag.eval.runner import read_traces
from skillrag.methods.exploration import build_router_dataset, explored_states
from skillrag.metrics import accuracy
from skillrag.skills import EXIT, QUERY_SKILLS, SKILL_NAMES
from skillrag.skills.calibration import (
    choice_report,
    choose,
    cross_validated_choices,
    fit_offsets,
    right_choices,
)

VECTORS = (
    "the traces with them are in git's history: `git show f5b474c:experiments/router-100/router_traces/train.jsonl "
    "> <folder>/train.jsonl`, then run this on <folder>; or re-run the exploration as the README says"
)


def is_right(answer: str, golds: list[str]) -> bool:
    return bool(accuracy(answer, golds))


def show(name: str, chosen: list[str], fixers: list[frozenset[str]]) -> None:
    r = choice_report(chosen, fixers)
    print(
        f"{name:30s} accuracy {r['accuracy']:.2f} (always {r['majority']['label']} {r['majority']['accuracy']:.2f}), "
        f"fixed {r['fixed']} of {r['fixable']}, chosen {r['chosen']}"
    )


def main(root: Path) -> None:
    traces = read_traces(root / "train.jsonl")
    if all(t.rounds[0].state is None for t in traces if t.rounds):
        print(f"{len(traces)} questions, no hidden vectors in {root / 'train.jsonl'}, so no failure state: {VECTORS}")
        return
    states = [s for s in explored_states(traces, is_right) if s.raw is not None]
    fixers = [s.fixers for s in states]
    print(f"{len(traces)} questions, {len(states)} failure states {dict(Counter(s.dataset for s in states))}")
    print("fixed by:", dict(Counter("+".join(sorted(f)) or "no skill" for f in fixers)))
    fixable = np.array([bool(f) for f in fixers])
    alone = {s: sum(s in f for f in fixers) for s in QUERY_SKILLS}
    only = {s: sum(f == {s} for f in fixers) for s in QUERY_SKILLS}
    print(
        f"oracle fixes {fixable.sum()} of {len(states)}; each skill always: {alone}; only that skill: {only}"
    )

    metrics = Path(__file__).parent / "reports" / "router_metrics.json"
    content_free = json.loads(metrics.read_text(encoding="utf-8"))["prompt_router"]["content_free"]
    start = np.array([content_free[s] for s in SKILL_NAMES])
    raw = np.array([s.raw for s in states], dtype=float)
    right = right_choices(fixers)
    show("prompt, content-free", [SKILL_NAMES[i] for i in choose(raw, start)], fixers)
    show(
        "prompt, fitted (in sample)",
        [SKILL_NAMES[i] for i in choose(raw, fit_offsets(raw, right, start))],
        fixers,
    )
    held_out = cross_validated_choices(raw, right, start)
    if held_out is not None:
        show("prompt, fitted (cv)", held_out, fixers)

    x, labels = build_router_dataset(traces, is_right)
    assert len(labels) == len(states), "every failure state needs the router's raw scores"
    for weight in (
        None,
        "balanced",
    ):  # 3 folds: a label with fewer states is seen in some folds only (sklearn warns)
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000, class_weight=weight))
        chosen = list(
            cross_val_predict(model, x, np.array(labels), cv=StratifiedKFold(3, shuffle=True, random_state=0))
        )
        show(f"learned, {weight or 'unweighted'} (cv)", chosen, fixers)

    k = int(min(5, fixable.sum(), (~fixable).sum()))
    if k >= 2:
        p = cross_val_predict(
            make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000)),
            x,
            fixable,
            cv=StratifiedKFold(k, shuffle=True, random_state=0),
            method="predict_proba",
        )[:, 1]
        exit_at = SKILL_NAMES.index(EXIT)
        margin = raw[:, exit_at] - np.delete(raw, exit_at, axis=1).max(axis=1)
        print(
            f"fixable vs not: AUROC {roc_auc_score(fixable, p):.2f} from the state ({k}-fold cv), "
            f"{roc_auc_score(fixable, -margin):.2f} from the prompt router's exit margin"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("experiments/router-100/router_traces"))
