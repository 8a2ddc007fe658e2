"""The per-layer prober network: a normalisation, then [Linear -> SiLU]* -> Linear(2).

The normalisation is either the Probing-RAG recipe's LayerNorm (`norm="layer"`) or a fixed
standardisation by the train rows' mean and scale (`norm="standard"`), which makes a logistic
regression fitted by sklearn on standardised states an exact LayerProber (`from_logistic`), so
every prober is saved, loaded and scored the same way.

It returns logits, not probabilities: training applies cross-entropy to the logits (upstream
Probing-RAG applied it to softmax outputs, which squashes the gradients), and P(correct) is
the softmax of the logits at class 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch import nn

Norm = Literal["layer", "standard"]


class Standardise(nn.Module):
    """(x - mean) / scale with fixed buffers (saved with the weights)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("scale", torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale


class LayerProber(nn.Module):
    """Maps one layer's pooled hidden state [N, input_size] to logits [N, 2] (1 = correct)."""

    def __init__(self, input_size: int, hidden: Sequence[int], norm: Norm = "layer") -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden = list(hidden)
        self.norm = norm
        blocks: list[nn.Module] = [nn.LayerNorm(input_size) if norm == "layer" else Standardise(input_size)]
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


@torch.no_grad()
def from_logistic(mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float) -> LayerProber:
    """The LayerProber equal to a logistic regression on standardised states: logits
    [0, coef . (x - mean) / scale + intercept], whose softmax at class 1 is the regression's
    P(correct)."""
    model = LayerProber(len(coef), [], norm="standard")
    model.net[0].mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
    model.net[0].scale.copy_(torch.as_tensor(scale, dtype=torch.float32))
    model.net[-1].weight.zero_()
    model.net[-1].weight[1] = torch.as_tensor(coef, dtype=torch.float32)
    model.net[-1].bias.copy_(torch.tensor([0.0, float(intercept)]))
    return model.eval()
