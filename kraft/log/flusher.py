"""The group-commit flusher thread of a ``SegmentedLog``.

It sleeps until the log has unflushed changes, lets them accumulate for the linger
(``append.linger.ms``, less the recent fsync time, so an append is durable within the
linger when the disk keeps up) unless a flush was requested, then runs one flush cycle
(``SegmentedLog._flush_once``: fdatasync with the GIL released, epoch checkpoint if it
changed, flushed offset reported through the callback). Appends made while a cycle runs are
covered by the next one. An fsync error ends the thread and makes the log fatal: it is
never retried. This module holds only the scheduling; what a flush does is the log's.
"""

from __future__ import annotations

import logging
import threading
import time

from kraft.errors import FatalLogError

_log = logging.getLogger(__name__)


class FlusherThread(threading.Thread):
    """Waits on the log's condition variable; one per open log."""

    def __init__(self, log, linger_ms: float):
        super().__init__(name=f"kraft-flusher:{log.directory}", daemon=True)
        self._log = log
        self._linger_s = linger_ms / 1000.0

    def _wait_for_work(self) -> bool:
        """Block until a flush is due; False when the thread should exit."""
        log = self._log
        with log._lock:
            while True:
                if log._fatal is not None:
                    return False
                if log._dirty_since is not None:
                    # The linger is a latency budget: start early by the expected fsync
                    # time so the first unflushed append is durable within it.
                    start_by = log._dirty_since + max(0.0, self._linger_s - log._fsync_estimate)
                    remaining = start_by - time.monotonic()
                    if log._flush_requested or log._closing or remaining <= 0:
                        return True
                    log._work.wait(remaining)
                elif log._closing:
                    return False
                else:
                    log._work.wait()

    def run(self) -> None:
        while self._wait_for_work():
            try:
                self._log._flush_once()
            except FatalLogError:
                return  # already recorded by the log and reported to on_fatal
            except BaseException as exc:  # a bug must not leave writers waiting forever
                _log.exception("flusher of %s failed", self._log.directory)
                self._log._set_fatal(FatalLogError(f"flusher thread failed: {exc!r}"))
                return
