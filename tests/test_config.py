from pathlib import Path

import pytest
import yaml

from skillrag.config import ConfigError, ReportParams, experiment_overrides, load_params, parse_override
from skillrag.paths import Paths

REPO = Path(__file__).resolve().parents[1]


def test_repo_params_load_and_resolve_paths():
    params = load_params(REPO / "params.yaml")
    assert params.profile == "default"
    assert params.prepare.local_dir.is_absolute()
    assert params.prepare.local_dir == (REPO / "../shared/data").resolve()


def test_profile_and_overrides_apply_in_order():
    params = load_params(REPO / "params.yaml", profile="tiny", overrides=["prepare.eval_size=7"])
    assert params.prepare.train_size == 90  # from the tiny profile
    assert params.prepare.eval_size == 7  # the override wins over the profile


def _flat(tree: dict, prefix: str = "") -> dict:
    """{"lm": {"model": m}} -> {"lm.model": m}."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("profile", sorted(yaml.safe_load((REPO / "params.yaml").read_text())["profiles"]))
def test_each_profile_is_valid_and_changes_exactly_the_keys_it_names(profile):
    """Every profile validates, each key it names takes the profile's value, and every other key
    keeps params.yaml's (a dotted key must not replace its whole section)."""
    named = yaml.safe_load((REPO / "params.yaml").read_text())["profiles"][profile]
    exclude = {"profile", "profiles"}
    default = _flat(load_params(REPO / "params.yaml").model_dump(mode="json", exclude=exclude))
    chosen = _flat(load_params(REPO / "params.yaml", profile=profile).model_dump(mode="json", exclude=exclude))
    assert set(named) <= set(chosen), f"profile {profile} names unknown keys: {sorted(set(named) - set(chosen))}"
    assert {key: chosen[key] for key in named} == named
    assert {key for key in default if default[key] != chosen[key]} <= set(named)


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


def test_params_file_may_not_choose_a_profile(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("profile: tiny\n")
    with pytest.raises(ConfigError, match="--profile NAME"):
        load_params(path)


def test_experiment_overrides_turn_params_yaml_into_the_profile():
    """Applying the `dvc exp run -S` arguments to params.yaml gives exactly the profile's values,
    with the data paths absolute (the experiment runs in a temporary copy of the project)."""
    tree = yaml.safe_load((REPO / "params.yaml").read_text())
    for override in experiment_overrides(REPO / "params.yaml", "tiny"):
        key, value = parse_override(override)
        section, leaf = key.split(".")
        tree[section][leaf] = value
    path = REPO / "params.yaml"
    assert load_params(path).resolved() != load_params(path, "tiny").resolved()
    as_experiment = load_params(path).model_validate(tree)
    assert as_experiment.resolved() == load_params(path, "tiny").resolved()
    assert Path(tree["prepare"]["local_dir"]).is_absolute()


def test_each_profile_gets_its_own_workspace(tmp_path):
    assert Paths.for_profile(tmp_path, None).root == tmp_path
    assert Paths.for_profile(tmp_path, "default").metrics == tmp_path / "reports" / "metrics.json"
    assert Paths.for_profile(tmp_path, "tiny").metrics == tmp_path / "workspaces" / "tiny" / "reports" / "metrics.json"


def test_every_config_default_is_params_yaml_value():
    """params.yaml is where defaults live: a model built without params.yaml (`Params()`, a
    section's own default) holds exactly its values, knob by knob."""
    from skillrag.config import Params

    tree = yaml.safe_load((REPO / "params.yaml").read_text())
    tree.pop("profiles")
    from_file, defaults = Params.model_validate(tree).resolved(), Params().resolved()
    differing = {
        f"{section}.{key}": (value, defaults[section][key])
        for section, values in from_file.items()
        for key, value in values.items()
        if defaults[section][key] != value
    }
    assert not differing, f"config defaults differ from params.yaml (params.yaml value, default): {differing}"


def test_the_primary_comparisons_are_named_in_params_yaml_and_validated():
    from skillrag.config import Comparison

    primary = load_params(REPO / "params.yaml").report.primary
    assert [(c.first, c.second, c.scope) for c in primary] == [
        ("skill_rag", "probing_rag", "overall"), ("skill_rag", "single_step", "overall")]
    with pytest.raises(ValueError, match="two methods"):
        Comparison(first="skill_rag", second="skill_rag")
    with pytest.raises(ValueError):
        Comparison(first="skill_rag", second="no_such_rag")
    with pytest.raises(ValueError, match="names a comparison twice"):
        ReportParams(primary=[{"first": "skill_rag", "second": "ircot"}] * 2)
