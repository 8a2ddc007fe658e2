"""Stage `train_probe`: the per-layer probers (data/probe/), gated before they are published."""

from __future__ import annotations

from typing import Any

from skillrag.config import Params
from skillrag.paths import Paths


def train_probe(params: Params, paths: Paths) -> dict[str, Any]:
    """The prober, its recipe chosen on train (question-grouped CV) and its cuts on dev (from
    extract's dev answers and train_router's retry rates, data/router_traces/retries.json),
    trained and evaluated in memory, then the probe gate on that report
    (reports/validation/probe.json, written pass or fail), and only once it passes the prober
    (data/probe/), reports/probe_metrics.json, probe_detail.json, the reliability plot and the
    learning curve's. The gate runs inside the stage so that a prober that fails it is never
    published; returns the dev report."""
    from skillrag.probe.fit import fit_probe
    from skillrag.quality.probe_gate import gate_probe

    fitted = fit_probe(paths.states, paths.retry_rates, params.probe)
    gate_probe(fitted.report, params.probe, paths.validation("probe"))
    fitted.publish(
        paths.probe, paths.probe_metrics, paths.probe_detail,
        paths.probe_reliability_figure, paths.probe_learning_curve_figure,
    )
    return fitted.report
