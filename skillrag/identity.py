"""One check that an artifact learned from a model's hidden states (the prober, the learned
router, Adaptive-RAG's classifier) is opened with the model that produced those states.

An artifact records the identity of its model when it is written (`skillrag.lm.loading.
model_identity`: name, dtype, weights digest, licence); opening it compares the recorded name,
dtype and digest with the running model's. States from another model, another dtype (bfloat16
states differ from float32 ones) or other weights (a re-converted model) make its scores
meaningless, so any difference is refused, naming both identities and the command that rebuilds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillrag.errors import ArtifactError

COMPARED = ("name", "dtype", "digest")  # the licence is recorded, not compared


def describe(identity: Mapping[str, Any]) -> str:
    """`name (dtype, weights digest 0123456789ab)`, as the error messages show an identity."""
    digest = identity.get("digest")
    return f"{identity.get('name')} ({identity.get('dtype')}, weights digest {str(digest)[:12] if digest else 'unknown'})"


def check_identity(recorded: Any, current: Mapping[str, Any], artifact: str, rebuild_command: str) -> None:
    """Raise ArtifactError unless `recorded` (what `artifact` was built from, as read from its
    record) has the name, dtype and weights digest of `current` (the model that runs now)."""
    if not isinstance(recorded, Mapping) or not set(COMPARED) <= set(recorded):
        raise ArtifactError(
            f"{artifact} records no model identity (name, dtype, weights digest), so it cannot be checked "
            f"against the current model {describe(current)}: rebuild it with {rebuild_command}"
        )
    if any(recorded[key] != current[key] for key in COMPARED):
        raise ArtifactError(
            f"{artifact} was built from {describe(recorded)}, but the current model is {describe(current)}: "
            f"rebuild it with {rebuild_command} (or set lm.model / lm.dtype back to the recorded ones)"
        )
