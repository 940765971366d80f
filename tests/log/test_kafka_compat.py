"""Files we write are readable by an independent implementation: kafka-python's record
reader decodes our segments and snapshots batch by batch with valid CRCs, and our index
files have Kafka's entry layout."""

from __future__ import annotations

import os
import struct

from kafka.record import MemoryRecords

from kraft import records
from kraft.log import LogConfig, SegmentedLog
from kraft.log.snapshot import SnapshotId, SnapshotFileWriter


def kafka_python_batches(data: bytes):
    out, mr = [], MemoryRecords(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        out.append((batch.base_offset, batch.leader_epoch, batch.is_control_batch,
                    [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in batch]))


def test_segments_decode_with_kafka_python(tmp_path):
    log = SegmentedLog.open(str(tmp_path), LogConfig(segment_bytes=2000, index_interval_bytes=200))
    expected = []
    log.append(records.build_control_record_batch(records.LeaderChangeMessage(1, (1, 2, 3), (1, 2))), leader_epoch=1)
    for i in range(40):
        values = [f"value-{i}-{j}".encode() for j in range(i % 5 + 1)]
        keys = [None if j % 2 else f"k{j}".encode() for j in range(len(values))]
        headers = [[("h", b"v")] if j == 0 else [] for j in range(len(values))]
        info = log.append(records.build_batch(values, keys=keys, headers=headers, timestamp=1_700_000_000_000 + i),
                          leader_epoch=1 + i // 10)
        expected += [(info.first_offset + j, keys[j], values[j], 1_700_000_000_000 + i, headers[j])
                     for j in range(len(values))]
    log.close()
    seen, epochs = [], []
    segs = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert len(segs) >= 3
    for name in segs:
        for base, epoch, is_control, recs in kafka_python_batches((tmp_path / name).read_bytes()):
            assert base >= int(name[:20])
            epochs.append(epoch)
            if not is_control:
                seen += [(o, k, v, ts, [(hk, hv) for hk, hv in h]) for o, k, v, ts, h in recs]
    assert seen == expected
    assert epochs == sorted(epochs) and epochs[0] == 1


def test_index_entries_point_at_batches_kafka_python_finds(tmp_path):
    log = SegmentedLog.open(str(tmp_path), LogConfig(index_interval_bytes=100))
    for i in range(30):
        log.append(records.build_batch([b"x" * 40] * 3), leader_epoch=1)
    log.close()
    data = (tmp_path / "00000000000000000000.log").read_bytes()
    raw = (tmp_path / "00000000000000000000.index").read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert entries
    for rel, pos in entries:
        batch = MemoryRecords(data[pos:]).next_batch()
        assert batch.base_offset + batch.last_offset_delta == rel  # Kafka indexes a batch's last offset
    raw_t = (tmp_path / "00000000000000000000.timeindex").read_bytes()
    assert len(raw_t) % 12 == 0 and len(raw_t) // 12 >= 1


def test_snapshots_decode_with_kafka_python(tmp_path):
    with SnapshotFileWriter(str(tmp_path), SnapshotId(10, 4), 99) as w:
        w.append(records.build_batch([b"a", b"b"]))
        path = w.freeze()
    batches = kafka_python_batches(open(path, "rb").read())
    assert [(b[0], b[1], b[2]) for b in batches] == [(0, 4, True), (1, 4, False), (3, 4, True)]
    header_key = batches[0][3][0][1]
    assert header_key == struct.pack(">hh", 0, 3)  # control key: version 0, SNAPSHOT_HEADER
