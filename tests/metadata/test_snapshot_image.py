"""Snapshots of a MetadataImage in Kafka's file format: written from the image (on any thread),
checked by our own dump-log's metadata decoder, loaded back (with a log suffix) into an equal
image, with the native and the pure-Python codec.
"""

from __future__ import annotations

import concurrent.futures
import os
import uuid

import pytest
from image_samples import replay, sample_image, sample_records

from kraft import records
from kraft.cli.dump_log import dump_file
from kraft.errors import MetadataReplayError
from kraft.log.snapshot import SnapshotFileReader, SnapshotFileWriter, snapshot_filename
from kraft.metadata import (BeginTransactionRecord, EndTransactionRecord, PartitionChangeRecord, RemoveTopicRecord,
                            TopicRecord, encode_record)
from kraft.metadata import batch_codec as BC
from kraft.metadata.image_records import image_records
from kraft.metadata.snapshot_image import load_image, snapshot_value_batches, write_image_snapshot
from kraft.types import SnapshotId

NO_EXTENSIONS = bool(os.environ.get("KRAFT_NO_EXTENSIONS"))
SID = SnapshotId(1234, 5)


@pytest.fixture(params=["native", "python"])
def codec(request):
    if request.param == "native" and NO_EXTENSIONS:
        pytest.skip("KRAFT_NO_EXTENSIONS is set: only the pure-Python codec is under test")
    return BC.implementation(request.param)


def write(directory, image, codec=None, sid=SID, **kw):
    with SnapshotFileWriter(str(directory), sid, last_contained_log_timestamp=77, timestamp_ms=1000) as w:
        stats = write_image_snapshot(image, w.append_values, codec=codec, **kw)
        path = w.freeze()
    return path, stats


def load(directory, sid=SID, log_batches=(), codec=None):
    with SnapshotFileReader(str(directory), sid) as reader:
        return load_image(reader.batches(), log_batches, start_offset=sid.offset, codec=codec)


def test_snapshot_of_an_image_loads_back_into_an_equal_image(tmp_path, codec):
    image = sample_image(topics=20, partitions=30)
    path, stats = write(tmp_path, image, codec)
    assert os.path.basename(path) == snapshot_filename(SID) == "00000000000000001234-0000000005.checkpoint"
    assert stats.records == len(list(image_records(image)))
    loaded = load(tmp_path, codec=codec)
    assert loaded.image == image and loaded.records == stats.records


def test_native_and_pure_writers_write_the_same_bytes(tmp_path):
    if NO_EXTENSIONS:
        pytest.skip("KRAFT_NO_EXTENSIONS is set: no native codec to compare")
    image = sample_image(topics=5, partitions=40)
    a, _ = write(tmp_path / "a", image, BC.implementation("native"))
    b, _ = write(tmp_path / "b", image, BC.implementation("python"))
    assert open(a, "rb").read() == open(b, "rb").read()


def test_the_file_has_kafkas_layout_and_dump_log_decodes_every_record(tmp_path):
    image = sample_image(topics=30, partitions=50)
    path, stats = write(tmp_path, image, max_batch_bytes=8192)
    doc = dump_file(path, decode_metadata=True)
    assert doc["error"] is None and doc["kind"] == "snapshot"
    batches = doc["batches"]
    # Header first, footer last, both control batches; offsets from 0 without gaps; the epoch everywhere.
    assert batches[0]["isControl"] and batches[0]["records"][0]["control"]["type"] == "SNAPSHOT_HEADER"
    assert batches[0]["records"][0]["control"]["message"]["last_contained_log_timestamp"] == 77
    assert batches[-1]["isControl"] and batches[-1]["records"][0]["control"]["type"] == "SNAPSHOT_FOOTER"
    assert [b["baseOffset"] for b in batches] == [0] + [b["lastOffset"] + 1 for b in batches[:-1]]
    assert {b["partitionLeaderEpoch"] for b in batches} == {SID.epoch}
    data = [b for b in batches if not b["isControl"]]
    assert len(data) == stats.batches > 1
    # Batches of about 8 KiB of records each (Kafka's accumulator target), none far past it.
    assert all(b["size"] <= 8192 + 61 + 200 for b in data)
    # REFERENCE.md section 1, KRaft's own batches: CreateTime, base = max timestamp, producer
    # fields -1, no key, no headers, uncompressed.
    for b in data:
        assert (b["timestampType"], b["producerId"], b["producerEpoch"], b["baseSequence"], b["compression"]) == (
            "CreateTime", -1, -1, -1, "none")
        assert b["baseTimestamp"] == b["maxTimestamp"] == 1000 and not b["isTransactional"]
        assert all(r["keySize"] == -1 and r["headerKeys"] == [] for r in b["records"])
    payloads = [r["payload"] for b in data for r in b["records"]]
    assert all("error" not in p for p in payloads)
    expected = [type(rv.record).__name__ for rv in image_records(image)]
    assert [p["type"] for p in payloads] == [records_name(n) for n in expected]
    assert [r["metadata"]["type"] for b in data for r in b["records"]] == expected  # the labels agree
    assert payloads[0] == {"type": "FEATURE_LEVEL_RECORD", "version": 0,
                           "data": {"name": "metadata.version", "featureLevel": 21}}


def records_name(cls_name: str) -> str:
    from kraft.metadata.records import RECORDS_BY_TYPE_NAME
    return next(k for k, v in RECORDS_BY_TYPE_NAME.items() if v.__name__ == cls_name)


def test_writing_on_a_worker_thread_gives_the_same_file(tmp_path):
    image = sample_image(topics=10, partitions=20)
    here, _ = write(tmp_path / "here", image)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        there, _ = pool.submit(write, tmp_path / "there", image).result()
    assert open(here, "rb").read() == open(there, "rb").read()


def _log_batches(values_per_batch, base_offset, epoch=6):
    buf = bytearray()
    offset = base_offset
    for values in values_per_batch:
        buf += records.build_batch(values, base_offset=offset, partition_leader_epoch=epoch, timestamp=5)
        offset += len(values)
    return list(records.iter_batches(bytes(buf)))


def test_snapshot_then_log_suffix_equals_replaying_everything(tmp_path, codec):
    base = sample_records(topics=3, partitions=4)
    image = replay(base)
    write(tmp_path, image, codec)
    t0 = uuid.UUID(int=0x7000)
    later = [PartitionChangeRecord(partition_id=0, topic_id=t0, leader=2, isr=[2]),
             BeginTransactionRecord(), TopicRecord(name="new", topic_id=uuid.UUID(int=99)), EndTransactionRecord(),
             RemoveTopicRecord(topic_id=uuid.UUID(int=0x7001))]
    before = [encode_record(TopicRecord(name="ignored", topic_id=uuid.UUID(int=5)))]  # below the snapshot
    values = [encode_record(r) for r in later]
    # One batch entirely before the snapshot, one straddling its end offset, the rest after.
    batches = _log_batches([before, before + values[:2], values[2:]], SID.offset - 2)
    loaded = load(tmp_path, log_batches=batches, codec=codec)
    assert loaded.image == replay(base + later)
    assert loaded.next_offset == SID.offset + len(later) and loaded.open_transaction is None


def test_an_open_transaction_at_the_end_of_the_log_is_not_in_the_image(tmp_path, codec):
    image = sample_image()
    write(tmp_path, image, codec)
    vals = [encode_record(BeginTransactionRecord()), encode_record(TopicRecord(name="x", topic_id=uuid.UUID(int=42)))]
    loaded = load(tmp_path, log_batches=_log_batches([vals], SID.offset), codec=codec)
    assert loaded.image == image and len(loaded.open_transaction) == 1


def test_a_log_record_that_does_not_fit_names_its_batch(tmp_path, codec):
    write(tmp_path, sample_image(), codec)
    bad = [encode_record(PartitionChangeRecord(partition_id=0, topic_id=uuid.UUID(int=12345), leader=1))]
    with pytest.raises(MetadataReplayError, match=f"log batch at offset {SID.offset}"):
        load(tmp_path, log_batches=_log_batches([bad], SID.offset), codec=codec)


def test_batches_respect_the_size_and_record_limits():
    image = sample_image(topics=10, partitions=50)
    for limit in (200, 1000, 8192):
        for values in snapshot_value_batches(image, max_batch_bytes=limit):
            assert len(values) == 1 or sum(len(v) + 8 for v in values) <= limit
    assert all(len(v) <= 7 for v in snapshot_value_batches(image, max_batch_records=7))


def test_loading_pauses_the_cyclic_collector_and_restores_it(tmp_path):
    import gc
    write(tmp_path, sample_image())
    seen = []

    def batches():
        with SnapshotFileReader(str(tmp_path), SID) as reader:
            for b in reader.batches():
                seen.append(gc.isenabled())
                yield b
    assert gc.isenabled()
    load_image(batches(), start_offset=SID.offset)
    assert seen and not any(seen) and gc.isenabled()
    with pytest.raises(RuntimeError):  # restored on the way out of a failure too
        load_image(iter_raising(), start_offset=SID.offset)
    assert gc.isenabled()


def iter_raising():
    raise RuntimeError("boom")
    yield
