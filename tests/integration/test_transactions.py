"""Transactions against 3 combined ``kraft server start`` processes with a real confluent-kafka
(librdkafka) transactional Producer: init/begin/produce/commit and abort end with the right
COMMIT/ABORT marker on every partition and read_committed consumers read exactly the committed
records; ``send_offsets_to_transaction`` (the group's offset moves only when the transaction
commits); zombie fencing by a second producer with the same transactional.id; a transaction
past its timeout aborted by the coordinator; a commit across a SIGKILL of the coordinator's
node; DescribeTransactions / ListTransactions answered from ``__transaction_state``.
aiokafka's and kafka-python's transactional producers commit and abort too. One cluster for
the module."""

from __future__ import annotations

import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .test_broker_cluster import QUIET, SETTINGS, all_see_all  # noqa: E402

pytestmark = pytest.mark.integration
TOPIC = "txn-out"
SOURCE = "txn-in"
PARTITIONS = 3
TXN_SETTINGS = {**SETTINGS, "group.initial.rebalance.delay.ms": "0",
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("txns")), 3, combined=True, overrides=TXN_SETTINGS).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not register: {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3), NewTopic(SOURCE, 1, 3)]).values():
            f.result()
        p = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", **QUIET})
        for i in range(20):
            p.produce(SOURCE, value=b"in%d" % i, partition=0)
        assert p.flush(30) == 0
        yield c
    finally:
        c.close()


def producer(cluster, tid, **extra) -> Producer:
    return Producer({"bootstrap.servers": cluster.broker_bootstrap, "transactional.id": tid,
                     "transaction.timeout.ms": 60000, **QUIET, **extra})


def read_all(cluster, isolation: str, topic=TOPIC, expect: int | None = None, timeout=20.0) -> list:
    """Every value of ``topic`` a fresh consumer reads at ``isolation`` until it is idle."""
    c = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation,
                  **QUIET})
    c.subscribe([topic])
    out, end, idle_since = [], time.monotonic() + timeout, None
    try:
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is None or m.error():
                if out and (expect is None or len(out) >= expect):
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 2:
                        break
                continue
            idle_since = None
            out.append(m.value())
    finally:
        c.close()
    return out


def log_of(cluster, topic: str, partition: int) -> list:
    """The partition's log as its leader serves it at read_uncommitted: ("data", value) for each
    record and ("COMMIT"|"ABORT", producer id) for each transaction marker, in offset order."""
    import asyncio

    from kraft.client.node_client import NodeClient
    from kraft.protocol import FetchRequest
    from kraft.records import decode_control_key, iter_batches

    F = FetchRequest

    async def ask():
        for node in cluster.running():
            client = NodeClient(*cluster.broker_address(node), client_id="txn-log")
            try:
                req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, forgotten_topics_data=[], topics=[F.Topic(
                            topic=topic, partitions=[F.Topic.Partition(partition=partition, fetch_offset=0,
                                                                       partition_max_bytes=8 << 20)])])
                # v10: no client metadata, so only the leader answers (from v11 a follower
                # answers consumers too, up to its own high watermark: KIP-392)
                resp = await client.request(req, 10)
                part = resp.responses[0].partitions[0]
                if part.error_code == 0:
                    return bytes(part.records or b"")
            finally:
                await client.close()
        raise AssertionError(f"no leader served {topic}-{partition}")
    out = []
    for batch in iter_batches(asyncio.run(ask())):
        for rec in batch:
            if batch.is_control:
                out.append(("COMMIT" if decode_control_key(rec.key) == 1 else "ABORT", batch.producer_id))
            else:
                out.append(("data", bytes(rec.value)))
    return out


def marker_after(cluster, topic: str, partition: int, value: bytes) -> str | None:
    """The kind of the first transaction marker after the record ``value`` (None if none yet)."""
    entries = log_of(cluster, topic, partition)
    if ("data", value) not in entries:
        return None
    at = entries.index(("data", value))
    return next((kind for kind, _ in entries[at + 1:] if kind != "data"), None)


def test_commit_and_abort_end_with_markers_on_every_partition(cluster):
    """The coordinator's part of commit and abort: every partition of the transaction gets the
    transaction's COMMIT or ABORT marker after its records."""
    p = producer(cluster, "tx-commit-abort")
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(TOPIC, value=b"committed-%d" % i, partition=i % PARTITIONS)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(TOPIC, value=b"aborted-%d" % i, partition=i % PARTITIONS)
    p.flush(30)  # written to the partitions, then aborted
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(TOPIC, value=b"committed-last", partition=0)
    p.commit_transaction(30)
    # EndTxn is answered once PrepareCommit is durable; the markers follow (Kafka's order).
    for part in range(PARTITIONS):
        # committed records, COMMIT; aborted records, ABORT; (partition 0) the last one, COMMIT
        expected = ["committed"] * len(range(part, 10, PARTITIONS)) + ["COMMIT"] + \
            ["aborted"] * len(range(part, 5, PARTITIONS)) + ["ABORT"] + (["committed", "COMMIT"] if part == 0 else [])

        def kinds(part=part):
            entries = log_of(cluster, TOPIC, part)
            mine = [e for e in entries if e[0] != "data" or e[1].startswith((b"committed", b"aborted"))]
            assert len({pid for kind, pid in mine if kind != "data"}) == 1  # one producer's markers
            return [e[0] if e[0] != "data" else e[1].split(b"-")[0].decode() for e in mine]
        assert wait_for(lambda: kinds() == expected, 10, 0.2), (part, kinds(), expected)
    # A read_committed consumer reads exactly the committed records; read_uncommitted all of them.
    got = read_all(cluster, "read_committed", expect=11)
    assert sorted(v for v in got if v.startswith((b"committed", b"aborted"))) == \
        sorted([b"committed-%d" % i for i in range(10)] + [b"committed-last"])
    assert sum(v.startswith(b"aborted") for v in read_all(cluster, "read_uncommitted", expect=16)) == 5


def test_read_committed_sees_committed_records_only(cluster):
    p = producer(cluster, "tx-read-committed")
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(SOURCE, value=b"rc-aborted", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(SOURCE, value=b"rc-committed", partition=0)
    p.commit_transaction(30)
    got = read_all(cluster, "read_committed", topic=SOURCE, expect=21)
    assert b"rc-committed" in got and b"rc-aborted" not in got


def test_send_offsets_to_transaction(cluster):
    group = "txn-copier"
    c = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed", **QUIET})
    c.subscribe([SOURCE])
    msgs, end = [], time.monotonic() + 30
    while len(msgs) < 10 and time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            msgs.append(m)
    assert len(msgs) == 10
    p = producer(cluster, "tx-copier")
    p.init_transactions(60)

    # A read_uncommitted look at the group's offset: a read_committed one (require_stable) is
    # answered UNSTABLE_OFFSET_COMMIT while transactional offsets are pending (KIP-447).
    looker = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": group,
                       "isolation.level": "read_uncommitted", **QUIET})

    def committed():
        return looker.committed([TopicPartition(SOURCE, 0)], 10)[0].offset

    # aborted: the group's offset does not move
    p.begin_transaction()
    p.produce(TOPIC, value=b"copy-aborted", partition=0)
    p.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 5)], c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    assert committed() < 0
    # committed: it moves, and only once the transaction commits
    p.begin_transaction()
    p.produce(TOPIC, value=b"copy-committed", partition=0)
    p.send_offsets_to_transaction([TopicPartition(SOURCE, 0, 10)], c.consumer_group_metadata(), 30)
    assert committed() < 0  # pending in the transaction
    with pytest.raises(KafkaException):  # and a read_committed look waits for it (UNSTABLE_OFFSET_COMMIT)
        c.committed([TopicPartition(SOURCE, 0)], 2)
    p.commit_transaction(30)
    assert wait_for(lambda: committed() == 10, 10, 0.2), committed()
    assert c.committed([TopicPartition(SOURCE, 0)], 10)[0].offset == 10  # stable now
    c.close()
    looker.close()


def test_back_to_back_transactions_begin_while_the_previous_one_completes(cluster):
    """Each transaction's first AddPartitionsToTxn / AddOffsetsToTxn arrives while the previous
    one's markers are written and is held by the coordinator until it completes: a held add
    lost would time the producer out, one answered without its partitions would leave their
    markers missing (read_committed stuck below them), one added twice would show as a
    duplicate."""
    topic = "txn-back-to-back"
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        f.result()
    c = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": "txn-back-to-back", **QUIET})
    p = producer(cluster, "tx-back-to-back", **{"linger.ms": 0})
    p.init_transactions(60)
    committed = []
    for i in range(30):
        p.begin_transaction()
        if i % 3 == 0:  # the transaction's first coordinator request is AddOffsetsToTxn
            p.send_offsets_to_transaction([TopicPartition(SOURCE, 0, i)], c.consumer_group_metadata(), 30)
        for q in range(PARTITIONS):
            p.produce(topic, value=b"b2b-%d-%d" % (i, q), partition=q)
        if i % 5 == 4:
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed.extend(b"b2b-%d-%d" % (i, q) for q in range(PARTITIONS))
    got = read_all(cluster, "read_committed", topic=topic, expect=len(committed))
    assert sorted(got) == sorted(committed)
    c.close()


def test_second_producer_fences_the_first(cluster):
    first = producer(cluster, "tx-zombie")
    first.init_transactions(60)
    first.begin_transaction()
    first.produce(TOPIC, value=b"zombie", partition=1)
    first.flush(30)
    second = producer(cluster, "tx-zombie")
    second.init_transactions(60)  # aborts the first one's transaction, bumps the epoch
    with pytest.raises(KafkaException) as err:
        first.produce(TOPIC, value=b"zombie-2", partition=1)
        first.commit_transaction(30)
    e = err.value.args[0]
    assert e.fatal() and e.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                      KafkaError.INVALID_PRODUCER_EPOCH), e
    second.begin_transaction()
    second.produce(TOPIC, value=b"from-second", partition=1)
    second.commit_transaction(30)
    assert marker_after(cluster, TOPIC, 1, b"zombie") == "ABORT"  # the fenced one's transaction
    assert marker_after(cluster, TOPIC, 1, b"from-second") == "COMMIT"
    assert ("data", b"zombie-2") not in log_of(cluster, TOPIC, 1)
    got = read_all(cluster, "read_committed", expect=1)
    assert b"from-second" in got and b"zombie" not in got


def test_timed_out_transaction_is_aborted(cluster):
    p = producer(cluster, "tx-timeout", **{"transaction.timeout.ms": 2000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(TOPIC, value=b"timed-out", partition=2)
    p.flush(30)
    time.sleep(4)  # past its timeout: the coordinator aborts it (and fences this epoch)
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert marker_after(cluster, TOPIC, 2, b"timed-out") == "ABORT"


def test_transaction_state_topic_and_admin_views(cluster):
    """``__transaction_state`` as Kafka creates it; DescribeTransactions / ListTransactions from
    the coordinator of a live transactional id."""
    import asyncio

    from confluent_kafka.admin import ConfigResource

    from kraft.client.node_client import NodeClient
    from kraft.protocol import DescribeTransactionsRequest, FindCoordinatorRequest, ListTransactionsRequest

    p = producer(cluster, "tx-admin")
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(TOPIC, value=b"admin-view", partition=0)
    p.flush(30)
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    meta = admin.list_topics(timeout=10).topics["__transaction_state"]
    assert len(meta.partitions) == 50 and all(len(pm.replicas) == 3 for pm in meta.partitions.values())
    configs = admin.describe_configs([ConfigResource("topic", "__transaction_state")])
    [cfg] = [f.result() for f in configs.values()]
    assert cfg["cleanup.policy"].value == "compact" and cfg["min.insync.replicas"].value == "2"

    async def ask():
        first = NodeClient(*cluster.broker_address(cluster.ids[0]), client_id="txn-admin")
        try:
            coord = await first.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-admin"]), 4)
            c = coord.coordinators[0]
            assert c.error_code == 0
        finally:
            await first.close()
        client = NodeClient(c.host or "127.0.0.1", c.port, client_id="txn-admin")
        try:
            desc = await client.request(DescribeTransactionsRequest(transactional_ids=["tx-admin"]), 0)
            listed = await client.request(ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[]),
                                          1)
            return desc.transaction_states[0], listed
        finally:
            await client.close()
    state, listed = asyncio.run(ask())
    assert (state.error_code, state.transaction_state) == (0, "Ongoing")
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(TOPIC, [0])]
    assert "tx-admin" in {s.transactional_id for s in listed.transaction_states}
    p.abort_transaction(30)


def txn_coordinator(cluster, tid: str) -> int:
    import asyncio

    from kraft.client.node_client import NodeClient
    from kraft.protocol import FindCoordinatorRequest

    async def ask():
        for node in cluster.running():
            client = NodeClient(*cluster.broker_address(node), client_id="txn-find")
            try:
                resp = await client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]), 4)
                if resp.coordinators[0].error_code == 0:
                    return resp.coordinators[0].node_id
            except Exception:  # noqa: BLE001 - try the next node
                pass
            finally:
                await client.close()
        return None
    return asyncio.run(ask())


def test_commit_survives_a_sigkill_of_the_transaction_coordinator(cluster):
    """The coordinator's node dies mid-transaction: the partition's new leader loads the
    Ongoing transaction from ``__transaction_state`` and completes the commit."""
    p = producer(cluster, "tx-failover")
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(6):
        p.produce(TOPIC, value=b"failover-%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    victim = txn_coordinator(cluster, "tx-failover")
    assert victim is not None
    cluster.kill(victim)
    try:
        p.commit_transaction(60)
        assert wait_for(lambda: txn_coordinator(cluster, "tx-failover") not in (None, victim), 30, 0.5)
        for i in range(6):
            assert wait_for(lambda: marker_after(cluster, TOPIC, i % PARTITIONS, b"failover-%d" % i) == "COMMIT",
                            30, 0.5), i
    finally:
        cluster.start(victim)
        assert wait_for(lambda: all_see_all(cluster), 60, 0.2)


def _fresh_topic(cluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    for f in admin.create_topics([NewTopic(name, 1, 3)]).values():
        f.result()


def test_aiokafka_transactional_producer_and_read_committed_consumer(cluster):
    """aiokafka on both sides: its transactional producer commits and aborts (markers in the
    log), its read_committed consumer reads exactly the committed values in order while its
    read_uncommitted consumer sees the aborted one too."""
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    topic = "tx-aio"
    _fresh_topic(cluster, topic)

    async def produce():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.broker_bootstrap, transactional_id="tx-aiokafka")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-committed", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-aborted", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-committed-2", partition=0)
        finally:
            await p.stop()

    async def consume(isolation: str, want: int) -> list:
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=cluster.broker_bootstrap, auto_offset_reset="earliest",
                                      enable_auto_commit=False, isolation_level=isolation)
        await c.start()
        out = []
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                out += [m.value for msgs in batch.values() for m in msgs]
                if len(out) >= want:
                    out += [m.value for msgs in (await c.getmany(timeout_ms=1500)).values() for m in msgs]
                    break
        finally:
            await c.stop()
        return out
    asyncio.run(produce())
    assert wait_for(lambda: marker_after(cluster, topic, 0, b"aio-committed") == "COMMIT", 10, 0.2)
    assert wait_for(lambda: marker_after(cluster, topic, 0, b"aio-aborted") == "ABORT", 10, 0.2)
    assert asyncio.run(consume("read_committed", 2)) == [b"aio-committed", b"aio-committed-2"]
    assert asyncio.run(consume("read_uncommitted", 3)) == [b"aio-committed", b"aio-aborted", b"aio-committed-2"]


def test_kafka_python_transactional_producer_and_read_committed_consumer(cluster):
    """kafka-python on both sides, as aiokafka's test: committed values only under read_committed."""
    kafka = pytest.importorskip("kafka")
    topic = "tx-kp"
    _fresh_topic(cluster, topic)
    p = kafka.KafkaProducer(bootstrap_servers=cluster.broker_bootstrap, transactional_id="tx-kafka-python")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"kp-committed", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-aborted", partition=0).get(timeout=30)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-committed-2", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=5)
    assert wait_for(lambda: marker_after(cluster, topic, 0, b"kp-committed") == "COMMIT", 10, 0.2)
    assert wait_for(lambda: marker_after(cluster, topic, 0, b"kp-aborted") == "ABORT", 10, 0.2)

    def consume(isolation: str, want: int) -> list:
        c = kafka.KafkaConsumer(topic, bootstrap_servers=cluster.broker_bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, isolation_level=isolation, consumer_timeout_ms=3000)
        out = []
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(out) < want:
                for msgs in c.poll(timeout_ms=500).values():
                    out += [m.value for m in msgs]
            for msgs in c.poll(timeout_ms=1500).values():
                out += [m.value for m in msgs]
        finally:
            c.close()
        return out
    assert consume("read_committed", 2) == [b"kp-committed", b"kp-committed-2"]
    assert consume("read_uncommitted", 3) == [b"kp-committed", b"kp-aborted", b"kp-committed-2"]