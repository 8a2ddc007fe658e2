"""The prompt router (calibrated label likelihoods, fixed-order fallback) and the learned router."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from skillrag.methods import Round, Trace
from skillrag.skills import (
    ExplorationRouter,
    FailureState,
    PromptRouter,
    build_router_dataset,
    fallback_skill,
    load_learned_router,
    train_learned_router,
)
from skillrag.skills.learned_router import cross_validate_router, fit_router
from tests.fakes import FakeLM

LAYERS = (2, 4)
SIZE = 6
SKILLS = ("evidence_focusing", "query_rewriting", "question_decomposition")


def state(round_index: int = 1, hidden=None) -> FailureState:
    return FailureState(
        "Who directed Cast Away?", "Tom Hanks starred in it.", "Tom Hanks", (), hidden, round_index
    )


def test_prompt_router_calibrates_once_and_picks_the_best_calibrated_label():
    prior = [-1.0, -9.0, -2.0, -0.5]  # "decompose" is unlikely a priori, "stop" likely
    lm = FakeLM(likelihoods=[prior, [-2.0, -8.0, -3.0, -1.5], [-0.5, -10.0, -3.0, -1.0]])
    router = PromptRouter(lm)
    first = router.choose(state())
    assert first.scores == {
        "query_rewriting": -1.0,
        "question_decomposition": 1.0,
        "evidence_focusing": -1.0,
        "exit": -1.0,
    }
    assert (first.skill, first.fallback) == ("question_decomposition", None)
    assert router.choose(state()).skill == "query_rewriting"
    assert len(lm.calls) == 3  # one calibration call, then one call per decision
    assert "N/A" in lm.calls[0][1]
    assert lm.calls[1][1].endswith("Next step:") and "Tom Hanks starred in it." in lm.calls[1][1]


@pytest.mark.parametrize("scores", [[float("nan"), 0.0, 0.0, 0.0], [-1.0, -1.0, -3.0, -4.0]])
def test_prompt_router_falls_back_to_the_fixed_order_when_scores_cannot_decide(scores):
    lm = FakeLM(likelihoods=[[0.0] * 4, scores])
    routing = PromptRouter(lm).choose(state(round_index=2))
    assert routing.skill == "question_decomposition" == fallback_skill(2)
    assert routing.fallback == "router: scores cannot decide -> fixed order (question_decomposition)"


def test_fixed_order_cycles_through_the_query_skills():
    assert [fallback_skill(i) for i in range(1, 5)] == [
        "query_rewriting",
        "question_decomposition",
        "evidence_focusing",
        "query_rewriting",
    ]


def separable(n_per_class: int, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Three well-separated clusters, one per skill."""
    rng = np.random.default_rng(seed)
    centres = np.eye(3, SIZE) * 4.0
    x = np.concatenate([rng.normal(centres[i], 0.5, (n_per_class, SIZE)) for i in range(3)]).astype(
        np.float32
    )
    return x, [s for s in SKILLS for _ in range(n_per_class)]


def hidden_for(vector: np.ndarray) -> dict[int, torch.Tensor]:
    return {layer: torch.from_numpy(vector) for layer in LAYERS}


def test_learned_router_separates_synthetic_failure_states_and_survives_save_load(tmp_path):
    x, labels = separable(30)
    router = fit_router(x, labels, LAYERS)
    test_x, test_labels = separable(10, seed=1)
    predicted = [router.choose(state(hidden=hidden_for(v))).skill for v in test_x]
    assert np.mean([p == t for p, t in zip(predicted, test_labels)]) > 0.95

    router.save(tmp_path / "router")
    assert sorted(p.name for p in (tmp_path / "router").iterdir()) == ["router.json", "router.safetensors"]
    assert json.loads((tmp_path / "router" / "router.json").read_text())["classes"] == list(SKILLS)
    loaded = load_learned_router(tmp_path / "router", expected_hidden_size=SIZE)
    assert np.allclose(loaded.probabilities(test_x), router.probabilities(test_x))
    with pytest.raises(ValueError, match="reads hidden size 6, the current model has 576"):
        load_learned_router(tmp_path / "router", expected_hidden_size=576)


def test_two_classes_match_sklearn_and_one_class_is_constant():
    from sklearn.linear_model import LogisticRegression

    x, labels = separable(20)
    x, labels = x[:40], labels[:40]  # evidence_focusing vs query_rewriting
    router = fit_router(x, labels, LAYERS)
    mean, std = x.mean(0), np.where(x.std(0) > 1e-6, x.std(0), 1.0)
    reference = (
        LogisticRegression(max_iter=1000).fit((x - mean) / std, labels).predict_proba((x - mean) / std)
    )
    assert np.allclose(router.probabilities(x), reference, atol=1e-4)
    constant = fit_router(x[:5], labels[:5], LAYERS)
    assert constant.choose(state(hidden=hidden_for(x[30]))).skill == "evidence_focusing"


def test_learned_router_falls_back_when_the_state_lacks_its_layers():
    router = fit_router(*separable(5), LAYERS)
    routing = router.choose(state(round_index=3, hidden={2: torch.zeros(SIZE)}))
    assert routing.skill == "evidence_focusing" and routing.fallback.startswith(
        "router: failure state lacks layers"
    )


def test_train_learned_router_labels_states_by_the_skill_that_worked(tmp_path):
    x, labels = separable(8)
    traces = []
    for i, (vector, skill) in enumerate(zip(x, labels)):
        # even: the skill's round answered correctly; i % 4 == 1: it answered wrongly;
        # i % 4 == 3: a right answer, but from a decision round that issued no query
        answer, queries = ("wrong", ["q"]) if i % 4 == 1 else ("1952", [] if i % 4 == 3 else ["q"])
        rounds = [
            Round(0, "retrieval", "wrong", state=vector.tolist(), accepted=False),
            Round(1, skill, answer, queries=queries, accepted=False),
        ]
        traces.append(Trace(f"q{i}", "nq", "?", ["1952"], "skill_rag", rounds, termination="max_rounds"))
    x_used, used = build_router_dataset(traces)
    assert used == labels[::2] and np.array_equal(x_used, x[::2])
    router = train_learned_router(traces, LAYERS, tmp_path / "router")
    assert router.classes == SKILLS and (tmp_path / "router" / "router.safetensors").is_file()
    with pytest.raises(ValueError, match="no recorded failure state"):
        train_learned_router(traces[1::2], LAYERS)


def test_exploration_router_tries_every_skill_from_a_per_question_start():
    router = ExplorationRouter()
    first = FailureState("Who directed Cast Away?", "", "", (), None, 1)
    cycle = [router.choose(FailureState(first.question, "", "", (), None, r)).skill for r in (1, 2, 3)]
    assert sorted(cycle) == sorted(SKILLS)
    starts = {router.choose(FailureState(f"question {i}", "", "", (), None, 1)).skill for i in range(12)}
    assert starts == set(SKILLS)


def test_untrained_router_note_explains_why_loading_fails(tmp_path):
    from skillrag.skills.learned_router import load_learned_router, record_untrained

    record_untrained(tmp_path / "router", "no recorded failure state was followed by a skill that worked")
    with pytest.raises(FileNotFoundError, match="no recorded failure state.*skillrag train-router"):
        load_learned_router(tmp_path / "router")


def test_cross_validation_scores_held_out_states_against_the_majority_skill():
    x, labels = separable(10)
    report = cross_validate_router(x, labels)
    assert report["cv_folds"] == 5 and report["examples"] == 30
    assert report["cv_accuracy"] > 0.9 and report["majority_accuracy"] == pytest.approx(1 / 3)

    rng = np.random.default_rng(0)
    noise = rng.normal(size=(30, SIZE)).astype(np.float32)  # states that say nothing about the skill
    assert cross_validate_router(noise, labels)["cv_accuracy"] < 0.7

    thin = cross_validate_router(x[:11], labels[:11])  # one query_rewriting example
    assert thin["cv_folds"] == 0 and thin["cv_accuracy"] is None
    assert thin["by_skill"] == {"evidence_focusing": 10, "query_rewriting": 1}
