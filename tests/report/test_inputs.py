"""What the report reads: methods in the registry's order."""

from __future__ import annotations

from skillrag.registry import METHOD_NAMES
from skillrag.report.inputs import Inputs, in_method_order


def test_methods_are_listed_in_the_registrys_order_and_undeclared_ones_last():
    detail = {name: {} for name in ("skill_rag", "my_method", "no_retrieval", "a_method", "single_step")}
    inputs = Inputs(detail, {}, {}, {}, {}, {}, {}, {}, {})
    assert inputs.methods == ["no_retrieval", "single_step", "skill_rag", "a_method", "my_method"]
    assert in_method_order(reversed(METHOD_NAMES)) == list(METHOD_NAMES)
