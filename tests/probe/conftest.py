"""Synthetic hidden states in which a per-layer direction separates correct from incorrect rows."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from skillrag.config import ProbeParams
from skillrag.probe.prober import Prober
from skillrag.probe.training import train_probers

LAYERS = (3, 4, 5)
HIDDEN_SIZE = 16
States = tuple[dict[int, torch.Tensor], torch.Tensor]


def _make_states(n: int, seed: int, signal: float = 3.0, rate: float = 0.3) -> States:
    """features {layer: [n, HIDDEN_SIZE]} and labels [n] (a share `rate` correct); signal 0:
    labels are noise."""
    generator = torch.Generator().manual_seed(seed)
    labels = (torch.rand(n, generator=generator) < rate).long()
    directions = torch.randn(len(LAYERS), HIDDEN_SIZE, generator=torch.Generator().manual_seed(0))
    features = {
        layer: torch.randn(n, HIDDEN_SIZE, generator=generator) + signal * labels[:, None] * direction
        for layer, direction in zip(LAYERS, directions, strict=True)
    }
    return features, labels


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """The probers here are tiny: with two threads on a busy 2-core machine torch's thread pool
    spins and training runs 10-50x slower than with one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def make_states() -> Callable[..., States]:
    return _make_states


@pytest.fixture(scope="session")
def fast_params() -> ProbeParams:
    """Small and quick: enough steps to fit the synthetic signal in about a second."""
    return ProbeParams(hidden=[8], epochs=4, max_epochs=20, patience=3, batch_size=32, lr=1e-2)


@pytest.fixture(scope="module")
def trained(fast_params: ProbeParams) -> Prober:
    features, labels = _make_states(300, seed=1)
    return train_probers(features, labels, fast_params, device="cpu")
