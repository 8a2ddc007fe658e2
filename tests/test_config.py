from pathlib import Path

import pytest

from skillrag.config import ConfigError, load_params

REPO = Path(__file__).resolve().parents[1]


def test_repo_params_load_and_resolve_paths():
    params = load_params(REPO / "params.yaml")
    assert params.profile == "default"
    assert params.prepare.local_dir.is_absolute()
    assert params.prepare.local_dir == (REPO / "../shared/data").resolve()


def test_profile_and_overrides_apply_in_order():
    params = load_params(REPO / "params.yaml", profile="tiny", overrides=["prepare.eval_size=7"])
    assert params.prepare.train_size == 24  # from the tiny profile
    assert params.prepare.eval_size == 7  # the override wins over the profile


def test_paper_profile_names_the_paper_model():
    params = load_params(REPO / "params.yaml", profile="paper")
    assert params.lm.model == "google/gemma-2-9b-it"
    assert params.prepare.eval_size == 500


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["prepare.eval_size=0"], "greater than or equal to 1"),
        (["prepare.nonsense=1"], "Extra inputs are not permitted"),
        (["no-equals-sign"], "section.key=value"),
        (["retrieval.backend=faiss"], "lucene"),
    ],
)
def test_bad_overrides_are_rejected_with_the_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_params(REPO / "params.yaml", overrides=overrides)


def test_unknown_profile_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="profile 'nope'"):
        load_params(REPO / "params.yaml", profile="nope")
    with pytest.raises(ConfigError, match="no params file"):
        load_params(tmp_path / "params.yaml")
