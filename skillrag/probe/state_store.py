"""The prober's training data on disk (stage `extract`'s output, `data/states/`), in two folders:
`rows/` (small, git-tracked: what every stage but train_probe reads) and `vectors/` (the hidden
states, ~200 MB on the default run: DVC cache only, read by train_probe and the states gate).

- `rows/shard-XXXXX.parquet`: one row per (question, strategy): id, dataset, split, strategy,
  prompt_hash, text, answer (strict), em, acc (the label), no_answer, budget_hit, mean_entropy,
  prompt_tokens, new_tokens and, per kept token, `logprobs`, `entropies` and `pieces` (so a
  token-level score can be recomputed without the model); `read_rows` adds shard and offset;
- `rows/meta.json`: model, layers, hidden_size, and the fingerprint of the run's inputs;
- `vectors/shard-XXXXX.layer_<l>.safetensors`: one file per shard and layer, one float32 tensor
  [rows in shard, hidden_size] per pooling, named by it (`generated_mean`, `answer_mean`,
  `answer_last`: skillrag.lm.base.POOLINGS), so the prober reads one pooling of one layer
  without loading the others.

Every function takes the states' root (`data/states`, or a partial or sharded run's own folder).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from skillrag.errors import ArtifactError
from skillrag.files import atomic_path, publish, write_json

ROW_COLUMNS = [
    "id", "dataset", "split", "strategy", "prompt_hash", "text", "answer", "em", "acc", "no_answer",
    "budget_hit", "mean_entropy", "prompt_tokens", "new_tokens", "logprobs", "entropies", "pieces",
]
DEFAULT_POOLING = "generated_mean"
ROWS, VECTORS = "rows", "vectors"

States = Mapping[str, Mapping[int, torch.Tensor]]  # pooling -> layer -> [rows, hidden_size]


def shard_name(number: int) -> str:
    return f"shard-{number:05d}"


def rows_dir(directory: Path) -> Path:
    return Path(directory) / ROWS


def vectors_dir(directory: Path) -> Path:
    return Path(directory) / VECTORS


def layer_file(directory: Path, shard: str, layer: int) -> Path:
    return vectors_dir(directory) / f"{shard}.layer_{layer}.safetensors"


def write_shard(directory: Path, number: int, rows: Sequence[Mapping[str, Any]], states: States) -> None:
    """One shard: its tensors (one safetensors file per layer, a tensor per pooling) and its rows
    (parquet), each written atomically; the parquet file lands last, so a shard counts as done
    only once every file is complete."""
    name = shard_name(number)
    layers = sorted({layer for by_layer in states.values() for layer in by_layer})
    for layer in layers:
        with atomic_path(layer_file(directory, name, layer)) as tmp:
            save_file({pooling: by_layer[layer].contiguous() for pooling, by_layer in states.items()}, str(tmp))
    with atomic_path(rows_dir(directory) / f"{name}.parquet") as tmp:
        pd.DataFrame(list(rows), columns=ROW_COLUMNS).to_parquet(tmp, index=False)


def write_meta(directory: Path, meta: Mapping[str, Any]) -> None:
    """`rows/meta.json`: beside the rows, so the stages that read only the rows have it too."""
    write_json(rows_dir(directory) / "meta.json", meta)


def shard_names(directory: Path) -> list[str]:
    """The complete shards (those whose rows were written), in order."""
    return [path.stem for path in sorted(rows_dir(directory).glob("shard-*.parquet"))]


def has_vectors(directory: Path) -> bool:
    """Whether every complete shard has its file for every layer: false on a machine that has the
    git-tracked rows but not the cache-only vectors."""
    layers = read_meta(directory)["layers"]
    return all(layer_file(directory, shard, layer).is_file() for shard in shard_names(directory) for layer in layers)


def publish_states(source: Path, target: Path) -> None:
    """Move the states in `source` to `target`, each folder replaced whole (`files.publish`); the
    vectors first, so rows (with the meta that says the run is done) never precede their vectors.
    `target` itself is not replaced: it holds what DVC writes beside its outputs (.gitignore)."""
    for folder in (vectors_dir(source), rows_dir(source)):
        folder.mkdir(parents=True, exist_ok=True)  # a run with no rows yet has neither
    Path(target).mkdir(parents=True, exist_ok=True)
    publish(vectors_dir(source), vectors_dir(target))
    publish(rows_dir(source), rows_dir(target))


def read_rows(directory: Path) -> pd.DataFrame:
    """All rows of all complete shards, with `shard` and `offset` (row within the shard)."""
    frames = []
    for path in sorted(rows_dir(directory).glob("shard-*.parquet")):
        frame = pd.read_parquet(path)
        frame["shard"] = path.stem
        frame["offset"] = range(len(frame))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=[*ROW_COLUMNS, "shard", "offset"])
    return pd.concat(frames, ignore_index=True)


def read_meta(directory: Path) -> dict[str, Any]:
    path = rows_dir(directory) / "meta.json"
    if not path.exists():
        raise ArtifactError(f"no hidden states at {directory}: run `skillrag extract` (or `dvc repro extract`)")
    return json.loads(path.read_text())


def stored_poolings(directory: Path) -> list[str]:
    """The poolings the states hold (the tensor names of the first shard's first layer file)."""
    shards = shard_names(directory)
    if not shards:
        return []
    with safe_open(str(layer_file(directory, shards[0], read_meta(directory)["layers"][0])), "pt") as f:
        return sorted(f.keys())


def load_features(directory: Path, rows: pd.DataFrame, pooling: str = DEFAULT_POOLING) -> dict[int, torch.Tensor]:
    """layer -> [len(rows), hidden_size] of `pooling` for the given rows (in their order), each
    tensor read alone through safetensors."""
    layers = read_meta(directory)["layers"]
    if not has_vectors(directory):
        raise ArtifactError(
            f"the hidden-state vectors in {vectors_dir(directory)} are missing or incomplete (they live in the DVC "
            "cache only, not in git): rebuild them with `skillrag extract` (or `dvc repro extract`)"
        )
    pieces: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    order = []
    for shard, group in rows.groupby("shard", sort=True):
        index = torch.tensor(group["offset"].to_numpy())
        for layer in layers:
            with safe_open(str(layer_file(directory, str(shard), layer)), "pt") as f:
                names = f.keys()
                if pooling not in names:
                    raise ArtifactError(
                        f"the states at {directory} hold no pooling {pooling!r} (have {sorted(names)}); "
                        "rerun `skillrag extract` or set probe.pooling to one they hold"
                    )
                pieces[layer].append(f.get_tensor(pooling)[index])
        order.extend(group.index.tolist())
    position = torch.tensor(pd.Series(range(len(order)), index=order).loc[rows.index].to_numpy())
    return {layer: torch.cat(parts)[position] if parts else torch.empty(0) for layer, parts in pieces.items()}
