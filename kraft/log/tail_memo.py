"""TailMemo: the bytes of a segment's latest appends, kept to serve reads of the tail.

Nearly every read of a metadata log is of what was just appended: each follower's Fetch
answer, then the state machine applying what committed. The leader read the same bytes back
from the file three times per write (two followers and its own apply), a system call and a
copy each, and the followers once. The memo holds the appended bytes objects themselves, so
a read of the tail slices memory (no copy when it is exactly one append) and never needs a
CRC pass again: what was appended was validated (or made) before it was written.

Bounded by bytes and by count; a consistent snapshot (one tuple swapped per append) so a
reader on another thread never sees it half changed. The segment clears it on truncation
and when it stops taking appends.
"""

from __future__ import annotations

#: Bytes of appends kept per segment (only the active segment appends).
MEMO_BYTES = 4 << 20
#: Appends kept: reads search them from the newest.
MEMO_APPENDS = 64


class TailMemo:
    __slots__ = ("_state",)

    def __init__(self):
        # (start position, (chunk, ...), total bytes): chunks are contiguous from start.
        self._state: tuple | None = None

    def clear(self) -> None:
        self._state = None

    def append(self, position: int, data) -> None:
        """``data`` was written at ``position`` (the end of the file before the write). Bytes
        and read-only views are kept as they are (whoever made a read-only view of a buffer
        hands it over unchanged for good: the log's own patched buffers, frames the decoder
        gave away); anything writable is copied."""
        kind = type(data)
        chunk = data if kind is bytes or (kind is memoryview and data.readonly) else bytes(data)
        n = len(chunk)
        if n > MEMO_BYTES:
            self._state = None
            return
        state = self._state
        if state is None or state[0] + state[2] != position:
            self._state = (position, (chunk,), n)
            return
        start, chunks, total = state
        chunks = chunks + (chunk,)
        total += n
        while total > MEMO_BYTES or len(chunks) > MEMO_APPENDS:
            total -= len(chunks[0])
            start += len(chunks[0])
            chunks = chunks[1:]
        self._state = (start, chunks, total)

    def read(self, position: int, want: int):
        """``want`` bytes (fewer at the end) from ``position``, or None when the memo does
        not hold ``position``. Within one append: that append's bytes or a view of them
        (no copy); across appends, joined."""
        state = self._state
        if state is None:
            return None
        start, chunks, total = state
        end = start + total
        if position < start or position >= end:
            return None
        want = min(want, end - position)
        at = end
        for i in range(len(chunks) - 1, -1, -1):  # the newest first: reads are of the tail
            at -= len(chunks[i])
            if at <= position:
                break
        first = chunks[i]
        off = position - at
        if off == 0 and len(first) == want:
            return first
        if off + want <= len(first):
            return first[off:off + want]
        parts = [first[off:]]
        got = len(first) - off
        for chunk in chunks[i + 1:]:
            if got >= want:
                break
            parts.append(chunk if got + len(chunk) <= want else chunk[:want - got])
            got += len(parts[-1])
        return b"".join(parts)
