"""The ``.lock`` file Kafka takes on every log directory, so two processes never run as the
same node on the same files.

``lock_directories`` takes an exclusive, non-blocking ``flock`` on ``DIR/.lock`` for each
directory (Kafka's ``LogManager.lockLogDirs``: ``FileLock.tryLock`` on ``.lock``) and keeps
the file descriptors open: the lock lives exactly as long as the process, so a crash never
leaves a stale lock behind. A directory another process holds raises
:class:`LogDirLockedError` naming it. No log logic here, no asyncio.
"""

from __future__ import annotations

import fcntl
import os

from kraft.errors import StorageError

LOCK_FILE = ".lock"


class LogDirLockedError(StorageError):
    """Another process holds the directory's ``.lock``."""


class DirectoryLocks:
    """Held locks; ``release`` (or process exit) frees them."""

    def __init__(self, fds: dict[str, int]):
        self._fds = fds

    @property
    def directories(self) -> list[str]:
        return list(self._fds)

    def release(self) -> None:
        for fd in self._fds.values():
            os.close(fd)  # closing the last descriptor drops the flock
        self._fds = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def lock_directories(directories, *, create: bool = False) -> DirectoryLocks:
    """Lock every directory or none. ``create`` makes missing directories (``format`` does;
    ``start`` must not, a missing directory there means it was never formatted)."""
    fds: dict[str, int] = {}
    try:
        for d in dict.fromkeys(directories):
            if create:
                os.makedirs(d, exist_ok=True)
            path = os.path.join(d, LOCK_FILE)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:
                raise StorageError(f"log directory {d} does not exist") from None
            except OSError as exc:
                raise StorageError(f"cannot open {path}: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LogDirLockedError(f"log directory {d} is in use by another process "
                                        f"(it holds {path}); stop that process first") from None
            except OSError as exc:
                os.close(fd)
                raise StorageError(f"cannot lock {path}: {exc.strerror}") from None
            fds[d] = fd
    except BaseException:
        DirectoryLocks(fds).release()
        raise
    return DirectoryLocks(fds)
