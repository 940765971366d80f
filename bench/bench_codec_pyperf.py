"""pyperf suite for the RecordBatch v2 codec: kraft native and pure against aiokafka's
Cython codec and kafka-python, plus CRC-32C against the ``crc32c`` package.

    python bench/bench_codec_pyperf.py --fast            # quick look
    python bench/bench_codec_pyperf.py -o codec.json     # full run, then `pyperf stats`

Workloads (the issue's): a batch of 1,000 records with 100-byte values (no key, no
headers, one timestamp), encoded and decoded; CRC-32C of 64 B, 4 KiB and 1 MiB. Decoders
visit every record. Times are per batch / per call; records/s = 1000 / time.

This module also defines the candidates that bench/test_bench_codec.py and
bench/report_codec.py measure, so the three always time the same code. Importing it has
no side effects; the pyperf Runner starts only under ``__main__``.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

try:
    import kraft  # noqa: F401  (an installed kraft wins)
except ImportError:  # run from a source checkout: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N_RECORDS = 1000
VALUE_SIZE = 100
TIMESTAMP = 1_700_000_000_000
CRC_SIZES = {"64B": 64, "4KiB": 4096, "1MiB": 1 << 20}

# Anchors the targets are stated against.
ENCODE_ANCHOR = DECODE_ANCHOR = "aiokafka-cython"
CRC_ANCHOR = "crc32c-pkg"


def make_values(n: int = N_RECORDS, size: int = VALUE_SIZE) -> list:
    rng = random.Random(42)
    return [rng.randbytes(size) for _ in range(n)]


def _impls():
    import kraft.records

    out = {"python": kraft.records.implementation("python")}
    if not os.environ.get("KRAFT_NO_EXTENSIONS"):
        out["native"] = kraft.records.implementation("native")
    return out


def encode_candidates(values: list) -> dict:
    """name -> zero-argument callable returning one encoded batch of ``values``."""
    out = {}
    impls = _impls()
    n = len(values)
    for name, c in (("kraft-native", impls.get("native")), ("kraft-pure", impls["python"])):
        if c is None:
            continue

        def whole(c=c):
            return c.build_batch(values, timestamp=TIMESTAMP)

        def incremental(c=c):
            b = c.RecordBatchBuilder()
            append = b.append
            for v in values:
                append(v, timestamp=TIMESTAMP)
            return b.build()

        out[f"{name} build_batch"] = whole
        out[f"{name} RecordBatchBuilder.append"] = incremental
    try:
        from aiokafka.record import _crecords

        def aiokafka_cython():
            b = _crecords.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
            append = b.append
            for i in range(n):
                append(i, TIMESTAMP, None, values[i], [])
            return bytes(b.build())

        out[ENCODE_ANCHOR] = aiokafka_cython
    except ImportError:
        pass
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder

        def kafka_python():
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                          producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                          batch_size=1 << 30)
            append = b.append
            for i in range(n):
                append(i, TIMESTAMP, None, values[i], [])
            return bytes(b.build())

        out["kafka-python"] = kafka_python
    except ImportError:
        pass
    return out


def decode_candidates(batch: bytes) -> dict:
    """name -> zero-argument callable that decodes ``batch`` visiting every record and
    returns the list of values (so results can be checked)."""
    out = {}
    impls = _impls()
    for name, c in (("kraft-native", impls.get("native")), ("kraft-pure", impls["python"])):
        if c is None:
            continue
        RecordBatch = c.RecordBatch

        def arrays(RecordBatch=RecordBatch):
            d = RecordBatch(batch).decode()
            return d  # offsets/timestamps/positions of every record, no per-record objects

        def values(RecordBatch=RecordBatch):
            return RecordBatch(batch).values()

        def iterate(RecordBatch=RecordBatch):
            return [r.value for r in RecordBatch(batch)]

        out[f"{name} decode() arrays"] = arrays
        out[f"{name} values()"] = values
        out[f"{name} iterate .value"] = iterate
    try:
        from aiokafka.record import _crecords

        def aiokafka_cython():
            return [r.value for r in _crecords.DefaultRecordBatch(batch)]

        out[DECODE_ANCHOR] = aiokafka_cython
    except ImportError:
        pass
    try:
        from kafka.record.default_records import DefaultRecordBatch

        def kafka_python():
            return [r.value for r in DefaultRecordBatch(batch)]

        out["kafka-python"] = kafka_python
    except ImportError:
        pass
    return out


def crc_candidates(data: bytes) -> dict:
    out = {}
    impls = _impls()
    if "native" in impls:
        out["kraft-native"] = lambda f=impls["native"].crc32c: f(data)
    try:
        import crc32c as pkg

        out[CRC_ANCHOR] = lambda f=pkg.crc32c: f(data)
    except ImportError:
        pass
    return out


def check_candidates(values: list, batch: bytes) -> None:
    """Every candidate computes the right thing (a fast wrong codec must not win)."""
    import kraft.records

    reader = kraft.records.implementation("python")
    for name, fn in encode_candidates(values).items():
        assert reader.RecordBatch(fn()).values() == values, name
    for name, fn in decode_candidates(batch).items():
        got = fn()
        if not isinstance(got, list):
            got = got.values()
        assert got == values, name
    import crc32c as pkg

    for size in CRC_SIZES.values():
        data = random.Random(size).randbytes(size)
        for name, fn in crc_candidates(data).items():
            assert fn() == pkg.crc32c(data), name


def crc_data(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def _time_loops(fn):
    def timer(loops):
        import time

        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        return time.perf_counter() - t0

    return timer


def main():
    import pyperf

    runner = pyperf.Runner()
    runner.metadata["description"] = (
        f"RecordBatch v2 codec: {N_RECORDS} records x {VALUE_SIZE} B values per batch; "
        "records/s = 1000 / time per batch")
    values = make_values()
    batch = encode_candidates(values)["kraft-pure build_batch"]()
    args = runner.parse_args()
    if not args.worker:
        check_candidates(values, batch)
    for name, fn in encode_candidates(values).items():
        runner.bench_time_func(f"encode {N_RECORDS}x{VALUE_SIZE}B: {name}", _time_loops(fn))
    for name, fn in decode_candidates(batch).items():
        runner.bench_time_func(f"decode {N_RECORDS}x{VALUE_SIZE}B: {name}", _time_loops(fn))
    for label, size in CRC_SIZES.items():
        for name, fn in crc_candidates(crc_data(size)).items():
            runner.bench_time_func(f"crc32c {label}: {name}", _time_loops(fn))


if __name__ == "__main__":
    main()
