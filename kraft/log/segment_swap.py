"""Crash-safe replacement of closed segments by a cleaned one, and the recovery of a swap a
crash interrupted (Kafka's ``LocalLog.replaceSegments`` and ``LogLoader``'s handling of
``.cleaned``/``.swap``/``.deleted`` files).

The steps, each leaving a state recovery understands:

1. the cleaner writes ``<base>.log.cleaned`` and fdatasyncs it (a crash: recovery deletes it);
2. renames it to ``<base>.log.swap`` and fsyncs the directory (from here the cleaned data wins:
   recovery deletes every ``.log`` whose base offset lies in the swap file's offsets and renames
   the swap file into place);
3. on the log's owner thread (renames only, no fsync: the event loop never fsyncs): each old
   ``.log`` becomes ``.log.deleted``, its index files go, the swap file becomes ``<base>.log``,
   and the in-memory segment list is replaced; the old segments are closed there too, where no
   read can be using them;
4. back on the cleaner thread: fsync the directory, unlink the ``.deleted`` files, write the new
   segment's index files.
"""

from __future__ import annotations

import logging
import os
import re

from kraft.log import files, txn_index
from kraft.log.segment import LogSegment
from kraft.records import scan_batches

_log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = files.DELETED_SUFFIX
_LEFTOVER = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)\.(cleaned|swap|deleted)$")


class SwapAborted(Exception):
    """The segments to replace are no longer the log's (truncated or trimmed meanwhile)."""


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def install_cleaned(log, cleaned_path: str, base: int, old_segments: list, run_on_owner=None) -> None:
    """Steps 2-4 for the cleaned file of the group ``old_segments`` (``LogSegment`` objects of
    ``log``). ``run_on_owner(fn)`` runs ``fn`` on the log's owner thread and returns its
    result (None: call it here, for a log nobody else uses). Raises SwapAborted, with the
    cleaned data removed, if the log changed meanwhile."""
    directory = log.directory
    swap_path = os.path.join(directory, files.segment_name(base, files.LOG_SUFFIX) + SWAP_SUFFIX)
    os.replace(cleaned_path, swap_path)
    files.fsync_dir(directory)
    seg = _open_swapped(directory, base, swap_path, log.config.index_interval_bytes)
    deleted = [o.path + DELETED_SUFFIX for o in old_segments]

    def swap_on_owner() -> bool:
        return log.replace_closed_segments(old_segments, seg, swap_path)

    ok = run_on_owner(swap_on_owner) if run_on_owner is not None else swap_on_owner()
    if not ok:
        seg.close()
        _unlink(swap_path)
        files.fsync_dir(directory)
        raise SwapAborted(f"{directory}: segments from {base} changed during cleaning")
    files.fsync_dir(directory)
    for path in deleted:
        _unlink(path)
    seg.index.sync()


def _open_swapped(directory: str, base: int, swap_path: str, interval: int) -> LogSegment:
    """The cleaned segment as the log will hold it (its path the final ``.log`` name), with its
    index built in memory; the index files are written after the swap (step 4)."""
    fd = os.open(swap_path, os.O_RDWR)
    size = os.fstat(fd).st_size
    seg = LogSegment(directory, base, fd, size, interval)
    scan = seg.scan()
    seg.next_offset = int(scan.last_offsets[-1]) + 1 if len(scan) else base
    seg.index.fill(scan.positions, scan.last_offsets, scan.max_timestamps, scan.sizes)
    return seg


def rename_into_place(old_segments: list, swap_path: str, final_path: str) -> None:
    """Step 3's file operations (owner thread, under the log's lock)."""
    _merge_txn_indexes(old_segments, final_path)
    for old in old_segments:
        os.replace(old.path, old.path + DELETED_SUFFIX)
        old.index.delete_files()
    os.replace(swap_path, final_path)


def _merge_txn_indexes(old_segments: list, final_path: str) -> None:
    """The aborted transactions of the replaced segments go with their replacement: one
    ``.txnindex`` under its base offset, written (temp, rename) before the old ones go, so a
    crash leaves an entry twice at worst (a consumer skips an aborted range twice: harmless),
    never lost. Entries stay even if the cleaner dropped their records: a consumer that sees
    no record of the range is unaffected."""
    directory = os.path.dirname(final_path)
    base = int(os.path.basename(final_path)[:files.OFFSET_WIDTH])
    entries = []
    for old in old_segments:
        entries.extend(txn_index.read(directory, old.base_offset))
    if entries:
        files.atomic_write(txn_index.path(directory, base), txn_index.encode(entries))
    for old in old_segments:
        if old.base_offset != base:
            txn_index.delete(directory, old.base_offset)


def recover_leftovers(directory: str, removed: list) -> None:
    """Before a log directory is opened: delete ``.cleaned`` and ``.deleted`` files, delete
    ``.swap`` files at or above the lowest ``.cleaned`` one (a pass that had not finished
    swapping, as Kafka does), and complete every other swap: delete each ``.log`` (and its
    indexes) whose base offset lies within the swap file's offsets, then rename it into place."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    cleaned, swaps = [], []
    for name in names:
        m = _LEFTOVER.match(name)
        if m is None:
            continue
        base, kind, suffix = int(m.group(1)), m.group(2), m.group(3)
        if suffix == "cleaned":
            cleaned.append(base)
        if suffix == "swap" and kind == "log":
            swaps.append(base)
        elif suffix != "swap" or kind != "log":
            _unlink(os.path.join(directory, name))
            removed.append(name)
    if not swaps:
        if removed:
            files.fsync_dir(directory)
        return
    lowest_cleaned = min(cleaned) if cleaned else None
    bases = sorted(b for b in (files.parse_segment_name(n) for n in names) if b is not None and b[1] == "log")
    bases = [b for b, _ in bases]
    for base in sorted(swaps):
        swap = os.path.join(directory, files.segment_name(base, files.LOG_SUFFIX) + SWAP_SUFFIX)
        if lowest_cleaned is not None and base >= lowest_cleaned:
            _unlink(swap)
            removed.append(os.path.basename(swap))
            continue
        with open(swap, "rb") as f:
            scan = scan_batches(f.read())
        end = int(scan.last_offsets[-1]) + 1 if len(scan) else base + 1
        for b in bases:
            if base <= b < end:
                for suffix in (files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX):
                    path = os.path.join(directory, files.segment_name(b, suffix))
                    if os.path.exists(path):
                        os.unlink(path)
                        removed.append(os.path.basename(path))
        os.replace(swap, os.path.join(directory, files.segment_name(base, files.LOG_SUFFIX)))
        _log.info("%s: completed the swap of the cleaned segment %d interrupted by a crash", directory, base)
    files.fsync_dir(directory)
