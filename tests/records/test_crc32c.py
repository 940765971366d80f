"""CRC-32C (Castagnoli) from Python: published vectors, chaining, every length and
alignment against the ``crc32c`` package and the portable table path, input types, big
buffers. The C file is checked on its own (and for aarch64) in test_crc32c_c.py."""

import threading

import crc32c as crc32c_pkg
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.records._pure_crc import crc32c_table

from _codec_helpers import hyp

# RFC 3720 (iSCSI) appendix B.4 test vectors, plus the customary check value.
VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0x00000000),
]


def _random(n: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.fixture
def native_crc(native):
    from kraft._native import _crc

    return _crc


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_published_vectors(codec, data, expected):
    assert codec.crc32c(data) == expected


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_table_reference_matches_published_vectors(data, expected):
    assert crc32c_table(data) == expected


def test_table_reference_matches_package():
    data = _random(700, seed=7)
    for n in range(0, 700, 7):
        assert crc32c_table(data[:n]) == crc32c_pkg.crc32c(data[:n])
    assert crc32c_table(data[300:], crc32c_table(data[:300])) == crc32c_pkg.crc32c(data)


def test_chaining_equals_crc_of_concatenation(codec):
    data = _random(5000)
    for cut in (0, 1, 7, 8, 63, 64, 255, 256, 768, 1000, 4999, 5000):
        a, b = data[:cut], data[cut:]
        assert codec.crc32c(b, codec.crc32c(a)) == codec.crc32c(data)


def test_empty_input_keeps_the_running_value(codec):
    assert codec.crc32c(b"", 0xDEADBEEF) == 0xDEADBEEF


def test_every_length_and_alignment_matches_package(codec):
    base = bytearray(_random(1100 + 16, seed=3))
    view = memoryview(base)
    for align in range(16):
        for n in range(1101):
            chunk = view[align : align + n]
            expected = crc32c_pkg.crc32c(chunk)
            got = codec.crc32c(chunk)
            assert got == expected, (align, n)


def test_every_length_and_alignment_portable_path_matches(native_crc):
    base = bytearray(_random(1100 + 16, seed=4))
    view = memoryview(base)
    for align in range(16):
        for n in range(1101):
            chunk = view[align : align + n]
            assert native_crc.crc32c_portable(chunk) == crc32c_pkg.crc32c(chunk), (align, n)


@pytest.mark.parametrize("n", [767, 768, 769, 24575, 24576, 24577, 3 * 8192 + 3 * 256 + 5,
                               65535, 65536, 65537, 100_003])
def test_block_boundaries_of_the_three_way_path(codec, n):
    base = bytearray(_random(n + 16, seed=n))
    for align in (0, 1, 5, 8, 13):
        chunk = memoryview(base)[align : align + n]
        assert codec.crc32c(chunk) == crc32c_pkg.crc32c(chunk), (align, n)


def test_block_boundaries_portable_path(native_crc):
    for n in (767, 768, 24576, 65537, 100_003):
        base = bytearray(_random(n + 16, seed=n))
        for align in (0, 3, 8):
            chunk = memoryview(base)[align : align + n]
            assert native_crc.crc32c_portable(chunk) == crc32c_pkg.crc32c(chunk), (align, n)


def test_forced_portable_path_gives_the_same_results(native, native_crc):
    data = _random(70_000, seed=9)
    hardware = [native.crc32c(data[:n]) for n in (0, 5, 64, 4096, 70_000)]
    native_crc.crc32c_force_portable(True)
    try:
        assert native_crc.crc32c_implementation() == "portable"
        portable = [native.crc32c(data[:n]) for n in (0, 5, 64, 4096, 70_000)]
    finally:
        native_crc.crc32c_force_portable(False)
    assert portable == hardware
    assert native_crc.crc32c_implementation() == native.crc32c_implementation()


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy", "numpy_slice",
                                  "memoryview_2d"])
def test_buffer_types(codec, kind):
    raw = _random(4099, seed=11)
    data = {
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw)[3:],
        "numpy": np.frombuffer(raw, dtype=np.uint8).copy(),
        "numpy_slice": np.frombuffer(raw, dtype=np.uint8)[3:],
        "memoryview_2d": memoryview(raw[:4096]).cast("B", (64, 64)),
    }[kind]
    expected = crc32c_pkg.crc32c(bytes(memoryview(data).cast("B") if kind == "memoryview_2d" else data))
    assert codec.crc32c(data) == expected


def test_non_contiguous_buffer_is_rejected(codec):
    with pytest.raises((ValueError, BufferError, TypeError)):
        codec.crc32c(np.arange(100, dtype=np.uint8)[::2])


def test_str_is_rejected(codec):
    with pytest.raises(TypeError):
        codec.crc32c("123456789")


@pytest.mark.parametrize("n", [65535, 65536, 1 << 20, (3 << 20) + 7])
def test_big_buffers(codec, n):
    raw = _random(n, seed=n % 1000)
    expected = crc32c_pkg.crc32c(raw)
    assert codec.crc32c(raw) == expected
    assert codec.crc32c(bytearray(raw)) == expected  # the path that releases the GIL
    assert codec.crc32c(memoryview(raw)[1:], codec.crc32c(raw[:1])) == expected


def test_big_buffers_from_many_threads(codec):
    """Results only: concurrent big CRCs (GIL released) must not interfere."""
    buffers = [bytearray(_random(300_000 + i, seed=i)) for i in range(4)]
    expected = [crc32c_pkg.crc32c(b) for b in buffers]
    results = [[] for _ in buffers]

    def work(i):
        for _ in range(20):
            results[i].append(codec.crc32c(buffers[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(buffers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, got in enumerate(results):
        assert got == [expected[i]] * 20


@hyp(200)
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1))
def test_matches_package_for_any_input_and_start_value(codec, data, start):
    assert codec.crc32c(data, start) == crc32c_pkg.crc32c(data, start)
