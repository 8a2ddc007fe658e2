"""The states gate (after `extract`): every pooling's tensors finite and of the expected shape,
per-token lists as long as the answer, both labels in train, train and dev disjoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.quality.gate import Check, run_gate


def states_checks(rows: pd.DataFrame, shapes: pd.DataFrame, hidden_size: int) -> dict[str, Check]:
    """Every shard/layer/pooling tensor finite and [rows in shard, hidden_size]; each row's
    logprobs, entropies and pieces one per kept token (new_tokens); both labels present in
    train; no question id in both train and dev."""
    splits_per_id = rows.groupby("id")["split"].nunique().rename("n_splits").reset_index()
    train_labels = rows.loc[rows["split"] == "train", ["acc"]]
    tokens = pd.DataFrame(
        {
            "new_tokens": rows["new_tokens"].astype(int),
            **{column: rows[column].map(len) for column in ("logprobs", "entropies", "pieces")},
        }
    )
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
        "tokens": Check(
            tokens,
            [gxe.ExpectColumnPairValuesToBeEqual(column_A=c, column_B="new_tokens") for c in ("logprobs", "entropies", "pieces")],
        ),
        "labels": Check(train_labels, [gxe.ExpectColumnDistinctValuesToContainSet(column="acc", value_set=[0, 1])]),
        "splits": Check(splits_per_id, [gxe.ExpectColumnValuesToBeInSet(column="n_splits", value_set=[1])]),
    }


def gate_states(states_dir: Path, result_path: Path) -> dict[str, Any]:
    """The gate after `extract`, over what is on disk (rows and vectors, skillrag.probe.state_store):
    each shard's layer files must hold the same poolings as the first (a missing layer file or
    pooling fails every check)."""
    import torch
    from safetensors.torch import load_file

    from skillrag.probe.state_store import layer_file, read_meta, read_rows, stored_poolings

    meta, rows = read_meta(states_dir), read_rows(states_dir)
    poolings = stored_poolings(states_dir) or ["(none)"]
    shapes = []
    for shard, n in rows.groupby("shard").size().items():
        for layer in meta["layers"]:
            path = layer_file(states_dir, str(shard), layer)
            tensors = load_file(str(path)) if path.exists() else {}
            for pooling in poolings:
                tensor = tensors.get(pooling, torch.empty(0))
                shapes.append(
                    {
                        "tensor": f"{path.name}/{pooling}",
                        "rows": tensor.shape[0],
                        "cols": tensor.shape[1] if tensor.ndim == 2 else -1,
                        "expected_rows": int(n),
                        "finite": bool(tensor.numel()) and bool(torch.isfinite(tensor).all()),
                    }
                )
    shapes_frame = pd.DataFrame(shapes, columns=["tensor", "rows", "cols", "expected_rows", "finite"])
    return run_gate("states", states_checks(rows, shapes_frame, meta["hidden_size"]), result_path)
