"""Stage `train_adaptive` on a tiny dataset where every silver label occurs, then adaptive_rag in
`evaluate`: the real stage, runner, batching and reuse over a rule-based fake LM."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from skillrag.config import load_params
from skillrag.errors import ArtifactError
from skillrag.eval.runner import read_traces, settings_file
from skillrag.lm.base import Generation
from skillrag.methods.complexity import STRATEGIES, load_classifier
from skillrag.paths import Paths
from skillrag.pipeline import runtime, stages
from tests.conftest import write_rows
from tests.fake_cli import make_workspace
from tests.fakes import CORPUS, OverlapRetriever, fake_pooled


def expected_label(n: int, dataset: str) -> str:
    """Plan n % 4: closed-book right (A); right once retrieved (B); right only after IRCoT's
    second step (C); never right (the dataset's default)."""
    plan = n % 4
    if plan == 3:
        return "ircot" if dataset == "hotpotqa" else "single_step"
    return STRATEGIES[plan]


class AdaptiveLM:
    """Replies by rule from the prompt alone (any batching gives the same replies); the question's
    state (a one-token call) is a fixed vector per expected label, so the classifier can learn it."""

    name, num_layers, hidden_size = "adaptive-fake", 4, 8

    def __init__(self) -> None:
        self.prompts: list[tuple[int, str]] = []

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None):
        out = []
        for prompt in prompts:
            self.prompts.append((max_new_tokens, prompt))
            case = prompt.rsplit("\n\n", 1)[-1]
            n, dataset = re.search(r"landmark (\d+) of the (\w+)", case).groups()
            plan, right = int(n) % 4, " Found it.\nAnswer: Paris"
            if max_new_tokens == 1:
                text, key = " The", expected_label(int(n), dataset)
            elif "Passages:" not in case:
                text, key = (right if plan == 0 else " Guessing.\nAnswer: Rome"), None
            elif case.endswith("Rationale:"):
                text, key = (right if plan < 2 else " Landmark facts. Then more.\nAnswer: Rome"), None
            else:  # IRCoT's second step, after " Landmark facts."
                text, key = (" So it is Paris.\nAnswer: Paris" if plan == 2 else " Still unknown.\nAnswer: Rome"), None
            pooled = fake_pooled(key or text, capture, self.hidden_size)
            k = len(text.split())
            out.append(Generation(text, list(range(k)), [-0.1] * k, [0.3] * k, len(prompt.split()), None, "stop", pooled=pooled))
        return out


def _questions(workspace, split: str, count: int) -> None:
    for dataset in ("nq", "hotpotqa"):
        rows = [
            {"id": f"{dataset}-{split}-{i}", "dataset": dataset, "question": f"Where is the Apollo landmark {i} of the {dataset} {split} set?", "answers": ["Paris"], "split": split}
            for i in range(count)
        ]
        write_rows(workspace / "data" / "questions" / split / f"{dataset}.jsonl", rows)


@pytest.fixture
def trained(tmp_path, monkeypatch):
    workspace = make_workspace(tmp_path / "ws")
    for split, count in (("train", 8), ("dev", 4), ("eval", 4)):
        _questions(workspace, split, count)
    lm = AdaptiveLM()
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: lm)
    overrides = ["train_adaptive.train_questions=16", "train_adaptive.dev_questions=8", "lm.concurrency=4", "lm.batch_size=3"]
    params, paths = load_params(workspace / "params.yaml", overrides=overrides), Paths(workspace)
    stages.extract.extract(params, paths)  # the closed-book and single-step answers the labels start from
    lm.prompts.clear()
    return params, paths, lm, stages.train_adaptive.train_adaptive(params, paths)


def test_train_adaptive_labels_every_strategy_and_beats_the_majority_label_on_dev(trained):
    params, paths, lm, report = trained
    # every label what running all three strategies gives (expected_label); IRCoT ran only on the
    # single-hop (nq) questions neither simpler strategy answered: plans 2 and 3
    assert report["train"] == {
        "questions": 16, "labels": {"no_retrieval": 4, "single_step": 6, "ircot": 6}, "defaulted": 6, "ircot_runs": 4,
        "ircot_failed": 0,
    }
    assert report["constant"] is None
    dev = report["dev"]
    assert dev["labels"] == {"no_retrieval": 2, "single_step": 3, "ircot": 3} and (dev["defaulted"], dev["ircot_runs"]) == (3, 2)
    assert dev["accuracy"] == 1.0 and dev["majority_accuracy"] == 3 / 8
    assert dev["confusion"]["ircot"] == {"no_retrieval": 0, "single_step": 0, "ircot": 3}
    # routed: IRCoT also ran where the classifier chose it (hotpotqa plans 2 and 3)
    assert dev["acc"] == {"adaptive": 0.75, "no_retrieval": 0.25, "single_step": 0.5}
    assert json.loads(paths.adaptive_metrics.read_text()) == report
    classifier = load_classifier(paths.adaptive, runtime.model_identity(params))  # the stage recorded the model
    assert set(classifier.linear.classes) == set(STRATEGIES) and list(classifier.linear.layers) == report["layers"]
    train = read_traces(paths.adaptive_traces("train", "ircot"))
    assert sorted(t.question_id for t in train) == [f"nq-train-{i}" for i in (2, 3, 6, 7)]
    assert json.loads(settings_file(paths.adaptive_traces("train", "ircot")).read_text())["method"] == "ircot"
    dev_runs = sorted(t.question_id for t in read_traces(paths.adaptive_traces("dev", "ircot")))
    assert dev_runs == ["hotpotqa-dev-2", "hotpotqa-dev-3", "nq-dev-2", "nq-dev-3"]
    assert not paths.adaptive_traces("train", "no_retrieval").exists()
    # the closed-book and single-step answers are extract's: train_adaptive writes none again
    answers = [p.rsplit("\n\n", 1)[-1] for budget, p in lm.prompts if budget > 1]
    assert not [a for a in answers if "Passages:" not in a]
    assert len([a for a in answers if "Passages:" in a and a.endswith("Rationale:")]) == len(train) + len(dev_runs)


class ClosedBookLM(AdaptiveLM):
    """Answers every closed-book question right: every silver label is no_retrieval."""

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None):
        out = super().generate(prompts, max_new_tokens, stop, capture, prefix)
        return [
            Generation(" Found it.\nAnswer: Paris", g.token_ids, g.logprobs, g.entropies, g.prompt_tokens, None, "stop", pooled=g.pooled)
            if budget > 1 and "Passages:" not in prompt.rsplit("\n\n", 1)[-1] else g
            for g, (budget, prompt) in zip(out, [(max_new_tokens, p) for p in prompts])
        ]


class FailingIRCoTLM(AdaptiveLM):
    """Fails IRCoT's second step (a prompt that continues the kept reasoning)."""

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None):
        if any("Passages:" in p.rsplit("\n\n", 1)[-1] and not p.endswith("Rationale:") for p in prompts):
            raise RuntimeError("scripted IRCoT failure")
        return super().generate(prompts, max_new_tokens, stop, capture, prefix)


def _train(tmp_path, monkeypatch, lm):
    workspace = make_workspace(tmp_path / "ws")
    for split, count in (("train", 8), ("dev", 4)):
        _questions(workspace, split, count)
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: lm)
    overrides = ["train_adaptive.train_questions=16", "train_adaptive.dev_questions=8", "lm.concurrency=1", "lm.batch_size=1"]
    params, paths = load_params(workspace / "params.yaml", overrides=overrides), Paths(workspace)
    stages.extract.extract(params, paths)
    return stages.train_adaptive.train_adaptive(params, paths)


def test_one_silver_label_gives_a_constant_classifier_with_a_warning(tmp_path, monkeypatch, caplog):
    report = _train(tmp_path, monkeypatch, ClosedBookLM())
    assert report["train"]["labels"] == {"no_retrieval": 16, "single_step": 0, "ircot": 0}
    assert report["constant"] == "no_retrieval" and report["dev"]["accuracy"] == 1.0
    assert "always routes there" in caplog.text


def test_questions_whose_labelling_ircot_failed_are_left_out_and_counted(tmp_path, monkeypatch):
    report = _train(tmp_path, monkeypatch, FailingIRCoTLM())
    assert report["train"]["ircot_failed"] == 4 and report["train"]["questions"] == 12  # nq plans 2 and 3 of 8


def test_evaluate_opens_the_classifier_only_for_adaptive_rag_and_names_the_stage_when_missing(trained):
    _, paths, _, _ = trained
    evaluated = load_params(paths.root / "params.yaml", overrides=["evaluate.methods=[adaptive_rag, single_step]", "evaluate.datasets=[hotpotqa]"])
    stages.evaluate.evaluate(evaluated, paths)
    metrics = stages.summarize.summarize(evaluated, paths)
    traces = read_traces(paths.run_file("adaptive_rag", "hotpotqa"))
    routes = [t.rounds[1].stage for t in traces]
    assert routes == ["no_retrieval", "retrieval", "retrieval", "retrieval"]  # A, B, C (IRCoT's first round), default C
    assert [len(t.rounds) for t in traces] == [2, 2, 3, 3]
    assert metrics["adaptive_rag"]["hotpotqa"]["acc"] == 0.75
    settings = json.loads(settings_file(paths.run_file("adaptive_rag", "hotpotqa")).read_text())
    assert {"adaptive", "index"} <= set(settings["inputs"]) and "prober" not in settings["inputs"]
    assert settings["params"]["methods.ircot"] == evaluated.methods.ircot.model_dump()  # a retrained classifier or new IRCoT knobs refuse to resume

    shutil.rmtree(paths.adaptive)
    shutil.rmtree(paths.runs)
    with pytest.raises(ArtifactError, match=r"run `skillrag train-adaptive` \(or `dvc repro train_adaptive`\)"):
        stages.evaluate.evaluate(evaluated, paths)
    single = load_params(paths.root / "params.yaml", overrides=["evaluate.methods=[single_step]", "evaluate.datasets=[hotpotqa]"])
    stages.evaluate.evaluate(single, paths)
    assert stages.summarize.summarize(single, paths)["single_step"]["hotpotqa"]["n"] == 4
