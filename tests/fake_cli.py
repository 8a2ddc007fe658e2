"""The real `skillrag` command line over fakes, for tests that run it as a subprocess and send it
signals: a rule-based LM (no model to load) and the term-overlap retriever. Everything else
(the CLI's signal handling, the stage, its lock, the runner, the gate) is the real code.

The LM can pause deterministically, so a test knows the run is mid-question without timing it:
with FAKE_PAUSE_AT=n the n-th generate call touches FAKE_READY and waits, until the file
FAKE_RELEASE exists (when given) or until a signal ends the run.

    python -m tests.fake_cli --params <workspace>/params.yaml evaluate

`make_workspace` writes a workspace it can run in.
"""

from __future__ import annotations

import os
import re
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import yaml

from skillrag import cli
from skillrag.files import write_json
from skillrag.lm.base import Choice, Generation, Option, Pick
from skillrag.paths import Paths
from skillrag.pipeline import runtime
from tests.conftest import write_rows
from tests.fakes import CORPUS, OverlapRetriever, fake_pooled


class PausingLM:
    """Answers "Paris" when the question's first number is even, else "Rome" (both labels occur),
    with hidden states."""

    name, num_layers, hidden_size = "pausing-fake", 4, 8

    def __init__(self) -> None:
        self.calls = 0
        self.pause_at = int(os.environ.get("FAKE_PAUSE_AT", "0"))

    def _pause(self) -> None:
        Path(os.environ["FAKE_READY"]).touch()
        release = os.environ.get("FAKE_RELEASE")
        while release is None or not Path(release).exists():
            time.sleep(0.02)

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture: Sequence[int] | None = None,
        prefix: str | None = None,
    ) -> list[Generation]:
        self.calls += 1
        if self.calls == self.pause_at:
            self._pause()
        out = []
        for prompt in prompts:
            question = prompt.rsplit("Question: ", 1)[-1]
            number = int(re.search(r"\d+", question).group())
            text = " Looked it up.\nAnswer: " + ("Paris" if number % 2 == 0 else "Rome")
            pooled = fake_pooled(question + text, capture, self.hidden_size)
            pieces = re.findall(r"\s*\S+", text)  # a token per word: extract keeps one entry per token
            n = len(pieces)
            out.append(Generation(
                text, list(range(n)), [-0.1] * n, [0.3] * n, len(prompt.split()), None, "stop", pooled=pooled, pieces=pieces,
            ))
        return out

    def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        return [-float(len(c)) for c in continuations]  # a label-length prior (the content-free calibration)

    def choose_and_generate(
        self, prompt: str, options: Sequence[Option], prefix: str | None = None, pick: Pick | None = None
    ) -> Choice:
        """Label scores fixed by the prompt's end (the failure state), then the chosen label's
        continuation as `generate` writes it."""
        scores = [-float(zlib.crc32(f"{prompt[-400:]}{o.label}".encode()) % 5) for o in options]
        index = (pick or (lambda s: s.index(max(s))))(scores)
        option = options[index]
        if option.max_new_tokens < 1:
            return Choice(scores, index, None, len(prompt.split()))
        (generation,) = self.generate([prompt + option.label + option.lead], option.max_new_tokens)
        return Choice(scores, index, generation, generation.prompt_tokens)


def make_workspace(root: Path) -> Path:
    """params.yaml, questions of every split, a model directory and an index fingerprint (the inputs
    the run settings identify); the fakes stand in for the model and the retriever."""
    (root / "model").mkdir(parents=True)
    (root / "model" / "config.json").write_text("{}")
    write_json(Paths(root).index_fingerprint, {"corpus_sha256": "corpus"})
    for split, n in (("train", 4), ("dev", 2), ("eval", 4)):
        rows = [
            {"id": f"nq-{split}-{i}", "dataset": "nq", "question": f"Where is landmark {i} of the {split} set?", "answers": ["Paris"], "split": split}
            for i in range(n)
        ]
        write_rows(root / "data" / "questions" / split / "nq.jsonl", rows)
    params = {
        # one question at a time: the fakes pause or fail at the n-th LM call
        "lm": {"model": str(root / "model"), "device": "cpu", "max_new_tokens": 8, "batch_size": 2, "concurrency": 1},
        "retrieval": {"backend": "bm25s"},
        "extract": {"checkpoint_rows": 2, "checkpoint_seconds": 600},
        "evaluate": {"methods": ["no_retrieval", "single_step"], "datasets": ["nq"]},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


if __name__ == "__main__":
    runtime.open_lm = lambda params: PausingLM()
    runtime.open_retriever = lambda params, paths: OverlapRetriever(CORPUS)
    cli.run()
