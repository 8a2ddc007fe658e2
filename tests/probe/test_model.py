import torch
from torch import nn

from skillrag.probe.model import LayerProber


def test_layout_is_layernorm_then_linear_silu_blocks_then_two_logits():
    model = LayerProber(16, [8, 4])
    kinds = [type(block) for block in model.net]
    assert kinds == [nn.LayerNorm, nn.Linear, nn.SiLU, nn.Linear, nn.SiLU, nn.Linear]
    assert [block.out_features for block in model.net if isinstance(block, nn.Linear)] == [8, 4, 2]


def test_returns_the_last_layers_output_as_logits_not_probabilities():
    """With the last layer's weights zeroed, the output is exactly its bias for any input: nothing
    (softmax, log-softmax, sigmoid) is applied after it, so cross-entropy gets raw logits."""
    torch.manual_seed(0)
    model = LayerProber(16, [8])
    with torch.no_grad():
        model.net[-1].weight.zero_()
        model.net[-1].bias.copy_(torch.tensor([5.0, -5.0]))
        logits = model(torch.randn(5, 16) * 10)
    assert torch.equal(logits, torch.tensor([[5.0, -5.0]] * 5))



def test_from_logistic_is_the_regressions_probability_on_standardised_states():
    import numpy as np

    from skillrag.probe.model import from_logistic

    rng = np.random.default_rng(0)
    mean, scale, coef, intercept = rng.normal(size=5), rng.uniform(0.5, 2, size=5), rng.normal(size=5), -0.7
    x = rng.normal(size=(7, 5))
    expected = 1 / (1 + np.exp(-(((x - mean) / scale) @ coef + intercept)))
    probs = from_logistic(mean, scale, coef, intercept)(torch.as_tensor(x, dtype=torch.float32)).softmax(-1)[:, 1]
    assert np.allclose(probs.detach().numpy(), expected, atol=1e-5)
