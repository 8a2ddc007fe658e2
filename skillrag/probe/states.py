"""The prober's training data on disk (stage `extract`'s output, `data/states/`):

- `rows.parquet`: one row per (question, strategy): id, dataset, split, strategy, prompt_hash,
  text, answer (strict), em, acc (the label), no_answer, budget_hit, mean_entropy, prompt_tokens,
  new_tokens, logprobs, entropies, pieces (per kept token), shard, offset;
- `shard-XXXXX.layer-<l>.safetensors`, one per layer: a tensor per pooling
  (skillrag.lm.base.POOLINGS) of shape [rows in shard, hidden_size], float32;
- `meta.json`: model, layers, hidden_size, and the fingerprint of the run's inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from skillrag.errors import ArtifactError
from skillrag.files import atomic_path

ROW_COLUMNS = [
    "id", "dataset", "split", "strategy", "prompt_hash", "text", "answer", "em", "acc", "no_answer",
    "budget_hit", "mean_entropy", "prompt_tokens", "new_tokens", "logprobs", "entropies", "pieces",
]


def shard_name(number: int) -> str:
    return f"shard-{number:05d}"


def layer_file(directory: Path, shard: str, layer: int) -> Path:
    """The safetensors file of one shard's states at one layer (a tensor per pooling)."""
    return Path(directory) / f"{shard}.layer-{layer}.safetensors"


def write_shard(
    directory: Path,
    number: int,
    rows: Sequence[Mapping[str, Any]],
    states: Mapping[str, Mapping[int, torch.Tensor]],
) -> None:
    """One shard: its rows (parquet) and its states (pooling -> layer -> [rows, hidden]; one
    safetensors file per layer), each written atomically; the parquet file lands last, so a
    shard counts as done only once all are complete."""
    name = shard_name(number)
    layers = next(iter(states.values())).keys()
    for layer in layers:
        with atomic_path(layer_file(directory, name, layer)) as tmp:
            save_file({pooling: by_layer[layer].contiguous() for pooling, by_layer in states.items()}, str(tmp))
    with atomic_path(directory / f"{name}.parquet") as tmp:
        pd.DataFrame(list(rows), columns=ROW_COLUMNS).to_parquet(tmp, index=False)


def read_rows(directory: Path) -> pd.DataFrame:
    """All rows of all complete shards, with `shard` and `offset` (row within the shard)."""
    frames = []
    for path in sorted(Path(directory).glob("shard-*.parquet")):
        frame = pd.read_parquet(path)
        frame["shard"] = path.stem
        frame["offset"] = range(len(frame))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*ROW_COLUMNS, "shard", "offset"])
    return pd.concat(frames, ignore_index=True)


def read_meta(directory: Path) -> dict[str, Any]:
    path = Path(directory) / "meta.json"
    if not path.exists():
        raise ArtifactError(f"no hidden states at {directory}: run `skillrag extract` (or `dvc repro extract`)")
    return json.loads(path.read_text())


def load_features(directory: Path, rows: pd.DataFrame, pooling: str = "generated_mean") -> dict[int, torch.Tensor]:
    """layer -> [len(rows), hidden_size] for the given rows (in their order) in one pooling, read
    through safetensors."""
    layers = read_meta(directory)["layers"]
    pieces: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    order = []
    for shard, group in rows.groupby("shard", sort=True):
        index = torch.tensor(group["offset"].to_numpy())
        for layer in layers:
            pieces[layer].append(load_file(str(layer_file(directory, shard, layer)))[pooling][index])
        order.extend(group.index.tolist())
    position = torch.tensor(pd.Series(range(len(order)), index=order).loc[rows.index].to_numpy())
    return {layer: torch.cat(parts)[position] if parts else torch.empty(0) for layer, parts in pieces.items()}
