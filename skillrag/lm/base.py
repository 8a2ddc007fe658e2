"""What every language model in skillrag offers: batched greedy generation with optional
hidden-state capture in the same pass, and continuation log-likelihoods (for the router)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass
class Generation:
    """One generated continuation.

    `hidden` maps a layer id (1-based: the output of transformer block `l`, i.e. HF
    `hidden_states[l]`) to that layer's residual stream mean-pooled over the generated tokens,
    as a float32 CPU tensor of shape [hidden_size]; None when capture was not asked for.
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    prompt_tokens: int
    hidden: dict[int, torch.Tensor] | None = None
    stopped_by: str = "length"  # "stop" | "eos" | "length"
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)


class LM(Protocol):
    name: str
    num_layers: int
    hidden_size: int

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
    ) -> list[Generation]:
        """Greedy-decode every prompt (batched, left-padded). `prefix`, when given, is a string
        every prompt starts with; its KV cache is computed once and reused."""
        ...

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Sum of token log-probabilities of each continuation after `prompt`."""
        ...


def default_layers(num_layers: int) -> list[int]:
    """The posterior two-thirds of the layers (paper §3.1): for 30 layers, 11..30."""
    first = num_layers - (2 * num_layers) // 3 + 1
    return list(range(first, num_layers + 1))
