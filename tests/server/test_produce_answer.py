"""The writing client reads the base offset of a Produce success answer by matching bytes
(kraft/client/quorum.py ``_SuccessAnswer``) instead of decoding it. Tied here to the answer
the server really sends (ProduceWriter's cached encoding): if the two drift apart, the
client would silently decode every answer again, or worse read a wrong offset."""

from __future__ import annotations

import struct

from kraft.client.quorum import _SUCCESS, PRODUCE_VERSION
from kraft.errors import ErrorCode
from kraft.protocol import ProduceResponse, encode_response
from kraft.server.produce_writer import ProduceWriter


def _writer() -> ProduceWriter:
    return ProduceWriter(None, [], max_batch_bytes=1 << 20, max_batch_records=1000, max_decompressed_bytes=1 << 20)


def _frame(cid: int, body) -> bytes:
    """The frame as NodeClient._deliver gets it: from the correlation id on."""
    if isinstance(body, (bytes, bytearray)):
        return struct.pack(">i", cid) + b"\x00" + bytes(body)  # response header v1: id, no tags
    return bytes(encode_response(cid, ProduceResponse.API_KEY, PRODUCE_VERSION, body))[4:]


def test_the_servers_success_answer_is_read_without_decoding_and_gives_the_offset():
    w = _writer()
    try:
        read = _SUCCESS
        for offset in (0, 1, 255, 1 << 40, (1 << 63) - 1):
            frame = _frame(12345, w.success(PRODUCE_VERSION, offset))
            assert read(frame) == offset
            # and the bytes say what decoding them says
            decoded = ProduceResponse.decode(frame[5:], PRODUCE_VERSION)
            assert decoded.responses[0].partition_responses[0].base_offset == offset
    finally:
        w.close()


def test_every_other_answer_is_left_to_the_decoder():
    w = _writer()
    try:
        read = _SUCCESS
        assert read(_frame(1, w.error(PRODUCE_VERSION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))) is None
        assert read(_frame(1, w.error(PRODUCE_VERSION, ErrorCode.REQUEST_TIMED_OUT, 5))) is None
        P = ProduceResponse
        filled = P(responses=[P.Topic(name="__cluster_metadata", partition_responses=[
            P.Topic.Partition(index=0, base_offset=9, log_start_offset=3)])])
        assert read(_frame(1, filled)) is None  # a field the server filled in
        other = P(responses=[P.Topic(name="__cluster_metadatb", partition_responses=[
            P.Topic.Partition(index=0, base_offset=9)])])
        assert read(_frame(1, other)) is None
        good = _frame(1, w.success(PRODUCE_VERSION, 9))
        assert read(good + b"\x00") is None and read(good[:-1]) is None
    finally:
        w.close()
