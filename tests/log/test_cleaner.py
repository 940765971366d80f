"""The log cleaner's rules (Kafka's ``Cleaner``/``LogCleanerTest``): the latest record per key is
kept at its offset, tombstones until their delete horizon (KIP-534), the active segment and
everything at or above the cleanable end are untouched, a map smaller than the keys cleans in
several passes, producer batches keep their metadata, compressed batches keep their codec."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _compaction_helpers import append_keyed, clean_all, latest_per_key, open_compact_log, read_all

from kraft import records
from kraft.records import Compression


def _pairs(n_keys, rounds, tomb_every=0):
    out = []
    for r in range(rounds):
        for k in range(n_keys):
            value = None if tomb_every and r == rounds - 1 and k % tomb_every == 0 else f"v{r}-{k}".encode()
            out.append((f"key-{k}".encode(), value))
    return out


def _below(rows, end):
    return [r for r in rows if r[0] < end]


def test_latest_value_per_key_is_kept_at_its_offset(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, _pairs(20, 10))
    before = read_all(log)
    active = log.segments[-1].base_offset
    clean_all(log)
    after = read_all(log)
    # below the active segment: exactly the latest record of each key, same offsets
    want = {k: v for k, v in latest_per_key(_below(before, active)).items()}
    got_below = _below(after, active)
    assert {k: (o, v) for o, k, v in got_below} == want
    assert len(got_below) == len(want)
    # the active segment is byte for byte what it was
    assert [r for r in after if r[0] >= active] == [r for r in before if r[0] >= active]
    assert latest_per_key(after) == latest_per_key(before)
    assert log.end_offset == 200
    log.close()


def test_batches_keep_base_and_last_offset(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, _pairs(5, 12), per_batch=5)
    clean_all(log)
    for seg in log.segments[:-1]:
        for batch in records.iter_batches(seg.read(0, seg.size), validate=True):
            assert batch.base_offset % 5 == 0 and batch.last_offset_delta == 4
    log.close()


def test_tombstones_stay_until_the_delete_horizon(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, _pairs(10, 3, tomb_every=2))
    append_keyed(log, [(b"filler-%d" % i, b"x" * 200) for i in range(60)])  # pushes the tombstones out of the active segment
    clean_all(log, now_ms=10_000, delete_retention_ms=1_000)
    rows = read_all(log)
    tombs = [r for r in rows if r[2] is None]
    assert len(tombs) == 5  # kept: the horizon (11,000) is set on this first cleaning
    horizons = set()
    for seg in log.segments[:-1]:
        for batch in records.iter_batches(seg.read(0, seg.size)):
            if any(r.value is None for r in batch):
                assert batch.attributes & 0x40
                horizons.add(batch.base_timestamp)
    assert horizons == {11_000}
    clean_all(log, now_ms=10_500, delete_retention_ms=1_000)
    assert len([r for r in read_all(log) if r[2] is None]) == 5  # before the horizon
    clean_all(log, now_ms=11_001, delete_retention_ms=1_000)
    assert [r for r in read_all(log) if r[2] is None] == []  # after it: gone
    log.close()


def test_upper_bound_is_respected(tmp_path):
    log = open_compact_log(tmp_path / "log", segment_bytes=1024)
    append_keyed(log, _pairs(4, 100))
    before = read_all(log)
    upper = log.segments[3].base_offset
    clean_all(log, upper=upper)
    after = read_all(log)
    assert [r for r in after if r[0] >= upper] == [r for r in before if r[0] >= upper]
    assert len([r for r in after if r[0] < upper]) < len([r for r in before if r[0] < upper])
    log.close()


def test_a_map_smaller_than_the_keys_cleans_in_several_passes(tmp_path):
    log = open_compact_log(tmp_path / "log", segment_bytes=8192)
    append_keyed(log, _pairs(300, 4))
    before = read_all(log)
    active = log.segments[-1].base_offset
    passes = clean_all(log, map_bytes=24 * 120)  # 108 keys fit, 300 exist
    assert len(passes) > 1 and passes[0].passes_needed
    after = read_all(log)
    assert latest_per_key(after) == latest_per_key(before)
    # every key older than the map pass that saw its latest version is gone
    assert len(_below(after, active)) < len(_below(before, active))
    log.close()


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_compressed_batches_keep_their_codec(tmp_path, codec):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, _pairs(10, 8), compression=codec)
    log.roll()  # compressed, it all fits one segment
    before = read_all(log)
    clean_all(log)
    after = read_all(log)
    assert latest_per_key(after) == latest_per_key(before) and len(after) < len(before)
    for seg in log.segments:
        for batch in records.iter_batches(seg.read(0, seg.size), validate=True):
            assert batch.attributes & 0x07 == codec
    log.close()


def test_producer_batches_keep_their_ids_and_the_last_stays_when_emptied(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, [(b"k", b"v%d" % i) for i in range(40)], per_batch=10, producer=(7, 3, 0))
    append_keyed(log, [(b"k", b"new")] * 10 + [(b"pad%d" % i, b"x" * 300) for i in range(30)])
    clean_all(log)
    seen = []
    for seg in log.segments[:-1]:
        for batch in records.iter_batches(seg.read(0, seg.size), validate=True):
            if batch.producer_id == 7:
                seen.append((batch.base_offset, batch.last_offset_delta, batch.producer_epoch,
                             batch.base_sequence, len(batch.records())))
    # the producer's last batch (offsets 30-39) remains, empty, with its sequence and offsets
    assert seen == [(30, 9, 3, 30, 0)]
    log.close()


def test_records_of_aborted_transactions_are_removed(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, [(b"a", b"committed")], producer=(1, 0, 0), transactional=True)
    log.append(_marker(1, 1), leader_epoch=1)  # COMMIT
    append_keyed(log, [(b"a", b"aborted")], producer=(2, 0, 0), transactional=True)
    log.append(_marker(2, 0), leader_epoch=1)  # ABORT
    append_keyed(log, [(b"pad%d" % i, b"x" * 300) for i in range(30)])
    clean_all(log)
    values = [v for _, k, v in read_all(log) if k == b"a"]
    assert values == [b"committed"]
    log.close()


def _marker(pid, kind):
    b = records.RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=-1, transactional=True,
                                   control=True)
    b.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00" + kind.to_bytes(2, "big"), timestamp=1_000)
    return b.build()


def test_reopen_after_cleaning_gives_the_same_records(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, _pairs(20, 10))
    clean_all(log)
    after = read_all(log)
    log.close()
    again = open_compact_log(tmp_path / "log")
    assert read_all(again) == after
    assert not [n for n in os.listdir(tmp_path / "log") if n.endswith((".cleaned", ".swap", ".deleted"))]
    again.close()


def test_dump_log_shows_the_delete_horizon(tmp_path):
    log = open_compact_log(tmp_path / "log")
    append_keyed(log, [(b"gone", b"v"), (b"gone", None)])
    append_keyed(log, [(b"pad%d" % i, b"x" * 300) for i in range(30)])
    clean_all(log, now_ms=10_000, delete_retention_ms=500)
    first = log.segments[0].path
    log.close()
    out = subprocess.run([sys.executable, "-m", "kraft", "dump-log", first], capture_output=True, text=True,
                         timeout=60)
    assert "deleteHorizonMs: 10500" in out.stdout, out.stdout + out.stderr


def test_slices_of_a_segment_give_the_same_result(tmp_path, monkeypatch):
    """The array work runs in slices of CHUNK records (the event loop gets the GIL between
    them); slices that cut through batches decide exactly as one slice does."""
    from kraft.log import cleaner
    results = []
    for chunk, name in ((1 << 16, "whole"), (7, "sliced")):
        monkeypatch.setattr(cleaner, "CHUNK", chunk)
        log = open_compact_log(tmp_path / name)
        append_keyed(log, _pairs(30, 6, tomb_every=4), per_batch=9)
        append_keyed(log, [(b"filler-%d" % i, b"x" * 200) for i in range(40)])
        clean_all(log, map_bytes=24 * 40)
        results.append([seg.read(0, seg.size) for seg in log.segments])
        log.close()
    assert results[0] == results[1]


def test_windows_of_a_segment_give_the_same_result(tmp_path, monkeypatch):
    """A pass reads a segment WINDOW_BYTES at a time (its memory must not grow with the
    segment): windows that end anywhere, a batch larger than the window, compressed,
    producer, transactional (aborted) and tombstone batches, a map smaller than the keys
    (several passes), all decide exactly as one window over the whole segment does."""
    from kraft.log import cleaner
    results, windows = [], []
    real = cleaner._Window.__init__

    def counting(self, *a):
        windows[-1] += 1
        real(self, *a)
    monkeypatch.setattr(cleaner._Window, "__init__", counting)
    for size, name in ((1 << 30, "whole"), (333, "windowed")):
        monkeypatch.setattr(cleaner, "WINDOW_BYTES", size)
        windows.append(0)
        log = open_compact_log(tmp_path / name, segment_bytes=8192)
        append_keyed(log, _pairs(30, 4, tomb_every=4), per_batch=3)
        append_keyed(log, _pairs(12, 2), per_batch=6, compression=Compression.GZIP)
        append_keyed(log, [(b"big", b"y" * 1500)], per_batch=1)  # larger than a window
        append_keyed(log, [(b"key-1", b"txn")], producer=(5, 0, 0), transactional=True)
        log.append(_marker(5, 0), leader_epoch=1)  # ABORT
        append_keyed(log, [(b"key-%d" % i, b"p%d" % i) for i in range(20)], per_batch=4, producer=(9, 1, 0))
        append_keyed(log, _pairs(30, 3, tomb_every=5), per_batch=7)
        append_keyed(log, [(b"filler-%d" % i, b"x" * 200) for i in range(40)])
        passes = clean_all(log, map_bytes=24 * 40)
        assert len(passes) > 1
        results.append([seg.read(0, seg.size) for seg in log.segments])
        log.close()
    assert results[0] == results[1]
    assert windows[1] > 10 * windows[0], windows
