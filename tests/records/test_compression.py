"""Compression codecs (kraft/records/compression.py) and their use by both codec
implementations: round trips, Kafka's framing choices, missing optional packages,
the decompression-bomb cap, and malformed compressed payloads."""

import os
import struct
import tracemalloc

import lz4.frame
import pytest

from kraft.errors import CorruptRecordError, RecordListTooLargeError, UnsupportedCodecError
from kraft.records import Compression, compression

from _codec_helpers import HEADER_SIZE, implementations, raw_batch, raw_record

ALL = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
AVAILABLE = [c for c in ALL if compression.available(c)]
PAYLOADS = [b"", b"x", b"hello world " * 1000, os.urandom(5000), bytes(200_000),
            os.urandom(70_000) + bytes(70_000)]


def records_block(n: int, size: int = 100) -> bytes:
    return b"".join(raw_record(i, i, None, (b"%04d" % i) * (size // 4)) for i in range(n))


@pytest.mark.parametrize("codec_id", AVAILABLE)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_module_round_trip(codec_id, payload):
    assert compression.decompress(codec_id, compression.compress(codec_id, payload)) == payload


@pytest.mark.parametrize("codec_id", AVAILABLE)
def test_batch_round_trip_through_both_implementations(codec, codec_id):
    values = [(b"%06d" % i) * 20 for i in range(2000)]  # > 64 KiB: several lz4 blocks / snappy chunks
    keys = [b"key-%d" % (i % 10) for i in range(2000)]
    headers = [[("i", b"%d" % i)] if i % 3 == 0 else None for i in range(2000)]
    raw = codec.build_batch(values, keys, headers, list(range(2000)), compression=codec_id)
    for reader in implementations():
        batch = reader.RecordBatch(raw)
        batch.validate()
        assert batch.compression == codec_id
        assert batch.values() == values
        assert [r.key for r in batch] == keys
        assert [dict(r.headers).get("i") for r in batch][:4] == [b"0", None, None, b"3"]


def test_lz4_uses_kafkas_frame_settings():
    out = compression.compress(Compression.LZ4, records_block(10))
    assert out[:4] == b"\x04\x22\x4d\x18"            # LZ4 frame magic
    assert out[4] == 0x60                             # version 01, independent blocks, no checksums, no size
    assert out[5] == 0x40                             # 64 KiB maximum block size
    assert lz4.frame.decompress(out) == records_block(10)


def test_snappy_uses_xerial_framing_in_32k_chunks():
    if not compression.available(Compression.SNAPPY):
        pytest.skip("python-snappy is not installed")
    data = os.urandom(100_000)
    out = compression.compress(Compression.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks = 16, 0
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        pos += 4 + n
        chunks += 1
    assert chunks == 4  # ceil(100000 / 32768)


def test_raw_snappy_without_xerial_framing_is_accepted():
    if not compression.available(Compression.SNAPPY):
        pytest.skip("python-snappy is not installed")
    import snappy

    data = records_block(50)
    assert compression.decompress(Compression.SNAPPY, snappy.compress(data)) == data


def test_gzip_with_zlib_header_is_accepted():
    import zlib

    data = records_block(20)
    assert compression.decompress(Compression.GZIP, zlib.compress(data)) == data


# --- optional packages missing ---------------------------------------------------------------


@pytest.mark.parametrize(("attr", "codec_id"), [("_snappy", Compression.SNAPPY),
                                                ("_zstd", Compression.ZSTD),
                                                ("_lz4", Compression.LZ4)])
def test_missing_package_is_unsupported_codec(codec, monkeypatch, attr, codec_id):
    block = records_block(5)
    if compression.available(codec_id):
        packed = compression.compress(codec_id, block)
    else:
        packed = b"\x00" * 10
    raw = raw_batch(packed, 5, attributes=codec_id)
    monkeypatch.setattr(compression, attr, None)
    assert not compression.available(codec_id)
    with pytest.raises(UnsupportedCodecError):
        compression.compress(codec_id, block)
    with pytest.raises(UnsupportedCodecError):
        compression.decompress(codec_id, packed)
    with pytest.raises(UnsupportedCodecError):
        codec.build_batch([b"v"], timestamp=1, compression=codec_id)
    b = codec.RecordBatchBuilder(compression=codec_id)
    b.append(b"v", timestamp=1)
    with pytest.raises(UnsupportedCodecError):
        b.build()
    batch = codec.RecordBatch(raw)  # the header is still readable
    assert batch.is_valid()
    for read in (list, lambda b: b.values(), lambda b: b.decode()):
        with pytest.raises(UnsupportedCodecError):
            read(batch)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_reserved_codec_ids_are_unsupported(codec, codec_id):
    batch = codec.RecordBatch(raw_batch(records_block(2), 2, attributes=codec_id))
    assert batch.compression == codec_id
    with pytest.raises(UnsupportedCodecError):
        batch.values()
    with pytest.raises(UnsupportedCodecError):
        compression.decompress(codec_id, b"x")


# --- decompression bombs ----------------------------------------------------------------------------


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 4096)
    return 4096


@pytest.mark.parametrize("codec_id", AVAILABLE)
def test_output_past_the_cap_is_corrupt(codec, small_cap, codec_id):
    at_cap = bytes(small_cap)
    assert compression.decompress(codec_id, compression.compress(codec_id, at_cap)) == at_cap
    bomb = compression.compress(codec_id, bytes(small_cap + 1))
    with pytest.raises(CorruptRecordError):
        compression.decompress(codec_id, bomb)
    block = records_block(60)
    assert len(block) > small_cap
    batch = codec.RecordBatch(raw_batch(compression.compress(codec_id, block), 60, attributes=codec_id))
    with pytest.raises(CorruptRecordError):
        batch.values()


def test_raw_snappy_past_the_cap_is_corrupt(small_cap):
    # Regression: raw (non-xerial) snappy used to bypass MAX_DECOMPRESSED_BYTES.
    if not compression.available(Compression.SNAPPY):
        pytest.skip("python-snappy is not installed")
    import snappy

    with pytest.raises(CorruptRecordError):
        compression.decompress(Compression.SNAPPY, snappy.compress(bytes(small_cap * 4)))


@pytest.mark.parametrize("kind", ["gzip", "lz4", "snappy", "snappy-raw", "zstd"])
def test_bomb_is_stopped_before_the_memory_is_spent(monkeypatch, kind):
    # Regression: zstd used to inflate the whole frame before checking the cap, and raw
    # (non-xerial) snappy was not capped at all.
    codec_id = Compression[kind.split("-")[0].upper()]
    if not compression.available(codec_id):
        pytest.skip(f"{kind} is not installed")
    cap = 1 << 20
    zeros = bytes(16 << 20)
    if kind == "snappy-raw":
        import snappy

        bomb = snappy.compress(zeros)
    else:
        bomb = compression.compress(codec_id, zeros)
    assert len(bomb) < cap
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", cap)
    del zeros
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            compression.decompress(codec_id, bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * cap + 2 * len(bomb), f"peak {peak >> 20} MiB for a bomb capped at 1 MiB"


# --- malformed payloads ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec_id", AVAILABLE)
def test_garbage_payload_is_corrupt(codec, codec_id):
    for seed in range(20):
        garbage = bytes((seed * 131 + i * 17) % 256 for i in range(50 + seed * 7))
        with pytest.raises(CorruptRecordError):
            compression.decompress(codec_id, garbage)
        batch = codec.RecordBatch(raw_batch(garbage, 3, attributes=codec_id))
        for read in (list, lambda b: b.values(), lambda b: b.decode()):
            with pytest.raises(CorruptRecordError):
                read(batch)


@pytest.mark.parametrize("codec_id", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                      Compression.ZSTD])
def test_truncated_payload_is_corrupt(codec_id):
    # Regression: a truncated or empty zstd frame used to decompress to partial output.
    if not compression.available(codec_id):
        pytest.skip(f"{Compression(codec_id).name} is not installed")
    packed = compression.compress(codec_id, records_block(100))
    for cut in (0, 1, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError):
            compression.decompress(codec_id, packed[:cut])


@pytest.mark.parametrize("codec_id", AVAILABLE)
def test_truncated_payload_in_a_batch_is_corrupt(codec, codec_id):
    packed = compression.compress(codec_id, records_block(100))
    for cut in (1, len(packed) // 2, len(packed) - 1):
        batch = codec.RecordBatch(raw_batch(packed[:cut], 100, attributes=codec_id))
        with pytest.raises(CorruptRecordError):
            batch.values()


def test_compressed_block_with_a_wrong_record_count_is_corrupt(codec):
    block = records_block(10)
    for count in (9, 11, 1000):
        raw = raw_batch(compression.compress(Compression.GZIP, block), count,
                        attributes=Compression.GZIP)
        with pytest.raises(CorruptRecordError):
            codec.RecordBatch(raw).values()


def test_records_count_is_read_from_the_plain_header(codec):
    raw = codec.build_batch([b"a", b"b", b"c"], timestamp=0, compression=Compression.GZIP)
    assert struct.unpack_from(">i", raw, 57)[0] == 3
    assert raw[HEADER_SIZE : HEADER_SIZE + 2] == b"\x1f\x8b"  # gzip magic right after the header


# --- lz4 in steps ---------------------------------------------------------------------------------


def test_lz4_never_asks_python_lz4_for_more_than_one_step(monkeypatch):
    # python-lz4 allocates max_length bytes up front: asking for the whole cap (hundreds of
    # MiB) made every 16 KiB batch pay for an allocation that size (20 us instead of 5).
    asked = []
    real = lz4.frame.LZ4FrameDecompressor

    class Recording:
        def __init__(self):
            self._d = real()

        def decompress(self, data, max_length=-1):
            asked.append(max_length)
            return self._d.decompress(data, max_length=max_length)

        def __getattr__(self, name):
            return getattr(self._d, name)
    monkeypatch.setattr(compression._lz4, "LZ4FrameDecompressor", Recording)
    block = records_block(100)
    assert compression.decompress(Compression.LZ4, compression.compress(Compression.LZ4, block)) == block
    assert asked and all(0 < n <= compression.LZ4_STEP for n in asked), asked


def test_lz4_output_of_many_steps_is_whole_and_capped(monkeypatch):
    monkeypatch.setattr(compression, "LZ4_STEP", 4096)
    block = records_block(600)  # many steps of 4 KiB
    assert len(block) > 10 * 4096
    packed = compression.compress(Compression.LZ4, block)
    assert compression.decompress(Compression.LZ4, packed) == block
    assert compression.decompress(Compression.LZ4, packed, limit=len(block)) == block
    with pytest.raises(RecordListTooLargeError):
        compression.decompress(Compression.LZ4, packed, limit=len(block) - 1)
    with pytest.raises(RecordListTooLargeError):
        compression.decompress(Compression.LZ4, packed, limit=3 * 4096 + 5)
    for cut in (len(packed) // 3, len(packed) - 1):  # truncated after several steps of output
        with pytest.raises(CorruptRecordError) as e:
            compression.decompress(Compression.LZ4, packed[:cut])
        assert not isinstance(e.value, RecordListTooLargeError)


# --- zstd with and without a content size -----------------------------------------------------------


def _zstd_frames(data: bytes) -> dict:
    zstandard = pytest.importorskip("zstandard")
    return {"sized": zstandard.ZstdCompressor().compress(data),
            # librdkafka and Java's zstd-jni stream their frames: no content size in the header
            "unsized": zstandard.ZstdCompressor(write_content_size=False).compress(data)}


@pytest.mark.parametrize("kind", ["sized", "unsized"])
def test_zstd_frames_with_and_without_a_content_size(kind):
    block = records_block(300)
    frame = _zstd_frames(block)[kind]
    assert compression.decompress(Compression.ZSTD, frame) == block
    assert compression.decompress(Compression.ZSTD, frame, limit=len(block)) == block
    with pytest.raises(RecordListTooLargeError):
        compression.decompress(Compression.ZSTD, frame, limit=len(block) - 1)
    for cut in (0, 5, len(frame) // 2, len(frame) - 1):
        with pytest.raises(CorruptRecordError):
            compression.decompress(Compression.ZSTD, frame[:cut])


def test_zstd_frame_whose_content_size_lies_is_corrupt():
    zstandard = pytest.importorskip("zstandard")
    block = records_block(50)
    frame = bytearray(_zstd_frames(block)["sized"])
    # The frame header (RFC 8878 3.1.1.1): magic, descriptor, [window], [dictionary id], size.
    desc = frame[4]
    fcs_flag, single, dict_flag = desc >> 6, (desc >> 5) & 1, desc & 3
    width = {0: 1 if single else 0, 1: 2, 2: 4, 3: 8}[fcs_flag]
    at = 5 + (0 if single else 1) + {0: 0, 1: 1, 2: 2, 3: 4}[dict_flag]
    bias = 256 if width == 2 else 0
    assert int.from_bytes(frame[at:at + width], "little") + bias == len(block) == \
        zstandard.frame_content_size(bytes(frame))
    frame[at:at + width] = (len(block) - 100 - bias).to_bytes(width, "little")
    assert zstandard.frame_content_size(bytes(frame)) == len(block) - 100
    with pytest.raises(CorruptRecordError):
        compression.decompress(Compression.ZSTD, bytes(frame))


def test_unsized_zstd_bomb_is_stopped_before_the_memory_is_spent(monkeypatch):
    frame = _zstd_frames(bytes(16 << 20))["unsized"]
    cap = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(RecordListTooLargeError):
            compression.decompress(Compression.ZSTD, frame, limit=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * cap + 2 * len(frame), f"peak {peak >> 20} MiB for a bomb capped at 1 MiB"


def test_sized_zstd_frame_over_the_limit_is_refused_from_its_header(monkeypatch):
    frame = _zstd_frames(bytes(16 << 20))["sized"]
    tracemalloc.start()
    try:
        with pytest.raises(RecordListTooLargeError):
            compression.decompress(Compression.ZSTD, frame, limit=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_zstd_decompressors_are_reused_and_never_shared(monkeypatch):
    import threading
    zstandard = pytest.importorskip("zstandard")
    made = []
    real = zstandard.ZstdDecompressor

    def counting():
        made.append(real())
        return made[-1]
    monkeypatch.setattr(compression._zstd, "ZstdDecompressor", counting)
    monkeypatch.setattr(compression, "_zstd_pool", [])
    block = records_block(20)
    frame = _zstd_frames(block)["unsized"]
    for _ in range(5):  # one after another: one decompressor, reused
        assert compression.decompress(Compression.ZSTD, frame) == block
    assert len(made) == 1
    # At once on several threads: each call has its own, every answer is right.
    big = records_block(3000)
    big_frame = _zstd_frames(big)["unsized"]
    start, wrong = threading.Barrier(4), []

    def work():
        start.wait()
        for _ in range(20):
            if compression.decompress(Compression.ZSTD, big_frame) != big:
                wrong.append(1)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong
    assert len(made) <= 4 + 1 and len(compression._zstd_pool) <= compression._ZSTD_POOL_MAX
    # A failed call does not put its decompressor back.
    before = len(compression._zstd_pool)
    with pytest.raises(CorruptRecordError):
        compression.decompress(Compression.ZSTD, big_frame[: len(big_frame) // 2])
    assert len(compression._zstd_pool) == max(before - 1, 0)
