"""File-system primitives of the log directory: durable syncs, atomic replacement, the
names Kafka gives segment and snapshot files.

Every fsync the log layer performs goes through :func:`fdatasync` / :func:`fsync_dir` here,
so an error is turned into :class:`FatalLogError` in one place (an fsync failure is never
retried: Linux may have dropped the dirty pages and would report success the second time)
and tests can inject failures by replacing these module attributes. No log logic here.
"""

from __future__ import annotations

import errno
import os
import re

from kraft.errors import FatalLogError, StateFileError

#: Width of the zero-padded base offset in segment names (Kafka's ``LogFileUtils``).
OFFSET_WIDTH = 20
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
#: Suffix of files this layer writes by temp → fsync → rename.
TEMP_SUFFIX = ".tmp"
#: a segment file that left the log and waits to be unlinked (compaction swaps, file.delete.delay.ms)
DELETED_SUFFIX = ".deleted"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:0{OFFSET_WIDTH}d}{suffix}"


def parse_segment_name(name: str):
    """``(base_offset, kind)`` for ``00000000000000000042.log`` → ``(42, "log")``, or None."""
    m = _SEGMENT_NAME.match(name)
    return (int(m.group(1)), m.group(2)) if m else None


def fdatasync(fd: int, what: str) -> None:
    """fdatasync ``fd`` (releases the GIL); any error is fatal for the log."""
    try:
        os.fdatasync(fd)
    except OSError as exc:
        raise FatalLogError(f"fdatasync of {what} failed: {exc}; the log is unusable "
                            "(fsync errors are never retried)") from exc


def _libc_syncfs():
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    return fn


_SYNCFS = _libc_syncfs()


def sync_file_system(path: str, files_to_sync=()) -> None:
    """Make every write to the file system holding ``path`` durable with one ``syncfs`` (Linux):
    recovering 10,000 partition logs after a crash took 10,000 fdatasyncs, one after the
    other. Where syncfs is missing, ``files_to_sync`` ((fd, name) pairs) are fdatasynced on
    threads at once instead. Any error is fatal, as for fdatasync."""
    import ctypes

    if _SYNCFS is not None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if _SYNCFS(fd) == 0:
                return
            err = ctypes.get_errno()
        finally:
            os.close(fd)
        if err != errno.ENOSYS:
            raise FatalLogError(f"syncfs of {path} failed: {os.strerror(err)}; its logs are unusable "
                                "(fsync errors are never retried)")
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="kraft-sync") as pool:
        list(pool.map(lambda item: fdatasync(*item), files_to_sync))


def fsync_dir(path: str) -> None:
    """fsync a directory so entries created, renamed or removed in it are durable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise FatalLogError(f"cannot open directory {path} to fsync it: {exc}") from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FatalLogError(f"fsync of directory {path} failed: {exc}; the log is unusable "
                            "(fsync errors are never retried)") from exc
    finally:
        os.close(fd)


def write_all(fd: int, data, position: int, what: str) -> None:
    """pwrite all of ``data`` at ``position``. A failed or short write leaves the file in
    an unknown state, so it is fatal like an fsync error."""
    view = memoryview(data)
    try:
        while view:
            n = os.pwrite(fd, view, position)
            if n <= 0:
                raise OSError("pwrite wrote nothing")
            view = view[n:]
            position += n
    except OSError as exc:
        raise FatalLogError(f"write to {what} failed: {exc}; the log is unusable") from exc


def remove_durably(path: str) -> None:
    """Unlink ``path`` (if it is there) and fsync its directory: a crash afterwards does not
    bring it back."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FatalLogError(f"cannot remove {path}: {exc}") from exc
    fsync_dir(os.path.dirname(path) or ".")


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` durably: write ``path.tmp``, fsync it, rename it over
    ``path``, fsync the directory. A crash at any point leaves the old or the new file."""
    tmp = path + TEMP_SUFFIX
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        raise FatalLogError(f"cannot create {tmp}: {exc}") from exc
    try:
        write_all(fd, data, 0, tmp)
        fdatasync(fd, tmp)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise FatalLogError(f"cannot rename {tmp} to {path}: {exc}") from exc
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_text(path: str, what: str):
    """Contents of a small text state file, or None if it does not exist; unreadable or
    non-UTF-8 files raise StateFileError naming the file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"cannot read {what} file {path}: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateFileError(f"{what} file {path} is not UTF-8 text: {exc}") from exc
