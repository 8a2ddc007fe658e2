import pytest

from skillrag.files import DataError, atomic_path, read_jsonl, write_jsonl


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
