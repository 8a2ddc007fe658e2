"""experiments/router-100/headroom.py still runs against the library it imports (exploration,
skill calibration, traces), on a tiny slice of the experiment's own traces."""

from __future__ import annotations

import importlib.util
import re

from tests.conftest import REPO

EXPERIMENT = REPO / "experiments" / "router-100"


def _headroom():
    spec = importlib.util.spec_from_file_location("headroom", EXPERIMENT / "headroom.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_headroom_bounds_every_constant_skill_by_the_oracle_on_a_slice_of_the_traces(tmp_path, capsys):
    lines = (EXPERIMENT / "router_traces" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    _headroom().main(tmp_path)

    out = capsys.readouterr().out
    assert out.startswith(f"{len(lines)} questions, ")
    oracle, states = map(int, re.search(r"oracle fixes (\d+) of (\d+)", out).groups())
    alone = {skill: int(n) for skill, n in re.findall(r"'(\w+)': (\d+)", out.split("each skill always:")[1].split(";")[0])}
    assert 0 < states and alone and all(n <= oracle <= states for n in alone.values())
    assert "prompt, content-free" in out and "learned, balanced (cv)" in out
