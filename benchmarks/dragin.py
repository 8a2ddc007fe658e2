"""DRAGIN's wall time per question beside FLARE's, on the same questions, in one process.

    python benchmarks/dragin.py --per-dataset 2 --name dragin-after [--profile dragin.prof] [--compare dragin-before]

Issue 47 asks DRAGIN to cost at most 2x FLARE per question. Both methods answer the first
`--per-dataset` evaluation questions of every dataset (data/questions/eval/), as one evaluation
set `mixed` (so they are answered at once, up to `lm.concurrency`, as a stage answers its 30), each as its
evaluate stage runs it (`skillrag.pipeline.stages.evaluate.evaluate`: the default params, concurrency
and batch size, a model loaded once), written as the named evaluation `--name-<method>` under
data/custom/ (cleared first, so nothing is resumed). The methods alternate `--repeats` times;
the best wall time of each is kept, so load from other processes hurts both alike; the process's
CPU seconds are printed beside it (on a shared machine they move less with the load). The
thresholds are the tuned ones the committed report records (reports/thresholds.json), as
`auto` would read them from data/thresholds/ (a DVC cache output absent on a new machine).

`--profile DIR` runs every method under cProfile (its overhead on these torch-bound runs is a few
percent, alike for both), saves DIR/<method>.prof and prints the first method's top functions by
cumulative time. `--compare NAME` checks that this run's traces equal those of an
earlier run named NAME (e.g. made before a change) record by record, wall-clock fields aside.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import time
from dataclasses import replace
from pathlib import Path

from skillrag.config import load_params
from skillrag.data.splits import load_split
from skillrag.files import write_jsonl
from skillrag.paths import Paths
from skillrag.pipeline.recommit import VOLATILE
from skillrag.pipeline.stages import ensure_index
from skillrag.pipeline.stages.evaluate import evaluate

REPO = Path(__file__).resolve().parents[1]


def tuned_thresholds(report: Path) -> list[str]:
    """`param=value` overrides of the tuned trigger thresholds the report records."""
    triggers = json.loads(report.read_text(encoding="utf-8"))["triggers"]
    return [f"{t['param']}={t['value']!r}" for t in triggers.values()]


def stable(value: object) -> object:
    """`value` without its wall-clock fields (skillrag.pipeline.recommit.VOLATILE)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def traces(paths: Paths, method: str) -> dict[str, list[dict]]:
    """dataset -> the method's traces of a named run, wall-clock fields aside."""
    folder = paths.runs / method
    return {f.stem: [stable(json.loads(line)) for line in f.open()] for f in sorted(folder.glob("*.jsonl"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-dataset", type=int, default=2, help="evaluation questions per dataset")
    parser.add_argument("--methods", nargs="+", default=["dragin", "flare"], help="the first is compared with the others")
    parser.add_argument("--name", default="bench-dragin", help="prefix of the named evaluations written")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--profile", type=Path, help="profile every run, stats saved in this folder")
    parser.add_argument("--compare", help="an earlier run's --name whose traces must be the same")
    parser.add_argument("--set", action="append", default=[], dest="overrides", help="KEY=VALUE, as skillrag --set")
    args = parser.parse_args()

    params = load_params(REPO / "params.yaml", overrides=[*tuned_thresholds(REPO / "reports/thresholds.json"), *args.overrides])
    root = Paths(REPO)
    found = load_split(root.questions, "eval", params.prepare.max_question_chars)
    # one evaluation set, so the questions are answered at once as a stage answers its 30
    mixed = [q for d in params.evaluate.datasets for q in found[d][: args.per_dataset]]
    chosen = {"mixed": [replace(q, dataset="mixed") for q in mixed]}
    count = len(mixed)
    ensure_index(params, root, print)  # a fresh clone keeps no index; the named runs share the pipeline's

    def run(method: str) -> tuple[float, float]:
        """(wall, this process's CPU) seconds of one method's run."""
        paths = root.for_custom(f"{args.name}-{method}")
        shutil.rmtree(paths.runs.parent, ignore_errors=True)
        for dataset, questions in chosen.items():
            write_jsonl(paths.question_file("eval", dataset), (q.to_dict() for q in questions))
        profiler = cProfile.Profile() if args.profile else None
        started, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.runcall(evaluate, params, paths, datasets=list(chosen), methods=[method])
            args.profile.mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(args.profile / f"{method}.prof")
        else:
            evaluate(params, paths, datasets=list(chosen), methods=[method])
        return time.perf_counter() - started, time.process_time() - cpu

    best = dict.fromkeys(args.methods, (float("inf"), float("inf")))
    for _ in range(args.repeats):
        for method in args.methods:
            best[method] = min(best[method], run(method))
    first = args.methods[0]
    print(f"{count} questions ({args.per_dataset} per dataset), model {params.lm.model} {params.lm.dtype}")
    for method in args.methods:
        (wall, cpu), (first_wall, first_cpu) = best[method], best[first]
        print(
            f"{method:>8}: {wall / count:7.2f} s per question ({cpu / count:7.2f} CPU s)   "
            f"{first}/{method} = {first_wall / wall:.2f} ({first_cpu / cpu:.2f} in CPU time)"
        )
    if args.profile:
        pstats.Stats(str(args.profile / f"{first}.prof")).sort_stats("cumulative").print_stats(40)

    if args.compare:
        for method in args.methods:
            now = traces(root.for_custom(f"{args.name}-{method}"), method)
            before = traces(root.for_custom(f"{args.compare}-{method}"), method)
            print(f"{method}: traces {'identical to' if now == before else 'DIFFERENT from'} {args.compare}'s")


if __name__ == "__main__":
    main()
