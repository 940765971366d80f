"""Runs simulator seeds on every core: the seeds are independent and pure CPU, and the test run
is otherwise one process on a many-core machine, so CI covers the same seeds in a fraction of the
wall time. One place for the loop the chunked seed tests shared."""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor


def _one(run: Callable, seed: int, profile: str, failure: type[BaseException]) -> str | None:
    try:
        run(seed, profile)
    except failure as exc:
        return str(exc)
    except Exception:  # a crash of the simulator itself is a failure of that seed, named
        return f"seed {seed} ({profile}) raised:\n{traceback.format_exc()}"
    return None


def failed_seeds(run: Callable, seeds: Iterable[int], profile: str,
                 failure: type[BaseException] = Exception, workers: int | None = None) -> list[str]:
    """The failure messages of ``run(seed, profile)`` over ``seeds``, in seed order. ``run`` must
    be a module-level function (it is sent to worker processes); ``KRAFT_SIM_WORKERS=1`` or one
    core runs them here, in this process."""
    seeds = list(seeds)
    workers = workers or int(os.environ.get("KRAFT_SIM_WORKERS", 0)) or os.cpu_count() or 1
    workers = min(workers, len(seeds))
    if workers <= 1:
        results = [_one(run, s, profile, failure) for s in seeds]
    else:
        # fork: workers start at once with the test process's imports (and any monkeypatch).
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_one, [run] * len(seeds), seeds, [profile] * len(seeds),
                                    [failure] * len(seeds), chunksize=max(1, len(seeds) // (4 * workers))))
    return [r for r in results if r is not None]
