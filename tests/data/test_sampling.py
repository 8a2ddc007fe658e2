import json
import random
from dataclasses import replace

import pytest
import yaml

from skillrag.config import FirstDraw, PrepareParams
from skillrag.data.sampling import make_splits, split_sizes
from skillrag.data.sources import load_local
from skillrag.text import normalize
from tests.conftest import ALL, REPO, make_bundle, make_origin_bundle


def _params(**kw) -> PrepareParams:
    return PrepareParams(train_size=30, dev_size=9, eval_size=5, seed=7, **kw)


def _questions(root):
    return {d: load_local(root, d) for d in ALL}


@pytest.fixture
def bundle(tmp_path):
    return _questions(make_bundle(tmp_path, {d: 40 for d in ALL}))


def test_sizes_and_disjointness(bundle):
    splits = make_splits(bundle, _params())
    sizes = split_sizes(_params())
    for split, by_dataset in sizes.items():
        assert {d: len(splits[split][d]) for d in by_dataset} == by_dataset
    texts = [normalize(q.question) for by in splits.values() for qs in by.values() for q in qs]
    assert len(texts) == len(set(texts)), "a question appears in two splits"
    assert all(q.split == split for split, by in splits.items() for qs in by.values() for q in qs)


def test_same_seed_same_splits_regardless_of_file_order(bundle):
    shuffled = {d: random.Random(1).sample(qs, len(qs)) for d, qs in bundle.items()}
    assert make_splits(bundle, _params()) == make_splits(shuffled, _params())
    other = make_splits(bundle, _params().model_copy(update={"seed": 8}))
    assert other != make_splits(bundle, _params())


def test_eval_prefers_evidence_in_corpus(bundle):
    splits = make_splits(bundle, _params())
    assert all(q.meta.get("gold_context_in_corpus") for q in splits["eval"]["nq"])


def test_duplicate_texts_across_datasets_are_not_reused(bundle):
    clone = [replace(q, id="dup-" + q.id, dataset="triviaqa") for q in bundle["nq"]]
    bundle["triviaqa"] = clone  # every triviaqa question repeats an nq question
    with pytest.raises(ValueError, match="unused questions"):
        make_splits(bundle, _params().model_copy(update={"train_size": 90}))


def test_real_bundle_default_profile(shared_data):
    params = PrepareParams(local_dir=shared_data)
    splits = make_splits({d: load_local(shared_data, d) for d in ALL}, params)
    assert sum(len(q) for q in splits["train"].values()) == params.train_size
    evidence = [q.meta.get("gold_context_in_corpus") for q in splits["eval"]["hotpotqa"]]
    assert all(evidence)


def _ids(splits):
    return {(split, d): {q.id for q in qs} for split, by in splits.items() for d, qs in by.items()}


def test_every_split_keeps_its_questions_when_any_split_grows(tmp_path):
    """Nested: a run at larger sizes holds every question of a run at smaller ones (while the
    original-train questions last), so the two can be compared question by question. The first
    draw is small here so that growth does the work."""
    bundle = _questions(make_origin_bundle(tmp_path, n_train=60, n_dev=60))
    first = {"train_size": 6, "dev_size": 3, "eval_size": 2}
    sizes = [(t, d, e) for t in (6, 30, 75) for d in (3, 15, 30) for e in (2, 10, 20)]
    runs = {s: _ids(make_splits(bundle, PrepareParams(train_size=s[0], dev_size=s[1], eval_size=s[2], first_draw=first))) for s in sizes}
    for small, smaller_ids in runs.items():
        for large, larger_ids in runs.items():
            for (split, dataset), ids in smaller_ids.items():
                axis = ("train", "dev", "eval").index(split)
                if small[axis] <= large[axis]:
                    assert ids <= larger_ids[split, dataset], (split, dataset, small, large)


FIRST_DRAW = FirstDraw().model_dump()  # the sizes of the run committed before issues 46 and 49


def test_the_first_draw_is_kept_when_the_dev_pool_grows(tmp_path):
    """The original rule drew dev before train from shuffles of its own, so a larger dev pool took
    questions the smaller run had trained on; the first draw (the default sizes) keeps them."""
    bundle = _questions(make_origin_bundle(tmp_path, n_train=400, n_dev=200))
    before = _ids(make_splits(bundle, PrepareParams(**FIRST_DRAW)))
    after = _ids(make_splits(bundle, PrepareParams(train_size=600, dev_size=300, eval_size=60)))
    assert all(ids <= after[key] for key, ids in before.items())


def test_the_committed_questions_are_what_the_locked_prepare_params_draw(shared_data):
    """data/questions is what this code draws with the params dvc.lock recorded for prepare."""
    committed = {
        (split, path.stem): {row["id"] for row in map(json.loads, path.read_text().splitlines())}
        for split in ("train", "dev", "eval")
        for path in (REPO / "data" / "questions" / split).glob("*.jsonl")
    }
    locked = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]["prepare"]["params"]["params.yaml"]["prepare"]
    bundle = {d: load_local(shared_data, d) for d in ALL}
    assert _ids(make_splits(bundle, PrepareParams(**{**locked, "local_dir": shared_data}))) == committed


def test_the_first_draw_is_inside_the_larger_pools(shared_data):
    """Every question of the first draw (100 train, 100 dev, 30 eval per dataset: the committed run
    before issues 46 and 49) is in the sample at 1,000 / 300 / 100, so results stay comparable."""
    bundle = {d: load_local(shared_data, d) for d in ALL}
    first = _ids(make_splits(bundle, PrepareParams(local_dir=shared_data, **FIRST_DRAW)))
    larger = _ids(make_splits(bundle, PrepareParams(local_dir=shared_data, train_size=1000, dev_size=300, eval_size=100)))
    assert {key: len(ids) for key, ids in larger.items() if key[0] == "train"} == {
        ("train", "hotpotqa"): 334, ("train", "nq"): 333, ("train", "triviaqa"): 333,
    }
    assert {key: len(ids - larger[key]) for key, ids in first.items()} == {key: 0 for key in first}
