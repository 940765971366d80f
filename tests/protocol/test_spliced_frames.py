"""Response frames whose large records values are spliced in by the write instead of copied
into the frame (``encode_response(splice=True)``, ``SplicedFrame``), and the frame decoder
that cuts each frame out of the stream with one copy. A broken splice shows up as a frame
whose bytes differ from the copied encoding, a wrong size prefix, or a copy of the value."""

from __future__ import annotations

import os
import random
import struct

import pytest

from kraft.protocol import FetchResponse, FetchSnapshotResponse, FrameDecoder, decode_response, encode_response
from kraft.protocol.primitives import SPLICE_BYTES
from kraft.raft.rpcs import fetch_response, fetch_snapshot_response
from kraft.server.wire_versions import ResponseFitter
from kraft.types import OffsetAndEpoch


def _joined(frame) -> bytes:
    return b"".join(bytes(p) for p in frame) if type(frame) is list else bytes(frame)


def _fetch(records, version: int = 17) -> FetchResponse:
    # As the server sends it: fitted to the version (no KIP-595 fields before v12).
    resp = fetch_response(0, 1, 5, high_watermark=10, log_start_offset=0, records=records)
    return ResponseFitter([(1, "localhost", 9093)]).fit(resp, version)


@pytest.mark.parametrize("version", range(FetchResponse.MIN_VERSION, FetchResponse.MAX_VERSION + 1))
@pytest.mark.parametrize("size", [0, 100, SPLICE_BYTES - 1, SPLICE_BYTES, 300_000])
def test_a_spliced_fetch_answer_is_byte_for_byte_the_copied_one(version, size):
    records = os.urandom(size)
    copied = encode_response(7, 1, version, _fetch(records, version))
    frame = encode_response(7, 1, version, _fetch(records, version), splice=True)
    assert _joined(frame) == copied
    assert struct.unpack_from(">i", copied)[0] == len(copied) - 4
    spliced = type(frame) is list
    assert spliced == (size >= SPLICE_BYTES)
    if spliced:  # the value itself goes to the socket: no copy of it was made
        assert sum(1 for p in frame if p is records) == 1


@pytest.mark.parametrize("version", range(FetchSnapshotResponse.MIN_VERSION, FetchSnapshotResponse.MAX_VERSION + 1))
def test_a_snapshot_chunk_is_spliced_too(version):
    chunk = os.urandom(SPLICE_BYTES * 2)
    fitter = ResponseFitter([(1, "localhost", 9093)])

    def resp():
        return fitter.fit(fetch_snapshot_response(0, 1, 5, OffsetAndEpoch(100, 5), 10 * len(chunk), 0, chunk), version)

    frame = encode_response(3, 59, version, resp(), splice=True)
    assert type(frame) is list
    assert _joined(frame) == encode_response(3, 59, version, resp())


def test_a_memoryview_value_is_spliced_and_measured_in_bytes():
    base = bytearray(os.urandom(SPLICE_BYTES * 3))
    view = memoryview(base)[5:SPLICE_BYTES * 2 + 5]
    frame = encode_response(1, 1, 17, _fetch(view), splice=True)
    assert type(frame) is list
    _, decoded = decode_response(_joined(frame)[4:], 1, 17)
    assert bytes(decoded.responses[0].partitions[0].records) == bytes(view)


def test_frames_cut_from_a_stream_at_every_split_are_the_frames_sent():
    rng = random.Random(3)
    bodies = [os.urandom(n) for n in (0, 1, 17, 1000, FrameDecoder.LARGE_FRAME - 1, FrameDecoder.LARGE_FRAME,
                                      FrameDecoder.LARGE_FRAME * 3 + 5, 9)]
    stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    for in_place in (False, True):
        for _ in range(20):
            dec = FrameDecoder(large_frames_in_place=in_place)
            got, at = [], 0
            while at < len(stream):
                n = rng.choice((1, 3, 4, 5, 100, 4096, 70_000, 300_000))
                got += dec.feed(stream[at:at + n])
                at += n
            assert [bytes(f) for f in got] == bodies
            assert dec.buffered == 0
            # Small frames are bytes; larger ones are read-only views (of the chunk, of their
            # own buffer when they spanned chunks).
            assert all(type(f) is bytes for f, b in zip(got, bodies) if len(b) < FrameDecoder.VIEW_FRAME)
            assert all(memoryview(f).readonly for f in got)


def test_whole_frames_in_a_chunk_are_views_of_it_and_a_split_frame_copies_only_itself():
    """The leader receives every Produce from the loop's bytes chunks: frames of
    VIEW_FRAME bytes or more come out as views of the chunk (no copy), and a frame cut by a
    chunk's end is gathered alone, without copying the frames that follow it."""
    bodies = [os.urandom(n) for n in (FrameDecoder.VIEW_FRAME, 30_000, 10, 25_000, 25_000)]
    wire = [struct.pack(">i", len(b)) + b for b in bodies]
    first = b"".join(wire[:3]) + wire[3][:1000]  # ends inside the 4th frame
    second = wire[3][1000:] + wire[4]
    dec = FrameDecoder()
    got = dec.feed(first)
    assert [bytes(f) for f in got] == bodies[:3] and dec.buffered == 1000
    assert got[0].obj is first and got[1].obj is first and type(got[2]) is bytes
    got = dec.feed(second)
    assert [bytes(f) for f in got] == bodies[3:] and dec.buffered == 0
    assert got[0].obj is not second and got[0].readonly  # gathered: its own buffer
    assert got[1].obj is second  # the frame after it was not copied
    # A chunk that is not bytes may be reused by its owner: every frame is copied out of it.
    dec = FrameDecoder()
    chunk = bytearray(b"".join(wire))
    got = dec.feed(chunk)
    chunk[:] = bytes(len(chunk))
    assert [bytes(f) for f in got] == bodies


def test_answers_without_records_are_built_as_plain_frames():
    """Only a message type with a records field pays for a SplicedFrame (a Produce
    acknowledgement is the hot answer of one-write requests)."""
    from kraft.protocol import ProduceResponse, VoteResponse
    for message, key, version in ((ProduceResponse(responses=[]), 0, 11), (VoteResponse(), 52, 0)):
        frame = encode_response(9, key, version, message, splice=True)
        assert type(frame) is bytearray
        assert bytes(frame) == encode_response(9, key, version, message)
