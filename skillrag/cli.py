"""`skillrag` command line: each command wires library calls together and holds no logic.

Every command reads params.yaml (or --params), applies --profile and --set overrides, and
writes where dvc.yaml expects, so `dvc repro` and a hand-run command produce the same files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from skillrag.env import apply_offline_defaults

apply_offline_defaults()

from skillrag.config import ConfigError, Params, load_params  # noqa: E402
from skillrag.files import DataError  # noqa: E402
from skillrag.paths import Paths  # noqa: E402

app = typer.Typer(
    help="Skill-RAG: hidden-state probing + skill routing for retrieval-augmented QA.\n\n"
    "Stages (in `dvc repro` order): prepare -> index -> extract -> train-probe -> evaluate -> report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


class _State:
    params_file: Path = Path("params.yaml")
    profile: str | None = None
    overrides: list[str] = []

    def params(self) -> Params:
        return load_params(self.params_file, self.profile, self.overrides)

    def paths(self) -> Paths:
        return Paths(self.params_file.resolve().parent)


state = _State()


@app.callback()
def main(
    params: Annotated[Path, typer.Option("--params", help="Parameters file (DVC reads the same one).")] = Path("params.yaml"),
    profile: Annotated[str | None, typer.Option(help="Profile from params.yaml: default, tiny, paper, ...")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a parameter, e.g. --set lm.max_new_tokens=32 (repeatable).")
    ] = None,
) -> None:
    state.params_file, state.profile, state.overrides = params, profile, list(set_ or [])


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code=1)


@app.command()
def prepare() -> None:
    """Sample the train/dev prober pools and the per-dataset evaluation sets into data/questions/."""
    params, paths = state.params(), state.paths()
    from skillrag.data.prepare import prepare_questions
    from skillrag.quality.suites import gate_questions

    counts = prepare_questions(params.prepare, paths.questions)
    for split, by_dataset in counts.items():
        console.print(f"{split:>5}: " + ", ".join(f"{d} {n}" for d, n in by_dataset.items()))
    gate_questions(paths.questions, params.prepare)
    console.print(f"[green]questions written to {paths.questions} and passed the gate[/]")


def run() -> None:
    """Entry point with readable errors for the failures a user can fix."""
    from skillrag.quality.gate import GateFailed

    try:
        app()
    except (ConfigError, DataError, GateFailed, FileNotFoundError, ValueError) as err:
        console.print(f"[bold red]error:[/] {err}", highlight=False)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        raise SystemExit(130) from None
