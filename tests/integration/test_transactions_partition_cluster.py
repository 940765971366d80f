"""The partition side of transactions on real ``kraft server start`` processes (3 combined
nodes, a topic of RF 2 on nodes X and Y): hand-built transactional batches of three producers
and WriteTxnMarkers to the leader (COMMIT one, ABORT one, leave one open), read back by a real
confluent-kafka Consumer with ``isolation.level=read_committed``. It must return exactly the
committed records, stop at the last stable offset while a transaction is open (and see the
rest once it commits), and keep doing so after the leader X is SIGKILLed (Y, which built its
producer state and ``.txnindex`` as a follower, leads), and after X is restarted and made the
leader again (its state rebuilt from its log: the LSO and the aborted set are unchanged)."""

from __future__ import annotations

import glob
import os
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.client.node_client import NodeClient
from kraft.log import txn_index
from kraft.protocol import ProduceRequest, WriteTxnMarkersRequest
from kraft.records import build_batch

from .quorum_helpers import run
from .test_broker_cluster import QUIET, SETTINGS, all_see_all, create

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "txn"
COMMITTED, ABORTED, OPEN, LATER = 7001, 7002, 7003, 7004  # producer ids


async def _ask(address, request, version):
    client = NodeClient(*address, client_id="txn-test")
    try:
        return await client.request(request, version, timeout_ms=20_000)
    finally:
        await client.close()


def txn_produce(address, pid: int, seq: int, values, transactional=True) -> int:
    P = ProduceRequest
    records = build_batch(values, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=transactional)
    request = P(transactional_id="t" if transactional else None, acks=-1, timeout_ms=10_000,
                topic_data=[P.Topic(name=TOPIC, partition_data=[P.Topic.Partition(index=0, records=records)])])
    deadline = time.monotonic() + 20
    while True:  # a new leader may not have opened its log yet: retriable, as a client retries
        p = run(_ask(address, request, 9)).responses[0].partition_responses[0]
        if p.error_code not in (3, 6) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert p.error_code == 0, p
    return p.base_offset


def end_txn(address, pid: int, commit: bool) -> None:
    W = WriteTxnMarkersRequest
    resp = run(_ask(address, W(markers=[W.Marker(producer_id=pid, producer_epoch=0, transaction_result=commit,
                                                 coordinator_epoch=1, topics=[W.Marker.Topic(
                                                     name=TOPIC, partition_indexes=[0])])]), 1))
    assert resp.markers[0].topics[0].partitions[0].error_code == 0, resp


def read_committed(bootstrap: str, expect: int, settle: float = 3.0, timeout: float = 30.0):
    """Every record a read_committed consumer returns from the beginning: until ``expect``
    arrived, then ``settle`` seconds more (nothing else may come); and the consumer's view of
    the end (ListOffsets with read_committed: the LSO)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest", **QUIET})
    c.assign([TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    got = []
    end = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) >= expect and quiet_until is None:
                quiet_until = time.monotonic() + settle
            if quiet_until is not None and time.monotonic() >= quiet_until:
                break
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    finally:
        c.close()
    return got, high


def leader_is(admin, node: int, isr_size: int):
    def check():
        try:
            p = admin.list_topics(TOPIC, timeout=2).topics[TOPIC].partitions[0]
        except (ck.KafkaException, KeyError):
            return False
        return p.leader == node and len(p.isrs) >= isr_size
    return check


def test_read_committed_sees_committed_records_and_survives_leader_kill(tmp_path):
    cluster = LocalCluster(str(tmp_path), 3, combined=True,
                           # markers are written by hand here, with no coordinator to verify
                           # against (KIP-890's check is tested in tests/broker/test_txn_verification.py)
                           overrides={**SETTINGS, "auto.leader.rebalance.enable": "false",
                                      "transaction.partition.verification.enable": "false",
                                      "replica.lag.time.max.ms": "10000"}).create()
    cluster.start()
    try:
        assert wait_for(lambda: all_see_all(cluster), 60, 0.2), cluster.unexpected_exits()
        x, y, _ = cluster.broker_ids
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        create(admin, NewTopic(TOPIC, num_partitions=1, replica_assignment=[[x, y]], config={"min.insync.replicas": "1"}))
        x_admin = AdminClient({"bootstrap.servers": "%s:%d" % cluster.broker_address(x), **QUIET})
        assert wait_for(leader_is(x_admin, x, 2), 30, 0.2), "X does not lead with Y in the ISR"
        leader = cluster.broker_address(x)

        c = [b"c%d" % i for i in range(4)]
        a = [b"a%d" % i for i in range(3)]
        txn_produce(leader, COMMITTED, 0, c[:2])        # 0-1
        txn_produce(leader, ABORTED, 0, a)              # 2-4
        txn_produce(leader, COMMITTED, 2, c[2:])        # 5-6
        end_txn(leader, COMMITTED, True)                # 7
        end_txn(leader, ABORTED, False)                 # 8
        open_first = txn_produce(leader, OPEN, 0, [b"o0", b"o1"])  # 9-10, left open
        assert open_first == 9
        txn_produce(leader, LATER, 0, [b"l0"], transactional=False)  # 11: above the LSO

        got, lso = read_committed(cluster.broker_bootstrap, len(c))
        assert got == c and lso == open_first, (got, lso)

        # SIGKILL the leader: Y leads with the producer state and index it built as a follower.
        cluster.kill(x)
        assert wait_for(leader_is(admin, y, 1), 40, 0.2), "Y did not take over"
        got, lso = read_committed(cluster.broker_bootstrap, len(c))
        assert got == c and lso == open_first, (got, lso)
        y_dir = os.path.join(cluster.partition_dir(y), f"{TOPIC}-0")
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in txn_index.read(y_dir, 0)] == \
            [(ABORTED, 2, 8)]

        # X comes back (its log replayed after the kill), catches up; then Y goes and X leads again.
        cluster.start(x)
        assert wait_for(leader_is(admin, y, 2), 60, 0.3), "X did not rejoin the ISR"
        cluster.kill(y)
        assert wait_for(leader_is(admin, x, 1), 40, 0.2), "X did not lead again"
        got, lso = read_committed(cluster.broker_bootstrap, len(c))
        assert got == c and lso == open_first, (got, lso)
        x_dir = os.path.join(cluster.partition_dir(x), f"{TOPIC}-0")
        assert glob.glob(os.path.join(x_dir, "*.txnindex"))
        assert [(e.producer_id, e.first_offset) for e in txn_index.read(x_dir, 0)] == [(ABORTED, 2)]

        # The open transaction commits on the new leader: everything above the old LSO appears.
        end_txn(cluster.broker_address(x), OPEN, True)   # 12
        got, lso = read_committed(cluster.broker_bootstrap, len(c) + 3)
        assert got == c + [b"o0", b"o1", b"l0"] and lso == 13, (got, lso)
        assert set(cluster.unexpected_exits()) <= {x, y}
    finally:
        cluster.close()
