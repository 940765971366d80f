"""How fast metadata records become a MetadataImage, and what the image costs in memory.

    PYTHONPATH=$PWD python bench/bench_metadata_image.py                      # 1,000,000 partitions
    PYTHONPATH=$PWD python bench/bench_metadata_image.py --topics 100 --partitions-per-topic 100

Workload: ``--topics`` TopicRecords each followed by ``--partitions-per-topic`` PartitionRecords
(v2, 3 replicas out of 6 brokers, as a controller writes them), framed as Kafka frames record
values. Steps, each timed once, in wall-clock and CPU seconds (this process; steadier on a
shared machine):

* encode: records -> framed bytes (setup, reported for reference)
* decode+replay in one pass, records not kept (how a loader runs), then apply: delta -> image
* the same split: decode all (``decode_record``), then replay all (``delta.replay``)
* small delta: one PartitionChangeRecord on the big image, replay + apply (median of 21)

Anchor, measured in the same run: the least Python can do per partition (build an 11-field
tuple and store it in a dict per topic). Ratios to it are what to compare across machines.
RSS is read from /proc/self/statm: growth from before the one-pass build to after it with the
delta dropped (the image alone), and the peak of the run (ru_maxrss, includes the split pass).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
import uuid
from pathlib import Path

try:
    import kraft  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kraft.metadata import (EMPTY_IMAGE, MetadataDelta, PartitionChangeRecord, PartitionRecord, TopicRecord,
                            decode_record, encode_record)


class Clock:
    """Wall and CPU seconds of one step: on a shared machine CPU time is the steadier figure."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def make_records(topics: int, per_topic: int) -> list:
    out = []
    brokers = 6
    for t in range(topics):
        tid = uuid.UUID(int=(t + 1) * 0x9E3779B97F4A7C15 % 2**128)
        out.append(TopicRecord(name=f"topic-{t}", topic_id=tid))
        for p in range(per_topic):
            replicas = [(p + i) % brokers for i in range(3)]
            out.append(PartitionRecord(partition_id=p, topic_id=tid, replicas=replicas, isr=list(replicas),
                                       leader=replicas[0], leader_epoch=0, partition_epoch=0,
                                       directories=[uuid.UUID(int=100 + r) for r in replicas]))
    return out


def anchor(topics: int, per_topic: int) -> tuple[float, float]:
    """(wall, cpu) seconds for the bare minimum: an 11-field tuple per partition into a dict per topic."""
    clock = Clock()
    image = {}
    replicas = (1, 2, 3)
    for t in range(topics):
        parts = image[t] = {}
        for p in range(per_topic):
            parts[p] = (replicas, replicas, replicas, (), (), 1, 0, 0, 0, (), ())
    elapsed = clock.stop()
    del image
    return elapsed


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    args = ap.parse_args(argv)
    topics, per_topic = args.topics, args.partitions_per_topic
    n_partitions = topics * per_topic
    gc.freeze()  # long-lived setup objects: keep the collector from rescanning them

    records = make_records(topics, per_topic)
    n = len(records)
    t0 = Clock()
    frames = [encode_record(r) for r in records]
    t_encode = t0.stop()
    del records
    gc.collect()
    base_rss = rss_mib()

    # The real path: framed bytes in, image out, no record kept.
    t0 = Clock()
    delta = MetadataDelta(EMPTY_IMAGE)
    replay = delta.replay
    for f in frames:
        replay(decode_record(f).record)
    t_stream = t0.stop()
    t0 = Clock()
    image = delta.apply()
    t_apply = t0.stop()
    assert image.topics.partition_count == n_partitions
    del delta, replay
    gc.collect()
    image_rss = rss_mib() - base_rss

    # The same split in two: decode everything, then replay everything.
    t0 = Clock()
    decoded = [decode_record(f).record for f in frames]
    t_decode = t0.stop()
    t0 = Clock()
    delta = MetadataDelta(EMPTY_IMAGE)
    replay = delta.replay
    for r in decoded:
        replay(r)
    t_replay = t0.stop()
    del decoded, delta, replay, frames
    gc.collect()

    # A small delta on the big image: one leader change.
    some_topic = next(iter(image.topics.by_id.values()))
    small = []
    for i in range(21):
        t0 = time.perf_counter()
        d = MetadataDelta(image)
        d.replay(PartitionChangeRecord(partition_id=0, topic_id=some_topic.id, leader=(i % 3) + 1))
        d.apply()
        small.append(time.perf_counter() - t0)
    t_small = statistics.median(small)

    t_anchor = anchor(topics, per_topic)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"workload: {topics:,} topics x {per_topic:,} partitions = {n_partitions:,} PartitionRecords "
          f"({n:,} records), python {sys.version.split()[0]}")
    print(f"{'step':24} {'wall s':>8} {'records/s':>11} {'cpu s':>8} {'records/s':>11}")
    for label, (wall, cpu) in (("encode (setup)", t_encode), ("decode", t_decode), ("replay", t_replay),
                               ("decode+replay, one pass", t_stream)):
        print(f"{label:24} {wall:8.2f} {n / wall:>11,.0f} {cpu:8.2f} {n / cpu:>11,.0f}")
    print(f"{'apply (build image)':24} {t_apply[0]:8.3f} {'':>11} {t_apply[1]:8.3f}")
    print(f"small delta on the big image (1 PartitionChange, replay+apply, median of 21): {t_small * 1e3:.2f} ms")
    print(f"anchor (tuple into dict per partition) {t_anchor[1]:.3f} s cpu -> cpu ratios: replay/anchor = "
          f"{t_replay[1] / t_anchor[1]:.1f}x, decode/anchor = {t_decode[1] / t_anchor[1]:.1f}x, "
          f"one pass/anchor = {t_stream[1] / t_anchor[1]:.1f}x")
    print(f"RSS of the image alone: {image_rss:,.0f} MiB ({image_rss * 2**20 / n_partitions:,.0f} bytes/partition); "
          f"peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
