"""The per-layer prober network (Probing-RAG recipe): LayerNorm -> [Linear -> SiLU]* -> Linear(2).

It returns logits, not probabilities: training applies cross-entropy to the logits (upstream
Probing-RAG applied it to softmax outputs, which squashes the gradients), and P(correct) is
the softmax of the logits at class 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class LayerProber(nn.Module):
    """Maps one layer's pooled hidden state [N, input_size] to logits [N, 2] (1 = correct)."""

    def __init__(self, input_size: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden = list(hidden)
        blocks: list[nn.Module] = [nn.LayerNorm(input_size)]
        width = input_size
        for size in self.hidden:
            blocks += [nn.Linear(width, size), nn.SiLU()]
            width = size
        blocks.append(nn.Linear(width, 2))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    @torch.no_grad()
    def shift_prior(self, log_odds: float) -> None:
        """Add `log_odds` to the "correct" logit: by Bayes' rule this moves P(correct) from the
        class prior it was trained under to one `log_odds` higher, without changing the ranking."""
        self.net[-1].bias[1] += log_odds
