"""Leader failover of a broker leading many partitions, on real ``kraft server start`` processes
(3 combined nodes, RF 3, confluent-kafka with acks=all): SIGKILL of the broker that leads
every partition moves every leadership to a survivor and every partition then accepts
acks=all writes; SIGTERM of such a broker is a controlled shutdown — leadership moves before
it goes, a client producing to every partition meanwhile sees no error, the process exits 0,
and the controller never had to fence it for a missed heartbeat. The timed version (1,000
partitions, the 5 s figure) is bench/bench_failover_partitions.py; nothing here is timed."""

from __future__ import annotations

import glob
import os
import re
import signal
import threading

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.log.replicated_log import METADATA_DIR
from kraft.metadata.records import (BrokerRegistrationChangeRecord, FenceBrokerRecord, PartitionChangeRecord,
                                    UnfenceBrokerRecord)
from kraft.metadata.serde import decode_record
from kraft.records import iter_batches

from .quorum_helpers import describe, run
from .test_broker_cluster import QUIET, SETTINGS, all_see_all, create

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "many"
PARTITIONS = 200


def start(tmp_path, **overrides) -> LocalCluster:
    c = LocalCluster(str(tmp_path), 3, combined=True,
                     overrides={**SETTINGS, "auto.leader.rebalance.enable": "false", **overrides}).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 90, 0.2), f"brokers did not all register; {c.unexpected_exits()}"
    except BaseException:
        c.close()
        raise
    return c


def view(cluster, nodes):
    """partition -> (leader, isr) from the Metadata of the first of ``nodes`` that answers."""
    admin = AdminClient({"bootstrap.servers": ",".join(f"127.0.0.1:{cluster.broker_ports[i]}" for i in nodes),
                         **QUIET})
    try:
        t = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    except (ck.KafkaException, KeyError):
        return {}
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def all_led_by(leader: int, isr_size: int = 3):
    return lambda v: len(v) == PARTITIONS and all(ld == leader and len(isr) >= isr_size for ld, isr in v.values())


def topic_led_by(cluster):
    """A topic whose every partition has the same first replica: a node that is not the active
    controller (so the failover below is a broker failover, not a controller election)."""
    active = run(describe(cluster)).leader_id
    a, b = [i for i in cluster.ids if i != active]
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    create(admin, NewTopic(TOPIC, num_partitions=PARTITIONS, replica_assignment=[[a, b, active]] * PARTITIONS))
    assert wait_for(lambda: all_led_by(a)(view(cluster, cluster.ids)), 90, 0.3), "A does not lead every partition"
    return a, b, active


def produce_to_every_partition(bootstrap: str, tag: bytes, **config) -> tuple[list, list]:
    """One acks=all record per partition; returns (acknowledged partitions, errors)."""
    ok, errors = [], []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET, **config})

    def done(err, msg):
        (errors if err is not None else ok).append(err or msg.partition())
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=tag + b"-%d" % part, partition=part, on_delivery=done)
    assert p.flush(60) == 0, "records were not delivered"
    return ok, errors


class ContinuousProducer:
    """acks=all to every partition in rounds until stopped; delivery errors are kept. Retries
    are librdkafka's defaults but ``message.timeout.ms`` is far below the broker session: a
    leader that left without handing its partitions over (they wait for the session to expire)
    turns into delivery errors."""

    def __init__(self, bootstrap: str, message_timeout_ms: int):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                           "message.timeout.ms": message_timeout_ms, **QUIET})
        self.errors: list = []
        self.acked = [0] * PARTITIONS
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _done(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.acked[msg.partition()] += 1

    def _run(self):
        # Closed loop: the next round once the last one is answered, so records never queue up
        # behind a slow machine and time out for that reason alone.
        while not self.stop.is_set():
            for part in range(PARTITIONS):
                self.p.produce(TOPIC, value=b"c", partition=part, on_delivery=self._done)
            while len(self.p) and not self.stop.is_set():
                self.p.poll(0.05)

    def snapshot(self) -> list:
        return list(self.acked)

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.p.flush(60)


def metadata_records(cluster, node: int) -> list:
    """Every metadata record in ``node``'s log, in order (read from the segment files)."""
    out = []
    for name in sorted(glob.glob(os.path.join(cluster.data_dir(node), METADATA_DIR, "*.log"))):
        with open(name, "rb") as f:
            data = f.read()
        for b in iter_batches(data):
            if not b.is_control:
                out.extend(decode_record(v).record for v in b.values())
    return out


def test_sigkill_of_the_leader_of_every_partition_moves_all_and_each_accepts_acks_all(tmp_path):
    cluster = start(tmp_path)
    try:
        a, b, c = topic_led_by(cluster)
        ok, errors = produce_to_every_partition(cluster.broker_bootstrap, b"before")
        assert not errors and len(ok) == PARTITIONS
        cluster.kill(a)
        survivors = [b, c]
        # Every partition gets a new leader from its ISR: B, the next replica, everywhere,
        # and A leaves every ISR.
        assert wait_for(lambda: all(ld == b and a not in isr for ld, isr in view(cluster, survivors).values())
                        and len(view(cluster, survivors)) == PARTITIONS, 60, 0.3), view(cluster, survivors)
        bootstrap = ",".join(f"127.0.0.1:{cluster.broker_ports[i]}" for i in survivors)
        ok, errors = produce_to_every_partition(bootstrap, b"after", **{"message.timeout.ms": 30_000})
        assert not errors, errors[:3]
        assert sorted(ok) == list(range(PARTITIONS))
        assert set(cluster.unexpected_exits()) <= {a}
    finally:
        cluster.close()


def test_sigterm_of_the_leader_of_every_partition_hands_over_without_client_errors(tmp_path):
    # A long session: had the broker left without moving its leaderships, its partitions would
    # wait 45 s for the controller to fence it, past the producer's 15 s message timeout.
    cluster = start(tmp_path, **{"broker.session.timeout.ms": "45000"})
    producer = None
    try:
        a, b, c = topic_led_by(cluster)
        producer = ContinuousProducer(cluster.broker_bootstrap, message_timeout_ms=15_000)
        assert wait_for(lambda: min(producer.snapshot()) > 0, 60, 0.2), "not every partition took a record"
        logged = {i: os.path.getsize(cluster.log_path(i)) for i in (b, c)}
        cluster._expected_exit.add(a)
        cluster.procs[a].send_signal(signal.SIGTERM)
        code = cluster.procs[a].wait(60)
        assert code == 0, cluster.log_tail(a)
        # Every partition keeps taking acks=all writes at its new leader.
        after_exit = producer.snapshot()
        assert wait_for(lambda: all(n > m for n, m in zip(producer.snapshot(), after_exit)), 60, 0.2)
        assert producer.close() == 0
        producer_errors, producer = producer.errors, None
        assert producer_errors == [], producer_errors[:3]
        assert all(ld in (b, c) and a not in isr for ld, isr in view(cluster, [b, c]).values())
        # In the log: A asked for a controlled shutdown, every leadership moved off it while it
        # was still registered unfenced, and only then was it fenced — never by lease expiry.
        records = metadata_records(cluster, c)
        start_at = max(i for i, r in enumerate(records) if isinstance(r, UnfenceBrokerRecord) and r.id == a)
        later = records[start_at:]
        shutdown = next(i for i, r in enumerate(later)
                        if isinstance(r, BrokerRegistrationChangeRecord) and r.broker_id == a
                        and r.in_controlled_shutdown == 1)
        fenced = next(i for i, r in enumerate(later) if isinstance(r, FenceBrokerRecord) and r.id == a)
        moves = [i for i, r in enumerate(later) if isinstance(r, PartitionChangeRecord) and r.leader not in (-2, a)]
        assert len(moves) >= PARTITIONS and shutdown < min(moves) and max(moves) < fenced
        for i, offset in logged.items():
            with open(cluster.log_path(i), "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
            assert not re.search(rf"fencing broker\(s\) \[[^\]]*\b{a}\b", text), text
        assert set(cluster.unexpected_exits()) == set()
    finally:
        if producer is not None:
            producer.close()
        cluster.close()
