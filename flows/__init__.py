"""Prefect flows: one per stage (`flows.stages`), `pipeline` (all stages with the quality gates
between, artifacts at the end) and `reevaluate` (the scheduled re-evaluation; deployments in
prefect.yaml). Each task is a library function; flows only wire them."""
