"""The states gate (after `extract`): finite tensors of the expected shape, both labels in
train, train and dev disjoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.quality.gate import Check, run_gate


def states_checks(rows: pd.DataFrame, shapes: pd.DataFrame, hidden_size: int) -> dict[str, Check]:
    """Every shard/layer/pooling tensor finite and [rows in shard, hidden_size]; both labels present in
    train; no question id in both train and dev."""
    splits_per_id = rows.groupby("id")["split"].nunique().rename("n_splits").reset_index()
    train_labels = rows.loc[rows["split"] == "train", ["acc"]]
    return {
        "tensors": Check(
            shapes,
            [
                gxe.ExpectTableRowCountToBeBetween(min_value=1),
                gxe.ExpectColumnValuesToBeInSet(column="finite", value_set=[True]),
                gxe.ExpectColumnValuesToBeBetween(column="cols", min_value=hidden_size, max_value=hidden_size),
                gxe.ExpectColumnPairValuesToBeEqual(column_A="rows", column_B="expected_rows"),
            ],
        ),
        "labels": Check(train_labels, [gxe.ExpectColumnDistinctValuesToContainSet(column="acc", value_set=[0, 1])]),
        "splits": Check(splits_per_id, [gxe.ExpectColumnValuesToBeInSet(column="n_splits", value_set=[1])]),
    }


def gate_states(states_dir: Path) -> dict[str, Any]:
    """The gate after `extract`, over what is on disk."""
    import torch
    from safetensors.torch import load_file

    from skillrag.lm.base import POOLINGS
    from skillrag.probe.states import layer_file, read_meta, read_rows

    meta, rows = read_meta(states_dir), read_rows(states_dir)
    expected = rows.groupby("shard").size()
    shapes = []
    for shard, n in expected.items():
        for layer in meta["layers"]:
            file = layer_file(states_dir, shard, layer)
            tensors = load_file(str(file)) if file.is_file() else {}
            for pooling in POOLINGS:
                tensor = tensors.get(pooling, torch.empty(0))  # a missing layer or pooling fails every check
                shapes.append(
                    {
                        "tensor": f"{shard}/layer_{layer}/{pooling}",
                        "rows": tensor.shape[0],
                        "cols": tensor.shape[1] if tensor.ndim == 2 else -1,
                        "expected_rows": int(n),
                        "finite": bool(tensor.numel()) and bool(torch.isfinite(tensor).all()),
                    }
                )
    shapes_frame = pd.DataFrame(shapes, columns=["tensor", "rows", "cols", "expected_rows", "finite"])
    return run_gate("states", states_checks(rows, shapes_frame, meta["hidden_size"]), states_dir / "validation.json")
