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
    """The gate on `train_probe`'s dev report, run before anything is published:

    - dev AUROC recorded per layer; the ensemble's must reach `probe.min_dev_auroc` and so must
      at least half the layers' (0 = record only: a tiny dev set may hold one class, AUROC null);
    - the prober must not rank dev answers worse than mean token entropy beyond noise (the paired
      question-bootstrap 95% interval of the AUROC difference wholly below 0, verdict "below")
      unless `probe.allow_below_entropy`; within noise it passes, and the report says in words
      that it does not beat entropy;
    - no published cut loses dev ACC against its decision point's null (before retrieval:
      always retrieving; after evidence, per gated method: never retrying).
    """
    layers = pd.DataFrame(
        [{"layer": int(layer), "auroc": m["auroc"]} for layer, m in report["per_layer"].items()], columns=["layer", "auroc"]
    )
    ensemble = pd.DataFrame([{"auroc": report["ensemble"]["auroc"]}])
    ensemble_checks = [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=params.min_dev_auroc)]
    if params.min_dev_auroc > 0:
        ensemble_checks.append(gxe.ExpectColumnValuesToNotBeNull(column="auroc"))
    by_point = [("before_retrieval", report["cuts"]["before_retrieval"])]
    by_point += [(f"after_evidence:{method}", cut) for method, cut in report["cuts"]["after_evidence"].items()]
    cuts = pd.DataFrame(
        [{"point": point, "dev_acc": cut["acc"], "dev_acc_null": cut["acc_null"]} for point, cut in by_point if cut["n"]],
        columns=["point", "dev_acc", "dev_acc_null"],
    )
    checks = {
        "per_layer": Check(layers, [gxe.ExpectColumnValuesToBeBetween(column="auroc", min_value=params.min_dev_auroc, mostly=0.5)]),
        "ensemble": Check(ensemble, ensemble_checks),
        "cuts": Check(cuts, [gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="dev_acc", column_B="dev_acc_null", or_equal=True)]),
    }
    versus = report["vs_entropy"]
    if not params.allow_below_entropy:
        checks["vs_entropy"] = Check(
            pd.DataFrame([{"verdict": versus["verdict"]}]),
            [gxe.ExpectColumnValuesToNotBeInSet(column="verdict", value_set=["below"])],
        )
    try:
        return run_gate("probe", checks, result_path)
    except GateFailed as err:
        if versus["verdict"] == "below" and not params.allow_below_entropy:
            raise GateFailed(
                f"{versus['text']}, so it adds nothing over entropy; improve it (more training questions, "
                f"probe.* settings) or set probe.allow_below_entropy: true to publish it anyway\n{err}"
            ) from None
        raise
