"""Kill -9 at random moments: a forked child appends with group commit and reports every
flushed offset over a pipe, and also (through a wrapper around ``os.fdatasync``) how many
bytes of which file each completed fdatasync made durable. The parent SIGKILLs it,
sometimes also throws away what the *disk* had not been told to keep (page-cache loss:
each segment cut anywhere after its durable size, the lost region possibly scrambled, the
tail index truncated), reopens, and checks that every offset ever reported flushed is
present with exactly the records written, and that the epoch cache agrees with the
batches. Durability is judged by the fdatasyncs that happened, not by what the log
claimed, so a log that reported too early fails. The same directory carries over all
rounds, so each child also recovers what the previous one left."""

from __future__ import annotations

import os
import random
import signal
import struct
import time

from _log_helpers import batch_for

from kraft import records
from kraft.log import LogConfig, SegmentedLog

ROUNDS = 60
CONFIG = dict(segment_bytes=48 * 1024, index_interval_bytes=512)


def _child(directory: str, seed: int, out: int) -> None:
    try:
        real_fdatasync = os.fdatasync

        def traced_fdatasync(fd):
            # Bytes present when fdatasync starts are durable once it returns.
            size, name = os.fstat(fd).st_size, os.readlink(f"/proc/self/fd/{fd}")
            real_fdatasync(fd)
            os.write(out, b"S %s %d\n" % (os.path.basename(name).encode(), size))

        os.fdatasync = traced_fdatasync
        rng = random.Random(seed)
        log = SegmentedLog.open(directory, LogConfig(append_linger_ms=rng.choice([0, 0, 1, 3]), **CONFIG),
                                on_flushed=lambda off: os.write(out, b"F %d\n" % off))
        epoch = (log.latest_epoch or 0) + 1
        while True:
            log.append(batch_for(log.end_offset, rng.randint(1, 12), rng.randint(8, 160)), leader_epoch=epoch)
            if rng.random() < 0.02:
                epoch += 1
            if rng.random() < 0.05:
                log.request_flush()
            time.sleep(rng.choice([0, 0.0002, 0.001]))
    finally:
        os._exit(0)


def _expected_value(offset: int, size: int) -> bytes:
    return struct.pack(">q", offset) + bytes((offset * 7 + i) & 0xFF for i in range(size - 8))


def _lose_unflushed(directory: str, durable: dict, rng: random.Random) -> None:
    """Model a power cut: every segment keeps its durable prefix and an arbitrary part of
    what followed it, which may come back scrambled; the tail index may be short."""
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    for name in names:
        path = os.path.join(directory, name)
        size = os.path.getsize(path)
        keep = min(durable.get(name, 0), size)
        cut = rng.randint(keep, size)
        with open(path, "r+b") as f:
            f.truncate(cut)
            if cut > keep and rng.random() < 0.5:
                start = rng.randint(keep, cut - 1)
                f.seek(start)
                f.write(bytes(rng.randrange(256) for _ in range(min(cut - start, 64))))
    index = os.path.join(directory, names[-1][: -len(".log")] + ".index")
    if os.path.exists(index) and rng.random() < 0.5:
        os.truncate(index, rng.randint(0, os.path.getsize(index)))


def _verify(directory: str, flushed: int) -> int:
    log = SegmentedLog.open(directory, LogConfig(background_flush=False, **CONFIG))
    try:
        assert log.end_offset >= flushed, f"lost flushed data: end {log.end_offset} < {flushed}"
        offset, epochs_seen = 0, []
        while offset < log.end_offset:
            data = log.read(offset, 1 << 20)
            for batch in records.iter_batches(data, validate=True):
                assert batch.base_offset == offset
                if not epochs_seen or batch.partition_leader_epoch > epochs_seen[-1][0]:
                    epochs_seen.append((batch.partition_leader_epoch, batch.base_offset))
                for rec in batch:
                    assert rec.offset == offset
                    assert bytes(rec.value) == _expected_value(offset, len(rec.value)), offset
                    offset += 1
        assert offset == log.end_offset
        assert log.epoch_cache.entries() == epochs_seen
        return log.end_offset
    finally:
        log.close()


def test_sigkill_never_loses_flushed_offsets(tmp_path):
    directory = str(tmp_path / "log")
    rng = random.Random(20240607)
    flushed_ever, rounds_with_loss, reports = 0, 0, 0
    for _ in range(ROUNDS):
        # Everything on disk now was fsynced by the last open (or verify): durable as is.
        durable = {n: os.path.getsize(os.path.join(directory, n))
                   for n in (os.listdir(directory) if os.path.isdir(directory) else ())}
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            os.close(r)
            _child(directory, rng.randrange(1 << 30), w)
        os.close(w)
        time.sleep(rng.uniform(0.0, 0.12))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        reported = b""
        while chunk := os.read(r, 1 << 16):
            reported += chunk
        os.close(r)
        offsets = []
        for line in reported.decode().splitlines():
            kind, *rest = line.split()
            if kind == "F":
                offsets.append(int(rest[0]))
            else:
                durable[rest[0]] = max(durable.get(rest[0], 0), int(rest[1]))
        assert offsets == sorted(offsets), "flushed offsets must be reported in order"
        reports += len(offsets)
        flushed_ever = max([flushed_ever, *offsets])
        if not os.path.isdir(directory):
            continue
        if rng.random() < 0.6:
            _lose_unflushed(directory, durable, rng)
            rounds_with_loss += 1
        _verify(directory, flushed_ever)
    assert reports > ROUNDS and flushed_ever > 0 and rounds_with_loss > ROUNDS // 3
