"""Stage tune_thresholds on a tiny dev pool: each threshold sends the target share of dev
questions to retrieval, judged on one scripted closed-book CoT per question, and the methods
read the values back when their params are auto."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from skillrag.config import load_params
from skillrag.data.splits import load_split
from skillrag.files import DataError
from skillrag.lm.base import POOLINGS
from skillrag.methods import Components, build_method
from skillrag.methods.thresholds import load_thresholds, pick_threshold, reaches
from skillrag.paths import Paths
from skillrag.pipeline import runtime
from skillrag.pipeline.stages import STAGES
from skillrag.probe.state_store import shard_name
from skillrag.prompts.cot import cot_prompt
from tests.conftest import REPO, write_rows
from tests.fakes import CORPUS, OverlapRetriever, scripted

# per dev question: (lowest token probability, token entropy, attention received, prober score)
DEV = {
    "nq": [(0.9, 0.2, 0.1, 0.9), (0.1, 2.0, 0.6, 0.2), (0.6, 0.5, 0.2, 0.8), (0.3, 1.5, 0.5, 0.3), (0.8, 0.3, 0.1, 0.7)],
    "hotpotqa": [(0.2, 1.8, 0.7, 0.1), (0.7, 0.4, 0.2, 0.6), (0.95, 0.1, 0.1, 0.9), (0.4, 1.0, 0.4, 0.4), (0.5, 0.8, 0.3, 0.6)],
}
LAYERS = [2]


class DevLM:
    """Answers each dev question's closed-book prompt with its scripted CoT: one unsure real word
    (" Paris") carrying the question's lowest probability, entropy and attention; the captured
    hidden state is the prober's scripted score."""

    name, num_layers, hidden_size = "dev-lm", 4, 1

    def __init__(self) -> None:
        self.rows = {f"What is item {i} of {d}?": row for d in DEV for i, row in enumerate(DEV[d])}
        self.asked_attention = []

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None, attention=False):
        self.asked_attention.append(attention)
        out = []
        for prompt in prompts:
            assert "Passages:" not in prompt, "tuning reads closed-book generations only"
            low, entropy, received, score = self.rows[prompt.rsplit("Question: ", 1)[1].removesuffix("\nRationale:")]
            pieces = [" It", " is", " Paris", ".", "\n", "Answer", ":", " Paris"]
            probs = [0.99, 0.99, low, 0.99, 0.99, 0.99, 0.99, 0.99]
            entropies = [0.0, 0.0, entropy, 0.0, 0.0, 0.0, 0.0, 0.0]
            gen = scripted(pieces, probs, entropies, received=[0.0, 0.0, received, 0, 0, 0, 0, 0], prompt=prompt)
            states = {layer: torch.tensor([score]) for layer in capture or ()}
            gen.pooled = {pooling: states for pooling in POOLINGS} if states else None
            out.append(gen)
        return out


class ScoreProber:
    layers = LAYERS

    def score(self, hidden):
        return float(hidden[2][0])

    pooling = "generated_mean"

    def accepts(self, score, stage):
        return score > 0.5


def write_closed_book_rows(paths, lm, change=None):
    """What extract writes for the dev questions' closed-book answers (data/states rows): each the
    LM's closed-book CoT with its per-token columns; `change(id, row)` edits one before it is
    written. One single_step row too, which tuning must not read."""
    rows = []
    for question in [q for qs in load_split(paths.questions, "dev").values() for q in qs]:
        [gen] = lm.generate([cot_prompt(question.question).text], 96)
        row = {
            "id": question.id, "dataset": question.dataset, "split": "dev", "strategy": "no_retrieval", "text": gen.text,
            "budget_hit": 0, "prompt_tokens": gen.prompt_tokens, "logprobs": gen.logprobs,
            "entropies": gen.entropies, "pieces": gen.pieces,
        }
        rows.append(change(row["id"], row) if change else row)
    rows.append({**rows[0], "strategy": "single_step", "logprobs": [-9.0] * len(rows[0]["logprobs"])})
    paths.states_rows.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(paths.states_rows / f"{shard_name(0)}.parquet")


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    paths = Paths(tmp_path)
    for dataset, rows in DEV.items():
        write_rows(
            paths.question_file("dev", dataset),
            [{"id": f"{dataset}-{i}", "dataset": dataset, "question": f"What is item {i} of {dataset}?",
              "answers": ["Paris"]} for i in range(len(rows))],
        )
    lm = DevLM()
    write_closed_book_rows(paths, DevLM())
    monkeypatch.setattr(runtime, "open_lm", lambda params: lm)
    monkeypatch.setattr(runtime, "open_prober", lambda params, paths, lm, method=None: ScoreProber())
    return paths, lm


def tune(paths, *overrides):
    params = load_params(REPO / "params.yaml", overrides=["lm.batch_size=4", *overrides])
    return STAGES["tune_thresholds"](params, paths)


def test_each_threshold_sends_the_target_share_of_dev_questions_to_retrieval(workspace):
    paths, lm = workspace
    report = tune(paths, "tune_thresholds.target_retrieval_rate=0.3")
    assert lm.asked_attention == [True] * 3  # dragin's CoTs: 10 questions in batches of 4
    triggers = report["triggers"]
    assert {m: t["dev_retrieval_rate"] for m, t in triggers.items()} == {"flare": 0.3, "dragin": 0.3, "entropy_rag": 0.3}
    # the three lowest probabilities are 0.1, 0.2, 0.3, the next 0.4: theta sits between
    assert triggers["flare"]["value"] == pytest.approx(0.35)
    assert triggers["entropy_rag"]["value"] == pytest.approx((1.0 + 1.5) / 2 / 8)  # mean over 8 tokens
    assert triggers["dragin"]["value"] == pytest.approx((0.4 * 1.0 + 0.5 * 1.5) / 2)  # RIND = entropy x attention
    assert triggers["flare"]["dev_retrieval_rate_by_dataset"] == {"hotpotqa": 0.2, "nq": 0.4}
    tuned = load_thresholds(paths.thresholds)
    assert tuned == {
        "methods.flare.theta": triggers["flare"]["value"],
        "methods.dragin.threshold": triggers["dragin"]["value"],
        "methods.entropy_rag.cut": triggers["entropy_rag"]["value"],
    }
    assert json.loads(paths.thresholds_report.read_text()) == report


def test_entropy_rags_cut_counts_the_cots_without_an_answer_that_retrieve_at_any_cut(workspace):
    """Two low-entropy CoTs without an `Answer:` line retrieve anyway (no gate accepts them), so
    of a 30% target the cut sends one more: the highest-entropy answered question."""
    paths, _ = workspace
    unanswered = {"nq-0", "hotpotqa-2"}  # mean entropies 0.2 / 8 and 0.1 / 8, the lowest
    write_closed_book_rows(paths, DevLM(), lambda qid, row: {**row, "text": "It is Paris."} if qid in unanswered else row)
    entropy, flare = (tune(paths, "tune_thresholds.target_retrieval_rate=0.3")["triggers"][m] for m in ("entropy_rag", "flare"))
    assert entropy["value"] == pytest.approx((2.0 + 1.8) / 2 / 8)  # between the two highest answered ones
    assert entropy["dev_retrieval_rate"] == 0.3 and entropy["dev_no_answer_line"] == 2
    assert entropy["dev_retrieval_rate_by_dataset"] == {"hotpotqa": 0.2, "nq": 0.4}  # hotpotqa-2; nq-0 and nq-1
    assert flare["value"] == pytest.approx(0.35) and "dev_no_answer_line" not in flare  # FLARE reads no answer line


def test_the_default_target_is_the_share_the_prober_rejects_closed_book(workspace):
    paths, _ = workspace
    report = tune(paths)  # prober scores > 0.5 accept: 6 of 10 accepted
    assert report["target"] == {"source": "probing_rag", "retrieval_rate": 0.4}
    assert {t["dev_retrieval_rate"] for t in report["triggers"].values()} == {0.4}


def test_auto_params_read_the_tuned_values(workspace):
    paths, _ = workspace
    tune(paths, "tune_thresholds.target_retrieval_rate=0.3")
    components = Components(DevLM(), OverlapRetriever(CORPUS), thresholds=load_thresholds(paths.thresholds))
    assert build_method("flare", components).theta == pytest.approx(0.35)
    assert build_method("dragin", components).threshold == load_thresholds(paths.thresholds)["methods.dragin.threshold"]


def test_flare_and_entropy_rag_read_extracts_rows_and_only_dragin_generates(workspace):
    paths, lm = workspace
    surer = 0.65  # nq-1's lowest probability in extract's row (0.1 in the LM's reply)

    def change(qid, row):
        return {**row, "logprobs": [math.log(surer) if lp < math.log(0.15) else lp for lp in row["logprobs"]]} if qid == "nq-1" else row

    write_closed_book_rows(paths, DevLM(), change)
    report = tune(paths, "tune_thresholds.target_retrieval_rate=0.3")
    # the three lowest probabilities are now 0.2, 0.3, 0.4, the next 0.5
    assert report["triggers"]["flare"]["value"] == pytest.approx(0.45)
    assert report["triggers"]["dragin"]["value"] == pytest.approx((0.4 * 1.0 + 0.5 * 1.5) / 2)  # as generated
    assert lm.asked_attention == [True] * 3


def test_dev_questions_without_a_closed_book_row_name_extract(workspace):
    paths, _ = workspace
    write_rows(paths.question_file("dev", "trivia"), [{"id": "trivia-0", "dataset": "trivia", "question": "Q?", "answers": ["A"]}])
    with pytest.raises(DataError, match=r"trivia-0\) have no closed-book answer .*`skillrag extract`"):
        tune(paths, "tune_thresholds.target_retrieval_rate=0.3")


def test_a_target_no_threshold_reaches_fails_naming_the_param(workspace):
    paths, _ = workspace
    with pytest.raises(ValueError, match="tune_thresholds.target_retrieval_rate"):
        tune(paths, "tune_thresholds.target_retrieval_rate=0")
    assert not paths.thresholds.exists()


def test_a_target_the_tied_scores_cannot_give_is_refused(workspace):
    paths, _ = workspace
    write_closed_book_rows(paths, DevLM(), lambda qid, row: {**row, "entropies": [0.1] * 8})  # every mean entropy ties
    with pytest.raises(ValueError, match=r"no threshold sends 30\.0% of the 10 dev questions .*\(nearest: entropy_rag 0\.0%\)") as info:
        tune(paths, "tune_thresholds.target_retrieval_rate=0.3")
    assert "\n" not in str(info.value) and not paths.thresholds.exists()
    assert tune(paths, "tune_thresholds.target_retrieval_rate=1.0")["triggers"]["entropy_rag"]["dev_retrieval_rate"] == 1.0


@pytest.mark.parametrize(("rate", "target", "questions", "expected"), [
    (0.3, 0.3, 10, True), (0.3, 0.35, 10, True), (0.3, 0.36, 10, False), (0.0, 0.3, 10, False), (1.0, 0.96, 10, True),
])
def test_a_rate_reaches_a_target_within_half_a_question(rate, target, questions, expected):
    assert reaches(rate, target, questions) is expected


@pytest.mark.parametrize(("above", "target", "expected"), [(True, 0.5, (2.5, 0.5)), (False, 0.25, (1.5, 0.25))])
def test_pick_threshold_takes_the_midpoint_whose_rate_is_closest(above, target, expected):
    assert pick_threshold([1.0, 2.0, 3.0, 4.0], above, target) == expected
    # equal scores: all or none retrieve, both reachable
    assert pick_threshold([1.0, 1.0], above, 0.6)[1] == 1.0 and pick_threshold([1.0, 1.0], above, 0.4)[1] == 0.0


def test_questions_per_dataset_takes_the_first_of_each_dataset(workspace):
    paths, _ = workspace
    report = tune(paths, "tune_thresholds.target_retrieval_rate=0.5", "tune_thresholds.questions_per_dataset=2")
    assert report["questions"] == {"hotpotqa": 2, "nq": 2}
    # lowest probabilities 0.9, 0.1 (nq) and 0.2, 0.7 (hotpotqa): theta halfway between 0.2 and 0.7
    assert report["triggers"]["flare"]["value"] == pytest.approx(0.45)


class UnsureLM:
    """Closed-book, it guesses Lyon unsure (low probability, high entropy, much attended); over
    passages it answers Paris sure of itself. Attention summaries when asked, the prompt's words
    weighted alike."""

    name, num_layers, hidden_size = "unsure-lm", 4, 1

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None, attention=False):
        out = []
        for prompt in prompts:
            if "Passages:" in prompt:
                pieces, probs, entropies = [" Paris", ".", "\n", "Answer", ":", " Paris"], [0.99] * 6, [0.01] * 6
            else:
                pieces = [" Zemeckis", " lived", " in", " Lyon", ".", "\n", "Answer", ":", " Lyon"]
                probs = [0.9, 0.9, 0.9, 0.05, 0.9, 0.9, 0.9, 0.9, 0.9]
                entropies = [0.1, 0.1, 0.1, 3.0, 0.1, 0.1, 0.1, 0.1, 0.1]
            n = min(len(pieces), max_new_tokens)
            received = [0.1, 0.1, 0.1, 0.8, 0.1, 0.1, 0.1, 0.1, 0.0][:n] if len(pieces) == 9 else [0.0] * n
            weights = {word.strip(): 1.0 for word in prompt.split()} if attention else None
            out.append(
                scripted(
                    pieces[:n], probs[:n], entropies[:n], received=received if attention else None,
                    prompt_weights=weights, prompt=prompt, stopped_by="stop" if n == len(pieces) else "length",
                )
            )
        return out


def test_tuned_baselines_retrieve_when_evaluated(tmp_path, monkeypatch):
    """Thresholds tuned on dev, read by evaluate as `auto`: every baseline retrieves on the unsure
    closed-book answers, answers over the passages, and passes the runs gate."""
    from tests.fake_cli import make_workspace

    workspace = make_workspace(tmp_path / "ws")
    rows = [
        {"id": f"nq-eval-{i}", "dataset": "nq", "question": f"Where did the director of Cast Away live ({i})?", "answers": ["Paris"]}
        for i in range(3)
    ]
    write_rows(workspace / "data" / "questions" / "eval" / "nq.jsonl", rows)  # the corpus has passages on these
    monkeypatch.setattr(runtime, "open_lm", lambda params: UnsureLM())
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    paths, names = Paths(workspace), ["flare", "dragin", "entropy_rag"]
    params = load_params(
        workspace / "params.yaml",
        overrides=["tune_thresholds.target_retrieval_rate=1.0", f"evaluate.methods={names}", "lm.max_new_tokens=16"],
    )
    write_closed_book_rows(paths, UnsureLM())
    STAGES["tune_thresholds"](params, paths)
    STAGES["evaluate"](params, paths)
    metrics = STAGES["summarize"](params, paths)
    for name in names:
        assert metrics[name]["nq"]["never_retrieved"] == 0, name
        assert metrics[name]["nq"]["acc"] == 1.0, name


@pytest.mark.parametrize(
    "text",
    ['{"thresholds": {"methods.flare.theta": 0.3', '{"thresholds": {"methods.flare.theta": "high"}}', '{"other": 1}', "[]"],
    ids=["truncated", "not-a-number", "no-thresholds", "not-an-object"],
)
def test_a_corrupted_thresholds_file_is_one_line_naming_it_and_the_command_that_rewrites_it(tmp_path, text):
    from skillrag.errors import ArtifactError

    path = tmp_path / "thresholds.json"
    path.write_text(text)
    with pytest.raises(ArtifactError, match=rf"^{path} is corrupted .*`skillrag tune-thresholds`") as info:
        load_thresholds(path)
    assert "\n" not in str(info.value)
