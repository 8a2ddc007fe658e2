import random
from dataclasses import replace

import pytest

from skillrag.config import PrepareParams
from skillrag.data.sampling import make_splits, split_sizes
from skillrag.data.sources import load_local
from skillrag.text import normalize
from tests.conftest import make_bundle

ALL = ["hotpotqa", "nq", "triviaqa", "musique", "2wiki"]


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
