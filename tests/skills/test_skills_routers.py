"""The prompt router (one call: calibrated label likelihoods, then the skill output; fixed-order
fallback) and the learned router (gold labels, exit included, a minimum per skill)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from skillrag.errors import ArtifactError
from skillrag.methods import Round, Trace
from skillrag.methods.exploration import build_router_dataset
from skillrag.skills import (
    SKILL_NAMES,
    FailureState,
    PromptRouter,
    fallback_skill,
    load_learned_router,
)
from skillrag.skills.learned_router import cross_validate_router, fit_router, too_few_examples
from skillrag.skills.router import OPTIONS
from tests.fakes import FakeLM

LAYERS = (2, 4)
SIZE = 6
# What skillrag.lm.loading.model_identity says of the model whose states the router learned from.
IDENTITY = {"name": "tiny-llama", "dtype": "float32", "digest": "d1" * 32, "licence": None}
SKILLS = ("evidence_focusing", "query_rewriting", "question_decomposition")


def state(round_index: int = 1, hidden=None) -> FailureState:
    return FailureState(
        "Who directed Cast Away?", "Tom Hanks starred in it.", "Tom Hanks", (), hidden, round_index
    )


def test_prompt_router_calibrates_once_then_routes_and_writes_in_one_call_per_decision():
    prior = [-1.0, -9.0, -2.0, -0.5]  # "decompose" is unlikely a priori, "stop" likely
    lm = FakeLM(
        likelihoods=[prior],
        choices=[
            ([-2.0, -8.0, -3.0, -1.5], " Cast Away director\n- Zemeckis"),
            ([-0.5, -10.0, -3.0, -1.0], " Q"),
        ],
    )
    router = PromptRouter(lm)
    first = router.choose(state())
    assert first.scores == {
        "query_rewriting": -1.0,
        "question_decomposition": 1.0,
        "evidence_focusing": -1.0,
        "exit": -1.0,
    }
    assert (first.skill, first.fallback, first.output) == (
        "question_decomposition",
        None,
        " Cast Away director\n- Zemeckis",
    )
    assert router.choose(state()).skill == "query_rewriting"
    assert lm.kinds() == ["calibrate", "route", "route"]  # one calibration, then one call per decision
    assert "N/A" in lm.calls[0][1]
    assert lm.calls[1][1].endswith("Next step:") and "Tom Hanks starred in it." in lm.calls[1][1]


@pytest.mark.parametrize("seed", range(20))
def test_one_call_routing_picks_what_the_label_likelihood_router_would(seed):
    """The reference: score the labels with `loglikelihood` on the same prompt, calibrate, argmax."""
    rng = np.random.default_rng(seed)
    prior, raw = rng.normal(size=4).tolist(), rng.normal(size=4).tolist()
    lm = FakeLM(likelihoods=[prior, raw], choices=[(raw, " Robert Zemeckis")])
    routing = PromptRouter(lm).choose(state())
    prompt = lm.calls[1][1]
    assert lm.loglikelihood(prompt, [o.label for o in OPTIONS.values()]) == raw
    calibrated = [r - p for r, p in zip(raw, prior)]
    assert routing.skill == list(OPTIONS)[int(np.argmax(calibrated))]
    assert routing.output == (None if routing.skill == "exit" else " Robert Zemeckis")


def test_exit_generates_nothing():
    lm = FakeLM(likelihoods=[[0.0] * 4], choices=[([-5.0, -5.0, -5.0, 0.0], "never read")])
    routing = PromptRouter(lm).choose(state())
    assert (routing.skill, routing.output) == ("exit", None)


@pytest.mark.parametrize("scores", [[float("nan"), 0.0, 0.0, 0.0], [-1.0, -1.0, -3.0, -4.0]])
def test_prompt_router_falls_back_to_the_fixed_order_when_scores_cannot_decide(scores):
    lm = FakeLM(likelihoods=[[0.0] * 4], choices=[(scores, " Cast Away\n- Zemeckis")])
    routing = PromptRouter(lm).choose(state(round_index=2))
    assert routing.skill == "question_decomposition" == fallback_skill(2)
    assert routing.fallback == "router: scores cannot decide -> fixed order (question_decomposition)"
    assert routing.output == " Cast Away\n- Zemeckis"  # generated after the fallback's label


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

    router.save(tmp_path / "router", IDENTITY)
    assert sorted(p.name for p in (tmp_path / "router").iterdir()) == ["router.json", "router.safetensors"]
    record = json.loads((tmp_path / "router" / "router.json").read_text())
    assert record["classes"] == list(SKILLS) and record["identity"] == IDENTITY
    loaded = load_learned_router(tmp_path / "router", IDENTITY)
    assert np.allclose(loaded.probabilities(test_x), router.probabilities(test_x))


@pytest.mark.parametrize(
    ("running", "named"),
    [
        ({"name": "smollm2-135m"}, r"built from tiny-llama \(float32, .*current model is smollm2-135m \(float32"),
        ({"dtype": "bfloat16"}, r"built from tiny-llama \(float32, .*current model is tiny-llama \(bfloat16"),
        ({"digest": "e2" * 32}, r"weights digest d1d1d1d1d1d1\).*current model is tiny-llama \(float32, weights digest e2e2e2e2e2e2\)"),
    ],
)
def test_a_router_learned_from_another_model_dtype_or_weights_is_refused_naming_both(tmp_path, running, named):
    x, labels = separable(30)
    fit_router(x, labels, LAYERS).save(tmp_path / "router", IDENTITY)
    with pytest.raises(ArtifactError, match=named + ".*skillrag train-router"):
        load_learned_router(tmp_path / "router", {**IDENTITY, **running})


def test_a_router_that_records_no_identity_is_refused(tmp_path):
    x, labels = separable(30)
    fit_router(x, labels, LAYERS).save(tmp_path / "router", IDENTITY)
    record_file = tmp_path / "router" / "router.json"
    record = json.loads(record_file.read_text())
    del record["identity"]  # a router saved before identities were recorded
    record_file.write_text(json.dumps(record))
    with pytest.raises(ArtifactError, match="records no model identity.*skillrag train-router"):
        load_learned_router(tmp_path / "router", IDENTITY)


def test_a_damaged_router_file_is_refused_naming_it_and_the_fix(tmp_path):
    x, labels = separable(30)
    fit_router(x, labels, LAYERS).save(tmp_path / "router", IDENTITY)
    weights = tmp_path / "router" / "router.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = b"\x00" * 8  # same size, other bytes
    weights.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"router\.safetensors is corrupted .*skillrag train-router"):
        load_learned_router(tmp_path / "router", IDENTITY)


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


def right(answer: str, golds) -> bool:
    return answer in golds


def exploration_trace(i: int, vector, after: list[tuple[str, str, list[str]]], first: str = "wrong") -> Trace:
    rounds = [Round(0, "retrieval", first, queries=["q"], state=vector.tolist())]
    rounds += [
        Round(j, stage, answer, queries=queries) for j, (stage, answer, queries) in enumerate(after, 1)
    ]
    return Trace(f"q{i}", "nq", "?", ["1952"], "skill_exploration", rounds, termination="done")


def test_router_labels_come_from_gold_with_exit_when_no_skill_helped():
    vector = np.ones(SIZE, np.float32)
    rewrite, decompose, focus = ("query_rewriting", "question_decomposition", "evidence_focusing")
    cases = [
        ([(rewrite, "1952", ["q1"])], rewrite),
        ([(rewrite, "no", ["q1"]), (decompose, "1952", ["a", "b"])], decompose),
        ([(rewrite, "no", ["q1"]), (decompose, "no", ["a"]), (focus, "no", ["f"])], "exit"),
        # a decision round issued no query and gave no new answer: it is never the skill that worked
        ([(rewrite, "1952", []), (decompose, "no", ["a"])], "exit"),
    ]
    traces = [exploration_trace(i, vector * i, rounds) for i, (rounds, _) in enumerate(cases)]
    traces.append(exploration_trace(9, vector, [], first="1952"))  # single step was right: no failure
    errored = exploration_trace(10, vector, [(rewrite, "1952", ["q"])])
    errored.termination = "error"
    x, labels = build_router_dataset([*traces, errored], right)
    assert labels == [expected for _, expected in cases]
    assert np.array_equal(x[2], vector * 2)
    empty_x, empty = build_router_dataset(traces[-1:], right)
    assert empty == [] and empty_x.shape[0] == 0


def test_too_few_examples_of_any_skill_or_exit_refuses_training():
    enough = [s for s in SKILL_NAMES for _ in range(5)]
    assert too_few_examples(enough, 5) is None
    reason = too_few_examples(enough[:-1], 5)
    assert "min_examples_per_skill=5" in reason and "exit 4" in reason and "query_rewriting 5" in reason


def test_untrained_router_note_explains_why_loading_fails(tmp_path):
    from skillrag.skills.learned_router import load_learned_router, record_untrained

    record_untrained(tmp_path / "router", "too few failure states per skill to learn from")
    with pytest.raises(ArtifactError, match="too few failure states.*skillrag train-router"):
        load_learned_router(tmp_path / "router", IDENTITY)


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
