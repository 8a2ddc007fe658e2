"""`skillrag repro`: run the DVC pipeline stage by stage so that finished work survives the machine.

A job may end (a time limit, a spot machine going back) and the next one may start on a new machine
that holds only the git repository: no DVC cache, no remote. So, in dependency order (dvc.yaml's
order where the graph allows), for every stage or, given targets, for the targets and the stages
they depend on (as `dvc repro TARGETS`):

- a stage is *done* when DVC finds its recorded inputs, command and outputs unchanged, allowing
  cache-only outputs to be absent (`Stage.changed(allow_missing=True)`); its git-tracked outputs
  must be there. Anything else is *pending*.
- before a pending stage runs, each cache-only input it needs that is absent (its DVC deps that
  are another stage's cached outputs, plus the paths in its `meta: {needs: [...]}`, for inputs it
  depends on through a fingerprint) is checked out of the DVC cache, pulled from a reachable remote,
  or else rebuilt by re-running its producer's command; the rebuilt producer's git-tracked outputs
  must equal the committed ones (its committed timing file is restored), then it is `dvc commit`ed.
- the stage's own command runs (never `dvc repro`, which deletes the finished part of a resumable
  stage's outputs), then `dvc commit -f`, `dvc push` when a default remote is reachable (a failure
  is a warning), and one git commit of dvc.lock, the stage's git-tracked outputs and README.md.
- a resumable stage (an output with `persist: true`) commits its git-tracked outputs to git every
  `checkpoint_s` while it runs, and when SIGINT/SIGTERM arrives: the signal is forwarded, the stage
  stops after the item in flight, its partial outputs are committed, and the run exits non-zero.
- with a deadline (`--budget` / `--until`), a stage starts only when its recorded wall time
  (reports/timings/<stage>.json) fits, a resumable one when a checkpoint fits (one that does not
  fit leaves the time to a later stage that does not depend on it); a stage whose cached
  output is a DVC dependency of a pending stage runs only together with that consumer (the output
  would be lost with the machine), and the stage in flight is stopped `margin_s` before the end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from skillrag import interrupts
from skillrag.errors import ArtifactError, ConfigError, UserError

CHECKPOINT_S = 20 * 60
MARGIN_S = 5 * 60  # a stage stopped for the deadline gets this long to stop, commit and push
DONE, PENDING, AFTER = "done", "pending", "after"  # AFTER: pending once an earlier pending stage has run


class StageFailed(UserError):
    """A stage's command exited non-zero. `transient`: it was killed (the out-of-memory killer's
    SIGKILL), worth retrying; anything else is the stage's own error (its output says which)."""

    def __init__(self, stage: str, returncode: int) -> None:
        super().__init__(f"stage {stage} failed (exit status {returncode}); its output above says why")
        self.stage, self.returncode = stage, returncode

    @property
    def transient(self) -> bool:
        return self.returncode in (-9, 128 + 9)


def parse_duration(text: str) -> float:
    """Seconds of '2h30m', '20m', '90s', '1h' (at least one part)."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    if not text.strip() or match is None:
        raise ConfigError(f"duration {text!r}: write hours, minutes and seconds like 2h30m, 20m or 90s")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def deadline_of(budget: str | None = None, until: str | None = None, now: datetime | None = None) -> datetime | None:
    """The end of the job: `budget` from now, or the next `until` (HH:MM, UTC)."""
    now = now or datetime.now(UTC)
    if budget is not None and until is not None:
        raise ConfigError("--budget and --until: give one of them")
    if budget is not None:
        return now + timedelta(seconds=parse_duration(budget))
    if until is None:
        return None
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", until.strip())
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise ConfigError(f"--until {until!r}: write the UTC end time as HH:MM, e.g. 14:30")
    end = now.replace(hour=int(match[1]), minute=int(match[2]), second=0, microsecond=0)
    return end if end > now else end + timedelta(days=1)


def apply_params(root: Path, overrides: Sequence[str]) -> None:
    """Write `section.key=value` overrides into params.yaml as `dvc exp run -S` does (comments kept)."""
    from dvc.utils.hydra import apply_overrides

    apply_overrides(Path(root) / "params.yaml", list(overrides))


@dataclass
class Step:
    """One DVC stage as the runner sees it."""

    name: str
    cmd: str
    git_outs: tuple[str, ...]  # `cache: false` outputs: committed to git
    persistent_outs: tuple[str, ...]  # git outputs with `persist: true`: what a stopped stage resumes from
    cached_outs: tuple[str, ...]  # cache-only outputs: rebuilt on a new machine
    resumable: bool  # some output is `persist: true`: the command resumes from it
    deps: tuple[str, ...]
    needs: tuple[str, ...]  # cache-only inputs: deps that are cached outputs of a stage, and meta.needs
    state: str = DONE
    why: str = ""
    forced: bool = False
    wanted: bool = True  # a target, or a stage a target depends on (every stage when none is given)
    waits_for: tuple[str, ...] = ()  # the stages it depends on directly that are not done
    estimate_s: float | None = None
    estimate_note: str = ""
    restores: list[Restore] = field(default_factory=list)  # absent inputs brought back before it runs


@dataclass(frozen=True)
class Restore:
    """An absent cache-only input `path` and how it comes back: 'checkout' (DVC cache), 'pull'
    (remote) or 'rebuild' (re-running `producer`)."""

    path: str
    producer: str
    how: str

    def describe(self) -> str:
        if self.how == "checkout":
            return f"check out {self.path} from the DVC cache"
        if self.how == "pull":
            return f"pull {self.path} from the DVC remote, else rebuild it via {self.producer}"
        return f"rebuild {self.path} via {self.producer}"


def _named(stage: str, name: str) -> bool:
    """`name` names `stage` itself, or the foreach group / evaluate-<method> family it belongs to."""
    return stage == name or stage.startswith((f"{name}@", f"{name}-"))


def _inside(path: str, out: str) -> bool:
    return path == out or path.startswith(out.rstrip("/") + "/")


def _minutes(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"~{seconds / 60:.1f} min"


@dataclass
class Runner:
    """The pipeline of the DVC project at `root`; see the module docstring.

    `targets`: stage names (`evaluate` covers every evaluate-<method>, as in `force`) to bring up to
    date with the stages they depend on and nothing else, as `dvc repro TARGETS` does; none: every
    stage. `force`: stage names that run again, outputs removed first, with every stage downstream
    of them, as `dvc repro --force --downstream` does. `git`: commit each stage (and checkpoints) to git.
    `push`: `dvc push` each stage when a default remote is reachable. `echo`: where progress goes."""

    root: Path
    checkpoint_s: float = CHECKPOINT_S
    deadline: datetime | None = None
    margin_s: float = MARGIN_S
    targets: Sequence[str] = ()
    force: Sequence[str] = ()
    git: bool = True
    push: bool = True
    echo: Callable[[str], None] = print
    _admitted: set[str] = field(default_factory=set, init=False, repr=False)  # stages let in as part of a job
    _forced_done: set[str] = field(default_factory=set, init=False, repr=False)  # forced stages already re-run

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self._env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    # ----- reading the project -------------------------------------------------------------------

    def plan(self) -> list[Step]:
        """Every stage in run order with its state, the inputs it would restore and its estimate."""
        from dvc.repo import Repo

        with Repo(str(self.root)) as repo, repo.lock:
            ordered = self._ordered(repo)
            forced = self._forced(repo, ordered)
            wanted = self._wanted(repo, ordered)
            steps = [self._step(stage) for stage in ordered]
            producers = {out: step.name for step in steps for out in step.cached_outs}
            in_cache = {str(out.def_path): out.hash_info and not out.changed_cache()
                        for stage in ordered for out in stage.outs if out.use_cache}
            state = {}
            for stage, step in zip(ordered, steps):  # dependencies first: theirs is known by now
                entries = [*stage.outs, *stage.deps]
                unrecorded = [str(entry) for entry in entries if not entry.hash_info]
                missing = [out for out in step.git_outs if not (self.root / out).exists()]
                upstream = [d.name for d in repo.index.graph.successors(stage) if state.get(d.name, DONE) != DONE]
                if step.name in forced:
                    step.state, step.why, step.forced = PENDING, "forced", True
                elif len(unrecorded) == len(entries):
                    step.state, step.why = PENDING, "never run here (no dvc.lock entry)"
                elif unrecorded:  # dvc.yaml lists an output or input its last run did not have
                    step.state, step.why = PENDING, f"dvc.lock does not record its {unrecorded[0]}"
                elif stage.changed(allow_missing=True):
                    step.state, step.why = PENDING, "its code, params, inputs or outputs changed"
                elif missing:
                    step.state, step.why = PENDING, f"its git-tracked output {missing[0]} is missing"
                elif upstream:
                    step.state, step.why = AFTER, f"after {upstream[0]}"
                state[step.name] = step.state
                step.wanted, step.waits_for = step.name in wanted, tuple(upstream)
        self._restores(steps, producers, in_cache)
        self._estimates(steps)
        return steps

    def _ordered(self, repo: Any) -> list[Any]:
        """dvc.yaml's stages (not `.dvc` files), dependencies first (the graph's edges point from a
        stage to what it needs), otherwise in dvc.yaml's order."""
        import networkx as nx
        from dvc.stage import PipelineStage

        written = {stage: n for n, stage in enumerate(repo.index.stages)}
        ordered = nx.lexicographical_topological_sort(repo.index.graph.reverse(), key=written.get)
        return [stage for stage in ordered if isinstance(stage, PipelineStage)]

    def _wanted(self, repo: Any, ordered: list[Any]) -> set[str]:
        """The targets and every stage they depend on (every stage without targets)."""
        import networkx as nx

        names = {s.name for s in ordered}
        if not self.targets:
            return names
        unknown = [t for t in self.targets if not any(_named(s.name, t) for s in ordered)]
        if unknown:
            raise ConfigError(f"no stage {unknown[0]!r} in dvc.yaml (stages: {', '.join(s.name for s in ordered)})")
        chosen = [s for s in ordered if any(_named(s.name, t) for t in self.targets)]
        return {s.name for s in chosen} | {d.name for s in chosen for d in nx.descendants(repo.index.graph, s)} & names

    def _forced(self, repo: Any, ordered: list[Any]) -> set[str]:
        import networkx as nx

        chosen = [s for s in ordered if s.name not in self._forced_done and any(_named(s.name, f) for f in self.force)]
        reverse = repo.index.graph.reverse()
        names = {s.name for s in chosen}
        for stage in chosen:
            names |= {d.name for d in nx.descendants(reverse, stage)}
        return names - self._forced_done

    @staticmethod
    def _step(stage: Any) -> Step:
        meta = stage.meta if isinstance(stage.meta, dict) else {}
        cached = tuple(str(o.def_path) for o in stage.outs if o.use_cache)
        return Step(
            name=stage.name,
            cmd=stage.cmd if isinstance(stage.cmd, str) else " && ".join(stage.cmd),
            git_outs=tuple(str(o.def_path) for o in stage.outs if not o.use_cache),
            persistent_outs=tuple(str(o.def_path) for o in stage.outs if not o.use_cache and o.persist),
            cached_outs=cached,
            resumable=any(o.persist for o in stage.outs),
            deps=tuple(str(d.def_path) for d in stage.deps),
            needs=tuple(str(p) for p in meta.get("needs", ())),
        )

    def _restores(self, steps: list[Step], producers: dict[str, str], in_cache: dict[str, Any]) -> None:
        """Which absent cache-only inputs each pending stage needs back, and how (dry-run view; a
        producer that runs earlier in this plan makes its outputs itself)."""
        made: set[str] = set()
        remote = self.remote() is not None
        for step in steps:
            for need in self._needs(step, producers):
                out = next(o for o in producers if _inside(need, o))
                if step.state != DONE and out not in made and not (self.root / need).exists():
                    producer = producers[out]
                    how = "checkout" if in_cache.get(out) else "pull" if remote else "rebuild"
                    step.restores.append(Restore(need, producer, how))
                    made.add(out)
            if step.state != DONE:
                made.update(step.cached_outs)

    @staticmethod
    def _needs(step: Step, producers: dict[str, str]) -> list[str]:
        """Cache-only inputs of `step`: deps inside another stage's cached output, and meta.needs."""
        candidates = [*step.deps, *step.needs]
        return list(dict.fromkeys(p for p in candidates if any(_inside(p, o) for o in producers if producers[o] != step.name)))

    def _estimates(self, steps: list[Step]) -> None:
        """Each stage's recorded wall time (the committed one when a stopped run removed the file);
        an unknown one is taken as the largest recorded (said so)."""
        import json

        from skillrag.paths import Paths

        paths = Paths(self.root)
        recorded: dict[str, float] = {}
        for step in steps:
            file = paths.timing(step.name)
            if file.is_file():
                text = file.read_text(encoding="utf-8")
            elif self._in_git():
                shown = self._git("show", f"HEAD:{file.relative_to(self.root).as_posix()}", check=False)
                text = shown.stdout if shown.returncode == 0 else ""
            else:
                text = ""
            if text:
                recorded[step.name] = float(json.loads(text)["wall_s"])
        largest = max(recorded.values(), default=None)
        for step in steps:
            if step.name in recorded:
                step.estimate_s = recorded[step.name]
            elif largest is not None:
                step.estimate_s, step.estimate_note = largest, "no recorded time: the largest recorded taken"
            else:
                step.estimate_note = "no recorded time"

    def remote(self) -> str | None:
        """The default DVC remote when one is configured and (for a local path) exists."""
        from dvc.repo import Repo

        with Repo(str(self.root)) as repo:
            name = repo.config["core"].get("remote")
            url = repo.config["remote"].get(name, {}).get("url", "") if name else ""
        if not name:
            return None
        if "://" in url and not url.startswith("file://"):
            return name  # reachable or not, a push says (a failure is only a warning)
        local = Path(url.removeprefix("file://"))
        return name if (local if local.is_absolute() else self.root / ".dvc" / local).is_dir() else None

    # ----- the budget ----------------------------------------------------------------------------

    @staticmethod
    def _cost(step: Step, by_name: dict[str, Step]) -> float | None:
        """The stage's estimate plus that of every producer it would rebuild (None: unknown)."""
        parts = [step.estimate_s, *(by_name[r.producer].estimate_s for r in step.restores if r.how != "checkout")]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)

    def job(self, steps: list[Step], index: int) -> tuple[list[Step], float | None]:
        """The stages that must run in one job if `steps[index]` starts: it, and everything pending
        through the last stage with a DVC dep on one of its cache-only outputs; and their estimate."""
        step, last = steps[index], index
        for later in range(index + 1, len(steps)):
            if steps[later].state != DONE and steps[later].wanted and any(_inside(d, o) for d in steps[later].deps for o in step.cached_outs):
                last = later
        members = [s for s in steps[index : last + 1] if s.state != DONE]
        by_name = {s.name: s for s in steps}
        costs = [self._cost(s, by_name) for s in members]
        return members, None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def admit(self, steps: list[Step], index: int, remaining_s: float | None, admitted: set[str]) -> tuple[bool, str]:
        """Whether `steps[index]` may start with `remaining_s` left (None: no deadline; `admitted`:
        stages already let in as part of a job), and what to say about it."""
        step = steps[index]
        members, estimate = self.job(steps, index)
        together = ""
        if len(members) > 1 and step.name not in admitted:
            together = (f"{step.name} runs together with {', '.join(s.name for s in members[1:])} in one job "
                        f"({', '.join(step.cached_outs)}: cache-only, lost with the machine), {_minutes(estimate)}")
        if remaining_s is None or step.name in admitted:
            return True, together
        if estimate is None:
            return False, f"{step.name}: no recorded time to estimate it from; with a deadline it does not start"
        if estimate <= remaining_s:
            return True, together
        if len(members) == 1 and step.resumable and min(self.checkpoint_s, estimate) <= remaining_s:
            return True, (f"{step.name} needs {_minutes(estimate)}, {_minutes(remaining_s)} left: it starts, and is "
                          "stopped before the deadline with its partial outputs committed")
        names = " + ".join(s.name for s in members)
        return False, f"{names} need {_minutes(estimate)}, {_minutes(remaining_s)} left: not started"

    def _remaining(self) -> float | None:
        """Seconds until the deadline less the margin (None: no deadline)."""
        if self.deadline is None:
            return None
        return (self.deadline - datetime.now(UTC)).total_seconds() - self.margin_s

    # ----- dry run -------------------------------------------------------------------------------

    def describe(self) -> list[str]:
        """What a run would do: one line per stage (state, estimate, restores, the budget's verdict),
        as `next_stage` would choose them one after another."""
        steps = self.plan()
        by_name = {s.name: s for s in steps}
        remaining, admitted, started = self._remaining(), set(), set()
        lines = []
        for index, step in enumerate(steps):
            if not step.wanted:
                continue
            if step.state == DONE:
                lines.append(f"{step.name}: done")
                continue
            note = f" ({step.estimate_note})" if step.estimate_note else ""
            state = "pending" if step.state == PENDING else f"pending ({step.why})"
            line = f"{step.name}: {state}, {_minutes(step.estimate_s)}{note}"
            line += "".join(f"; would {r.describe()}" for r in step.restores)
            if not set(step.waits_for) <= started or (remaining is not None and remaining <= 0):
                lines.append(line + "; not in this budget")
                continue
            ok, why = self.admit(steps, index, remaining, admitted)
            line += f"; {why}" if why else ""
            if ok:
                started.add(step.name)
                admitted.update(s.name for s in self.job(steps, index)[0])
                if remaining is not None:
                    remaining -= self._cost(step, by_name) or 0.0  # a resumable stage let in to checkpoint takes the rest
            lines.append(line)
        return lines

    # ----- running -------------------------------------------------------------------------------

    def run(self, run_stage: Callable[[str], bool] | None = None) -> list[str]:
        """Run every pending stage (given targets: theirs and what they depend on) within the
        deadline; returns the stages run. `run_stage`: how one stage runs (default
        `self.run_stage`; the Prefect flow wraps it in a retried task). Raises `StageFailed`, or
        `interrupts.Interrupted` once a resumable stage's partial outputs are committed."""
        ran: list[str] = []
        while (name := self.next_stage()) is not None:
            finished = (run_stage or self.run_stage)(name)
            ran.append(name)
            if not finished:
                break
        return ran

    def next_stage(self) -> str | None:
        """The first pending stage, in order, that can start now (everything it depends on done)
        and fits the deadline; a stage that does not fit leaves the time to a later one that does
        not depend on it. None when every wanted stage is done (it says so) or none fits."""
        steps = self.plan()
        if all(step.state == DONE for step in steps if step.wanted):
            self.echo(f"{' and '.join(self.targets)} and what {'they depend' if len(self.targets) > 1 else 'it depends'} on: done"
                      if self.targets else "every stage is done")
            return None
        for index, step in enumerate(steps):
            if step.state == DONE or not step.wanted or step.waits_for:
                continue
            ok, why = self.admit(steps, index, self._remaining(), self._admitted)
            if why:
                self.echo(why)
            if ok:
                self._admitted.update(s.name for s in self.job(steps, index)[0])
                return step.name
        return None

    def run_stage(self, name: str) -> bool:
        """Restore the stage's absent inputs, run it, record and commit it. False when it was
        stopped for the deadline (a resumable stage's partial outputs committed)."""
        steps = {s.name: s for s in self.plan()}
        step = steps[name]
        if step.state == DONE:
            self.echo(f"{name}: done")
            return True
        self._check_trackable(step)
        if not self._restore_inputs(step, steps):
            return False
        started = time.monotonic()
        self.echo(f"{name}: running ({step.why}; {_minutes(step.estimate_s)})")
        if not self._execute(step):
            minutes = (time.monotonic() - started) / 60
            self.echo(f"{name}: stopped for the deadline after {minutes:.1f} min; the next job resumes it")
            if step.resumable:
                self._commit(self._partial(step), f"run: stage {name} stopped for the deadline, partial outputs ({minutes:.1f} min)")
            return False
        minutes = (time.monotonic() - started) / 60
        self._dvc("commit", "--force", "--quiet", name)
        self._forced_done.add(name)
        self._push(name)
        self._commit(["dvc.lock", *step.git_outs, *self._legs(step), *self._readme()], f"run: stage {name} finished ({minutes:.1f} min here)")
        self.echo(f"{name}: finished in {minutes:.1f} min")
        return True

    def _restore_inputs(self, step: Step, steps: dict[str, Step]) -> bool:
        """Bring back each absent cache-only input of `step` (its producer's own first): from the
        DVC cache, a reachable remote, else by re-running the producer. False when a rebuild was
        stopped for the deadline."""
        producers = {out: s.name for s in steps.values() for out in s.cached_outs}
        for need in self._needs(step, producers):
            if (self.root / need).exists():
                continue
            producer = steps[producers[next(o for o in producers if _inside(need, o))]]
            self._dvc("checkout", "--quiet", need, check=False)
            if not (self.root / need).exists() and self.remote() is not None:
                self._dvc("pull", "--quiet", need, check=False)
            if (self.root / need).exists():
                self.echo(f"{step.name} needs {need}: restored from the DVC cache or remote")
                continue
            self.echo(f"{step.name} needs {need}, {producer.name}'s cache-only output, absent here (not in the DVC "
                      f"cache or a remote): rebuilding it with {producer.name} ({_minutes(producer.estimate_s)})")
            if not (self._restore_inputs(producer, steps) and self._execute(producer)):
                return False
            self._check_rebuilt(producer)
            self._dvc("commit", "--force", "--quiet", producer.name)
        return True

    def _check_rebuilt(self, producer: Step) -> None:
        """A rebuilt producer's git-tracked outputs must be the committed ones (its timing file is
        restored: the recorded wall time stays the original run's); else its consumers go stale."""
        if not self._in_git():
            return
        from skillrag.paths import Paths

        timing = Paths(self.root).timing(producer.name).relative_to(self.root).as_posix()
        if timing in producer.git_outs:
            self._git("checkout", "HEAD", "--", timing, check=False)
        changed = self._git("status", "--porcelain", "--", *producer.git_outs).stdout.strip()
        if changed:
            raise ArtifactError(
                f"rebuilding {producer.name} changed its committed outputs ({changed.splitlines()[0].strip()}, ...): "
                "it does not reproduce them here, so every stage after it would be stale; see `git diff`"
            )

    def _partial(self, step: Step) -> list[str]:
        """What a stopped, failed or checkpointed stage commits: what lets any machine resume it,
        its persistent outputs and its legs. Its other outputs, removed as it started (its timing
        record among them), stay in git as the last finished run made them, with the README block
        that shows them, the runner's estimate and a fresh clone's `ask` reading them, until it finishes."""
        return [*step.persistent_outs, *self._legs(step)]

    def _legs(self, step: Step) -> list[str]:
        """A resumable stage's stopped legs' wall time (skillrag.pipeline.timing), so that the leg
        which finishes it on another machine records the stage's whole time; the finishing commit
        removes the file. A project that git-ignores the legs file only loses that: its legs stay
        on the machine."""
        if not step.resumable:
            return []
        from skillrag.paths import Paths

        legs = Paths(self.root).stopped_legs(step.name).relative_to(self.root).as_posix()
        ignored = self._in_git() and self._git("check-ignore", "-q", "--no-index", legs, check=False).returncode == 0
        return [] if ignored else [legs]

    def _check_trackable(self, step: Step) -> None:
        """Fail before hours of compute, not after: a git-tracked output must not be git-ignored."""
        if not (self.git and self._in_git()):
            return
        for out in step.git_outs:
            if self._git("check-ignore", "-q", "--no-index", out, check=False).returncode == 0:
                raise ConfigError(f"{step.name}'s output {out} is git-ignored: un-ignore it in .gitignore (`!/{out}`)")

    def _execute(self, step: Step) -> bool:
        """Run the stage's command, its outputs removed first as DVC does (persistent ones kept
        unless forced); commit a resumable stage's outputs every `checkpoint_s`; forward SIGINT /
        SIGTERM. True when it finished, False when stopped for the deadline; raises `StageFailed`,
        or `interrupts.Interrupted` (a resumable stage's partial outputs committed first)."""
        from dvc.repo import Repo

        with Repo(str(self.root)) as repo, repo.lock:
            stage = next(s for s in repo.index.stages if getattr(s, "name", None) == step.name)
            stage.remove_outs(ignore_remove=False, force=step.forced)
        main = threading.current_thread() is threading.main_thread()
        if main:
            interrupts.install()  # a signal reaches this loop, which forwards it (the child has its own process group)
        self.echo(f"+ {step.cmd}")
        # The shell traps SIGTERM / SIGINT so that it waits for the stage to stop: otherwise it dies at
        # once and the stage would still be writing its last outputs (and stopped legs) when they are committed.
        # Its own process group (a terminal's Ctrl-C reaches only this loop, which forwards it), in this
        # session: Linux schedules a session's processes as one group, so `nice skillrag repro` holds for them.
        child = subprocess.Popen(f"trap : TERM INT; {step.cmd}", shell=True, cwd=self.root, env=self._env, process_group=0)
        signum, stopping, started = None, False, time.monotonic()
        next_checkpoint = started + self.checkpoint_s
        while True:
            try:
                try:
                    returncode = child.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if signum is None and not main and interrupts.received() is not None:
                    signum = interrupts.received()
                    self._signal(child, signum or 15)
                remaining = self._remaining()
                if remaining is not None and remaining <= 0 and not stopping:
                    stopping = True
                    self.echo(f"{step.name}: {self.margin_s / 60:.0f} min to the deadline, stopping it")
                    self._signal(child, 15)
                elif stopping and remaining is not None and remaining < -self.margin_s / 2:
                    self._signal(child, 9)  # not stopped in half the margin: killed, what it wrote is kept
                if step.resumable and signum is None and not stopping and time.monotonic() >= next_checkpoint:
                    next_checkpoint = time.monotonic() + self.checkpoint_s
                    minutes = (time.monotonic() - started) / 60
                    self._commit(self._partial(step), f"run: stage {step.name} checkpoint, partial outputs ({minutes:.1f} min)")
            except (interrupts.Interrupted, KeyboardInterrupt) as err:
                signum = getattr(err, "signum", 2)
                self._signal(child, signum)
        if signum is not None:
            kept = "its partial outputs are committed; " if step.resumable else ""
            self.echo(f"{step.name}: interrupted; {kept}rerun `skillrag repro` to continue")
            if step.resumable:
                self._commit(self._partial(step), f"run: stage {step.name} interrupted, partial outputs")
            raise interrupts.Interrupted(signum)
        if returncode == 0:
            return True
        if stopping:
            return False
        if step.resumable:
            self._commit(self._partial(step), f"run: stage {step.name} failed, partial outputs kept")
        raise StageFailed(step.name, returncode)

    @staticmethod
    def _signal(child: subprocess.Popen[bytes], signum: int) -> None:
        """To the stage's whole process group (the shell and what it started)."""
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    # ----- DVC and git ---------------------------------------------------------------------------

    def _dvc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["dvc", *args], cwd=self.root, env=self._env, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"`dvc {' '.join(args)}` failed: {(done.stderr or done.stdout).strip()[-2000:]}")
        return done

    def _push(self, name: str) -> None:
        if not self.push or self.remote() is None:
            return
        done = self._dvc("push", "--quiet", name, check=False)
        if done.returncode != 0:
            self.echo(f"warning: `dvc push {name}` failed, the outputs stay in the local cache: "
                      f"{(done.stderr or done.stdout).strip()[-300:]}")

    def _readme(self) -> list[str]:
        """Regenerate README.md's results block (as `skillrag readme`) when the project has one."""
        readme = self.root / "README.md"
        if not self.git or not readme.is_file():
            return []
        from skillrag.report.readme import BEGIN, update_readme

        if BEGIN not in readme.read_text(encoding="utf-8"):
            return []
        update_readme(readme, self.root / "reports")
        return ["README.md"]

    def _in_git(self) -> bool:
        return self._git("rev-parse", "--is-inside-work-tree", check=False).returncode == 0

    def _git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, check=check)

    def _commit(self, paths: Iterable[str], message: str) -> bool:
        """Commit exactly `paths`, a removed tracked one as its removal (whatever else is staged
        stays out); False when nothing changed."""
        paths = list(dict.fromkeys(paths))
        if not (self.git and paths and self._in_git()):
            return False
        tracked = set(self._git("ls-files", "--", *paths).stdout.splitlines())
        present = [p for p in paths if (self.root / p).exists() or p in tracked]
        if not present:
            return False
        with interrupts.deferred():
            self._git("add", "-A", "--", *present)
            if self._git("diff", "--cached", "--quiet", "--", *present, check=False).returncode == 0:
                return False
            self._git("commit", "--quiet", "-m", message, "--", *present)
        self.echo(f"git: {message}")
        return True
