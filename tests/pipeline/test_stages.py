"""What the stages record beside their traces (the stages themselves run in tests/e2e)."""

import json
import re
import shutil
from pathlib import Path

import pytest

from skillrag.config import load_params
from skillrag.errors import ArtifactError, DataError
from skillrag.eval.runner import read_traces
from skillrag.files import write_json
from skillrag.lm.base import Generation
from skillrag.paths import Paths
from skillrag.pipeline import runtime, stages
from skillrag.pipeline.settings import run_settings
from skillrag.quality import GateFailed
from tests.conftest import write_rows
from tests.fake_cli import PausingLM, make_workspace
from tests.fakes import CORPUS, HashProber, OverlapRetriever, RuleLM, fake_pooled, use_prober, without_latency

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(tmp_path):
    """Inputs of every kind: a model directory, an index with its manifest, a prober, questions."""
    paths = Paths(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    write_json(paths.index_fingerprint, {"corpus_sha256": "corpus"})
    paths.probe.mkdir(parents=True)
    (paths.probe / "probe.json").write_text('{"layers": [2]}')
    (paths.probe / "layer_2.safetensors").write_bytes(b"weights")
    questions = paths.question_file("eval", "nq")
    questions.parent.mkdir(parents=True)
    questions.write_text('{"id": "nq-0"}\n')
    return paths, model, questions


def _settings(workspace, method, *overrides):
    paths, model, questions = workspace
    params = load_params(REPO / "params.yaml", overrides=[f"lm.model={model}", "lm.device=cpu", *overrides])
    return run_settings(params, paths, method, [questions])


def _compared(settings):
    return {key: value for key, value in settings.items() if key != "provenance"}


def test_run_settings_follow_what_shapes_a_trace_and_not_speed_knobs(workspace):
    base = _settings(workspace, "skill_rag")
    assert _compared(_settings(workspace, "skill_rag", "lm.threads=1", "lm.batch_size=2")) == _compared(base)
    assert _settings(workspace, "skill_rag", "lm.max_new_tokens=32")["params"]["lm.max_new_tokens"] == 32
    assert _settings(workspace, "skill_rag", "retrieval.k=3")["params"]["retrieval.k"] == 3
    assert _settings(workspace, "skill_rag", "probe.threshold=0.1")["params"]["probe.threshold"] == 0.1
    assert _settings(workspace, "skill_rag", "lm.dtype=bfloat16")["inputs"]["model"]["dtype"] == "bfloat16"
    assert set(base["inputs"]) == {"questions", "model", "prompts", "index", "prober", "router"}  # the prompt router reads its offsets

    paths, model, questions = workspace
    (paths.probe / "layer_2.safetensors").write_bytes(b"retrained")
    (model / "model.safetensors").write_bytes(b"other weights")
    questions.write_text('{"id": "nq-1"}\n')
    write_json(paths.index_fingerprint, {"corpus_sha256": "another corpus"})
    changed = _settings(workspace, "skill_rag")["inputs"]
    assert all(changed[name] != base["inputs"][name] for name in ("prober", "model", "questions", "index"))

    paths.router.mkdir(parents=True)
    (paths.router / "router.safetensors").write_bytes(b"router")
    assert _settings(workspace, "skill_rag", "methods.router=learned")["inputs"]["router"]


def test_each_method_records_only_what_it_reads(workspace):
    closed_book = _settings(workspace, "no_retrieval")
    assert set(closed_book["inputs"]) == {"questions", "model", "prompts"}
    assert set(closed_book["params"]) == {"lm.max_new_tokens", "lm.prompt_format"}
    assert _compared(_settings(workspace, "no_retrieval", "methods.max_rounds=1", "retrieval.k=2")) == _compared(
        closed_book
    )
    single = _settings(workspace, "single_step")
    assert "index" in single["inputs"] and "prober" not in single["inputs"]
    assert "methods.max_rounds" not in single["params"] and single["params"]["retrieval.backend"] == "lucene"
    probing = _settings(workspace, "probing_rag", "methods.max_rounds=1")
    assert "methods.exit_mode" not in probing["params"] and probing["params"]["methods.max_rounds"] == 1


def test_provenance_names_the_code_and_libraries(workspace):
    from skillrag.gitutil import git

    provenance = _settings(workspace, "no_retrieval")["provenance"]
    assert set(provenance) == {"git_commit", "git_dirty", "torch", "transformers", "skillrag", "device"}
    assert provenance["device"] == "cpu"  # the device the run used (`_settings` sets lm.device=cpu)
    assert provenance["git_commit"] == git("rev-parse", "HEAD", cwd=REPO) and isinstance(provenance["git_dirty"], bool)
    assert provenance["torch"] and provenance["transformers"] and provenance["skillrag"]


class _Failing(PausingLM):
    """The fake CLI's LM, raising `error` on the calls numbered in `at`."""

    def __init__(self, error: Exception, at: set[int]) -> None:
        super().__init__()
        self.error, self.at = error, at

    def generate(self, prompts, *args, **kwargs):
        if self.calls + 1 in self.at:
            self.calls += 1
            raise self.error
        return super().generate(prompts, *args, **kwargs)


@pytest.fixture
def evaluate_in(tmp_path, monkeypatch):
    """Run the real evaluate stage in a fake workspace with `lm` (tests/fake_cli.py)."""
    workspace = make_workspace(tmp_path / "ws")
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))

    def run(lm, *overrides):
        monkeypatch.setattr(runtime, "open_lm", lambda params: lm)
        params = load_params(workspace / "params.yaml", overrides=list(overrides))
        stages.evaluate.evaluate(params, Paths(workspace))
        return params, Paths(workspace), stages.summarize.summarize(params, Paths(workspace))

    return run


def test_resuming_after_an_index_rebuild_is_refused_naming_the_index(evaluate_in):
    _, paths, _ = evaluate_in(PausingLM())
    write_json(paths.index_fingerprint, {"corpus_sha256": "another corpus"})
    before = paths.run_file("single_step", "nq").read_text()
    with pytest.raises(DataError, match=r"single_step/nq\.jsonl holds 4 traces run with other settings \(changed: inputs\.index\)"):
        evaluate_in(PausingLM())
    assert paths.run_file("single_step", "nq").read_text() == before


def test_a_programming_error_stops_evaluate(evaluate_in):
    with pytest.raises(TypeError, match="a bug"):
        evaluate_in(_Failing(TypeError("a bug"), at={2}))


def test_the_runs_gate_fails_above_the_error_rate_cap_before_any_metric_is_published(evaluate_in, tmp_path):
    with pytest.raises(GateFailed, match=r"2 of 4 traces are errors .*most common: RuntimeError x2, e\.g\. 'RuntimeError: CUDA out of memory'"):
        evaluate_in(_Failing(RuntimeError("CUDA out of memory"), at={2, 3}))
    paths = Paths(tmp_path / "ws")
    assert not paths.metrics.exists() and not paths.metrics_detail.exists()
    relaxed = load_params(paths.root / "params.yaml", overrides=["evaluate.max_error_rate=0.5"])
    assert stages.summarize.summarize(relaxed, paths) and paths.metrics.exists()
    paths.metrics.unlink()

    evaluate_in(PausingLM())  # the rerun retries the two error traces
    assert paths.metrics.exists()


def test_evaluate_answers_questions_concurrently_and_reuses_answers_across_methods(tmp_path, monkeypatch):
    """lm.concurrency and lm.reuse_cache change speed only: the run files are those of one
    question at a time without reuse (latency aside); the metrics say how much was reused."""
    workspace = make_workspace(tmp_path / "ws")
    topics = ["Cast Away film", "Apollo 11 Moon", "FedEx company", "Forrest Gump film", "Tom Hanks actor", "Robert Zemeckis"]
    rows = [
        {"id": f"nq-eval-{i}", "dataset": "nq", "question": f"What about the {topic} case {i}?", "answers": ["1969"], "split": "eval"}
        for i, topic in enumerate(topics)
    ]
    write_rows(workspace / "data" / "questions" / "eval" / "nq.jsonl", rows)  # the corpus has passages on these
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    paths, names = Paths(workspace), ["no_retrieval", "single_step", "probing_rag"]
    use_prober(monkeypatch, paths, HashProber())
    files = [paths.run_file(name, "nq") for name in names]
    runs, reuse, calls = [], [], []
    for concurrency, cache in ((1, 0), (3, 64)):
        lm = RuleLM()
        monkeypatch.setattr(runtime, "open_lm", lambda params, lm=lm: lm)
        overrides = [f"lm.concurrency={concurrency}", f"lm.reuse_cache={cache}", f"evaluate.methods={names}", "lm.layers=all"]
        params = load_params(workspace / "params.yaml", overrides=overrides)
        results = stages.evaluate.evaluate(params, paths)
        metrics = stages.summarize.summarize(params, paths)
        runs.append([[without_latency(json.loads(line)) for line in f.read_text().splitlines()] for f in files])
        reuse.append({name: metrics[name]["nq"]["reuse"]["hits"] for name in names})
        calls.append(sum(len(prompts) for _, prompts in lm.calls))
        shutil.rmtree(paths.runs)
    assert runs[0] == runs[1] and len(runs[0][2]) == len(topics)
    assert reuse[0] == dict.fromkeys(names, 0)
    rejected = sum(not t["rounds"][0]["accepted"] for t in runs[0][2])  # their stage 2 is single_step's answer
    assert (reuse[1]["no_retrieval"], reuse[1]["single_step"]) == (0, 0) and rejected > 0
    assert reuse[1]["probing_rag"] >= len(topics) + rejected
    assert calls[0] - calls[1] == reuse[1]["probing_rag"]  # prompts the model no longer computes
    summary = stages.STAGES["evaluate"].summary(results, paths)
    assert f"{reuse[1]['probing_rag']} of {calls[0]} LM results reused" in summary


def test_train_router_needs_no_prober_and_leaves_a_note_when_too_few_examples(tmp_path, monkeypatch):
    """The fake LM answers the odd-numbered train questions wrongly whatever the evidence: two
    failure states, both labelled exit (no skill helped), too few to learn from."""
    from skillrag.eval.runner import settings_file
    from skillrag.skills import load_learned_router

    workspace = make_workspace(tmp_path / "ws")
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: PausingLM())
    params, paths = load_params(workspace / "params.yaml"), Paths(workspace)
    report = stages.train_router.train_router(params, paths)
    assert not paths.probe.exists()
    assert report["trained"] is False and (report["questions"], report["by_skill"]) == (4, {"exit": 2})
    assert "need train_router.min_examples_per_skill=5 each" in report["reason"]
    with pytest.raises(ArtifactError, match="too few failure states per skill"):
        load_learned_router(paths.router, runtime.model_identity(params))
    settings = json.loads(settings_file(paths.router_traces).read_text())
    assert settings["method"] == "skill_exploration" and settings["params"]["lm.layers"] == [3, 4]
    assert not any(key.startswith(("probe", "methods")) for key in settings["params"])
    assert json.loads(paths.router_metrics.read_text()) == report


_SKILL_QUERIES = {"rewrite": " Apollo 1969 landed", "decompose": " FedEx delivery\n- FedEx founded", "focus": " Forrest Gump 1994"}
_SKILL_EVIDENCE = ("Apollo 11", "FedEx", "Forrest Gump")  # what each skill's query retrieves


class _SkillLM(PausingLM):
    """Train question n is answered right at once (n % 5 == 0), only over the evidence of one
    skill's query (rewrite, decompose, focus for n % 5 == 1, 2, 3), or never (n % 5 == 4)."""

    def generate(self, prompts, max_new_tokens, stop=(), capture=None, prefix=None):
        out = []
        for prompt in prompts:
            n = int(re.search(r"landmark (\d+)", prompt.rsplit("Question: ", 1)[-1]).group(1))
            skill = prompt.rsplit("Next step: ", 1)[-1].split("\n")[0] if prompt.endswith(("Query:", "-")) else None
            if skill is not None:
                text = _SKILL_QUERIES[skill]
            else:
                plan = n % 5
                case = prompt.rsplit("\n\n", 1)[-1]  # the passages and question, not the few-shot examples
                right = plan == 0 or (plan in (1, 2, 3) and _SKILL_EVIDENCE[plan - 1] in case)
                text = " Looked it up.\nAnswer: " + ("Paris" if right else "Rome")
            pooled = fake_pooled(f"{n % 5}:{text}", capture, self.hidden_size)
            k = len(text.split())
            out.append(Generation(text, list(range(k)), [-0.1] * k, [0.3] * k, len(prompt.split()), None, "stop", pooled=pooled))
        return out


def test_train_router_fits_on_gold_labels_with_enough_examples_of_every_skill(tmp_path, monkeypatch):
    from skillrag.skills import load_learned_router

    workspace = make_workspace(tmp_path / "ws")
    rows = [
        {"id": f"nq-train-{i:02d}", "dataset": "nq", "question": f"Where is landmark {i} of the train set?", "answers": ["Paris"], "split": "train"}
        for i in range(100, 125)  # numbers no corpus passage contains
    ]
    write_rows(workspace / "data" / "questions" / "train" / "nq.jsonl", rows)
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: _SkillLM())
    params = load_params(workspace / "params.yaml", overrides=["train_router.train_questions=25"])
    paths = Paths(workspace)
    report = stages.train_router.train_router(params, paths)
    assert report["trained"] is True and report["examples"] == 20
    assert report["by_skill"] == dict.fromkeys(["evidence_focusing", "exit", "query_rewriting", "question_decomposition"], 5)
    assert report["cv_folds"] == 5 and report["cv_accuracy"] is not None
    router = load_learned_router(paths.router, runtime.model_identity(params))
    assert router.layers == (3, 4) and set(router.classes) == {"evidence_focusing", "exit", "query_rewriting", "question_decomposition"}


def test_train_router_measures_each_gated_methods_own_retry_and_fits_the_prompt_routers_offsets(tmp_path, monkeypatch):
    """Same 25 train questions: skill_rag's and probing_rag's first retries run through the
    methods themselves (their traces beside the exploration's), the single-step answers are
    computed once for all three runs, and the fitted offsets are stored with the router data."""
    from skillrag.methods.exploration import RETRY_RULE
    from skillrag.skills.router import load_offsets

    workspace = make_workspace(tmp_path / "ws")
    rows = [
        {"id": f"nq-train-{i:02d}", "dataset": "nq", "question": f"Where is landmark {i} of the train set?", "answers": ["Paris"], "split": "train"}
        for i in range(100, 125)
    ]
    write_rows(workspace / "data" / "questions" / "train" / "nq.jsonl", rows)
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: _SkillLM())
    params = load_params(workspace / "params.yaml", overrides=["train_router.train_questions=25"])
    paths = Paths(workspace)
    report = stages.train_router.train_router(params, paths)
    retries = json.loads(paths.retry_rates.read_text())
    assert retries["questions"] == 25 and set(retries) == {"questions", "probing_rag", "skill_rag"}
    for method in ("probing_rag", "skill_rag"):
        rates = retries[method]
        assert rates["rule"] == RETRY_RULE and rates["after_right"]["n"] == 5 and rates["after_wrong"]["n"] == 20
        assert len(read_traces(paths.retry_traces(method))) == 25
    assert set(retries["probing_rag"]["choices"]) == {"requery"}
    assert set(retries["skill_rag"]["choices"]) <= {"query_rewriting", "question_decomposition", "evidence_focusing", "exit"}
    assert report["llm_calls"]["reused"] >= 2 * 25  # the retry runs' single-step answers come from the exploration's
    offsets = load_offsets(paths.router, runtime.model_identity(params))
    assert offsets == report["prompt_router"]["offsets"]
    assert report["prompt_router"]["states"] == 20
    assert report["prompt_router"]["fitted_choices"]["fixed"] >= report["prompt_router"]["content_free_choices"]["fixed"]
    as_run = report["router_as_run"]
    assert as_run["router"] == "prompt" and as_run["states"] == 20 and sum(as_run["chosen"].values()) == 20


def test_train_router_sizes_exploration_and_first_retries_on_their_own_knobs(tmp_path, monkeypatch):
    """A larger retry pool (the after-evidence cuts' rates) does not grow the exploration, which
    tries every skill on each failure and costs several times more per question."""
    workspace = make_workspace(tmp_path / "ws")
    rows = [
        {"id": f"nq-train-{i:02d}", "dataset": "nq", "question": f"Where is landmark {i} of the train set?", "answers": ["Paris"], "split": "train"}
        for i in range(100, 125)
    ]
    write_rows(workspace / "data" / "questions" / "train" / "nq.jsonl", rows)
    monkeypatch.setattr(runtime, "open_retriever", lambda params, paths: OverlapRetriever(CORPUS))
    monkeypatch.setattr(runtime, "open_lm", lambda params: _SkillLM())
    overrides = ["train_router.train_questions=5", "train_router.retry_questions=20", "train_router.min_examples_per_skill=50"]
    paths = Paths(workspace)
    report = stages.train_router.train_router(load_params(workspace / "params.yaml", overrides=overrides), paths)
    assert report["questions"] == 5 and len(read_traces(paths.router_traces)) == 5
    retries = json.loads(paths.retry_rates.read_text())
    assert retries["questions"] == 20
    assert all(len(read_traces(paths.retry_traces(method))) == 20 for method in ("probing_rag", "skill_rag"))


def test_each_stage_has_one_name_its_module_and_command_derive_from():
    """One spelling of a stage name: the stage table uses the registry's (DVC's) names, the stage's
    module is named as it, and its CLI command and Prefect flow are the name with dashes."""
    from typer.main import get_command

    from skillrag import registry
    from skillrag.cli import app

    dvc_stages = {name.split("-")[0] for name in registry.STAGES}  # evaluate-<method> -> evaluate
    assert set(stages.STAGES) == dvc_stages
    for entry in registry.STAGES.values():
        assert entry.module == f"skillrag.pipeline.stages.{entry.name.split('-')[0]}"
        assert entry.command.split()[0] == entry.name.split("-")[0].replace("_", "-")
    commands = set(get_command(app).commands)
    assert {stage.command for stage in stages.STAGES.values()} <= commands
    assert stages.STAGES["train_probe"].command == "train-probe"
