"""The probe gate, on `train_probe`'s dev report before anything is published."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import great_expectations.expectations as gxe
import pandas as pd

from skillrag.config import ProbeParams
from skillrag.quality.gate import Check, GateFailed, run_gate


def gate_probe(report: Mapping[str, Any], params: ProbeParams, result_path: Path) -> dict[str, Any]:
    """The gate on `train_probe`'s dev report, run before anything is published: dev AUROC
    recorded per layer; the ensemble must reach `probe.min_dev_auroc` and so must at least half
    the layers (0 = record only: a tiny dev set may hold one class, AUROC null); and the ensemble
    must not rank answers worse than mean token entropy unless `probe.allow_below_entropy`."""
    layers = pd.DataFrame(
        [{"layer": int(layer), "auroc": m["auroc"]} for layer, m in report["per_layer"].items()], columns=["layer", "auroc"]
    )
    prober_auroc, entropy_auroc = report["ensemble"]["auroc"], report["entropy_baseline"]["auroc"]
    ensemble = pd.DataFrame([{"auroc": prober_auroc}])
    ensemble_checks = [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=params.min_dev_auroc)]
    if params.min_dev_auroc > 0:
        ensemble_checks.append(gxe.ExpectColumnValuesToNotBeNull(column="auroc"))
    checks = {
        "per_layer": Check(layers, [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=params.min_dev_auroc, mostly=0.5)]),
        "ensemble": Check(ensemble, ensemble_checks),
    }
    compared = not params.allow_below_entropy and None not in (prober_auroc, entropy_auroc)
    if compared:
        checks["vs_entropy"] = Check(
            pd.DataFrame([{"ensemble_auroc": prober_auroc, "entropy_auroc": entropy_auroc}]),
            [gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="ensemble_auroc", column_B="entropy_auroc", or_equal=True)],
        )
    try:
        return run_gate("probe", checks, result_path)
    except GateFailed as err:
        if compared and prober_auroc < entropy_auroc:
            raise GateFailed(
                f"the prober's ensemble dev AUROC {prober_auroc:.3f} is below the mean-token-entropy "
                f"baseline's {entropy_auroc:.3f}, so it adds nothing over entropy; improve it (more "
                "training questions, probe.* settings) or set probe.allow_below_entropy: true to publish it anyway\n"
                f"{err}"
            ) from None
        raise
