"""Typed parameters: params.yaml -> validated pydantic models, with profiles and CLI overrides.

Every stage reads only its own section. A profile is a flat mapping of dotted keys that
overrides the sections; CLI overrides (`section.key=value`, values parsed as YAML) come last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DATASETS = ("hotpotqa", "nq", "triviaqa", "musique", "2wiki")
Dataset = Literal["hotpotqa", "nq", "triviaqa", "musique", "2wiki"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrepareParams(_Section):
    source: Literal["local", "hub"] = "local"
    local_dir: Path = Path("../shared/data")
    hub_id: str = "RUC-NLPIR/FlashRAG_datasets"
    train_datasets: list[Dataset] = ["hotpotqa", "nq", "triviaqa"]
    eval_datasets: list[Dataset] = list(DATASETS)
    train_size: int = Field(300, ge=1)
    dev_size: int = Field(100, ge=1)
    eval_size: int = Field(30, ge=1)
    prefer_evidence_in_corpus: bool = True
    seed: int = 13


class IndexParams(_Section):
    corpus_file: Path = Path("../shared/data/corpus/passages.jsonl")
    max_passages: int | None = Field(None, ge=1)
    threads: int = Field(2, ge=1)
    smoke_queries: int = Field(20, ge=0)


class RetrievalParams(_Section):
    backend: Literal["lucene", "bm25s"] = "lucene"
    k: int = Field(5, ge=1)
    k1: float = 0.9
    b: float = 0.4


class LMParams(_Section):
    model: str = "smollm2-135m"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_new_tokens: int = Field(96, ge=1)
    batch_size: int = Field(8, ge=1)
    threads: int | None = Field(None, ge=1)  # torch CPU threads; None = torch's default
    layers: Literal["posterior_two_thirds", "all"] | list[int] = "posterior_two_thirds"


class ExtractParams(_Section):
    strategies: list[Literal["no_retrieval", "single_step"]] = ["no_retrieval", "single_step"]
    shard_size: int = Field(64, ge=1)


class ProbeParams(_Section):
    hidden: list[int] = [256]
    lr: float = 1e-3
    epochs: int = Field(2, ge=1)
    batch_size: int = Field(32, ge=1)
    weight_decay: float = 0.01
    threshold: float = Field(0.0, ge=-0.5, le=0.5)
    min_dev_auroc: float = Field(0.5, ge=0.0, le=1.0)
    seed: int = 13


class MethodsParams(_Section):
    max_rounds: int = Field(3, ge=1)
    exit_mode: Literal["answer", "abstain"] = "answer"
    abstain_answer: str = "I cannot answer this question."
    router: Literal["prompt", "learned"] = "prompt"
    max_question_chars: int = Field(2000, ge=50)  # longer questions are truncated (with a warning)


class RouterParams(_Section):
    train_questions: int = Field(40, ge=1)  # train questions run with the exploration router
    c: float = Field(1.0, gt=0)  # inverse L2 regularisation of the logistic regression


class EvaluateParams(_Section):
    methods: list[Literal["no_retrieval", "single_step", "probing_rag", "skill_rag"]] = [
        "no_retrieval", "single_step", "probing_rag", "skill_rag"
    ]
    datasets: list[Dataset] = list(DATASETS)
    limit: int | None = Field(None, ge=1)  # first N eval questions per dataset (None = all)


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
    evaluate: EvaluateParams = EvaluateParams()
    profiles: dict[str, dict[str, Any]] = {}


class ConfigError(ValueError):
    """A params file, profile or override that cannot be used; the message says which and why."""


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
    if profile is not None:
        tree["profile"] = profile
    chosen = tree.get("profile", "default")
    profiles = tree.get("profiles") or {}
    if chosen != "default" and chosen not in profiles:
        raise ConfigError(f"profile {chosen!r} is not in {path} (have: {', '.join(profiles) or 'none'})")
    for key, value in (profiles.get(chosen) or {}).items():
        _set_dotted(tree, key, value)
    for text in overrides:
        _set_dotted(tree, *parse_override(text))
    try:
        params = Params.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(f"invalid parameters in {path} (profile {chosen!r}):\n{err}") from None
    return _resolve_paths(params, path.resolve().parent)


def _resolve_paths(params: Params, base: Path) -> Params:
    def fix(p: Path) -> Path:
        return p if p.is_absolute() else (base / p).resolve()

    return params.model_copy(
        update={
            "prepare": params.prepare.model_copy(update={"local_dir": fix(params.prepare.local_dir)}),
            "index": params.index.model_copy(update={"corpus_file": fix(params.index.corpus_file)}),
        }
    )
