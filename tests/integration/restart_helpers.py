"""Helpers for whole-cluster restart tests: a cluster with a long metadata log (hundreds of
topics), acknowledged writes recorded as (partition, offset, value), and checks that read
every replica's segment files from disk without changing them (no recovery, no truncation:
the node will do that itself when it starts)."""

from __future__ import annotations

import glob
import logging
import os
import threading
import time

from kraft.broker import partition_dir as names
from kraft.records import iter_batches

_SILENT = logging.getLogger("kraft-test-restart-rdkafka")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
QUIET = {"logger": _SILENT}


def segment_records(partition_dir: str) -> dict[int, bytes]:
    """offset -> value of every data record in a partition directory's ``.log`` files, read
    as they are (each segment up to its first invalid batch)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(partition_dir, "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        try:
            for b in iter_batches(data, validate=True):
                if not b.is_control:
                    for r in b:
                        out[r.offset] = r.value
        except Exception:  # a torn tail after SIGKILL: what came before it is what counts
            pass
    return out


def partition_dirs(cluster, node_id: int) -> dict[tuple[str, int], str]:
    """(topic, partition) -> directory of every live partition log of a node."""
    logs = cluster.partition_dir(node_id)
    out = {}
    for entry in os.listdir(logs) if os.path.isdir(logs) else []:
        tp = names.parse_partition_dir(entry)
        if tp is not None and not names.is_deleted_dir(entry) and not entry.endswith(names.STRAY_SUFFIX):
            out[tp] = os.path.join(logs, entry)
    return out


def strays(cluster) -> list[str]:
    """Every ``-stray`` or ``-delete`` directory on any node (neither should appear in a restart)."""
    out = []
    for i in cluster.broker_ids:
        logs = cluster.partition_dir(i)
        for entry in os.listdir(logs) if os.path.isdir(logs) else []:
            if entry.endswith(names.STRAY_SUFFIX) or names.is_deleted_dir(entry):
                out.append(f"node {i}: {entry}")
    return out


def missing_on_disk(cluster, topic: str, acked, replicas: dict) -> list:
    """Acknowledged (partition, offset, value) absent from a replica's segment files on disk:
    [(node, partition, offset)]. ``replicas``: partition -> the nodes that must hold it."""
    out = []
    for p, nodes in replicas.items():
        for node in nodes:
            path = partition_dirs(cluster, node).get((topic, p))
            have = segment_records(path) if path else {}
            for part, offset, value in acked:
                if part == p and have.get(offset) != value:
                    out.append((node, p, offset))
    return out


class BackgroundProducer:
    """acks=all (idempotent) writes of unique values from a thread until stopped; every
    acknowledgement kept as (partition, offset, value), every failure counted."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 200.0):
        from confluent_kafka import Producer

        self.topic, self.rate = topic, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 60000, **QUIET})
        self.acked: list = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed += 1

    def _run(self):
        n, t0 = 0, time.monotonic()
        while not self._stop.is_set():
            while n < (time.monotonic() - t0) * self.rate:
                try:
                    self.producer.produce(self.topic, value=b"bg-%d" % n, on_delivery=self._report)
                except BufferError:
                    break
                n += 1
            self.producer.poll(0.02)

    def start(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def stop(self) -> list:
        self._stop.set()
        self._thread.join()
        self.producer.flush(60)
        return self.acked
