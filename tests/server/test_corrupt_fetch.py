"""Corrupt records on the replication path are reported, counted and retried, never silent:

* a follower fetching a batch that fails its CRC (the leader serving a flipped byte) keeps its
  log unchanged, logs an error naming the leader, the offset and the reason at a bounded rate,
  counts kraft_fetch_corrupt_records_total, and keeps fetching (it catches up once the bytes
  are good again);
* a leader whose own segment has a flipped byte detects it when serving a Fetch: it answers
  KAFKA_STORAGE_ERROR (56) without the bytes, logs the file and offset, counts
  kraft_log_read_errors_total, and keeps serving.
"""

from __future__ import annotations

import glob
import logging
import os

from kraft.errors import ErrorCode
from kraft.protocol import METADATA_TOPIC_ID, FetchRequest, FetchResponse, decode_response, encode_request
from kraft.log.replicated_log import MetadataLog
from kraft.log.tail_memo import MEMO_APPENDS

from controller_helpers import Controller
from server_helpers import RawConnection, run, settle


async def _leader(log=None) -> Controller:
    node = Controller([1], node_id=1, log=log)
    await node.start(real_peers=True)
    assert await settle(lambda: node.core.is_leader() and node.core.high_watermark > 0)
    last, committed = node.driver.propose([b"v%d" % i for i in range(10)])
    await committed
    node.driver.peer_log_throttle.interval_s = 3600  # longer than the test: one line expected
    return node


def _errors(caplog, *needles):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.ERROR and all(n in r.getMessage() for n in needles)]


def test_a_follower_that_fetches_a_corrupt_batch_logs_counts_and_keeps_retrying(caplog):
    caplog.set_level(logging.INFO)

    async def main():
        leader = await _leader()
        flipped = 70  # inside the records of the first batch (its header is 61 bytes)
        leader.log._buf[flipped] ^= 0xFF
        follower = Controller([1], node_id=2)  # an observer of the one-voter quorum
        await follower.start({1: leader.server.port}, real_peers=True)
        follower.driver.peer_log_throttle.interval_s = 3600
        try:
            assert await settle(lambda: follower.metrics.fetch_corrupt_records.value >= 3, timeout=10)
            assert follower.log.end_offset() == 0  # nothing appended from the corrupt response
            assert follower.core.corrupt_fetches == follower.metrics.fetch_corrupt_records.value
            leader.log._buf[flipped] ^= 0xFF  # the bytes are good again: the retries succeed
            assert await settle(lambda: follower.log.end_offset() == leader.log.end_offset(), timeout=10)
        finally:
            await follower.close()
            await leader.close()

    run(main())
    lines = _errors(caplog, "node 2: records fetched from leader 1 at offset 0 failed validation")
    assert len(lines) == 1, lines
    assert "crc" in lines[0].lower(), lines[0]


def _fetch(offset):
    F = FetchRequest
    return F(cluster_id="c", replica_state=F.ReplicaState(replica_id=2, replica_epoch=-1), max_wait_ms=0,
             min_bytes=0, max_bytes=1 << 20, topics=[F.Topic(topic_id=METADATA_TOPIC_ID, partitions=[
                 F.Topic.Partition(partition=0, current_leader_epoch=1, fetch_offset=offset, last_fetched_epoch=0,
                                   partition_max_bytes=1 << 20)])])


async def _ask(conn, request, cid):
    await conn.send(encode_request(request, 17, cid, "t"))
    header, resp = decode_response(await conn.read_frame(), FetchResponse.API_KEY, 17)
    assert header.correlation_id == cid
    return resp.responses[0].partitions[0]


def test_a_leader_with_a_flipped_byte_on_disk_answers_storage_error_and_logs_the_file(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    holder = {}
    disk = MetadataLog(str(tmp_path), on_flushed=lambda o: holder["node"].driver.on_flushed_threadsafe(o))

    async def main():
        node = holder["node"] = Controller([1], node_id=1, log=disk)
        await node.start(real_peers=True)
        assert await settle(lambda: node.core.is_leader() and node.core.high_watermark > 0)
        last, committed = node.driver.propose([b"v%d" % i for i in range(10)])
        await committed
        for i in range(MEMO_APPENDS + 1):  # offset 0 leaves the memo of appends: reads go to the file
            await node.driver.propose([b"w%d" % i])[1]
        node.driver.peer_log_throttle.interval_s = 3600
        [segment] = glob.glob(os.path.join(disk.directory, "*.log"))
        with open(segment, "r+b") as f:  # a bit rots under the running leader
            f.seek(70)
            b = f.read(1)
            f.seek(70)
            f.write(bytes([b[0] ^ 0xFF]))
        conn = await RawConnection.open(node.server.port)
        try:
            for cid in (1, 2):
                p = await _ask(conn, _fetch(0), cid)
                assert p.error_code == ErrorCode.KAFKA_STORAGE_ERROR
                assert not p.records  # the corrupt bytes never leave the node
            assert node.metrics.log_read_errors.value == 2
            assert node.core.is_leader()  # and it keeps serving
            ok = await _ask(conn, _fetch(node.log.end_offset()), 3)
            assert ok.error_code == ErrorCode.NONE
        finally:
            await conn.close()
            await node.close()
        return segment

    segment = run(main())
    lines = _errors(caplog, "KAFKA_STORAGE_ERROR", segment, "offset 0")
    assert len(lines) == 1, lines
