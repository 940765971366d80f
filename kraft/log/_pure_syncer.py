"""Pure-Python twin of ``kraft._native._syncer.Syncer`` (``KRAFT_NO_EXTENSIONS=1``, or when
the extension is not built): the same jobs and eventfd, but a Python thread, which takes the
GIL after every fdatasync."""

from __future__ import annotations

import os
import threading
import time

#: Looked up per job, so tests can hold or fail this thread's fdatasync alone.
fdatasync = os.fdatasync


class Syncer:
    def __init__(self):
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._cond = threading.Condition()
        self._job: int | None = None
        self._busy = False
        self._result: tuple[int, float] | None = None
        self._stopping = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kraft-syncer", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        return self._efd

    def submit(self, fd: int) -> None:
        if self._closed:
            raise ValueError("syncer is closed")
        with self._cond:
            if self._busy or self._stopping:
                raise RuntimeError("a sync is already running")
            self._busy, self._result, self._job = True, None, fd
            self._cond.notify_all()

    def _take(self):
        result = self._result
        self._busy, self._result = False, None
        return result

    def _drain(self) -> None:
        # Every time: the thread writes after publishing, so a late write is drained by
        # the next call instead of leaving the loop woken forever.
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            pass

    def collect(self):
        self._drain()
        with self._cond:
            return self._take() if self._busy and self._result is not None else None

    def wait(self):
        self._drain()
        with self._cond:
            while self._busy and self._result is None:
                self._cond.wait()
            return self._take() if self._busy else None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()
        if self._job is not None:
            os.close(self._job)
            self._job = None
        os.close(self._efd)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._job is None and not self._stopping:
                    self._cond.wait()
                if self._job is None:
                    return
                fd = self._job
            began = time.monotonic()
            try:
                fdatasync(fd)
                err = 0
            except OSError as exc:
                err = exc.errno or 0
            took = time.monotonic() - began
            os.close(fd)
            with self._cond:
                self._job = None
                self._result = (err, took)
                self._cond.notify_all()
            os.eventfd_write(self._efd, 1)
