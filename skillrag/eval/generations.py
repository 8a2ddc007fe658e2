"""The generations an evaluate stage made, stored so that later stages start from them.

no_retrieval's and single_step's answers are the first rounds of the gated methods, Adaptive-RAG's
strategies and IRCoT's first step. Their stages store every generation they computed
(`skillrag.methods.reuse.Made`: the key of what determined it, the layers it captured, every
field of the Generation, its compute time), and the later stages seed their `ReusingLM` with
them, read-only, through a declared DVC dependency on those stages' outputs.

A store is a folder of chunk files, one per (dataset, shard, write): `<dataset>.<shard>.<n>.safetensors`,
whose metadata hold the rows (every field that is not a tensor, as JSON) and the `identity` of
what made them (the model, its dtype and device), and whose tensors are every tensor field,
named `<row>/<field>/<key>/.../<layer>` (a nested dict's keys in order; all-digit keys are
layer ids). A tensor that appears twice in a row (`hidden` is one pooling of `pooled`) is stored
once and the other place refers to it. Chunks are only added, so a resumed run adds its own.

The stores are git-tracked (inside data/runs/<method>/), so they keep the hidden states of the
layers their readers capture only (`layers`: the prober's, which its gate scores and skill_rag's
state vector averages), as float32, bit for bit as computed. A stored generation then serves only
calls within those layers (`Made.layers`): a call for another layer (a prober retrained on other
layers) computes its own generation, so trimming never changes what a method computes, it only
makes such a call slower. Measured: the tiny model (576 wide, 20 layers captured) ~147 KB a
generation with every layer, ~9-11 KB with one; the default model (1536 wide, 18 layers) ~337 KB,
~24 KB with its prober's one layer (3 poolings x 1536 float32, and the generation's JSON row).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from skillrag.files import atomic_path
from skillrag.lm.base import Attention, Generation
from skillrag.methods.reuse import Made, tensor_fields


def _flatten(tree: Any, name: str) -> Iterable[tuple[str, torch.Tensor]]:
    if isinstance(tree, torch.Tensor):
        yield name, tree
    else:
        for key, value in tree.items():
            yield from _flatten(value, f"{name}/{key}")


def _insert(tree: dict[Any, Any], path: Sequence[str], tensor: torch.Tensor) -> None:
    *inner, last = [int(part) if part.isdigit() else part for part in path]
    for key in inner:
        tree = tree.setdefault(key, {})
    tree[last] = tensor


def _row(index: int, made: Made, tensors: dict[str, torch.Tensor], layers: Collection[int] | None) -> dict[str, Any]:
    """`made`'s JSON row; its tensors of `layers` (None: all) added to `tensors` (each distinct tensor once)."""
    kept = made.layers if layers is None else made.layers & frozenset(layers)
    gen = made.generation
    held = tensor_fields(gen)
    row: dict[str, Any] = {
        f.name: getattr(gen, f.name) for f in fields(gen) if f.name not in held and f.name != "attention"
    }
    row["attention"] = asdict(gen.attention) if gen.attention is not None else None
    seen: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for field in held:
        for name, tensor in _flatten(getattr(gen, field), f"{index}/{field}"):
            if int(name.rsplit("/", 1)[1]) not in kept:
                continue
            if id(tensor) in seen:
                aliases[name] = seen[id(tensor)]
            else:
                seen[id(tensor)] = name
                tensors[name] = tensor.detach().to("cpu").contiguous().clone()
    return {"key": made.key, "layers": sorted(kept), "made_with_attention": made.attention,
            "tensor_fields": held, "aliases": aliases, "fields": row}


def save_generations(
    directory: Path, chunk: str, made: Sequence[Made], identity: Mapping[str, Any], layers: Collection[int] | None = None
) -> Path | None:
    """Store `made` as chunk `<chunk>.<n>.safetensors` (n: the first free number) in `directory`,
    with the hidden states of `layers` only (None: every captured layer; see the module docstring);
    nothing when `made` is empty. Written atomically: a chunk is whole or absent."""
    if not made:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    while (directory / f"{chunk}.{n}.safetensors").exists():
        n += 1
    tensors: dict[str, torch.Tensor] = {}
    rows = [_row(index, m, tensors, layers) for index, m in enumerate(made)]
    path = directory / f"{chunk}.{n}.safetensors"
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"identity": json.dumps(dict(identity), sort_keys=True), "rows": json.dumps(rows)})
    return path


def load_generations(directory: Path, dataset: str, identity: Mapping[str, Any]) -> tuple[dict[str, Made], list[Path]]:
    """The generations stored for `dataset` in `directory` by a run with this `identity`, by key;
    and the chunks left out because another model (or dtype, or device) made them."""
    found: dict[str, Made] = {}
    foreign: list[Path] = []
    wanted = json.dumps(dict(identity), sort_keys=True)
    for path in sorted(directory.glob(f"{dataset}.*.safetensors")):
        with safe_open(str(path), framework="pt") as chunk:
            metadata = chunk.metadata()
            if metadata["identity"] != wanted:
                foreign.append(path)
                continue
            trees: list[dict[str, Any]] = [{} for _ in json.loads(metadata["rows"])]
            stored = {name: chunk.get_tensor(name) for name in chunk.keys()}  # noqa: SIM118 - not a dict
        rows = json.loads(metadata["rows"])
        for index, row in enumerate(rows):
            for name, target in row["aliases"].items():
                stored[name] = stored[target]
        for name, tensor in stored.items():
            index, *path_in_row = name.split("/")
            _insert(trees[int(index)], path_in_row, tensor)
        for index, row in enumerate(rows):
            values = dict(row["fields"])
            if values["attention"] is not None:
                values["attention"] = Attention(**values["attention"])
            values |= {field: trees[index].get(field) for field in row["tensor_fields"]}
            found[row["key"]] = Made(row["key"], Generation(**values), frozenset(row["layers"]), row["made_with_attention"])
    return found, foreign
