"""The prober ensemble: mean P(correct) over per-layer probers, saved as safetensors + probe.json.

Weights are read only through safetensors (never pickle), so a probe directory from elsewhere
cannot run code on load. `probe.json` records which model and hidden size the probers read,
the sha256 of every weights file (verified on load: a corrupted file would otherwise give NaN or
wrong scores silently), the pooling it reads (`pooling`, skillrag.probe.state_store) and the
dev-chosen acceptance cuts per decision point (`cuts`, skillrag.probe.cuts). It also records the identity of the
model whose states it read (`identity`: name, dtype, weights digest, licence). Loading refuses a
prober built for another model, another dtype or other weights (bfloat16 states differ from
float32 ones; a re-converted model's from the old one's): its scores would be meaningless
(`skillrag.provenance.check_identity`, the check the learned router and the classifier use too).

The acceptance rule is "accept iff P(correct) > cut", with one cut per decision point:
`before_retrieval` for a closed-book answer (accept it or retrieve), `after_evidence` for every
answer made over passages (accept it or retry). What a retry is worth depends on the method that
retries, so probe.json stores the after-evidence cut per checked method
(`{"before_retrieval": c, "after_evidence": {"probing_rag": c1, "skill_rag": c2}}`). The cuts are
resolved when the prober is loaded, for the method that loads it, from `probe.threshold`: "auto"
takes the cuts chosen on dev at training time and stored in probe.json (`cuts`); a number t
gives the paper's rule at both points, cut = 0.5 + t.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from skillrag.errors import ArtifactError
from skillrag.files import atomic_path, write_json
from skillrag.probe.model import LayerProber
from skillrag.provenance import check_identity, digest

BUILD_HINT = "rebuild it with `skillrag train-probe` (or `dvc repro train_probe`)"
REBUILD_FROM_STATES = "`dvc repro train_probe` (extract then train-probe: the states must come from the model too)"
STRUCTURE_KEYS = ("layers", "hidden_size", "hidden", "norm", "files")
PAPER_CUT = 0.5
BEFORE_RETRIEVAL, AFTER_EVIDENCE = "before_retrieval", "after_evidence"
DECISION_POINTS = (BEFORE_RETRIEVAL, AFTER_EVIDENCE)
DEFAULT_POOLING = "generated_mean"

Threshold = Literal["auto"] | float


class ProbeError(ArtifactError):
    """A prober that cannot be used here (missing, for another model, incomplete or corrupted),
    or a score that is not a number."""


def weights_file(directory: Path, layer: int) -> Path:
    return directory / f"layer_{layer}.safetensors"


def accepted(score: Any, cut: float) -> Any:
    """The acceptance rule, for one score or an array of them: P(correct) strictly above `cut`."""
    return score > cut


class Prober:
    """Per-layer probers on CPU; accepts an answer at a decision point iff mean P(correct) > its cut.

    `info` holds what the prober cannot know from its modules: training facts (params, the
    sha256 of the training data, the pooling, the dev-chosen `cuts`) and, once saved or loaded,
    the model id. A freshly trained prober uses the paper's cut until `use_threshold` says otherwise.
    """

    def __init__(self, probers: Mapping[int, LayerProber], info: Mapping[str, Any]) -> None:
        if not probers:
            raise ProbeError("a Prober needs at least one layer")
        sizes = {model.input_size for model in probers.values()}
        if len(sizes) != 1:
            raise ProbeError(f"per-layer probers disagree on the hidden size: {sorted(sizes)}")
        self.probers = {layer: probers[layer].cpu().eval() for layer in sorted(probers)}
        self.hidden_size = sizes.pop()
        self.info = dict(info)
        self.cuts: dict[str, float] = dict.fromkeys(DECISION_POINTS, PAPER_CUT)

    @property
    def layers(self) -> list[int]:
        return list(self.probers)

    @property
    def hidden(self) -> list[int]:
        return next(iter(self.probers.values())).hidden

    @property
    def norm(self) -> str:
        return next(iter(self.probers.values())).norm

    @property
    def pooling(self) -> str:
        """Which pooled hidden state the prober reads (Generation.pooled key)."""
        return str(self.info.get("pooling", DEFAULT_POOLING))

    def use_threshold(self, threshold: Threshold, method: str | None = None) -> dict[str, float]:
        """Set the acceptance cuts from `probe.threshold` and return them: "auto", the stored dev
        cuts, the after-evidence one of `method` (None: a caller that only decides before
        retrieval; the after-evidence cut is then left unset); t: 0.5 + t at both points."""
        if threshold != "auto":
            self.cuts = dict.fromkeys(DECISION_POINTS, PAPER_CUT + float(threshold))
            return dict(self.cuts)
        stored = self.info.get("cuts")
        if not isinstance(stored, Mapping) or not isinstance(stored.get(AFTER_EVIDENCE), Mapping) or BEFORE_RETRIEVAL not in stored:
            raise ProbeError(f"this prober records no dev-chosen cuts per decision point and method (cuts); {BUILD_HINT}")
        self.cuts = {BEFORE_RETRIEVAL: float(stored[BEFORE_RETRIEVAL])}
        if method is not None:
            by_method = stored[AFTER_EVIDENCE]
            if method not in by_method:
                raise ProbeError(
                    f"this prober records no after-evidence cut for {method!r} (has {sorted(by_method)}); {BUILD_HINT}"
                )
            self.cuts[AFTER_EVIDENCE] = float(by_method[method])
        return dict(self.cuts)

    def layer_probs(self, features: Mapping[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        """P(correct) per layer, each [N], for features {layer: [N, hidden_size]}."""
        missing = [layer for layer in self.layers if layer not in features]
        if missing:
            raise ProbeError(
                f"hidden states lack layers {missing} that the prober reads (have {sorted(features)})"
            )
        probs = {}
        with torch.inference_mode():
            for layer, model in self.probers.items():
                x = features[layer].to(device="cpu", dtype=torch.float32)
                if x.shape[-1] != self.hidden_size:
                    raise ProbeError(
                        f"layer {layer} hidden states have size {x.shape[-1]}, the prober expects {self.hidden_size}"
                    )
                probs[layer] = model(x).softmax(dim=-1)[..., 1]
        return probs

    def score_batch(self, features: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """Mean over layers of P(correct), [N]."""
        return torch.stack(list(self.layer_probs(features).values())).mean(dim=0)

    def score(self, hidden: Mapping[int, torch.Tensor]) -> float:
        """Mean P(correct) for one answer's hidden states {layer: [hidden_size]}; a NaN or
        infinite score is an error naming the layers that produced it, never a verdict."""
        probs = self.layer_probs({layer: h.reshape(1, -1) for layer, h in hidden.items()})
        bad = [layer for layer, p in probs.items() if not math.isfinite(float(p[0]))]
        if bad:
            if any(not torch.isfinite(hidden[layer]).all() for layer in bad):
                cause = "the LM's hidden states there are not finite"
            else:
                cause = f"the prober's weights are broken; {BUILD_HINT}"
            raise ProbeError(f"the prober's score is not a number: layers {bad} gave NaN/inf ({cause})")
        return float(torch.stack([p[0] for p in probs.values()]).mean())

    def accepts(self, score: float, point: str) -> bool:
        """Whether an answer with this score is accepted at decision `point` ("before_retrieval":
        closed-book, "after_evidence": over passages)."""
        if point not in DECISION_POINTS:
            raise ValueError(f"unknown decision point {point!r}: choose from {list(DECISION_POINTS)}")
        if point not in self.cuts:
            raise ProbeError("the after-evidence cut is chosen per method: load the prober for one (use_threshold(..., method))")
        return bool(accepted(score, self.cuts[point]))

    def save(self, directory: str | Path, meta: Mapping[str, Any]) -> None:
        """Write `layer_<l>.safetensors` per layer and `probe.json` (with each file's sha256),
        atomically as one directory.

        `meta` adds facts known to the caller and must name the model ("model") unless `info`
        already does; it may not override the structure keys, which come from the modules.
        """
        clash = sorted(set(meta) & set(STRUCTURE_KEYS))
        if clash:
            raise ValueError(f"meta may not set {clash}: they are read from the probers")
        record = {
            **self.info, **meta, "layers": self.layers, "hidden_size": self.hidden_size, "hidden": self.hidden, "norm": self.norm
        }
        if not record.get("model"):
            raise ValueError("meta must name the model the prober reads, e.g. {'model': 'smollm2-135m'}")
        with atomic_path(directory) as tmp:
            tmp.mkdir()
            for layer, model in self.probers.items():
                save_file(model.state_dict(), weights_file(tmp, layer), metadata={"layer": str(layer)})
            record["files"] = {weights_file(tmp, layer).name: digest(weights_file(tmp, layer)) for layer in self.layers}
            write_json(tmp / "probe.json", record)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        expected_model: Mapping[str, Any] | None = None,
        expected_hidden_size: int | None = None,
    ) -> Prober:
        """Read a saved prober, checking it was trained for the model `expected_model` (its
        identity: name, dtype and digest, see `skillrag.lm.loading.model_identity`) and
        `expected_hidden_size`, and that every weights file has the sha256 recorded in probe.json."""
        directory = Path(directory)
        record_file = directory / "probe.json"
        if not record_file.is_file():
            raise ProbeError(f"no trained prober at {directory} (no probe.json); {BUILD_HINT}")
        try:
            record = json.loads(record_file.read_text())
            layers, hidden_size = record["layers"], record["hidden_size"]
            hidden, files, norm = record["hidden"], dict(record["files"]), record.get("norm", "layer")
        except (ValueError, KeyError, TypeError) as err:  # ValueError covers JSON and UTF-8 decoding
            raise ProbeError(f"{record_file} is not a valid prober record ({err!r}); {BUILD_HINT}") from None
        if expected_model is not None:  # its states came from another model, dtype or weights: refused
            check_identity(record.get("identity"), expected_model, f"the prober at {directory}", REBUILD_FROM_STATES)
        if expected_hidden_size is not None and hidden_size != expected_hidden_size:
            raise ProbeError(
                f"the prober at {directory} reads hidden size {hidden_size}, but the current model has "
                f"hidden size {expected_hidden_size}; retrain: {BUILD_HINT}"
            )
        missing = [layer for layer in layers if not weights_file(directory, layer).is_file()]
        if missing:
            raise ProbeError(f"the prober at {directory} lacks weights for layers {missing}; {BUILD_HINT}")
        probers = {}
        for layer in layers:
            path = weights_file(directory, layer)
            if digest(path) != files.get(path.name):
                raise ProbeError(f"{path} is corrupted (its sha256 differs from probe.json); {BUILD_HINT}")
            model = LayerProber(hidden_size, hidden, norm)
            try:
                model.load_state_dict(load_file(path))
            except (RuntimeError, SafetensorError) as err:
                message = str(err).splitlines()[0]
                raise ProbeError(f"{path} does not match probe.json ({message}); {BUILD_HINT}") from None
            probers[layer] = model
        info = {key: value for key, value in record.items() if key not in STRUCTURE_KEYS}
        return cls(probers, info)
