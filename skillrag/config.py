"""Typed parameters: params.yaml -> validated pydantic models, with profiles and CLI overrides.

Every stage reads only its own section. params.yaml holds the resolved values of the default
pipeline, so each DVC stage depends on exactly the keys it reads; it is where every default lives:
a model's default here equals params.yaml's value (tests/test_config.py fails when they differ). A profile (`profiles.<name>`)
is a flat mapping of dotted keys applied on top only when asked for: by `--profile` on a hand
run, or by `skillrag exp <name>`, which hands the same values to `dvc exp run --temp` as `-S`
overrides. CLI overrides (`section.key=value`, values parsed as YAML) come last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skillrag.errors import ConfigError
from skillrag.registry import METHOD_NAMES

DATASETS = ("hotpotqa", "nq", "triviaqa", "musique", "2wiki")
Dataset = Literal["hotpotqa", "nq", "triviaqa", "musique", "2wiki"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FirstDraw(_Section):
    """The sizes the original sampling rule draws first: a larger sample keeps those questions
    (skillrag.data.sampling)."""

    train_size: int = Field(100, ge=0)
    dev_size: int = Field(100, ge=0)
    eval_size: int = Field(30, ge=0)


class PrepareParams(_Section):
    source: Literal["local", "hub"] = "local"
    local_dir: Path = Path("../shared/data")
    hub_id: str = "RUC-NLPIR/FlashRAG_datasets"
    train_datasets: list[Dataset] = ["hotpotqa", "nq", "triviaqa"]
    eval_datasets: list[Dataset] = list(DATASETS)
    train_size: int = Field(1000, ge=1)
    dev_size: int = Field(300, ge=1)
    eval_size: int = Field(100, ge=1)
    first_draw: FirstDraw = FirstDraw()  # the committed run's sizes: every larger sample keeps its questions
    prefer_evidence_in_corpus: bool = True
    max_question_chars: int = Field(2000, ge=50)  # longer questions are left out by prepare, refused elsewhere
    seed: int = 13


class IndexParams(_Section):
    corpus_file: Path = Path("../shared/data/corpus/passages.jsonl")
    max_passages: int | None = Field(None, ge=1)
    question_evidence: bool = False  # with max_passages: also index the written questions' gold passages
    threads: int = Field(2, ge=1)
    smoke_queries: int = Field(20, ge=0)


class RetrievalParams(_Section):
    backend: Literal["lucene", "bm25s", "dense", "hybrid"] = "lucene"
    k: int = Field(3, ge=1)
    passage_words: int | None = Field(100, ge=1)  # words per passage in answer prompts (null = whole): bounds prefill
    k1: float = 0.9
    b: float = 0.4
    fusion_k: int = Field(60, ge=1)  # hybrid: reciprocal rank fusion's constant, score = sum 1 / (fusion_k + rank)
    fusion_depth: int = Field(20, ge=1)  # hybrid: passages each of Lucene and dense contributes to the fusion

    def recorded(self) -> dict[str, Any]:
        """The knobs the chosen backend reads, as run settings and extract's fingerprint record
        them: for lucene and bm25s exactly the fields that existed before dense retrieval, so a
        BM25 run's records keep their bytes; dense reads no BM25 knob, hybrid reads them all."""
        common = ("backend", "k", "passage_words")
        reads = {
            "lucene": (*common, "k1", "b"),
            "bm25s": (*common, "k1", "b"),
            "dense": common,
            "hybrid": (*common, "k1", "b", "fusion_k", "fusion_depth"),
        }[self.backend]
        return self.model_dump(include=set(reads))


class LMParams(_Section):
    model: str = "qwen2.5-coder-1.5b"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # auto: bfloat16 on GPU and bf16-capable CPUs; int8: int8 Linear weights on the CPU, float32 elsewhere (skillrag.lm.int8)
    dtype: Literal["auto", "float32", "bfloat16", "float16", "int8"] = "int8"
    prompt_format: Literal["auto", "plain", "chat"] = "auto"  # auto: the bundled model's measured format, else plain
    max_new_tokens: int = Field(96, ge=1)
    batch_size: int = Field(16, ge=1)
    threads: int | None = Field(None, ge=1)  # torch CPU threads; None = torch's default
    concurrency: int = Field(16, ge=1)  # questions evaluate / train_router answer at once, LM calls batched; 1 = one at a time
    reuse_cache: int = Field(1024, ge=0)  # LM results evaluate keeps for reuse across methods (LRU); 0 = no reuse
    layers: Literal["posterior_two_thirds", "all"] | list[int] = "posterior_two_thirds"


class ExtractParams(_Section):
    strategies: list[Literal["no_retrieval", "single_step"]] = ["no_retrieval", "single_step"]
    checkpoint_rows: int = Field(16, ge=1)  # finished rows are saved after this many rows ...
    checkpoint_seconds: float = Field(60.0, gt=0)  # ... or this many seconds, whichever comes first


class ProbeParams(_Section):
    recipe: Literal["cv", "weighted", "paper"] = "cv"  # cv: skillrag.probe.recipe; weighted, paper: skillrag.probe.training
    pooling: Literal["auto", "generated_mean", "answer_mean", "answer_last"] = "auto"  # auto: chosen by CV (recipe cv), else generated_mean
    cv_folds: int = Field(5, ge=2)  # recipe cv: question-grouped folds on train
    cv_c: list[Annotated[float, Field(gt=0)]] = [0.001, 0.01, 0.1]  # recipe cv: logistic regressions' inverse L2 strengths
    cv_hidden: list[Annotated[int, Field(ge=1)]] = [64]  # recipe cv: one-hidden-layer candidates' widths; [] = linear only
    call_cost: float = Field(0.0, ge=0.0)  # ACC points per extra LLM call when choosing the dev cuts (skillrag.probe.cuts)
    hidden: list[int] = []  # weighted/paper recipes: hidden layer widths; [] = LayerNorm -> Linear (paper: [256])
    lr: float = 1e-2  # paper: 1e-3
    epochs: int = Field(2, ge=1)  # paper recipe only
    max_epochs: int = Field(50, ge=1)  # weighted recipe: early stopping's ceiling
    patience: int = Field(5, ge=1)  # weighted recipe: epochs without a better held-out loss
    holdout_fraction: float = Field(0.2, gt=0.0, lt=1.0)  # weighted recipe: train rows held out
    batch_size: int = Field(32, ge=1)
    weight_decay: float = 0.01
    threshold: Literal["auto"] | Annotated[float, Field(ge=-0.5, le=0.5)] = "auto"  # read at load time
    min_dev_auroc: float = Field(0.5, ge=0.0, le=1.0)
    allow_below_entropy: bool = False
    seed: int = 13

    def training(self) -> dict[str, Any]:
        """The values that shape the prober's weights and cut (recorded in probe.json): not the
        acceptance threshold, which is applied at load time, nor the gate's bounds."""
        return self.model_dump(exclude={"threshold", "min_dev_auroc", "allow_below_entropy"})


class IrcotParams(_Section):
    max_steps: int = Field(3, ge=1)  # reasoning sentences, each after a retrieval; the last keeps the whole continuation
    max_passages: int = Field(6, ge=1)  # passages kept across steps (IRCoT paper: 15), newest interleaved first


Threshold = Literal["auto"] | Annotated[float, Field(ge=0)]  # auto: tuned on dev (skillrag tune-thresholds)


class FlareParams(_Section):
    theta: Literal["auto"] | Annotated[float, Field(gt=0, lt=1)] = "auto"  # retrieve when a look-ahead token's probability is below theta
    look_ahead: int = Field(32, ge=1)  # tokens generated per look-ahead (the next sentence is taken from them)
    max_iterations: int = Field(8, ge=1)  # sentences at most, each with at most one retrieval


class DraginParams(_Section):
    threshold: Threshold = "auto"  # retrieve at the first token whose RIND (entropy x attention received x real word) exceeds it
    query_words: int = Field(6, ge=1)  # QFS: real words of the context the last position attends to most
    max_retrievals: int = Field(3, ge=1)  # retrievals at most per question


class EntropyRAGParams(_Section):
    cut: Threshold = "auto"  # accept an answer when its mean token entropy is at most the cut


class MethodsParams(_Section):
    max_rounds: int = Field(2, ge=1)
    max_passages: int = Field(6, ge=1)  # passages an answer after a retry sees: this round's and earlier rounds', newest first
    exit_mode: Literal["answer", "abstain"] = "answer"
    abstain_answer: str = "I cannot answer this question."
    router: Literal["prompt", "learned"] = "prompt"
    ircot: IrcotParams = IrcotParams()  # IRCoT, also Adaptive-RAG's multi-step strategy
    flare: FlareParams = FlareParams()  # FLARE-direct (Jiang et al. 2023)
    dragin: DraginParams = DraginParams()  # DRAGIN (Su et al. 2024)
    entropy_rag: EntropyRAGParams = EntropyRAGParams()  # Probing-RAG's loop checked by mean token entropy


class RouterParams(_Section):
    train_questions: int = Field(30, ge=1)  # train questions explored (every skill tried on each failure)
    retry_questions: int = Field(30, ge=1)  # train questions each checked method's own first retry runs on (the after-evidence cuts' retry rates)
    min_examples_per_skill: int = Field(5, ge=2)  # fewer for any skill or exit: no router, a note says why
    c: float = Field(1.0, gt=0)  # inverse L2 regularisation of the logistic regression


class AdaptiveParams(_Section):
    train_questions: int = Field(60, ge=1)  # train questions (round-robin over the train datasets) silver-labelled by running A, B and C
    dev_questions: int = Field(40, ge=1)  # dev questions labelled the same way: the classifier's accuracy and confusion matrix
    c: float = Field(1.0, gt=0)  # inverse L2 regularisation of the logistic regression


class TuneThresholdsParams(_Section):
    # the share of dev questions each trigger sends to retrieval: probing_rag = the share whose
    # closed-book answer the prober rejects (Probing-RAG's retrieval rate before retrieval), or a number
    target_retrieval_rate: Literal["probing_rag"] | Annotated[float, Field(ge=0, le=1)] = "probing_rag"
    questions_per_dataset: int | None = Field(None, ge=1)  # first N dev questions of each dataset (None = all)


class EvaluateParams(_Section):
    # the methods declared in skillrag.registry; "all" (params.yaml) = every one, in its order
    methods: list[Literal[METHOD_NAMES]] = list(METHOD_NAMES)  # type: ignore[valid-type]
    datasets: list[Dataset] = list(DATASETS)
    limit: int | None = Field(None, ge=1)  # first N eval questions per dataset (None = all)
    max_error_rate: float = Field(0.05, ge=0.0, le=1.0)  # the runs gate fails above this share of error traces
    require_retrieval: bool = True  # the runs gate fails a retrieving method that never retrieved on a dataset; False: logged only

    @field_validator("methods", mode="before")
    @classmethod
    def _all_methods(cls, value: Any) -> Any:
        return list(METHOD_NAMES) if value == "all" else value


class AnalyzeParams(_Section):
    folds: int = Field(5, ge=2)  # k of the k-fold linear probe of skill from failure state (fewer when a skill has fewer states)
    tsne_min_points: int = Field(10, ge=5)  # fewer failure states: PCA only, t-SNE is skipped (its neighbourhoods mean nothing)
    seed: int = 0  # t-SNE and fold shuffling


Scope = Literal["in-domain", "OOD", "overall", "hotpotqa", "nq", "triviaqa", "musique", "2wiki"]


class Comparison(_Section):
    """One paired comparison the report tests: `first` minus `second` on `scope`'s questions."""

    first: Literal[METHOD_NAMES]  # type: ignore[valid-type]
    second: Literal[METHOD_NAMES]  # type: ignore[valid-type]
    scope: Scope = "overall"

    @model_validator(mode="after")
    def _two_methods(self) -> Comparison:
        if self.first == self.second:
            raise ValueError(f"a comparison needs two methods, got {self.first} twice")
        return self


class ReportParams(_Section):
    cases: int = Field(3, ge=0)  # case studies rendered from real skill_rag traces
    against: str = "HEAD"  # git ref whose committed metrics "Change against the base" compares with
    # the comparisons named before the run: Holm-corrected as their own family; every other test is exploratory
    primary: list[Comparison] = Field(
        default_factory=lambda: [Comparison(first="skill_rag", second="probing_rag"),
                                 Comparison(first="skill_rag", second="single_step")],
        min_length=1,
    )

    @field_validator("primary")
    @classmethod
    def _distinct(cls, value: list[Comparison]) -> list[Comparison]:
        keys = [(c.first, c.second, c.scope) for c in value]
        if len(set(keys)) < len(keys):
            raise ValueError("report.primary names a comparison twice")
        return value


class ReevaluateParams(_Section):
    alpha: float = Field(0.05, gt=0.0, lt=1.0)  # significance of the one-sided paired tests (Holm-corrected) that fail a re-evaluation
    against: str = "HEAD"  # git ref holding the committed reports/outcomes.csv it compares with


class Params(_Section):
    profile: str = "default"
    prepare: PrepareParams = PrepareParams()
    index: IndexParams = IndexParams()
    retrieval: RetrievalParams = RetrievalParams()
    lm: LMParams = LMParams()
    extract: ExtractParams = ExtractParams()
    probe: ProbeParams = ProbeParams()
    methods: MethodsParams = MethodsParams()
    train_router: RouterParams = RouterParams()
    train_adaptive: AdaptiveParams = AdaptiveParams()
    tune_thresholds: TuneThresholdsParams = TuneThresholdsParams()
    evaluate: EvaluateParams = EvaluateParams()
    analyze: AnalyzeParams = AnalyzeParams()
    report: ReportParams = ReportParams()
    reevaluate: ReevaluateParams = ReevaluateParams()
    profiles: dict[str, dict[str, Any]] = {}

    def resolved(self) -> dict[str, Any]:
        """Every section's values as plain YAML/JSON types, without the profile machinery."""
        return self.model_dump(mode="json", exclude={"profile", "profiles"})


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = tree
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {key!r}: {part!r} is not a section")
        node = child
    node[leaf] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`lm.max_new_tokens=32` -> ("lm.max_new_tokens", 32); the value is read as YAML."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} is not of the form section.key=value")
    return key.strip(), yaml.safe_load(raw)


def load_params(
    path: str | Path = "params.yaml",
    profile: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> Params:
    """Read `path`, apply the chosen profile, then the overrides, and validate the result.

    Relative paths inside the file are resolved against the file's directory, so stages behave
    the same whatever the working directory.
    """
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"no params file at {path}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    if "profile" in tree:
        raise ConfigError(
            f"{path} sets `profile`: params.yaml holds the default pipeline's values; choose a profile "
            "with `--profile NAME` (hand runs) or `skillrag exp NAME` (DVC experiment)"
        )
    chosen = profile or "default"
    tree["profile"] = chosen
    for key, value in profile_overrides(tree, chosen, path).items():
        _set_dotted(tree, key, value)
    for text in overrides:
        _set_dotted(tree, *parse_override(text))
    try:
        params = Params.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(f"invalid parameters in {path} (profile {chosen!r}):\n{err}") from None
    return _resolve_paths(params, path.resolve().parent)


def profile_overrides(tree: dict[str, Any], name: str, path: str | Path = "params.yaml") -> dict[str, Any]:
    """The dotted keys profile `name` sets; "default" is params.yaml itself and sets none."""
    profiles = tree.get("profiles") or {}
    if "default" in profiles:
        raise ConfigError(f"{path}: `profiles.default` is params.yaml itself; put its values in their sections")
    if name == "default":
        return {}
    if name not in profiles:
        raise ConfigError(f"profile {name!r} is not in {path} (have: {', '.join(profiles) or 'none'})")
    return dict(profiles[name] or {})


def _resolve_paths(params: Params, base: Path) -> Params:
    def fix(p: Path) -> Path:
        return p if p.is_absolute() else (base / p).resolve()

    return params.model_copy(
        update={
            "prepare": params.prepare.model_copy(update={"local_dir": fix(params.prepare.local_dir)}),
            "index": params.index.model_copy(update={"corpus_file": fix(params.index.corpus_file)}),
        }
    )


def experiment_overrides(path: str | Path, profile: str) -> list[str]:
    """`dvc exp run -S` arguments that turn params.yaml into profile `profile`: its keys, plus the
    data paths made absolute (an experiment runs in a temporary copy of the project, where the
    relative `../shared/data` would point elsewhere)."""
    import json

    tree = yaml.safe_load(Path(path).read_text()) or {}
    params = load_params(path, profile)
    values = {
        **profile_overrides(tree, profile, path),
        "prepare.local_dir": str(params.prepare.local_dir),
        "index.corpus_file": str(params.index.corpus_file),
    }
    return [f"{key}={json.dumps(value)}" for key, value in values.items()]
