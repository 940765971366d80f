"""A metadata snapshot of a million partitions: written from the image, loaded back, its memory.

    PYTHONPATH=$PWD python bench/bench_metadata_snapshot.py                  # 10,000 topics x 100, RF 3
    PYTHONPATH=$PWD python bench/bench_metadata_snapshot.py --topics 100     # quick

Issue 11's targets: written <= 10 s, loaded into an image <= 10 s, image RSS <= 2 GiB.

Steps (wall and CPU seconds; CPU is steadier on a shared machine):

* build the image (setup): TopicRecord + PartitionRecords (v1, 3 replicas of 6 brokers, one
  directory each) replayed per topic, plus a few brokers, configs and features;
* write: ``write_image_snapshot`` into ``SnapshotFileWriter`` (8 KiB batches, header, footer,
  fdatasync, rename), with the native PartitionRecord encoder, and with the pure one;
* load: in a fresh child process per codec (native, pure), ``SnapshotFileReader`` (CRC check of
  the whole file) + ``load_image``; the child reports the load time and the image's RSS
  (/proc/self/statm after the load minus before it, the delta dropped) and its peak RSS;
* check: the loaded image equals the written one (done once, in this process, native codec).

Anchors measured in the same run: reading the file and CRC-scanning it (the I/O floor of a
load), and the least Python can do per partition (an 11-field tuple into a dict per topic).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

try:
    import kraft  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kraft import records
from kraft.log.snapshot import SnapshotFileReader, SnapshotFileWriter
from kraft.metadata import (EMPTY_IMAGE, ConfigRecord, FeatureLevelRecord, MetadataDelta, PartitionRecord,
                            RegisterBrokerRecord, TopicRecord)
from kraft.metadata import batch_codec
from kraft.metadata.snapshot_image import load_image, write_image_snapshot
from kraft.types import SnapshotId

SID = SnapshotId(5_000_000, 7)
BROKERS = 6


class Clock:
    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def build_image(topics: int, per_topic: int):
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(FeatureLevelRecord(name="metadata.version", feature_level=21))
    E = RegisterBrokerRecord.BrokerEndpoint
    dirs = [uuid.UUID(int=100 + b) for b in range(BROKERS)]
    for b in range(BROKERS):
        delta.replay(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b + 1), broker_epoch=b,
                                          end_points=[E(name="PLAINTEXT", host=f"b{b}", port=9092,
                                                        security_protocol=0)],
                                          rack=None, fenced=False, log_dirs=[dirs[b]]))
    for t in range(topics):
        tid = uuid.UUID(int=(t + 1) * 0x9E3779B97F4A7C15 % 2**128)
        delta.replay(TopicRecord(name=f"topic-{t}", topic_id=tid))
        for p in range(per_topic):
            replicas = [(p + i) % BROKERS for i in range(3)]
            delta.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=replicas, isr=list(replicas),
                                         leader=replicas[0], leader_epoch=0, partition_epoch=0,
                                         directories=[dirs[r] for r in replicas]))
        if t % 100 == 0:
            delta.replay(ConfigRecord(resource_type=2, resource_name=f"topic-{t}", name="retention.ms", value="1"))
    return delta.apply()


def write(image, directory: str, codec) -> tuple[tuple[float, float], object]:
    os.makedirs(directory, exist_ok=True)
    clock = Clock()
    with SnapshotFileWriter(directory, SID, last_contained_log_timestamp=1, timestamp_ms=1_700_000_000_000) as w:
        stats = write_image_snapshot(image, w.append_values, codec=codec)
        w.freeze()
    return clock.stop(), stats


def child_load(directory: str, codec_name: str) -> None:
    """Run in a fresh process: load the snapshot, print JSON figures."""
    codec = batch_codec.implementation(codec_name)
    gc.collect()
    before = rss_mib()
    clock = Clock()
    with SnapshotFileReader(directory, SID) as reader:
        loaded = load_image(reader.batches(), codec=codec)
    wall, cpu = clock.stop()
    gc.collect()
    image_rss = rss_mib() - before
    print(json.dumps({"wall": wall, "cpu": cpu, "image_rss_mib": image_rss, "records": loaded.records,
                      "partitions": loaded.image.topics.partition_count,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def load_in_child(directory: str, codec_name: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child-load", directory, "--codec", codec_name],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    return json.loads(out.stdout)


def anchors(path: str, topics: int, per_topic: int) -> dict:
    clock = Clock()
    with open(path, "rb") as f:
        data = f.read()
    scan = records.scan_batches(data)
    assert scan.error is None
    read_scan = clock.stop()
    del data
    clock = Clock()
    image = {}
    replicas = (1, 2, 3)
    for t in range(topics):
        parts = image[t] = {}
        for p in range(per_topic):
            parts[p] = (replicas, replicas, replicas, (), (), 1, 0, 0, 0, (), ())
    tuples = clock.stop()
    return {"read+crc": read_scan, "tuple per partition": tuples}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--partitions-per-topic", type=int, default=100)
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir, removed after)")
    ap.add_argument("--skip-pure", action="store_true", help="native codec only")
    ap.add_argument("--child-load", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--codec", default="native", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_load:
        child_load(args.child_load, args.codec)
        return
    topics, per_topic = args.topics, args.partitions_per_topic
    n = topics * per_topic
    root = args.dir or tempfile.mkdtemp(prefix="kraft-snapbench-")
    try:
        clock = Clock()
        image = build_image(topics, per_topic)
        t_build = clock.stop()
        gc.collect()
        gc.freeze()  # the image lives for the whole run: keep the collector from rescanning it
        native = batch_codec.implementation("native")
        pure = batch_codec.implementation("python")
        t_write, stats = write(image, os.path.join(root, "native"), native)
        path = os.path.join(root, "native", f"{SID.offset:020d}-{SID.epoch:010d}.checkpoint")
        size = os.path.getsize(path)
        t_write_pure = None if args.skip_pure else write(image, os.path.join(root, "pure"), pure)[0]
        if t_write_pure is not None:
            assert Path(path).read_bytes() == Path(root, "pure", os.path.basename(path)).read_bytes()
            shutil.rmtree(os.path.join(root, "pure"))
        loads = {"native": load_in_child(os.path.join(root, "native"), "native")}
        if not args.skip_pure:
            loads["python"] = load_in_child(os.path.join(root, "native"), "python")
        with SnapshotFileReader(os.path.join(root, "native"), SID) as reader:
            assert load_image(reader.batches(), codec=native).image == image, "loaded image differs"
        anchor = anchors(path, topics, per_topic)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)

    print(f"workload: {topics:,} topics x {per_topic:,} partitions = {n:,} partitions (RF 3, v1 with directories), "
          f"python {sys.version.split()[0]}")
    print(f"snapshot: {stats.records:,} records in {stats.batches:,} batches, file {size / 2**20:,.1f} MiB "
          f"({size / n:.0f} bytes/partition)")
    print(f"{'step':34} {'wall s':>8} {'cpu s':>8} {'partitions/s':>13}  target")
    print(f"{'build image (setup)':34} {t_build[0]:8.2f} {t_build[1]:8.2f}")
    print(f"{'write, native encoder':34} {t_write[0]:8.2f} {t_write[1]:8.2f} {n / t_write[0]:>13,.0f}  <= 10 s "
          f"{'ok' if t_write[0] <= 10 else 'MISSED'}")
    if t_write_pure is not None:
        print(f"{'write, pure encoder':34} {t_write_pure[0]:8.2f} {t_write_pure[1]:8.2f} {n / t_write_pure[0]:>13,.0f}")
    for name, r in loads.items():
        print(f"{'load, ' + name + ' decoder (child)':34} {r['wall']:8.2f} {r['cpu']:8.2f} {n / r['wall']:>13,.0f}"
              + (f"  <= 10 s {'ok' if r['wall'] <= 10 else 'MISSED'}" if name == "native" else ""))
    for name, (wall, cpu) in anchor.items():
        print(f"{'anchor: ' + name:34} {wall:8.2f} {cpu:8.2f}")
    nat = loads["native"]
    print(f"image RSS (native load, child): {nat['image_rss_mib']:,.0f} MiB "
          f"({nat['image_rss_mib'] * 2**20 / n:,.0f} bytes/partition), child peak RSS {nat['peak_rss_mib']:,.0f} MiB  "
          f"<= 2048 MiB {'ok' if nat['peak_rss_mib'] <= 2048 else 'MISSED'}")
    a_tuple = anchor["tuple per partition"][1]
    ratio = f"load native / anchor tuple = {nat['cpu'] / a_tuple:.1f}x cpu"
    if "python" in loads:
        ratio += f", pure / native load = {loads['python']['cpu'] / nat['cpu']:.1f}x cpu"
    if t_write_pure is not None:
        ratio += f", pure / native write = {t_write_pure[1] / t_write[1]:.1f}x cpu"
    print(ratio)


if __name__ == "__main__":
    main()
