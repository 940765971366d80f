"""Passes over buffers holding many batches: ``iter_batches`` (fetch responses and segment
reads end mid-batch), ``scan_batches`` (log recovery: stop at the first torn or invalid
batch and say why) and ``assign_offsets`` (the leader stamps offsets and epoch into a
producer's batches without touching the CRC)."""

import numpy as np
import pytest

from kraft.errors import CorruptRecordError

from _codec_helpers import HEADER_SIZE, patch


def three_batches(codec, base=0):
    """Batches of 1, 3 and 2 records with offsets base.., epochs 1..3, distinct times."""
    return [
        codec.build_batch([b"a"], timestamp=100, base_offset=base, partition_leader_epoch=1),
        codec.build_batch([b"b", b"c", b"d"], timestamps=[200, 250, 220], base_offset=base + 1,
                          partition_leader_epoch=2),
        codec.build_batch([b"e", b"f"], timestamp=300, base_offset=base + 4, partition_leader_epoch=3,
                          keys=[b"k", None]),
    ]


# --- iter_batches ------------------------------------------------------------------------------


def test_iter_batches_yields_each_batch(codec):
    parts = three_batches(codec)
    buf = b"".join(parts)
    batches = list(codec.iter_batches(buf))
    assert [b.base_offset for b in batches] == [0, 1, 4]
    assert [b.position for b in batches] == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert [b.tobytes() for b in batches] == parts
    assert [v for b in batches for v in b.values()] == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_iter_batches_from_a_position(codec):
    parts = three_batches(codec)
    buf = b"".join(parts)
    assert [b.base_offset for b in codec.iter_batches(buf, len(parts[0]))] == [1, 4]
    assert list(codec.iter_batches(buf, len(buf))) == []


def test_iter_batches_stops_silently_at_a_partial_trailing_batch(codec):
    parts = three_batches(codec)
    buf = b"".join(parts)
    start_of_last = len(parts[0]) + len(parts[1])
    for cut in range(start_of_last, len(buf)):
        batches = list(codec.iter_batches(buf[:cut]))
        assert [b.base_offset for b in batches] == [0, 1], cut


def test_iter_batches_on_empty_and_tiny_buffers(codec):
    for n in range(0, 12):
        assert list(codec.iter_batches(b"\x00" * n)) == []


@pytest.mark.parametrize("length", [-1, 0, 48, -(2**31)])
def test_iter_batches_raises_on_an_impossible_length(codec, length):
    parts = three_batches(codec)
    bad = patch(parts[2], "length", length)
    it = codec.iter_batches(parts[0] + parts[1] + bad)
    assert [next(it).base_offset, next(it).base_offset] == [0, 1]
    with pytest.raises(CorruptRecordError):
        next(it)


def test_iter_batches_raises_on_bad_magic(codec):
    parts = three_batches(codec)
    bad = patch(parts[1], "magic", 1)
    with pytest.raises(CorruptRecordError):
        list(codec.iter_batches(parts[0] + bad))


def test_iter_batches_validate(codec):
    parts = three_batches(codec)
    bad = bytearray(parts[1])
    bad[-1] ^= 0xFF
    buf = parts[0] + bytes(bad) + parts[2]
    assert [b.is_valid() for b in codec.iter_batches(buf)] == [True, False, True]
    it = codec.iter_batches(buf, validate=True)
    assert next(it).base_offset == 0
    with pytest.raises(CorruptRecordError):
        next(it)


# --- scan_batches -----------------------------------------------------------------------------


def test_scan_reports_every_batch(codec):
    parts = three_batches(codec, base=10)
    buf = b"".join(parts)
    s = codec.scan_batches(buf)
    assert s.error is None and s.complete
    assert len(s) == 3
    assert s.valid_end == len(buf)
    assert s.positions.tolist() == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert s.base_offsets.tolist() == [10, 11, 14]
    assert s.last_offsets.tolist() == [10, 13, 15]
    assert s.partition_leader_epochs.tolist() == [1, 2, 3]
    assert s.max_timestamps.tolist() == [100, 250, 300]
    assert s.sizes.tolist() == [len(p) for p in parts]
    assert (s.positions.dtype, s.base_offsets.dtype, s.partition_leader_epochs.dtype) == (
        np.int64, np.int64, np.int32)


def test_scan_of_an_empty_buffer(codec):
    s = codec.scan_batches(b"")
    assert (len(s), s.valid_end, s.error) == (0, 0, None)


def test_scan_from_a_position(codec):
    parts = three_batches(codec)
    buf = b"".join(parts)
    s = codec.scan_batches(buf, len(parts[0]))
    assert s.base_offsets.tolist() == [1, 4]
    assert s.positions.tolist()[0] == len(parts[0])
    assert s.valid_end == len(buf)


@pytest.mark.parametrize("keep", [1, 11, 12, 60, 61, -1])
def test_scan_partial_trailing_batch(codec, keep):
    parts = three_batches(codec)
    tail = parts[2][:keep] if keep > 0 else parts[2][:-1]
    s = codec.scan_batches(parts[0] + parts[1] + tail)
    assert s.error == "partial"
    assert not s.complete
    assert s.valid_end == len(parts[0]) + len(parts[1])
    assert len(s) == 2


@pytest.mark.parametrize("length", [48, 0, -5])
def test_scan_bad_length(codec, length):
    parts = three_batches(codec)
    s = codec.scan_batches(parts[0] + patch(parts[1], "length", length) + parts[2])
    assert s.error.startswith("invalid batch length")
    assert s.valid_end == len(parts[0])
    assert s.base_offsets.tolist() == [0]


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_scan_bad_magic(codec, magic):
    parts = three_batches(codec)
    s = codec.scan_batches(parts[0] + patch(parts[1], "magic", magic) + parts[2])
    assert s.error == f"invalid magic {magic} at position {len(parts[0])}"
    assert s.valid_end == len(parts[0])


@pytest.mark.parametrize("where", [21, 30, HEADER_SIZE, -1])
def test_scan_crc_mismatch(codec, where):
    parts = three_batches(codec)
    bad = bytearray(parts[2])
    bad[where] ^= 0x10
    s = codec.scan_batches(parts[0] + parts[1] + bytes(bad))
    assert s.error == f"CRC mismatch at position {len(parts[0]) + len(parts[1])}"
    assert s.valid_end == len(parts[0]) + len(parts[1])
    assert len(s) == 2


def test_scan_ignores_changes_outside_the_crc_but_checks_offsets(codec):
    parts = three_batches(codec)
    s = codec.scan_batches(parts[0] + patch(parts[1], "partition_leader_epoch", 99, recrc=False))
    assert s.error is None and s.partition_leader_epochs.tolist() == [1, 99]
    s = codec.scan_batches(parts[0] + patch(parts[1], "base_offset", 0, recrc=False))
    assert s.error == f"offsets not increasing at position {len(parts[0])}"
    assert s.valid_end == len(parts[0])


@pytest.mark.parametrize(("field", "value"), [("last_offset_delta", -1), ("records_count", -1)])
def test_scan_rejects_negative_deltas_and_counts(codec, field, value):
    parts = three_batches(codec)
    s = codec.scan_batches(parts[0] + patch(parts[1], field, value))
    assert s.error == f"offsets not increasing at position {len(parts[0])}"


def test_scan_accepts_gaps_between_batches(codec):
    parts = three_batches(codec)
    s = codec.scan_batches(parts[0] + patch(parts[1], "base_offset", 50, recrc=False))
    assert s.error is None and s.base_offsets.tolist() == [0, 50]


def test_scan_reports_only_the_first_problem(codec):
    parts = three_batches(codec)
    bad_crc = bytearray(parts[1])
    bad_crc[-1] ^= 1
    s = codec.scan_batches(parts[0] + bytes(bad_crc) + patch(parts[2], "magic", 0))
    assert s.error.startswith("CRC mismatch") and s.valid_end == len(parts[0])


def test_scan_of_many_batches(codec):
    parts = [codec.build_batch([b"x" * (i % 13)] * (1 + i % 4), timestamp=i, base_offset=10 * i,
                               partition_leader_epoch=i // 100) for i in range(2500)]
    s = codec.scan_batches(b"".join(parts))
    assert s.error is None and len(s) == 2500
    assert s.base_offsets.tolist() == [10 * i for i in range(2500)]
    assert s.sizes.tolist() == [len(p) for p in parts]


# --- assign_offsets ---------------------------------------------------------------------------


def test_assign_offsets_patches_every_batch(codec):
    parts = [codec.build_batch([b"x"] * n, timestamp=5) for n in (1, 3, 2)]
    buf = bytearray(b"".join(parts))
    original = bytes(buf)
    assert codec.assign_offsets(buf, 100, 7) == 106
    batches = list(codec.iter_batches(buf, validate=True))
    assert [b.base_offset for b in batches] == [100, 101, 104]
    assert [b.partition_leader_epoch for b in batches] == [7, 7, 7]
    assert [r.offset for b in batches for r in b] == list(range(100, 106))
    assert codec.scan_batches(buf).error is None
    # only BaseOffset (0..8) and PartitionLeaderEpoch (12..16) of each batch changed
    pos = 0
    for p in parts:
        assert buf[pos + 8 : pos + 12] == original[pos + 8 : pos + 12]
        assert buf[pos + 16 : pos + len(p)] == original[pos + 16 : pos + len(p)]
        pos += len(p)


def test_assign_offsets_on_an_empty_buffer(codec):
    assert codec.assign_offsets(bytearray(), 42, 1) == 42


def test_assign_offsets_uses_last_offset_delta(codec):
    raw = patch(codec.build_batch([b"x"], timestamp=5), "last_offset_delta", 9)
    buf = bytearray(raw + raw)
    assert codec.assign_offsets(buf, 0, 0) == 20
    assert [b.base_offset for b in codec.iter_batches(buf)] == [0, 10]


def test_assign_offsets_on_numpy_and_memoryview(codec):
    raw = codec.build_batch([b"x", b"y"], timestamp=5)
    arr = np.frombuffer(bytearray(raw * 2), dtype=np.uint8).copy()
    assert codec.assign_offsets(arr, 10, 2) == 14
    assert [b.base_offset for b in codec.iter_batches(arr.tobytes())] == [10, 12]
    buf = bytearray(raw * 2)
    assert codec.assign_offsets(memoryview(buf), 0, 2) == 4


@pytest.mark.parametrize("damage", ["partial", "short_length", "long_length", "negative_delta",
                                    "trailing_bytes"])
def test_assign_offsets_leaves_the_buffer_untouched_on_bad_framing(codec, damage):
    good = codec.build_batch([b"x", b"y"], timestamp=5)
    second = {
        "partial": good[:-3],
        "short_length": patch(good, "length", 10),
        "long_length": patch(good, "length", len(good)),
        "negative_delta": patch(good, "last_offset_delta", -1),
        "trailing_bytes": good + b"\x00" * 20,
    }[damage]
    buf = bytearray(good + second)
    before = bytes(buf)
    with pytest.raises(CorruptRecordError):
        codec.assign_offsets(buf, 1000, 9)
    assert bytes(buf) == before


def test_assign_offsets_needs_a_writable_buffer(codec):
    raw = codec.build_batch([b"x"], timestamp=5)
    with pytest.raises((TypeError, BufferError)):
        codec.assign_offsets(raw, 0, 0)


# --- the scalars an append reads --------------------------------------------------------------


def test_scan_scalars_are_those_of_the_arrays(codec):
    parts = three_batches(codec, base=10)
    parts[1] = codec.build_batch([b"b"], timestamp=-7, base_offset=11, partition_leader_epoch=-1)
    s = codec.scan_batches(b"".join(parts))
    assert len(s) == 3
    assert (s.first_offset, s.last_offset, s.last_position) == (10, 15, len(parts[0]) + len(parts[1]))
    assert s.max_timestamp == max(s.max_timestamps.tolist()) == 300
    assert s.max_size == max(len(p) for p in parts)
    assert s.max_epoch == 3
    one = codec.scan_batches(parts[1])
    assert (one.max_timestamp, one.max_epoch) == (-7, -1)  # not clamped: what the batch says
    empty = codec.scan_batches(b"")
    assert (empty.first_offset, empty.last_offset, empty.last_position, empty.max_timestamp,
            empty.max_size, empty.max_epoch) == (-1, -1, -1, -1, 0, -1)


@pytest.mark.parametrize(("bases", "epochs", "expected_first", "previous_epoch", "ordered"), [
    ([5, 6, 9], [1, 1, 2], 5, 1, True),      # contiguous (batches of 1, 3 and 2 records)
    ([5, 6, 9], [1, 1, 2], 4, 1, False),     # not where the log ends
    ([5, 6, 9], [1, 1, 2], -1, 1, True),     # no expected first offset
    ([5, 7, 10], [1, 1, 2], 5, 1, False),    # a gap
    ([5, 6, 9], [1, 2, 1], 5, 1, False),     # an epoch goes back
    ([5, 6, 9], [1, 1, 2], 5, 2, False),     # below the previous epoch
])
def test_is_ordered_is_order_violation_finding_nothing(codec, bases, epochs, expected_first, previous_epoch,
                                                       ordered):
    from kraft.log.recovery import order_violation
    sizes = (1, 3, 2)
    buf = b"".join(codec.build_batch([b"x"] * n, base_offset=b, partition_leader_epoch=e)
                   for n, b, e in zip(sizes, bases, epochs))
    s = codec.scan_batches(buf)
    assert s.is_ordered(expected_first, previous_epoch) is ordered
    assert (order_violation(s, None if expected_first < 0 else expected_first, previous_epoch) is None) is ordered
