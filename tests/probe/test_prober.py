import copy
import hashlib
import json
import pickle
from pathlib import Path

import pytest
import torch

from skillrag.errors import ArtifactError
from skillrag.probe.prober import ProbeError, Prober

# What skillrag.lm.loading.model_identity says of the model whose states the prober read.
IDENTITY = {"name": "tiny-llama", "dtype": "bfloat16", "digest": "d1" * 32, "licence": None}


@pytest.fixture
def saved(trained, tmp_path):
    directory = tmp_path / "probe"
    trained.save(directory, {"model": "tiny-llama", "identity": IDENTITY})
    return directory


def test_save_writes_safetensors_per_layer_and_the_record(trained, saved):
    assert sorted(p.name for p in saved.iterdir()) == [
        "layer_3.safetensors",
        "layer_4.safetensors",
        "layer_5.safetensors",
        "probe.json",
    ]
    record = json.loads((saved / "probe.json").read_text())
    assert record["model"] == "tiny-llama"
    assert record["layers"] == [3, 4, 5]
    assert record["hidden_size"] == 16
    assert record["hidden"] == [8]
    assert "threshold" not in record  # resolved when loading, from probe.threshold
    assert record["data_sha256"] == trained.info["data_sha256"]
    assert record["params"]["lr"] == 0.01
    assert record["files"] == {
        name: hashlib.sha256((saved / name).read_bytes()).hexdigest()
        for name in ("layer_3.safetensors", "layer_4.safetensors", "layer_5.safetensors")
    }


def test_round_trip_gives_identical_scores_without_pickle(trained, saved, make_states, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("weights must not be unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    loaded = Prober.load(saved, expected_model=IDENTITY, expected_hidden_size=16)
    features, _ = make_states(50, seed=7)
    assert torch.equal(loaded.score_batch(features), trained.score_batch(features))
    assert loaded.info["model"] == "tiny-llama" and loaded.info["identity"] == IDENTITY
    assert (loaded.layers, loaded.hidden, loaded.cuts) == (trained.layers, trained.hidden, {"before_retrieval": 0.5, "after_evidence": 0.5})


def test_score_of_one_answer_matches_its_batch_row(trained, make_states):
    features, _ = make_states(4, seed=8)
    hidden = {layer: x[2] for layer, x in features.items()}
    assert trained.score(hidden) == pytest.approx(float(trained.score_batch(features)[2]))


def test_score_is_the_mean_of_the_layer_probabilities(trained, make_states):
    features, _ = make_states(6, seed=9)
    per_layer = torch.stack(list(trained.layer_probs(features).values()))
    assert torch.allclose(trained.score_batch(features), per_layer.mean(dim=0))


def test_accepts_strictly_above_each_decision_points_cut(trained):
    assert trained.cuts == {"before_retrieval": 0.5, "after_evidence": 0.5}  # the paper's cut until a threshold is applied
    assert trained.accepts(0.51, "before_retrieval") and not trained.accepts(0.5, "after_evidence")
    with pytest.raises(ValueError, match="unknown decision point 'stage3'"):
        trained.accepts(0.9, "stage3")


STORED = {"before_retrieval": 0.12, "after_evidence": {"probing_rag": 0.3, "skill_rag": 0.0}}
CUTS = {"before_retrieval": 0.12, "after_evidence": 0.3}  # as probing_rag loads them


@pytest.mark.parametrize(
    ("threshold", "cuts"), [("auto", CUTS), (0.0, {"before_retrieval": 0.5, "after_evidence": 0.5}), (0.2, {"before_retrieval": 0.7, "after_evidence": 0.7})]
)
def test_threshold_auto_takes_the_stored_dev_cuts_and_a_number_the_paper_rule(trained, tmp_path, threshold, cuts):
    Prober(trained.probers, {**trained.info, "cuts": STORED}).save(tmp_path / "probe", {"model": "m"})
    prober = Prober.load(tmp_path / "probe")
    assert prober.use_threshold(threshold, "probing_rag") == pytest.approx(cuts)
    for point, cut in cuts.items():
        assert prober.accepts(cut + 1e-6, point) and not prober.accepts(cut, point)


def test_each_gated_method_reads_its_own_after_evidence_cut(trained, tmp_path):
    Prober(trained.probers, {**trained.info, "cuts": STORED}).save(tmp_path / "probe", {"model": "m"})
    prober = Prober.load(tmp_path / "probe")
    assert prober.use_threshold("auto", "skill_rag") == {"before_retrieval": 0.12, "after_evidence": 0.0}
    assert prober.accepts(0.01, "after_evidence")  # skill_rag's null: keep every answer over passages
    prober.use_threshold("auto")  # a caller deciding only before retrieval (tune_thresholds)
    with pytest.raises(ProbeError, match="after-evidence cut is chosen per method"):
        prober.accepts(0.9, "after_evidence")
    with pytest.raises(ProbeError, match="no after-evidence cut for 'ircot'"):
        prober.use_threshold("auto", "ircot")


def test_threshold_auto_without_stored_cuts_names_the_rebuild(trained):
    prober = Prober(trained.probers, {key: v for key, v in trained.info.items() if key != "cuts"})
    with pytest.raises(ProbeError, match="no dev-chosen cuts.*skillrag train-probe"):
        prober.use_threshold("auto")


def test_open_prober_resolves_probe_threshold_at_load_time(trained, tmp_path):
    from types import SimpleNamespace

    from skillrag.config import load_params
    from skillrag.lm.loading import model_identity
    from skillrag.paths import Paths
    from skillrag.pipeline.runtime import open_prober

    paths = Paths(tmp_path)
    model = "skillrag-tests/no-such-model"  # a hub id that is not cached: identity without a digest
    identity = model_identity(model, "cpu", "float32")
    Prober(trained.probers, {**trained.info, "cuts": STORED}).save(paths.probe, {"model": model, "identity": identity})
    lm = SimpleNamespace(name=model, hidden_size=16)
    params_file = Path(__file__).resolve().parents[2] / "params.yaml"
    here = [f"lm.model={model}", "lm.device=cpu", "lm.dtype=float32"]
    assert open_prober(load_params(params_file, overrides=here), paths, lm, "probing_rag").cuts == pytest.approx(CUTS)
    assert open_prober(load_params(params_file, overrides=[*here, "probe.threshold=0.1"]), paths, lm).cuts["before_retrieval"] == pytest.approx(0.6)
    with pytest.raises(ArtifactError, match=r"\(float32, .* the current model is .*\(bfloat16"):
        open_prober(load_params(params_file, overrides=[*here, "lm.dtype=bfloat16"]), paths, lm)


def test_open_prober_refuses_a_float32_prober_under_int8(trained, tmp_path):
    """int8 states differ from float32 ones as bfloat16 states do: the prober is refused, naming both."""
    from types import SimpleNamespace

    from skillrag.config import load_params
    from skillrag.lm.loading import model_identity
    from skillrag.paths import Paths
    from skillrag.pipeline.runtime import open_prober

    paths = Paths(tmp_path)
    model = "skillrag-tests/no-such-model"
    Prober(trained.probers, {**trained.info, "cuts": STORED}).save(
        paths.probe, {"model": model, "identity": model_identity(model, "cpu", "float32")}
    )
    params_file = Path(__file__).resolve().parents[2] / "params.yaml"
    params = load_params(params_file, overrides=[f"lm.model={model}", "lm.device=cpu", "lm.dtype=int8"])
    with pytest.raises(ArtifactError, match=r"\(float32, .* the current model is .*\(int8, .*lm.dtype"):
        open_prober(params, paths, SimpleNamespace(name=model, hidden_size=16))


def test_a_non_finite_score_is_an_error_naming_the_layers_not_a_verdict(trained, make_states):
    features, _ = make_states(1, seed=14)
    hidden = {layer: x[0] for layer, x in features.items()}
    broken = copy.deepcopy(trained)
    with torch.no_grad():
        broken.probers[4].net[-1].weight.fill_(float("nan"))
    with pytest.raises(ProbeError, match=r"not a number: layers \[4\] gave NaN/inf \(the prober's weights"):
        broken.score(hidden)
    hidden[5] = torch.full_like(hidden[5], float("inf"))
    with pytest.raises(ProbeError, match=r"layers \[5\] gave NaN/inf \(the LM's hidden states"):
        trained.score(hidden)


def test_scoring_states_without_a_probed_layer_names_it(trained, make_states):
    features, _ = make_states(2, seed=10)
    del features[4]
    with pytest.raises(ProbeError, match=r"lack layers \[4\]"):
        trained.score_batch(features)


def test_scoring_states_of_another_size_is_a_clear_error(trained):
    with pytest.raises(ProbeError, match="size 12, the prober expects 16"):
        trained.score({layer: torch.zeros(12) for layer in trained.layers})


@pytest.mark.parametrize(
    ("running", "named"),
    [
        ({"name": "smollm2-135m"}, r"built from tiny-llama \(bfloat16, .*current model is smollm2-135m \(bfloat16"),
        ({"dtype": "float32"}, r"built from tiny-llama \(bfloat16, weights digest d1d1d1d1d1d1\), but the current model is tiny-llama \(float32, weights digest d1d1d1d1d1d1\)"),
        ({"digest": "e2" * 32}, r"\(bfloat16, weights digest d1d1d1d1d1d1\), but the current model is tiny-llama \(bfloat16, weights digest e2e2e2e2e2e2\)"),
    ],
)
def test_load_for_another_model_dtype_or_weights_names_both(saved, running, named):
    with pytest.raises(ArtifactError, match=named + ".*dvc repro train_probe") as info:
        Prober.load(saved, expected_model={**IDENTITY, **running})
    assert "\n" not in str(info.value)


def test_a_prober_that_records_no_identity_is_refused_with_the_rebuild(trained, tmp_path):
    trained.save(tmp_path / "old", {"model": "tiny-llama"})  # probe.json from before identities
    with pytest.raises(ArtifactError, match="records no model identity.*dvc repro train_probe"):
        Prober.load(tmp_path / "old", expected_model=IDENTITY)


def test_load_for_another_hidden_size_names_both(saved):
    with pytest.raises(ProbeError, match="hidden size 16.*hidden size 576"):
        Prober.load(saved, expected_hidden_size=576)


def test_missing_directory_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(ProbeError, match="skillrag train-probe.*dvc repro train_probe"):
        Prober.load(tmp_path / "nowhere")


def test_missing_layer_weights_are_named(saved):
    (saved / "layer_4.safetensors").unlink()
    with pytest.raises(ProbeError, match=r"lacks weights for layers \[4\]"):
        Prober.load(saved)


def test_save_requires_the_model_id_and_keeps_structure_from_the_modules(trained, tmp_path):
    with pytest.raises(ValueError, match="name the model"):
        trained.save(tmp_path / "a", {})
    with pytest.raises(ValueError, match="files"):
        trained.save(tmp_path / "b", {"model": "m", "files": {}})


def _one_line_error_naming(path, excinfo):
    message = str(excinfo.value)
    assert "\n" not in message
    assert str(path) in message and "skillrag train-probe" in message and "dvc repro train_probe" in message


@pytest.mark.parametrize("damage", ["garbage", "truncate"])
def test_a_corrupted_or_truncated_weights_file_is_one_line_naming_it(saved, damage):
    path = saved / "layer_4.safetensors"
    data = bytearray(path.read_bytes())
    if damage == "garbage":
        data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    with pytest.raises(ProbeError, match="corrupted") as excinfo:
        Prober.load(saved)
    _one_line_error_naming(path, excinfo)


def test_an_unreadable_weights_file_matching_its_record_is_one_line_naming_it(saved):
    """A file replaced together with its recorded hash still fails cleanly in safetensors."""
    path = saved / "layer_3.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    record = json.loads((saved / "probe.json").read_text())
    record["files"][path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    (saved / "probe.json").write_text(json.dumps(record))
    with pytest.raises(ProbeError, match="does not match probe.json") as excinfo:
        Prober.load(saved)
    _one_line_error_naming(path, excinfo)


def test_a_record_without_file_hashes_asks_for_a_rebuild(saved):
    record = json.loads((saved / "probe.json").read_text())
    del record["files"]
    (saved / "probe.json").write_text(json.dumps(record))
    with pytest.raises(ProbeError, match="not a valid prober record.*skillrag train-probe"):
        Prober.load(saved)
