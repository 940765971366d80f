"""Produce payloads that cost the leader work proportional to their claims: compressed
batches are checked on a worker thread within a decompression budget, in arrival order,
and a bomb is refused with RECORD_LIST_TOO_LARGE without writing anything."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kraft.errors import ErrorCode
from kraft.records import Compression, build_batch
from kraft.records import compression as codecs
from kraft.testing.hostile import gzip_bomb_batch

from test_controller_handlers import _data_values, _follower_test, _partition, leader_test, produce

BOMB = gzip_bomb_batch(64 << 20)  # 64 MiB of zeros in ~64 KB


def test_a_gzip_bomb_is_refused_with_record_list_too_large_and_nothing_is_written():
    async def body(node):
        end = node.log.end_offset()
        part = _partition(await node.call(produce(BOMB), 11))[1]
        assert part.error_code == ErrorCode.RECORD_LIST_TOO_LARGE, part
        assert "exceed" in part.error_message
        assert node.log.end_offset() == end
    leader_test(body)


def test_compressed_batches_are_decompressed_off_the_event_loop_thread(monkeypatch):
    threads = []
    real = codecs.decompress

    def spy(codec, data, limit=None):
        threads.append(threading.get_ident())
        return real(codec, data, limit)

    monkeypatch.setattr(codecs, "decompress", spy)

    async def body(node):
        loop_thread = threading.get_ident()
        resp = await node.call(produce(build_batch([b"a", b"b"], compression=Compression.GZIP)), 11)
        assert _partition(resp)[1].error_code == ErrorCode.NONE
        assert threads and loop_thread not in threads
        assert _data_values(node.log)[-2:] == [b"a", b"b"]
    leader_test(body)


def test_six_concurrent_bombs_leave_the_loop_free_and_every_bomb_refused():
    """While six bombs are checked, loop callbacks keep running (the loop is not blocked
    between them) and the leader keeps its epoch."""
    async def body(node):
        epoch = node.core.epoch
        ticks = []
        stop = asyncio.Event()

        async def ticker():
            while not stop.is_set():
                ticks.append(1)
                await asyncio.sleep(0)

        t = asyncio.ensure_future(ticker())
        parts = await asyncio.gather(*(node.call(produce(BOMB), 11) for _ in range(6)))
        stop.set()
        await t
        assert [_partition(p)[1].error_code for p in parts] == [ErrorCode.RECORD_LIST_TOO_LARGE] * 6
        assert len(ticks) > 6  # the loop turned while the bombs were being inflated
        assert node.core.is_leader() and node.core.epoch == epoch
    leader_test(body)


def test_order_is_kept_when_a_compressed_request_is_followed_by_a_plain_one():
    async def body(node):
        big = build_batch([b"z%d" % i for i in range(2000)], compression=Compression.GZIP)
        first = node.call(produce(big), 11)
        second = node.call(produce(build_batch([b"after"])), 11)
        r1, r2 = await asyncio.gather(first, second)
        b1, b2 = _partition(r1)[1].base_offset, _partition(r2)[1].base_offset
        assert b2 == b1 + 2000
        assert _data_values(node.log)[-1] == b"after"
    leader_test(body)


@pytest.mark.parametrize("records", [BOMB, b"\x00garbage"], ids=["bomb", "garbage"])
def test_a_follower_answers_not_leader_before_looking_at_the_payload(records):
    async def body(node):
        part = _partition(await node.call(produce(records), 11))[1]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    _follower_test(body)
