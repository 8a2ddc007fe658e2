"""Load time of a bundled model with the full sha256 check of its cache against the check skipped
when no file's size, mtime or ctime changed since the last full one (skillrag.lm.bundled), from
one run, alternately.

    python benchmarks/model_check.py --model smollm2-135m --repeats 3

"full" removes the verified stamp first (every load before the stamp existed); "stamped" loads
with it in place. Prints each side's best time and the saving.
"""

from __future__ import annotations

import argparse
import time

import torch

from skillrag.lm import load_lm
from skillrag.lm.bundled import VERIFIED, bundled_dir


def timed(model: str, full: bool) -> float:
    if full:
        (bundled_dir(model) / VERIFIED).unlink(missing_ok=True)
    start = time.perf_counter()
    load_lm(model, device="cpu", dtype="float32")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundled_dir(args.model)  # converted and stamped before timing
    best = {"full": float("inf"), "stamped": float("inf")}
    for _ in range(args.repeats):
        for side, so_far in best.items():
            best[side] = min(so_far, timed(args.model, side == "full"))
    print(f"{args.model} load: full check {best['full']:.2f} s, stamped {best['stamped']:.2f} s, "
          f"saved {best['full'] - best['stamped']:.2f} s ({best['stamped'] / best['full']:.2f}x)")


if __name__ == "__main__":
    main()
