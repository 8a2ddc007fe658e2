"""Hidden-state probers: one small MLP per layer, their ensemble, training and assessment.

Only the ensemble is imported here, so that methods which just score answers do not pay for
sklearn and matplotlib; training and assessment live in `skillrag.probe.training` and
`skillrag.probe.assessment`.
"""

from skillrag.probe.prober import ProbeError, Prober

__all__ = ["ProbeError", "Prober"]
