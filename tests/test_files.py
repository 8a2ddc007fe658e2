import json
import os

import pytest

from skillrag.files import (
    DataError,
    WorkspaceBusy,
    atomic_path,
    exclusive,
    read_jsonl,
    write_json,
    write_jsonl,
)


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(DataError, match=r"x\.jsonl:3: malformed JSON"):
        list(read_jsonl(path))


def test_non_object_line_is_rejected(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("[1, 2]\n")
    with pytest.raises(DataError, match=r"x\.jsonl:1: expected a JSON object"):
        list(read_jsonl(path))


def test_failed_write_leaves_previous_output_untouched(tmp_path):
    target = tmp_path / "out.jsonl"
    write_jsonl(target, [{"a": 1}])

    def rows():
        yield {"a": 2}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_jsonl(target, rows())
    assert list(read_jsonl(target)) == [{"a": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp debris


def test_atomic_directory_replaces_whole(tmp_path):
    target = tmp_path / "dir"
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "a").write_text("1")
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "b").write_text("2")
    assert sorted(p.name for p in target.iterdir()) == ["b"]


def test_a_crash_between_the_two_renames_of_a_directory_swap_loses_nothing(tmp_path, monkeypatch):
    target = tmp_path / "dir"
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "old").write_text("1")
    real_replace, calls = os.replace, []

    def crash_on_second(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed after the old one went aside, before the new one came in
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_second)
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("2")
    monkeypatch.undo()
    assert not target.exists() and (tmp_path / ".dir.old" / "old").read_text() == "1"  # the old one, aside

    with pytest.raises(RuntimeError), atomic_path(target) as tmp:  # the next write restores it first ...
        raise RuntimeError("and fails itself")
    assert [p.name for p in target.iterdir()] == ["old"]  # ... so the old directory is back
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("2")
    assert [p.name for p in target.iterdir()] == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]  # nothing aside, no temp debris


def test_a_failed_file_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "metrics.json"
    write_json(target, {"em": 0.5})
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(OSError("killed")))
    with pytest.raises(OSError):
        write_json(target, {"em": 0.9})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"em": 0.5}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_a_second_holder_of_a_lock_is_refused_naming_the_first(tmp_path):
    lock = tmp_path / "locks" / "evaluate.lock"
    with exclusive(lock, "`skillrag evaluate`"):
        assert f"pid {os.getpid()}" in (tmp_path / "locks" / "evaluate.lock.owner").read_text()
        busy = rf"`skillrag evaluate` is already running on this workspace \(pid {os.getpid()}: "
        with pytest.raises(WorkspaceBusy, match=busy), exclusive(lock, "`skillrag evaluate`"):
            pass
    with exclusive(lock, "`skillrag evaluate`"):  # released: the next run takes it
        pass
    assert not (tmp_path / "locks" / "evaluate.lock.owner").exists()


def test_publishing_beside_a_socket_flushes_only_the_new_file(tmp_path):
    """The parent folder is flushed as a directory entry, not walked: a socket or another
    stage's files beside the target are none of the writer's business."""
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "daemon.sock"))
    try:
        write_json(tmp_path / "metrics.json", {"em": 1.0})
    finally:
        server.close()
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"em": 1.0}
