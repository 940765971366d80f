"""A range of a segment file that a Fetch answer carries without reading it: the connection
sends it with ``sendfile`` (page cache to socket, no copy through Python), or reads it with
``pread`` where it cannot (TLS, a socket that is not writable now, a platform without
``sendfile``).

Why it is safe to hold a range of a file that the log may change before the answer is written
(the answer can wait in its connection's queue behind earlier ones):

* **deletion, retention, a compaction swap, a closed log**: a slice reads through its own
  descriptor (``SliceSource``: one ``dup`` of the segment's, shared by its slices, closed when
  the segment and the last slice are gone); an unlinked or renamed file stays readable through
  it, and a closed segment descriptor cannot be reused under it for another file;
* **truncation** (a follower cutting its divergent tail: the only change of bytes already
  written): before the file is cut, the segment reads every live slice that reaches past the
  cut into memory (``LogSegment.truncate_at`` -> ``FileSlice.materialize``), so the answer
  still carries the bytes it was built with. The cut never waits for a slow reader's socket.

A sender that finds a slice shorter than promised (truncated by a thread it did not see)
continues from the slice's materialized bytes, or fails the connection: an answer is never
sent with other bytes than those its length promised. Called on the thread that owns the log,
as its reads are.
"""

from __future__ import annotations

import os

from kraft.errors import FatalLogError


class SliceSource:
    """A duplicate of a segment's descriptor that its slices read through; closed when no
    slice and no segment refers to it (reference counting, no explicit release)."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: str):
        try:
            self.fd = os.dup(fd)
        except OSError as exc:
            raise FatalLogError(f"cannot duplicate the descriptor of {path}: {exc}") from exc
        self.path = path

    def __del__(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


class FileSlice:
    """``length`` bytes at ``position`` of a segment file (whole batches); ``data`` holds them
    once read into memory (then the file no longer matters to this slice)."""

    __slots__ = ("__weakref__", "data", "length", "position", "source")

    def __init__(self, source: SliceSource, position: int, length: int):
        self.source, self.position, self.length = source, position, length
        self.data: memoryview | None = None

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        return self.length

    def materialize(self) -> memoryview:
        """The bytes, read into memory now if they were not already."""
        data = self.data
        if data is None:
            source = self.source
            try:
                raw = os.pread(source.fd, self.length, self.position)
            except OSError as exc:
                raise FatalLogError(f"cannot read {source.path}: {exc}") from exc
            if len(raw) != self.length:
                raise FatalLogError(f"{source.path} holds {len(raw)} of the {self.length} bytes at position "
                                    f"{self.position} a fetch answer carries")
            data = self.data = memoryview(raw)
            self.source = None  # the file is not needed any more
        return data

    def __bytes__(self) -> bytes:  # in-process readers of an answer (tests, tools)
        return bytes(self.materialize())

    def __repr__(self) -> str:
        where = "in memory" if self.data is not None else f"of {self.source.path}"
        return f"FileSlice({self.length} bytes at {self.position} {where})"
