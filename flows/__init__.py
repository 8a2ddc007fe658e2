"""Prefect flows: one per stage (`flows.stages`), `pipeline` (all stages with the quality gates
between, artifacts at the end) and `reevaluate` (the scheduled re-evaluation; deployments in
prefect.yaml). Each task is a library function; flows only wire them.

The project's environment defaults (skillrag.env: offline, quiet, a patient start for Prefect's
temporary server) are set here, before any flow module imports prefect, which reads its settings
when it is imported."""

from skillrag.env import apply_offline_defaults

apply_offline_defaults()
