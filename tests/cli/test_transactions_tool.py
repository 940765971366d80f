"""``kraft transactions`` (Kafka's ``kafka-transactions.sh``) against 3 combined ``kraft server
start`` processes and a real confluent-kafka transactional Producer: ``list`` shows an ongoing
and a completed transaction with their states, ``describe`` the ongoing one's partitions,
``describe-producers`` the producer's open transaction start offset (None once committed). A
hanging transaction, written by hand with a producer id no coordinator ever gave out, holds back
the last stable offset; ``find-hanging`` finds it (and not the ongoing transaction its
coordinator knows of), ``abort`` ends it with an ABORT marker, after which a read_committed
consumer reads past it. Usage errors are one line on stderr."""

from __future__ import annotations

import asyncio
import time

import pytest

from kraft.cli import main as kraft_main
from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.cli.transactions import HANGING_HEADERS, table_lines
from kraft.client.node_client import NodeClient
from kraft.protocol import ProduceRequest
from kraft.records import build_batch

from tests.integration.test_broker_cluster import QUIET, SETTINGS, all_see_all

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration
TOPIC, HANG = "tx", "hang"
HANGING_PID = 8_000_001  # a producer id the coordinator never handed out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # KIP-890's check off: find-hanging's subject is a hanging transaction, which the check
    # exists to prevent (a cluster with it off, or older brokers, can still hold one).
    c = LocalCluster(str(tmp_path_factory.mktemp("txn-tool")), 3, combined=True,
                     overrides={**SETTINGS, "transaction.partition.verification.enable": "false"}).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not register: {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic(TOPIC, 2, 3), NewTopic(HANG, 1, 3)]).values():
            f.result()
        yield c
    finally:
        c.close()


@pytest.fixture
def kraft(capsys, cluster):
    def run(*args):
        capsys.readouterr()
        code = kraft_main(["transactions", "--bootstrap-server", cluster.broker_bootstrap, *args])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def table(out: str) -> tuple[list[str], list[list[str]]]:
    """Kafka's layout: cells padded, each followed by a tab."""
    lines = out.splitlines()
    assert all(line.endswith("\t") for line in lines), out
    rows = [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]
    return rows[0], rows[1:]


def producer(cluster, tid) -> Producer:
    p = Producer({"bootstrap.servers": cluster.broker_bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 60000, **QUIET})
    p.init_transactions(30)
    return p


def read_committed(cluster, topic: str, expect: int, timeout: float = 30.0):
    """The values a read_committed consumer reads from the start (until ``expect`` came, or
    the timeout), and its end offset (the LSO)."""
    c = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
    c.assign([TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got, end = [], time.monotonic() + timeout
    try:
        while time.monotonic() < end and len(got) < expect:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()
    return got, high


def test_list_describe_and_producers_show_ongoing_and_completed_transactions(kraft, cluster):
    done = producer(cluster, "tool-done")
    done.begin_transaction()
    done.produce(TOPIC, value=b"d0", partition=0)
    done.commit_transaction(30)
    ongoing = producer(cluster, "tool-open")
    ongoing.begin_transaction()
    for partition in (0, 1):
        ongoing.produce(TOPIC, value=b"o%d" % partition, partition=partition)
    assert ongoing.flush(30) == 0

    code, out, err = kraft("list")
    assert code == 0, err
    header, rows = table(out)
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    by_id = {r[0]: r for r in rows}
    assert by_id["tool-done"][3] == "CompleteCommit" and by_id["tool-open"][3] == "Ongoing", out
    assert {int(by_id[t][1]) for t in ("tool-done", "tool-open")} <= set(cluster.broker_ids)

    code, out, err = kraft("list", "--transactional-id-pattern", "tool-o.*")
    assert code == 0 and [r[0] for r in table(out)[1]] == ["tool-open"], (out, err)
    code, out, err = kraft("list", "--duration-filter", "3600000")
    assert code == 0 and table(out)[1] == [], (out, err)  # nothing has run for an hour
    code, out, err = kraft("list", "--duration-filter", "0")
    assert code == 0 and "tool-open" in [r[0] for r in table(out)[1]], (out, err)

    code, out, err = kraft("describe", "--transactional-id", "tool-open")
    assert code == 0, err
    header, [row] = table(out)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]
    assert row[0] == by_id["tool-open"][1] and row[1:3] == ["tool-open", by_id["tool-open"][2]]
    assert row[4:6] == ["Ongoing", "60000"] and int(row[7]) >= 0 and row[8] == "tx-0,tx-1", row

    code, out, err = kraft("describe-producers", "--topic", TOPIC, "--partition", "1")
    assert code == 0, err
    header, rows = table(out)
    assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"]
    [row] = [r for r in rows if r[0] == by_id["tool-open"][2]]
    assert row[5] == "0", out  # the transaction's first record is the partition's first

    # The ongoing transaction is not hanging: its coordinator lists the partitions.
    code, out, err = kraft("find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
    assert (code, out) == (0, table_lines(HANGING_HEADERS, [])[0] + "\n"), (out, err)

    ongoing.commit_transaction(30)

    def closed():
        rows = table(kraft("describe-producers", "--topic", TOPIC, "--partition", "1")[1])[1]
        return [r[5] for r in rows if r[0] == by_id["tool-open"][2]] == ["None"]
    assert wait_for(closed, 20, 0.2), "the committed transaction still shows a start offset"
    code, out, _ = kraft("describe", "--transactional-id", "tool-open")
    assert table(out)[1][0][4] == "CompleteCommit" and table(out)[1][0][8] == "", out

    code, out, err = kraft("describe", "--transactional-id", "no-such-id")
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err and "`no-such-id`" in err
    code, out, err = kraft("describe-producers", "--topic", "no-such-topic", "--partition", "0")
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert "Failed to describe producers for partition no-such-topic-0 on leader" in err


def _leader(cluster, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def _hand_built_transaction(address, pid: int = HANGING_PID, values=(b"h0", b"h1", b"h2")) -> int:
    """Transactional records of a producer no coordinator knows: nothing will ever end them."""
    P = ProduceRequest
    records = build_batch(list(values), producer_id=pid, producer_epoch=0, base_sequence=0,
                          transactional=True)
    request = P(transactional_id="nobody-knows", acks=-1, timeout_ms=10_000,
                topic_data=[P.Topic(name=HANG, partition_data=[P.Topic.Partition(index=0, records=records)])])

    async def send():
        client = NodeClient(*address, client_id="hanging")
        try:
            return await client.request(request, 9, timeout_ms=20_000)
        finally:
            await client.close()
    p = asyncio.run(send()).responses[0].partition_responses[0]
    assert p.error_code == 0, p
    return p.base_offset


def test_find_hanging_finds_a_hand_made_hanging_transaction_and_abort_ends_it(kraft, cluster):
    leader = _leader(cluster, HANG)
    assert _hand_built_transaction(cluster.broker_address(leader)) == 0
    plain = Producer({"bootstrap.servers": cluster.broker_bootstrap, "acks": "all", **QUIET})
    plain.produce(HANG, value=b"after", partition=0)  # offset 3, held back by the open transaction
    assert plain.flush(30) == 0
    got, lso = read_committed(cluster, HANG, 1, timeout=5)
    assert (got, lso) == ([], 0)

    code, out, err = kraft("find-hanging", "--broker-id", str(leader), "--max-transaction-timeout", "0")
    assert code == 0, err
    header, rows = table(out)
    assert header == HANGING_HEADERS
    assert [r[:6] for r in rows] == [[HANG, "0", str(HANGING_PID), "0", "-1", "0"]], out
    assert rows[0][7] == "0"  # minutes since its last write
    # A follower answers DescribeProducers too, from the producer state it built replicating.
    follower = next(b for b in cluster.broker_ids if b != leader)
    code, out, err = kraft("find-hanging", "--broker-id", str(follower), "--max-transaction-timeout", "0")
    assert code == 0 and [r[:6] for r in table(out)[1]] == [r[:6] for r in rows], (out, err)
    code, out, err = kraft("describe-producers", "--topic", HANG, "--partition", "0", "--broker-id", str(follower))
    assert code == 0 and [r[0] for r in table(out)[1] if r[5] == "0"] == [str(HANGING_PID)], (out, err)
    # Within Kafka's default 15 minutes a transaction may still be ended by its coordinator.
    code, out, _ = kraft("find-hanging", "--topic", HANG)
    assert code == 0 and table(out)[1] == []

    code, out, err = kraft("abort", "--topic", HANG, "--partition", "0", "--start-offset", "0")
    assert (code, out) == (0, ""), err
    got, lso = read_committed(cluster, HANG, 1)
    assert got == [b"after"] and lso == 5, (got, lso)  # 3 aborted records, the marker, "after"
    code, out, _ = kraft("describe-producers", "--topic", HANG, "--partition", "0")
    [row] = [r for r in table(out)[1] if r[0] == str(HANGING_PID)]
    assert row[5] == "None"
    assert table(kraft("find-hanging", "--topic", HANG, "--partition", "0",
                       "--max-transaction-timeout", "0")[1])[1] == []

    # The form for brokers before 3.0: the producer named; coordinator epoch -1 (no marker yet)
    # is sent as 0, as Kafka does.
    assert _hand_built_transaction(cluster.broker_address(leader), HANGING_PID + 1, [b"x"]) == 5
    code, out, err = kraft("abort", "--topic", HANG, "--partition", "0", "--producer-id", str(HANGING_PID + 1),
                           "--producer-epoch", "0", "--coordinator-epoch", "-1")
    assert (code, out) == (0, ""), err
    plain.produce(HANG, value=b"last", partition=0)  # offset 7, after the marker at 6
    assert plain.flush(30) == 0
    got, lso = read_committed(cluster, HANG, 2)
    assert got == [b"after", b"last"] and lso == 8, (got, lso)

    code, out, err = kraft("abort", "--topic", HANG, "--partition", "0", "--start-offset", "0")
    assert code == 1 and err.strip() == "error: Could not find any open transactions starting at offset 0 on " \
                                        "partition hang-0", err


@pytest.mark.parametrize("args, message", [
    (["find-hanging"], "requires either --topic or --broker-id"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "The --partition argument requires --topic"),
    (["abort", "--topic", "t", "--partition", "0"], "must be identified either with --start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5"], "Missing required argument --producer-epoch"),
    (["list"], "no bootstrap.servers"),
])
def test_usage_errors_are_one_line(args, message, capsys):
    bootstrap = [] if args == ["list"] else ["--bootstrap-server", "127.0.0.1:1"]
    code = kraft_main(["transactions", *bootstrap, *args])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1 and message in err, err
