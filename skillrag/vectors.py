"""Hidden vectors inside JSON files that live in git: base64 of their little-endian float32 bytes
(the precision they are computed in), a quarter of the size of a JSON list of the same numbers,
and exact on the way back."""

from __future__ import annotations

import base64

import numpy as np


def encode_vector(vector: list[float] | None) -> str | None:
    return None if vector is None else base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(stored: str | list[float] | None) -> list[float] | None:
    """`encode_vector`'s inverse; a plain list (a file written before the encoding) passes through."""
    if stored is None or isinstance(stored, list):
        return stored
    return np.frombuffer(base64.b64decode(stored), dtype="<f4").astype(float).tolist()
