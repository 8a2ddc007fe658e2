"""Many questions at once over one LM: per-question code runs in worker threads, and the one
thread that owns the model serves their LM and retriever calls, batched.

Methods are plain sequential code that answers one question. To batch across questions,
`Batcher.map` runs up to `workers` tasks in threads; each task reaches the model only through
its slot's fronts (`Batcher.lm(slot)`, `Batcher.retriever(slot)`), whose calls enqueue a
request and wait for its result. The thread that iterates `map` is the scheduler: when every
running task waits on a request (or after `WAIT_S`, so a slow task does not hold the others
back), it serves the pending retrievals first (they are cheap, and the tasks come back with LM
calls that join the next batch), else every pending LM call, as the request objects of
skillrag.lm.calls: `generate` calls that can share one call (equal `GenerateCall`s but for their
token budgets: stops, capture, prefix and attention, so the prefix KV cache is shared; each row
decodes to its own budget, so DRAGIN's calls, whose budget left shrinks as a CoT grows, batch
too) run together, at most `batch_size` prompts per call, prompts of similar length together (rows are left-padded to the
longest); `choose_and_generate` calls with the same prefix (the router's) run together likewise,
and `loglikelihood` calls together, at most `batch_size` per model call. Only
the scheduler touches the LM and the retriever, so native code (torch, the JVM) and signals
(`skillrag.interrupts`) stay in the main thread.

When a shared call raises an error that `retry_alone` accepts (a per-question runtime failure
such as out of memory, which may belong to one row or to the batch's size), its requests are
re-run one by one, so the error reaches only the task whose call causes it (a row's greedy
result does not depend on its batch neighbours). Any other error (a bug) goes to every request
of the call: it must stop the run, not vanish because a smaller call happened to pass.

Results come back in item order, and at most `WINDOW` x `workers` items run ahead of the
oldest unfinished one. An exception a task raises (any BaseException) is re-raised in the
iterating thread when the item's turn comes. Leaving the `with Batcher(...)` block (the end,
an error, an interrupt) cancels the tasks still waiting and joins every thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from skillrag import interrupts
from skillrag.lm.base import LM, Choice, Generation
from skillrag.lm.calls import (
    ChooseCall,
    GenerateCall,
    RequestLM,
    ScoreCall,
    choices_of,
    generations_of,
    scores_of,
)
from skillrag.retrieval.base import Hit, Retriever

T = TypeVar("T")
R = TypeVar("R")

WAIT_S = 0.5  # the longest the scheduler waits for a busy task before serving the others
WINDOW = 4  # items started at most this many times `workers` ahead of the oldest unfinished one
_RETRIEVAL = ("search", "batch_search")


class Cancelled(BaseException):
    """Raised in a task whose run was abandoned (an error or interrupt elsewhere): a
    BaseException, so no per-question handler records it as that question's failure."""


@dataclass(eq=False)
class _Request:
    kind: str  # "generate" | "choose" | "score" | "search" | "batch_search"
    args: tuple  # generate: (GenerateCall, prompts); choose: (ChooseCall,); score: (ScoreCall,)
    future: Future = field(default_factory=Future)

    @property
    def group(self) -> tuple:
        """Requests with equal groups share one LM call: generates whose `GenerateCall`s differ
        at most in their budgets, choices with the same prefix, every loglikelihood; a retrieval
        stands alone."""
        if self.kind == "generate":
            return ("generate", self.args[0].batch_group())
        if self.kind == "choose":
            return ("choose", self.args[0].prefix)
        return ("score",) if self.kind == "score" else (self.kind, id(self))

    @property
    def prompts(self) -> list[str]:
        """The prompts the request puts in a batch."""
        if self.kind == "generate":
            return self.args[1]
        return [self.args[0].prompt] if self.kind in ("choose", "score") else []


class _LMFront(RequestLM):
    """The `LM` protocol for one task: each call is a request served by the scheduler."""

    def __init__(self, batcher: Batcher) -> None:
        self._batcher = batcher
        lm = batcher.model
        self.name, self.num_layers, self.hidden_size = lm.name, lm.num_layers, lm.hidden_size

    def serve_generate(self, call: GenerateCall, prompts: list[str]) -> list[Generation]:
        return self._batcher.call("generate", call, list(prompts))

    def serve_scores(self, calls: Sequence[ScoreCall]) -> list[list[float]]:
        return [self._batcher.call("score", call) for call in calls]

    def serve_choices(self, calls: Sequence[ChooseCall]) -> list[Choice]:
        return [self._batcher.call("choose", call) for call in calls]


class _RetrieverFront:
    """The `Retriever` protocol for one task, served by the scheduler."""

    def __init__(self, batcher: Batcher) -> None:
        self._batcher = batcher

    def search(self, query: str, k: int) -> list[Hit]:
        return self._batcher.call("search", query, k)

    def batch_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return self._batcher.call("batch_search", list(queries), k)


class Batcher:
    """Runs tasks concurrently over one LM and retriever, serving their calls in batches (see
    the module docstring). Use as a context manager; `map` from the thread that owns the model."""

    def __init__(
        self,
        model: LM,
        retriever: Retriever | None,
        workers: int,
        batch_size: int,
        retry_alone: Callable[[Exception], bool],
    ) -> None:
        if workers < 1 or batch_size < 1:
            raise ValueError(f"workers and batch_size must be >= 1, got {workers} and {batch_size}")
        self.model, self.searcher = model, retriever
        self.workers, self.batch_size, self.retry_alone = workers, batch_size, retry_alone
        self._lms = [_LMFront(self) for _ in range(workers)]
        self._retrievers = [_RetrieverFront(self) for _ in range(workers)]
        self._changed = threading.Condition()
        self._pending: list[_Request] = []  # requests not yet taken by the scheduler
        self._serving: list[_Request] = []  # requests taken and not yet answered
        self._running = 0  # tasks started and not finished
        self._finished: dict[int, tuple[bool, Any]] = {}  # item index -> (ok, result or exception)
        self._news = False  # a task finished since the scheduler last looked
        self._free = list(range(workers))  # slots no running task holds
        self._cancelled = False
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="question")

    def lm(self, slot: int) -> LM:
        """The LM front of worker slot `slot` (0..workers-1)."""
        return self._lms[slot]

    def retriever(self, slot: int) -> Retriever:
        return self._retrievers[slot]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._changed:
            self._cancelled = True
            waiting, self._pending = [*self._serving, *self._pending], []
        for request in waiting:
            if not request.future.done():
                request.future.set_exception(Cancelled())
        self._pool.shutdown(wait=True, cancel_futures=True)

    def map(self, task: Callable[[int, T], R], items: Sequence[T]) -> Iterator[R]:
        """`task(slot, item)` for every item, up to `workers` at once, each on a free slot (whose
        fronts it may use); the results in item order."""
        started = done = 0
        while done < len(items):
            with self._changed:
                while self._free and started < min(len(items), done + WINDOW * self.workers):
                    self._running += 1
                    self._pool.submit(self._work, task, started, self._free.pop(), items[started])
                    started += 1
                result = self._finished.pop(done, None)
                self._news = False
            if result is not None:
                done += 1
                ok, value = result
                if not ok:
                    raise value
                yield value
            else:
                self._serve()

    def call(self, kind: str, *args: Any) -> Any:
        """From a task: enqueue a request and wait for its result."""
        request = _Request(kind, args)
        with self._changed:
            if self._cancelled:
                raise Cancelled()
            self._pending.append(request)
            self._changed.notify_all()
        return request.future.result()

    def _work(self, task: Callable[[int, T], R], index: int, slot: int, item: T) -> None:
        try:
            result = (True, task(slot, item))
        except BaseException as err:  # noqa: BLE001 - handed to the iterating thread, which re-raises it
            result = (False, err)
        with self._changed:
            self._finished[index] = result
            self._free.append(slot)
            self._running -= 1
            self._news = True
            self._changed.notify_all()

    def _serve(self) -> None:
        """Wait until every running task waits on a request (or WAIT_S passed), then serve the
        pending retrievals, else every pending LM call. Returns at once when a task finished:
        its result is handed out and a new task started first, which may join the batch."""
        interrupts.check()
        with self._changed:
            self._changed.wait_for(lambda: self._news or len(self._pending) >= self._running, timeout=WAIT_S)
            if self._news:
                return
            searches = [r for r in self._pending if r.kind in _RETRIEVAL]
            self._serving = searches or self._pending
            self._pending = [r for r in self._pending if r.kind not in _RETRIEVAL] if searches else []
        groups: dict[tuple, list[_Request]] = {}
        for request in self._serving:
            groups.setdefault(request.group, []).append(request)
        for group in groups.values():
            group.sort(key=lambda r: sum(len(p) for p in r.prompts))
            for chunk in self._chunks(group):
                self._run(chunk)
        self._serving = []

    def _chunks(self, group: list[_Request]) -> Iterator[list[_Request]]:
        """Consecutive requests of at most `batch_size` prompts together (one at least)."""
        chunk: list[_Request] = []
        prompts = 0
        for request in group:
            size = max(len(request.prompts), 1)
            if chunk and prompts + size > self.batch_size:
                yield chunk
                chunk, prompts = [], 0
            chunk.append(request)
            prompts += size
        if chunk:
            yield chunk

    def _run(self, chunk: list[_Request]) -> None:
        """One LM (or retriever) call for the chunk; its results, or its error, to the requests
        (see the module docstring for which errors are retried request by request)."""
        try:
            results = self._execute(chunk)
        except Exception as err:  # noqa: BLE001 - goes to the callers, who apply the error policy
            if len(chunk) > 1 and self.retry_alone(err):
                interrupts.check()  # native code may have turned a signal into this error
                for request in chunk:
                    self._run([request])
            else:
                for request in chunk:
                    request.future.set_exception(err)
            return
        for request, result in zip(chunk, results, strict=True):
            request.future.set_result(result)

    def _execute(self, chunk: list[_Request]) -> list[Any]:
        first = chunk[0]
        if first.kind == "generate":
            return generations_of(self.model, [request.args for request in chunk])
        if first.kind == "choose":
            return choices_of(self.model, [request.args[0] for request in chunk])
        if first.kind == "score":
            return scores_of(self.model, [request.args[0] for request in chunk])
        if self.searcher is None:
            raise ValueError("this Batcher has no retriever")
        return [getattr(self.searcher, first.kind)(*first.args)]
