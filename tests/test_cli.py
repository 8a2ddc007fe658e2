"""The CLI's contract with a user: clear errors for bad input, live rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from skillrag import cli
from skillrag.data.schema import Passage
from skillrag.errors import ConfigError
from skillrag.methods import Components
from skillrag.pipeline import runtime, stages
from skillrag.pipeline.runtime import components
from skillrag.registry import METHOD_NAMES
from tests.conftest import REPO, SHARED_DATA
from tests.fakes import FakeLM, OverlapRetriever
from tests.retrieval.corpus import make_passages

runner = CliRunner()


@pytest.fixture
def index_built(monkeypatch) -> None:
    """The BM25 index taken as present (the commands build a missing one first, from the real corpus)."""
    monkeypatch.setattr(stages, "ensure_index", lambda params, paths, say: None)


@pytest.fixture
def params_file(tmp_path) -> Path:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["local_dir"] = str(REPO.parent / "shared" / "data")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def invoke(params_file: Path, *args: str):
    """Run the CLI as the console script does (errors -> exit 1, a configuration error 2, with a
    message, no traceback)."""
    try:
        result = runner.invoke(cli.app, ["--params", str(params_file), *args], catch_exceptions=False)
    except Exception as err:  # noqa: BLE001 - mirror cli.run()'s handling
        return 2 if isinstance(err, ConfigError) else 1, str(err)
    return result.exit_code, result.output


def test_empty_question_is_refused(params_file):
    code, out = invoke(params_file, "ask", "   ", "--method", "no_retrieval")
    assert code == 1 and "question is empty" in out


def test_unknown_method_is_refused(params_file):
    code, out = invoke(params_file, "ask", "Who?", "--method", "magic")
    assert code == 2 and "unknown method 'magic'" in out
    assert "ircot" in out and "adaptive_rag" in out  # every registered method is listed


def test_evaluating_an_unknown_method_is_one_line_naming_the_known_ones(params_file, monkeypatch, capsys):
    """The console script itself: a configuration error, exit status 2, no traceback."""
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(params_file), "evaluate", "--method", "nosuch"])
    with pytest.raises(SystemExit) as stopped:
        cli.run()
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert err.strip().splitlines() == [f"error: unknown method 'nosuch' (choose from {', '.join(METHOD_NAMES)})"]


def test_a_search_on_a_fresh_clone_builds_the_missing_index_first_and_says_so(tmp_path):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in make_passages()))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["index"].update(corpus_file=str(corpus), smoke_queries=4)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    code, out = invoke(tmp_path / "params.yaml", "search", "Penicillin", "-k", "1")
    assert code == 0, out
    assert "no index at" in out and "Penicillin" in out.split("no index at")[1]


def test_too_long_question_is_refused_naming_the_limit(params_file, monkeypatch):
    monkeypatch.setattr(components, "open_components", lambda *a, **k: pytest.fail("must refuse before loading"))
    code, out = invoke(params_file, "ask", "capital " * 2500, "--method", "no_retrieval")
    assert code == 1 and "19,999 characters, over prepare.max_question_chars=2,000" in out


def test_search_k_below_one_is_a_parameter_error(params_file):
    code, out = invoke(params_file, "search", "Paris", "-k", "0")
    assert code == 2 and "Invalid value for '-k'" in out and "Traceback" not in out


def test_ask_shows_rounds_live_and_answers_on_stdout(params_file, index_built, monkeypatch):
    lm = FakeLM(replies=[" It is Paris.\nAnswer: Paris"])
    retriever = OverlapRetriever([Passage("p1", "Paris", "Paris is the capital of France.")])
    monkeypatch.setattr(components, "open_components", lambda *a, **k: Components(lm, retriever))
    result = runner.invoke(cli.app, ["--params", str(params_file), "ask", "What is the capital of France?", "--method", "single_step"])
    assert result.exit_code == 0, result.output
    assert "round 0" in result.stderr and "passages: Paris" in result.stderr  # progress
    assert result.stdout.startswith("answer: Paris")  # the result alone, to pipe or save


def test_help_lists_every_stage():
    out = runner.invoke(cli.app, ["--help"]).output
    for command in ("prepare", "index", "extract", "train-probe", "evaluate", "ask", "search"):
        assert command in out


def test_ctrl_c_mid_answer_exits_cleanly(params_file, index_built, monkeypatch, capfd):
    class InterruptedLM(FakeLM):
        def generate(self, *args, **kwargs):
            raise KeyboardInterrupt

    retriever = OverlapRetriever([Passage("p1", "Paris", "Paris is the capital of France.")])
    monkeypatch.setattr(components, "open_components", lambda *a, **k: Components(InterruptedLM(), retriever))
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(params_file), "ask", "Who?", "--method", "no_retrieval"])
    with pytest.raises(SystemExit) as info:
        cli.run()
    assert info.value.code == 130
    assert "Traceback" not in capfd.readouterr().err


def test_missing_prober_names_the_command_that_builds_it(params_file, monkeypatch, capsys):
    """The real open_components/open_prober path, with the model and index faked."""
    monkeypatch.setattr(runtime, "open_lm", lambda params: FakeLM())
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever([]))
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(params_file), "ask", "Who?"])
    with pytest.raises(SystemExit) as info:
        cli.run()
    assert info.value.code == 1 and "skillrag train-probe" in capsys.readouterr().err


def test_missing_classifier_names_the_command_that_builds_it(params_file, monkeypatch, capsys):
    """adaptive_rag opens its classifier (and no prober) through the real open_components path."""
    monkeypatch.setattr(runtime, "open_lm", lambda params: FakeLM())
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever([]))
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(params_file), "ask", "Who?", "--method", "adaptive_rag"])
    with pytest.raises(SystemExit) as info:
        cli.run()
    err = capsys.readouterr().err
    assert info.value.code == 1 and "skillrag train-adaptive" in err and "train-probe" not in err


def test_a_configuration_error_is_one_line_and_exit_status_2(params_file, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(params_file), "--profile", "nosuch", "search", "x"])
    with pytest.raises(SystemExit) as info:
        cli.run()
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("error: profile 'nosuch' is not in") and len(err.strip().splitlines()) == 1


def test_a_bug_keeps_its_traceback_even_as_a_value_error(params_file, index_built, monkeypatch, capsys):
    """A ValueError from inside the code is not the user's to fix: it propagates (Python prints its
    traceback) instead of becoming an `error:` line."""

    def broken(*args, **kwargs):
        raise ValueError("an internal invariant broke")

    monkeypatch.setattr("skillrag.retrieval.open_retriever", broken)
    monkeypatch.setattr("sys.argv", ["skillrag", "--params", str(params_file), "search", "x"])
    with pytest.raises(ValueError, match="an internal invariant broke"):
        cli.run()
    assert "error:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["evaluate", "--profile", "tiny"], ["--profile", "tiny", "evaluate"]),
        (["--params", "p.yaml", "search", "q", "-k", "3", "--set=a.b=1"], ["--params", "p.yaml", "--set=a.b=1", "search", "q", "-k", "3"]),
        (["ask", "--", "--set"], ["ask", "--", "--set"]),
        (["--help"], ["--help"]),
    ],
)
def test_global_options_may_follow_the_command(argv, expected):
    assert cli.hoist_global_options(argv) == expected


def test_exp_runs_a_profile_without_touching_the_workspace(tmp_path):
    """`skillrag exp tiny` hands the profile to `dvc exp run --temp`: the experiment records the tiny
    values while the workspace stays as committed (real git and DVC, the prepare stage only)."""
    import os
    import shutil
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    (project / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    shutil.copytree(REPO / "skillrag", project / "skillrag", ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["local_dir"] = str(SHARED_DATA)
    params["index"]["corpus_file"] = str(SHARED_DATA / "corpus" / "passages.jsonl")
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def sh(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, check=True)

    sh("git", "init", "-q")
    sh("dvc", "init", "-q")
    sh("git", "add", "-A")
    sh("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    out = sh("skillrag", "exp", "tiny", "--", "prepare")
    assert "dvc exp run --temp -S" in out.stdout + out.stderr
    assert sh("git", "status", "--porcelain").stdout == ""
    assert not (project / "data").exists()
    shown = json.loads(sh("dvc", "exp", "show", "--json").stdout)
    runs = [rev for commit in shown for exp in commit.get("experiments") or [] for rev in exp["revs"]]
    assert [rev["data"]["params"]["params.yaml"]["data"]["prepare"]["train_size"] for rev in runs] == [90]


def test_a_stage_in_an_experiment_copy_starts_afresh_and_the_users_project_is_never_cleared(tmp_path, monkeypatch):
    """`dvc exp run --temp` copies the committed run's resumable traces into the experiment; with the
    experiment's params the resume guard would refuse them, so the stage DVC names clears its own."""
    home, copy = tmp_path / "home", tmp_path / "copy"
    for root in (home, copy):
        for method in ("skill_rag", "single_step"):
            (root / "data" / "runs" / method).mkdir(parents=True)
            (root / "data" / "runs" / method / "hotpotqa.jsonl").write_text("{}\n")
        (root / "params.yaml").write_text((REPO / "params.yaml").read_text())
    monkeypatch.setenv("DVC_STAGE", "evaluate-skill_rag")
    monkeypatch.setenv("DVC_EXP_NAME", "try1")
    monkeypatch.setenv("DVC_ROOT", str(home))  # DVC points it at the user's project, not the copy
    for root in (copy, home):
        result = runner.invoke(cli.app, ["--params", str(root / "params.yaml"), "params"])
        assert result.exit_code == 0, result.output
    assert not (copy / "data" / "runs" / "skill_rag").exists()
    assert (copy / "data" / "runs" / "single_step" / "hotpotqa.jsonl").exists()  # another stage's
    assert (home / "data" / "runs" / "skill_rag" / "hotpotqa.jsonl").exists()
