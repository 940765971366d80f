"""The high-watermark kernel, native and pure: both twins (``kraft._native._hw`` and
``kraft.broker._pure_hw``) against each other, against the numpy form they replaced and
against the per-partition rule, on random shapes including 0 partitions, 1 replica, rows with
no ISR member and int64 extremes."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.broker import _pure_hw, hw_kernel

NATIVE = hw_kernel.implementation("native") if not os.environ.get("KRAFT_NO_EXTENSIONS") else None
I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def test_the_native_kernel_really_loaded():
    if os.environ.get("KRAFT_NO_EXTENSIONS"):
        assert hw_kernel.IMPLEMENTATION == "python"
    else:  # a silent fall back would let the differential tests compare pure with pure
        assert hw_kernel.IMPLEMENTATION == "native", hw_kernel.NATIVE_IMPORT_ERROR


def _numpy_min(leos, mask):  # the form this kernel replaced, kept here as a third opinion
    return np.where(mask, leos, I64_MAX).min(axis=1, initial=I64_MAX)


def _rule(leos, mask, hws):  # the per-partition rule, as PartitionLeaderState applies it
    rows, new = [], []
    for p, (r, m, h) in enumerate(zip(leos.tolist(), mask.tolist(), hws.tolist())):
        isr = [v for v, b in zip(r, m) if b]
        # int64 max is the kernels' "no member" mark, so an LEO equal to it (never a real
        # offset: Kafka offsets stay below it) does not move a HW either.
        if isr and I64_MAX != min(isr) > h:
            rows.append(p)
            new.append(min(isr))
    return rows, new


values = st.one_of(st.integers(-1, 1000), st.sampled_from([I64_MIN, I64_MIN + 1, -1, 0, I64_MAX - 1, I64_MAX]))


@st.composite
def matrices(draw):
    p = draw(st.integers(0, 40))
    r = draw(st.integers(0, 6)) if p else draw(st.integers(0, 3))
    flat = draw(st.lists(values, min_size=p * r, max_size=p * r))
    bits = draw(st.lists(st.booleans(), min_size=p * r, max_size=p * r))
    hws = draw(st.lists(values, min_size=p, max_size=p))
    return (np.array(flat, np.int64).reshape(p, r), np.array(bits, bool).reshape(p, r), np.array(hws, np.int64))


@settings(max_examples=400, deadline=None)
@given(matrices())
def test_native_pure_numpy_and_the_rule_agree(case):
    leos, mask, hws = case
    want_rows, want_new = _rule(leos, mask, hws)
    for impl in (m for m in (_pure_hw, NATIVE) if m is not None):
        assert impl.isr_min_leo(leos, mask).tolist() == _numpy_min(leos, mask).tolist()
        rows, new = impl.advance_hw(leos, mask, hws)
        assert rows.dtype == new.dtype == np.int64
        assert (rows.tolist(), new.tolist()) == (want_rows, want_new)


@pytest.mark.parametrize("impl", ["python", "native"])
def test_a_row_with_no_isr_member_never_moves_even_from_the_lowest_hw(impl):
    if impl == "native" and NATIVE is None:
        pytest.skip("KRAFT_NO_EXTENSIONS")
    k = hw_kernel.implementation(impl)
    leos = np.array([[5, 6], [7, 8]], np.int64)
    mask = np.array([[False, False], [True, False]])
    rows, new = k.advance_hw(leos, mask, np.array([I64_MIN, I64_MIN], np.int64))
    assert (rows.tolist(), new.tolist()) == ([1], [7])


@pytest.mark.parametrize("impl", ["python", "native"])
def test_non_contiguous_and_odd_dtypes_are_taken_as_values(impl):
    if impl == "native" and NATIVE is None:
        pytest.skip("KRAFT_NO_EXTENSIONS")
    k = hw_kernel.implementation(impl)
    leos = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2]  # strided, int32
    mask = (np.arange(12).reshape(4, 3) % 2 == 0)
    assert k.isr_min_leo(leos, mask).tolist() == _numpy_min(leos.astype(np.int64), mask).tolist()
    with pytest.raises(ValueError):
        k.isr_min_leo(leos, mask[:, :2])
    with pytest.raises(ValueError):
        k.advance_hw(leos, mask, np.zeros(3, np.int64))
