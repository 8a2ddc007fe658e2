"""States on disk: one safetensors file per shard and layer, a tensor per pooling; the gate."""

import pytest
import torch
from safetensors.torch import load_file, save_file

from skillrag.errors import ArtifactError
from skillrag.probe.state_store import (
    layer_file,
    load_features,
    read_rows,
    stored_poolings,
    write_meta,
    write_shard,
)
from skillrag.quality import GateFailed
from skillrag.quality.states_gate import gate_states

LAYERS = [2, 5]
POOLINGS = ("generated_mean", "answer_mean", "answer_last")


def _row(i: int, split: str, acc: int) -> dict:
    return {
        "id": f"q{i}", "dataset": "nq", "split": split, "strategy": "no_retrieval", "prompt_hash": "h",
        "text": "t", "answer": "a", "em": acc, "acc": acc, "no_answer": 0, "budget_hit": 0,
        "mean_entropy": 0.1, "prompt_tokens": 3, "new_tokens": 2,
        "logprobs": [-0.1, -0.2], "entropies": [0.3, 0.4], "pieces": [" a", "\n"],
    }


def _value(pooling: str, layer: int, row: int) -> float:
    return 100 * POOLINGS.index(pooling) + 10 * layer + row


def _write(directory, shards=((0, 3), (1, 2))) -> None:
    """Shards of (number, rows); every tensor entry names its pooling, layer and global row."""
    start = 0
    for number, n in shards:
        rows = [_row(start + i, "train" if (start + i) % 2 else "dev", (start + i) % 3 == 0) for i in range(n)]
        states = {
            pooling: {layer: torch.tensor([[_value(pooling, layer, start + i)] * 4 for i in range(n)]) for layer in LAYERS}
            for pooling in POOLINGS
        }
        write_shard(directory, number, rows, states)
        start += n
    write_meta(directory, {"model": "m", "layers": LAYERS, "hidden_size": 4, "fingerprint": "f"})


def test_each_pooling_is_read_alone_and_aligned_with_its_rows(tmp_path):
    states = tmp_path / "states"
    _write(states)
    rows = read_rows(states)
    assert sorted(p.name for p in (states / "vectors").glob("*.safetensors")) == [
        f"shard-0000{s}.layer_{layer}.safetensors" for s in (0, 1) for layer in LAYERS
    ]
    assert stored_poolings(states) == sorted(POOLINGS)
    assert list(rows.loc[0, "pieces"]) == [" a", "\n"]  # per-token lists survive parquet
    chosen = rows.iloc[[4, 0, 3]]  # across shards, out of order
    for pooling in POOLINGS:
        features = load_features(states, chosen, pooling)
        for layer in LAYERS:
            assert features[layer][:, 0].tolist() == [_value(pooling, layer, r) for r in (4, 0, 3)]


def test_a_pooling_the_states_lack_is_a_clear_error(tmp_path):
    states = tmp_path / "states"
    _write(states)
    with pytest.raises(ArtifactError, match="no pooling 'answer_first'.*probe.pooling"):
        load_features(states, read_rows(states), "answer_first")


def test_the_gate_passes_whole_states_and_fails_a_missing_pooling(tmp_path):
    states = tmp_path / "states"
    _write(states)
    assert gate_states(states, tmp_path / "states.json")["success"]
    path = layer_file(states, "shard-00001", 5)
    tensors = load_file(str(path))
    del tensors["answer_last"]
    save_file(tensors, str(path))
    with pytest.raises(GateFailed, match="expect_column_values_to_be_in_set"):
        gate_states(states, tmp_path / "states.json")


def test_the_gate_fails_per_token_lists_that_do_not_match_the_answer_length(tmp_path):
    states = tmp_path / "states"
    _write(states)
    rows = read_rows(states)
    rows = rows[rows["shard"] == "shard-00000"].drop(columns=["shard", "offset"])
    rows.at[1, "entropies"] = [0.3]
    rows.to_parquet(states / "rows" / "shard-00000.parquet", index=False)
    with pytest.raises(GateFailed, match="expect_column_pair_values_to_be_equal {'column_A': 'entropies'"):
        gate_states(states, tmp_path / "states.json")
