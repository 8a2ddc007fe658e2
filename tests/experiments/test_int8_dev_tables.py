"""experiments/int8-dev/tables.py on tiny synthetic states: the paired counts, the reproduction
check, both probers' AUROCs and the written tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from scipy.stats import binomtest

from skillrag.lm.base import POOLINGS
from skillrag.probe.state_store import write_meta, write_shard
from tests.experiments import load_script

LAYERS = [1, 2]
HIDDEN = 8


@pytest.fixture(scope="module")
def tables():
    return load_script("int8-dev/tables.py")


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def labels_of(split: str, n: int) -> list[int]:
    """A fixed label pattern: every third question right."""
    return [int(i % 3 == 0) for i in range(n)]


def write_states(directory: Path, splits: dict[str, int], flip: set[str] = frozenset(), dtype: str = "float32") -> None:
    """Rows for every (question, strategy) of `splits` ({split: questions}), states in which a
    direction separates right from wrong answers; questions in `flip` get the other label (and
    another answer)."""
    rows, vectors = [], []
    generator = torch.Generator().manual_seed(0)
    direction = torch.randn(HIDDEN, generator=generator)
    for strategy in ("no_retrieval", "single_step"):
        for split, n in splits.items():
            for i, acc in enumerate(labels_of(split, n)):
                qid = f"{split}-{i}"
                acc = 1 - acc if qid in flip else acc
                answer = f"answer {i}" + (" (other)" if qid in flip else "")
                rows.append({
                    "id": qid, "dataset": "nq", "split": split, "strategy": strategy, "prompt_hash": "h", "text": answer,
                    "answer": answer, "em": acc, "acc": acc, "no_answer": 0, "budget_hit": 0, "mean_entropy": 1.0 - acc,
                    "prompt_tokens": 10, "new_tokens": 3, "logprobs": [-0.5, -0.1], "entropies": [0.2, 0.1], "pieces": ["a", "b"],
                })
                vectors.append(torch.randn(HIDDEN, generator=generator) + 2.0 * acc * direction)
    stacked = torch.stack(vectors)
    write_shard(directory, 0, rows, {pooling: {layer: stacked.clone() for layer in LAYERS} for pooling in POOLINGS})
    identity = {"name": "tiny", "dtype": dtype, "digest": "d" * 64, "licence": None}
    write_meta(directory, {"model": "tiny", "identity": identity, "layers": LAYERS, "hidden_size": HIDDEN, "fingerprint": "f"})


def test_paired_counts_wins_losses_and_identical_answers(tables, tmp_path):
    write_states(tmp_path / "a", {"dev": 30})
    write_states(tmp_path / "b", {"dev": 30}, flip={"dev-0", "dev-1", "dev-2", "dev-3"})  # dev-0, dev-3 were right
    from skillrag.probe.state_store import read_rows

    row = tables.paired(read_rows(tmp_path / "a"), read_rows(tmp_path / "b"))
    assert (row["n"], row["won"], row["lost"]) == (60, 4, 4)  # both strategies: dev-1, dev-2 won, dev-0, dev-3 lost
    assert row["mcnemar_p"] == pytest.approx(binomtest(4, 8, 0.5).pvalue)
    assert row["identical_answers"] == pytest.approx(52 / 60)
    assert row["acc_float32"] == row["acc_int8"]


def test_the_tables_from_two_runs_a_committed_one_and_a_prober(tables, tmp_path, monkeypatch):
    from skillrag.config import ProbeParams
    from skillrag.probe.fit import fit_probe

    write_states(tmp_path / "float32", {"dev": 40})
    write_states(tmp_path / "committed", {"dev": 40})
    write_states(tmp_path / "int8", {"train": 40, "dev": 40}, flip={"dev-1"}, dtype="int8")
    write_states(tmp_path / "train", {"train": 40, "dev": 40})
    retries = tmp_path / "retries.json"
    retries.write_text("{}")
    params = ProbeParams(cv_c=[0.1], cv_hidden=[], cv_folds=3)
    fit_probe(tmp_path / "train", retries, params).prober.save(tmp_path / "probe", {"model": "tiny"})
    out = tmp_path / "out"
    monkeypatch.setattr(tables, "probe_params", lambda: params)
    monkeypatch.setattr(sys, "argv", [
        "tables.py", "--float32", str(tmp_path / "float32"), "--int8", str(tmp_path / "int8"),
        "--committed", str(tmp_path / "committed"), "--probe", str(tmp_path / "probe"), "--retries", str(retries), "--out", str(out),
    ])
    tables.main()

    results = json.loads((out / "results.json").read_text())
    assert results["precisions"]["int8"]["dtype"] == "int8"
    assert results["paired"]["both"]["won"] == 2 and results["paired"]["both"]["lost"] == 0
    assert results["float32_reproduces_committed"]["identical"] == {"answer": 80, "text": 80, "logprobs": 80}
    committed = results["committed_prober"]["float32_vs_int8"]
    assert committed["auroc"][0] > 0.9  # the states separate the labels
    assert results["int8_retrained_prober"]["train"]["n"] == 80
    assert results["int8_retrained_prober"]["vs_committed_on_int8"]["auroc"][1] == pytest.approx(committed["auroc"][1])
    table = (out / "results.md").read_text()
    assert "| closed-book | 40 |" in table and "committed (trained on float32 states)" in table
    assert len((out / "answers.jsonl").read_text().splitlines()) == 80
