"""Kafka's checkpoint text files (``CheckpointFile``): line 1 the format version, line 2 the
entry count, then one entry per line. Used for ``leader-epoch-checkpoint`` (``epoch
start_offset``) and offset checkpoints such as ``recovery-point-offset-checkpoint``
(``topic partition offset``).

Reading is strict: a wrong version, a malformed line or a count that does not match raises
:class:`StateFileError` naming the file. Writing is temp → fsync → rename → fsync directory.
This module knows the text format only, not what the entries mean to the log.
"""

from __future__ import annotations

import re

from kraft.errors import StateFileError
from kraft.log import files

_WS = re.compile(r"\s+")
_INT = re.compile(r"^-?\d+$")


def _parse_int(text: str, path: str, line: str, lo: int, hi: int) -> int:
    if not _INT.match(text):
        raise StateFileError(f"malformed line in checkpoint file {path}: {line!r}")
    value = int(text)
    if not lo <= value <= hi:
        raise StateFileError(f"value {value} out of range in checkpoint file {path}: {line!r}")
    return value


_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


def format_checkpoint(version: int, lines: list[str]) -> bytes:
    return "".join(f"{x}\n" for x in [str(version), str(len(lines)), *lines]).encode("utf-8")


def read_checkpoint_lines(path: str, version: int) -> list[list[str]] | None:
    """The whitespace-split entry lines of a checkpoint file, None if it does not exist.
    An empty file (Kafka creates one before its first write) has no entries."""
    text = files.read_text(path, "checkpoint")
    if text is None:
        return None
    lines = text.splitlines()
    if not lines:
        return []
    got = _parse_int(lines[0].strip(), path, lines[0], *_I32)
    if got != version:
        raise StateFileError(f"unrecognised version {got} (expected {version}) in checkpoint file {path}")
    if len(lines) == 1:
        return []
    count = _parse_int(lines[1].strip(), path, lines[1], 0, _I32[1])
    entries = [_WS.split(line.strip()) for line in lines[2:]]
    if len(entries) != count:
        raise StateFileError(f"expected {count} entries in checkpoint file {path}, found {len(entries)}")
    return entries


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: version 0, entries ``epoch start_offset``."""

    VERSION = 0

    def __init__(self, path: str):
        self.path = path

    def read(self, missing=()) -> list[tuple[int, int]]:
        """The entries; ``missing`` (an empty list by default) when there is no file."""
        rows = read_checkpoint_lines(self.path, self.VERSION)
        if rows is None:
            return missing if missing is None else list(missing)
        out = []
        for row in rows:
            line = " ".join(row)
            if len(row) != 2:
                raise StateFileError(f"malformed line in checkpoint file {self.path}: {line!r}")
            epoch = _parse_int(row[0], self.path, line, 0, _I32[1])
            start = _parse_int(row[1], self.path, line, 0, _I64[1])
            out.append((epoch, start))
        for (e0, s0), (e1, s1) in zip(out, out[1:]):
            if e1 <= e0 or s1 <= s0:
                raise StateFileError(f"leader epoch entries not increasing in {self.path}: "
                                     f"({e0}, {s0}) then ({e1}, {s1})")
        return out

    def write(self, entries) -> None:
        files.atomic_write(self.path, format_checkpoint(self.VERSION, [f"{e} {s}" for e, s in entries]))


class OffsetCheckpointFile:
    """Kafka's per-partition offset checkpoints (``recovery-point-offset-checkpoint``,
    ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``): version 0, entries
    ``topic partition offset``; read and written as ``{(topic, partition): offset}``."""

    VERSION = 0

    def __init__(self, path: str):
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        out = {}
        for row in read_checkpoint_lines(self.path, self.VERSION) or []:
            line = " ".join(row)
            if len(row) != 3:
                raise StateFileError(f"malformed line in checkpoint file {self.path}: {line!r}")
            partition = _parse_int(row[1], self.path, line, 0, _I32[1])
            out[(row[0], partition)] = _parse_int(row[2], self.path, line, *_I64)
        return out

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        lines = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        files.atomic_write(self.path, format_checkpoint(self.VERSION, lines))
