"""Fuzzing: no input makes the decoders raise anything but ProtocolError/UnsupportedVersionError.

Inputs are random bytes, random bodies behind a valid header, and valid frames of every
message/version with random mutations (byte changes, insertions, deletions, truncation). When
a mutated frame still decodes, the result must re-encode without error (the decoder never
produces a value the encoder cannot write).
"""

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.errors import ProtocolError, UnsupportedVersionError
from kraft.protocol import FrameDecoder, decode_request, decode_response, encode_request, encode_response
from kraft.protocol.message import REQUESTS, RESPONSES
from protocol_samples import all_messages, mutated, sample

ALLOWED = (ProtocolError, UnsupportedVersionError)
MESSAGES = all_messages()
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

REQUEST_FRAMES = [encode_request(sample(cls, v, unknown_tags=True), v, 7, "fuzz")[4:]
                  for cls, v in MESSAGES if cls.API_KEY in REQUESTS and cls is REQUESTS[cls.API_KEY]]
RESPONSE_FRAMES = [(cls, v, encode_response(7, cls.API_KEY, v, sample(cls, v, unknown_tags=True))[4:])
                   for cls, v in MESSAGES if cls is RESPONSES.get(cls.API_KEY)]
BODIES = [(cls, v, sample(cls, v, seed=s).encode(v)) for cls, v in MESSAGES for s in (1, 50)]


@FUZZ
@given(st.binary(max_size=300))
def test_random_request_frames(frame):
    try:
        decode_request(frame)
    except ALLOWED:
        pass


@FUZZ
@given(st.sampled_from(sorted(REQUESTS)), st.integers(-2, 20), st.binary(max_size=200))
def test_random_bodies_behind_a_valid_header(api_key, version, body):
    cls = REQUESTS[api_key]
    flexible = cls.is_flexible(version)
    header = struct.pack(">hhi", api_key, version, 1) + b"\x00\x01x" + (b"\x00" if flexible else b"")
    try:
        _, msg = decode_request(header + body)
    except ALLOWED:
        return
    if cls.supports(version):
        msg.encode(version)


@FUZZ
@given(st.data())
def test_mutated_request_frames(data):
    frame = data.draw(st.sampled_from(REQUEST_FRAMES))
    bad = data.draw(mutated(frame))
    try:
        header, msg = decode_request(bad)
    except ALLOWED:
        return
    if REQUESTS[header.api_key].supports(header.api_version):
        msg.encode(header.api_version)


@FUZZ
@given(st.data())
def test_mutated_response_frames(data):
    cls, version, frame = data.draw(st.sampled_from(RESPONSE_FRAMES))
    bad = data.draw(st.one_of(mutated(frame), st.binary(max_size=100)))
    try:
        _, msg = decode_response(bad, cls.API_KEY, version)
    except ALLOWED:
        return
    msg.encode(0 if cls.API_KEY == 18 and msg.error_code else version)


@FUZZ
@given(st.data())
def test_every_message_decoder_with_mutated_and_random_bodies(data):
    cls, version, body = data.draw(st.sampled_from(BODIES))
    bad = data.draw(st.one_of(mutated(body), st.binary(max_size=120)))
    try:
        msg = cls.decode(bad, version)
    except ALLOWED:
        return
    assert cls.decode(msg.encode(version), version) == msg


@FUZZ
@given(st.binary(max_size=200), st.lists(st.integers(1, 50), max_size=10))
def test_frame_decoder_only_raises_protocol_errors(stream, cuts):
    decoder = FrameDecoder(64)
    pos = 0
    try:
        for n in cuts + [len(stream)]:
            for frame in decoder.feed(stream[pos:pos + n]):
                assert len(frame) <= 64
            pos += n
    except ProtocolError:
        pass
