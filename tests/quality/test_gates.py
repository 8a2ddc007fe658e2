"""Real Great Expectations runs: good data passes, each kind of bad data fails with a summary."""

import json

import pytest

from skillrag.config import PrepareParams
from skillrag.data.questions import prepare_questions
from skillrag.files import read_jsonl, write_jsonl
from skillrag.quality import GateFailed
from skillrag.quality.questions_gate import gate_questions
from tests.conftest import make_bundle

DATASETS = {"hotpotqa": 12, "nq": 12, "triviaqa": 12, "musique": 4, "2wiki": 4}


@pytest.fixture
def prepared(tmp_path):
    params = PrepareParams(local_dir=make_bundle(tmp_path / "bundle", DATASETS), train_size=6, dev_size=9, eval_size=2)
    out = tmp_path / "questions"
    prepare_questions(params, out)
    return params, out


def test_good_questions_pass_and_result_is_written(prepared):
    params, out = prepared
    report = gate_questions(out, params, out.parent / "questions.json")
    assert report["success"]
    assert json.loads((out.parent / "questions.json").read_text())["success"] is True


def test_duplicate_id_empty_question_and_no_answers_fail_with_examples(prepared):
    params, out = prepared
    path = out / "dev" / "nq.jsonl"
    rows = list(read_jsonl(path))
    rows[0]["question"] = " "
    rows[1]["id"] = rows[2]["id"]
    rows[2]["answers"] = []
    write_jsonl(path, rows)
    with pytest.raises(GateFailed) as info:
        gate_questions(out, params, out.parent / "questions.json")
    message = str(info.value)
    assert "expect_column_values_to_be_unique" in message and rows[2]["id"] in message
    assert "expect_column_value_lengths_to_be_between" in message
    assert "expect_column_values_to_be_between {'column': 'n_answers'" in message
    assert json.loads((out.parent / "questions.json").read_text())["success"] is False


def test_wrong_split_size_fails(prepared):
    params, out = prepared
    with pytest.raises(GateFailed, match="expect_column_pair_values_to_be_equal"):
        gate_questions(out, params.model_copy(update={"eval_size": 3}), out.parent / "questions.json")


def test_a_too_long_question_fails_the_gate(prepared):
    params, out = prepared
    path = out / "train" / "nq.jsonl"
    rows = list(read_jsonl(path))
    rows[0]["question"] = "why " * 1000
    write_jsonl(path, rows)
    with pytest.raises(GateFailed, match="expect_column_value_lengths_to_be_between") as info:
        gate_questions(out, params, out.parent / "questions.json")
    assert "'max_value': 2000" in str(info.value)


def test_an_eval_question_from_a_train_split_fails_the_gate(prepared):
    params, out = prepared
    path = out / "eval" / "musique.jsonl"
    rows = list(read_jsonl(path))
    rows[0]["meta"]["orig_split"] = "train"
    write_jsonl(path, rows)
    with pytest.raises(GateFailed, match="expect_column_values_to_be_in_set {'column': 'side'") as info:
        gate_questions(out, params, out.parent / "questions.json")
    assert f"train: {rows[0]['id']} (orig_split 'train')" in str(info.value)


def _probe_report(ensemble_auroc, layer_aurocs, verdict="no_better", accs=((0.3, 0.3), (0.5, 0.45), (0.4, 0.4))):
    """`accs`: (dev ACC, the null's dev ACC) before retrieval, then after evidence for probing_rag and skill_rag."""
    text = {"below": "the prober ranks dev answers worse than mean token entropy (difference -0.2)"}.get(verdict, "t")
    return {
        "ensemble": {"auroc": ensemble_auroc},
        "per_layer": {str(i): {"auroc": a} for i, a in enumerate(layer_aurocs, start=1)},
        "vs_entropy": {"verdict": verdict, "text": text},
        "cuts": {
            "before_retrieval": {"acc": accs[0][0], "acc_null": accs[0][1], "n": 40},
            "after_evidence": {
                method: {"acc": acc, "acc_null": null, "n": 40}
                for method, (acc, null) in zip(("probing_rag", "skill_rag"), accs[1:], strict=True)
            },
        },
    }


def test_probe_gate_thresholds_and_record_only_mode(tmp_path):
    from skillrag.config import ProbeParams
    from skillrag.quality.probe_gate import gate_probe

    result = tmp_path / "probe_validation.json"
    params, record_only = ProbeParams(min_dev_auroc=0.5), ProbeParams(min_dev_auroc=0.0)
    assert gate_probe(_probe_report(0.62, [0.6, 0.55, 0.4]), params, result)["success"]
    with pytest.raises(GateFailed, match="expect_column_values_to_be_between"):
        gate_probe(_probe_report(0.45, [0.6, 0.55, 0.4]), params, result)
    with pytest.raises(GateFailed, match="expect_column_values_to_not_be_null"):
        gate_probe(_probe_report(None, [None, None], "undefined"), params, result)
    assert gate_probe(_probe_report(None, [None, None], "undefined"), record_only, result)["success"]  # one-class dev set


def test_probe_gate_fails_below_entropy_beyond_noise_unless_allowed_and_passes_within_noise(tmp_path):
    from skillrag.config import ProbeParams
    from skillrag.quality.probe_gate import gate_probe

    result = tmp_path / "probe_validation.json"
    below = _probe_report(0.57, [0.6, 0.55, 0.58], verdict="below")
    with pytest.raises(GateFailed, match=r"worse than mean token entropy \(difference -0\.2\).*probe\.allow_below_entropy: true"):
        gate_probe(below, ProbeParams(), result)
    assert gate_probe(below, ProbeParams(allow_below_entropy=True), result)["success"]
    assert gate_probe(_probe_report(0.7, [0.7, 0.7], verdict="no_better"), ProbeParams(), result)["success"]


def test_probe_gate_never_passes_a_cut_that_loses_dev_acc_against_its_null(tmp_path):
    from skillrag.config import ProbeParams
    from skillrag.quality.probe_gate import gate_probe

    for accs in (((0.28, 0.3), (0.5, 0.5), (0.4, 0.4)), ((0.3, 0.3), (0.5, 0.5), (0.38, 0.4))):
        with pytest.raises(GateFailed, match=r"\[cuts\] expect_column_pair_values_a_to_be_greater_than_b"):
            gate_probe(_probe_report(0.7, [0.7, 0.7], accs=accs), ProbeParams(), tmp_path / "probe_validation.json")


def test_two_runs_of_a_gate_on_the_same_data_write_identical_bytes_without_run_markers(prepared, tmp_path):
    params, out = prepared
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    gate_questions(out, params, first)
    gate_questions(out, params, second)
    assert first.read_bytes() == second.read_bytes()
    result = json.loads(first.read_text())["checks"]["rows"]
    assert not {"validation_time", "validation_id"} & set(result["meta"])
    assert "run_time" not in result["meta"]["run_id"] and "ge_load_time" not in result["meta"]["batch_markers"]
    assert result["meta"]["batch_markers"]["pandas_data_fingerprint"]  # deterministic: kept
    assert all("id" not in item["expectation_config"] for item in result["results"])
