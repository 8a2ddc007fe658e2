import pytest

from skillrag.gitutil import GitError, git, head

IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@t")


def test_head_names_the_commit_and_whether_tracked_files_changed(tmp_path):
    assert head(tmp_path) is None  # not a repository
    git("init", "-q", cwd=tmp_path, check=True)
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt", cwd=tmp_path, check=True)
    git(*IDENTITY, "commit", "-q", "-m", "first", cwd=tmp_path, check=True)
    commit = git("rev-parse", "HEAD", cwd=tmp_path)
    assert commit is not None and len(commit) == 40
    (tmp_path / "untracked.txt").write_text("not counted\n")
    assert head(tmp_path) == (commit, False)
    (tmp_path / "a.txt").write_text("two\n")
    assert head(tmp_path) == (commit, True)


def test_head_ignores_changes_to_the_paths_it_is_told_are_outputs_even_from_a_subfolder(tmp_path):
    git("init", "-q", cwd=tmp_path, check=True)
    for name in ("code/a.py", "code/data/b.py", "data/runs.jsonl", "dvc.lock"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("one\n")
    git("add", ".", cwd=tmp_path, check=True)
    git(*IDENTITY, "commit", "-q", "-m", "first", cwd=tmp_path, check=True)
    commit = git("rev-parse", "HEAD", cwd=tmp_path)
    outputs = ("data", "dvc.lock")
    (tmp_path / "data" / "runs.jsonl").unlink()  # what DVC does to a stage's outputs before running it
    (tmp_path / "dvc.lock").write_text("two\n")
    assert head(tmp_path / "code", ignoring=outputs) == (commit, False)
    assert head(tmp_path / "code") == (commit, True)
    (tmp_path / "code" / "data" / "b.py").write_text("two\n")  # code named like an output folder, below the top
    assert head(tmp_path / "code", ignoring=outputs) == (commit, True)


def test_a_failing_command_is_none_or_with_check_an_error_naming_it(tmp_path):
    assert git("rev-parse", "HEAD", cwd=tmp_path) is None
    with pytest.raises(GitError, match="git rev-parse HEAD"):
        git("rev-parse", "HEAD", cwd=tmp_path, check=True)
