"""Adaptive-RAG on a scripted LM: the classifier reads the question's state from one generate
call and routes to each strategy, whose rounds and costs the trace holds; the classifier's
artifact is refused when missing, altered or from another model."""

from __future__ import annotations

import json
from itertools import product

import numpy as np
import pytest

from skillrag.errors import ArtifactError
from skillrag.lm.base import state_vector
from skillrag.methods import Components, build_method
from skillrag.methods.complexity import (
    STRATEGIES,
    fit_classifier,
    load_classifier,
    needs_multi_step,
    silver_label,
)
from tests.fakes import CORPUS, FakeLM, OverlapRetriever, answer, hidden_state
from tests.methods.test_methods_pipelines import QUESTION, stages

LAYERS = (3, 4)
IDENTITY = {"name": FakeLM.name, "dtype": "float32", "digest": None, "licence": None}  # as model_identity gives it
FEATURE = {"no_retrieval": " So", "single_step": " The", "ircot": " First"}  # the scripted first token per route


def classifier():
    """Separates the states the fake LM gives for each scripted first token."""
    x = np.stack([state_vector({l: hidden_state(FEATURE[s], l, FakeLM.hidden_size) for l in LAYERS}, LAYERS) for s in STRATEGIES])
    return fit_classifier(np.repeat(x, 2, axis=0), [s for s in STRATEGIES for _ in range(2)], LAYERS, IDENTITY, c=100.0)


def run_adaptive(replies):
    lm, retriever = FakeLM(replies), OverlapRetriever(CORPUS)
    components = Components(lm, retriever, k=2, max_new_tokens=16, classifier=classifier())
    trace = build_method("adaptive_rag", components).answer(QUESTION)
    assert lm.exhausted, "the script was not fully used"
    return trace, lm, retriever


@pytest.mark.parametrize(
    ("route", "replies", "expected_stages", "retrievals"),
    [
        ("no_retrieval", [answer("1952")], ["complexity", "no_retrieval"], 0),
        ("single_step", [answer("1952")], ["complexity", "retrieval"], 1),
        ("ircot", [" Cast Away was directed by Robert Zemeckis. More.", answer("1952", "")], ["complexity", "retrieval", "ircot"], 2),
    ],
)
def test_the_classifier_routes_each_question_to_its_strategy(route, replies, expected_stages, retrievals):
    trace, lm, _ = run_adaptive([FEATURE[route], *replies])
    assert trace.method == "adaptive_rag" and stages(trace) == expected_stages
    choice = trace.rounds[0]
    assert set(choice.router_scores) == set(STRATEGIES) and max(choice.router_scores, key=choice.router_scores.get) == route
    assert choice.cost.llm_calls == 1 and choice.cost.retrievals == 0  # the classifier's one prefill
    assert lm.calls[0][1].endswith(f"Question: {QUESTION.question}\nRationale:") and "Passages:" not in lm.calls[0][1]
    assert trace.answer == "1952" and trace.termination == "done"
    assert (trace.totals.llm_calls, trace.totals.retrievals) == (1 + len(replies), retrievals)


def test_silver_labels_take_the_simplest_strategy_that_answered_else_the_datasets_default():
    assert silver_label({"no_retrieval": False, "single_step": True, "ircot": True}, "hotpotqa") == "single_step"
    assert silver_label({"no_retrieval": True, "single_step": False, "ircot": True}, "nq") == "no_retrieval"
    none = dict.fromkeys(STRATEGIES, False)
    assert (silver_label(none, "nq"), silver_label(none, "triviaqa")) == ("single_step", "single_step")
    assert {silver_label(none, d) for d in ("hotpotqa", "musique", "2wiki")} == {"ircot"}


@pytest.mark.parametrize("dataset", ["nq", "triviaqa", "hotpotqa", "musique", "2wiki"])
@pytest.mark.parametrize("outcome", list(product([False, True], repeat=3)))
def test_running_ircot_only_where_the_label_needs_it_gives_every_label_full_labelling_gives(outcome, dataset):
    full = dict(zip(STRATEGIES, outcome))
    simpler = {s: full[s] for s in STRATEGIES[:-1]}
    partial = full if needs_multi_step(simpler, dataset) else simpler
    assert silver_label(partial, dataset) == silver_label(full, dataset)
    # and IRCoT is needed exactly for a single-hop question neither simpler strategy answered
    assert needs_multi_step(simpler, dataset) == (not any(simpler.values()) and dataset in ("nq", "triviaqa"))


def test_the_classifier_artifact_is_refused_when_missing_altered_or_from_another_model(tmp_path):
    with pytest.raises(ArtifactError, match="skillrag train-adaptive"):
        load_classifier(tmp_path / "adaptive", IDENTITY)
    with pytest.raises(ValueError, match="skillrag train-adaptive"):
        build_method("adaptive_rag", Components(FakeLM(), OverlapRetriever(CORPUS)))
    classifier().save(tmp_path / "adaptive")
    loaded = load_classifier(tmp_path / "adaptive", IDENTITY)
    assert loaded.linear.classes == tuple(sorted(STRATEGIES)) and loaded.linear.layers == LAYERS
    record = json.loads((tmp_path / "adaptive" / "classifier.json").read_text())
    assert len(record["sha256"]) == 64
    for other in ({"name": "other-lm"}, {"dtype": "bfloat16"}, {"digest": "e2" * 32}):
        with pytest.raises(ArtifactError, match=r"built from fake-lm \(float32, .*current model is .*skillrag train-adaptive"):
            load_classifier(tmp_path / "adaptive", {**IDENTITY, **other})
    (tmp_path / "adaptive" / "linear" / "router.safetensors").write_bytes(b"tampered")
    with pytest.raises(ArtifactError, match="altered"):
        load_classifier(tmp_path / "adaptive", IDENTITY)
