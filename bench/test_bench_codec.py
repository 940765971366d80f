"""pytest-benchmark suite for the RecordBatch v2 codec (same candidates as the pyperf suite).

    pytest bench/test_bench_codec.py --benchmark-only
    pytest bench/test_bench_codec.py --benchmark-only --benchmark-group-by=group \
        --benchmark-columns=min,median,ops --benchmark-sort=name

Grouped per workload ("encode 1000x100B", "decode 1000x100B", "crc32c 4KiB", ...) so the
ratios against aiokafka's Cython codec and the crc32c package are read off one table each.
Not part of the test suite (pyproject's testpaths is ``tests``); no assertion here is about
time: the only checks are that each candidate computes the right thing.
"""

import pytest

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is not installed")

import bench_codec_pyperf as suite  # noqa: E402  (bench/ is on sys.path under pytest)

VALUES = suite.make_values()
BATCH = suite.encode_candidates(VALUES)["kraft-pure build_batch"]()
ENCODE = suite.encode_candidates(VALUES)
DECODE = suite.decode_candidates(BATCH)
CRC = {label: suite.crc_candidates(suite.crc_data(size)) for label, size in suite.CRC_SIZES.items()}
WORKLOAD = f"{suite.N_RECORDS}x{suite.VALUE_SIZE}B"


@pytest.mark.parametrize("name", sorted(ENCODE))
def test_encode(benchmark, name):
    benchmark.group = f"encode {WORKLOAD}"
    benchmark.extra_info["records"] = suite.N_RECORDS
    out = benchmark(ENCODE[name])
    import kraft.records

    assert kraft.records.implementation("python").RecordBatch(out).values() == VALUES


@pytest.mark.parametrize("name", sorted(DECODE))
def test_decode(benchmark, name):
    benchmark.group = f"decode {WORKLOAD}"
    benchmark.extra_info["records"] = suite.N_RECORDS
    out = benchmark(DECODE[name])
    assert (out if isinstance(out, list) else out.values()) == VALUES


@pytest.mark.parametrize(("label", "name"), [(label, name) for label in CRC for name in sorted(CRC[label])])
def test_crc32c(benchmark, label, name):
    import crc32c as pkg

    benchmark.group = f"crc32c {label}"
    benchmark.extra_info["bytes"] = suite.CRC_SIZES[label]
    assert benchmark(CRC[label][name]) == pkg.crc32c(suite.crc_data(suite.CRC_SIZES[label]))
