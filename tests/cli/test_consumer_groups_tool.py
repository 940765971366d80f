"""``kraft consumer-groups`` against a real 3-node cluster (combined nodes) with a confluent-kafka
group, compared with the layout of Kafka's ``kafka-consumer-groups.sh``: --list (with states),
--describe (offsets and LAG checked against what was produced and committed, members with
their assignment, state), the reset scenarios (dry run by default, --execute, clamping to the
log's ends, --export / --from-file), refusing to reset an active group, --delete-offsets and
--delete, each checked by reading the group's committed offsets back; and the coordinator's
lag gauges on /metrics. Before this command existed none of it could be done without Kafka's
own tools."""

from __future__ import annotations

import re
import urllib.request

import pytest

from kraft.cli import main as kraft_main
from kraft.cli.local_cluster import LocalCluster, wait_for

from tests.integration.test_broker_cluster import QUIET, SETTINGS, all_see_all

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration
TOPIC, PARTITIONS, PER_PARTITION = "cg", 3, 10
CLUSTER = {**SETTINGS, "group.initial.rebalance.delay.ms": "0", "kraft.group.lag.interval.ms": "300"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("groups-tool")), 3, combined=True, overrides=CLUSTER,
                     metrics=True).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not register: {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
            f.result()
        p = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", **QUIET})
        for i in range(PARTITIONS * PER_PARTITION):
            p.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
        assert p.flush(30) == 0
        yield c
    finally:
        c.close()


@pytest.fixture
def kraft(capsys, cluster):
    def run(*args):
        capsys.readouterr()
        code = kraft_main(["consumer-groups", "--bootstrap-server", cluster.broker_bootstrap, *args])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def committed(cluster, group) -> dict:
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def active_consumer(cluster, group, commits: dict) -> Consumer:
    """A classic member owning every partition, with ``commits`` committed (partition -> offset)."""
    c = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": "cg-client", **QUIET})
    c.subscribe([TOPIC])
    assert wait_for(lambda: c.poll(0.1) is not None and len(c.assignment()) == PARTITIONS, 30)
    c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in commits.items()], asynchronous=False)
    return c


def table(out: str) -> list[list[str]]:
    """The rows after the blank line and the header, split on runs of spaces."""
    lines = out.splitlines()
    assert lines[0] == "", out  # Kafka's tables start with an empty line
    return [re.split(r"\s+", line.strip()) for line in lines[1:] if line.strip()]


def scrape(cluster, node_id) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[node_id]}/metrics", timeout=5) as r:
        return r.read().decode()


def test_list_and_describe_show_members_offsets_and_lag_as_kafka_does(kraft, cluster):
    c = active_consumer(cluster, "cg-a", {0: 4, 1: 5, 2: 6})
    try:
        assert "cg-a" in kraft("--list")[1].splitlines()
        code, out, _ = kraft("--list", "--state")
        assert out.splitlines()[0].split() == ["GROUP", "STATE"] and ["cg-a", "Stable"] in [
            line.split() for line in out.splitlines()]
        code, out, err = kraft("--describe", "--group", "cg-a")
        assert code == 0, err
        rows = table(out)
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                           "HOST", "CLIENT-ID"]
        member = c.memberid()
        assert [r[:7] + r[8:] for r in rows[1:]] == [
            ["cg-a", TOPIC, str(p), str(4 + p), str(PER_PARTITION), str(PER_PARTITION - 4 - p), member, "cg-client"]
            for p in range(PARTITIONS)]
        code, out, _ = kraft("--describe", "--group", "cg-a", "--members", "--verbose")
        assert table(out) == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                              ["cg-a", member, table(out)[1][2], "cg-client", "3", f"{TOPIC}(0,1,2)"]]
        code, out, _ = kraft("--describe", "--group", "cg-a", "--state")
        header, row = out.splitlines()[1:3]
        assert re.split(r"\s{2,}", header.strip()) == ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                                     "#MEMBERS"]
        assert row.split()[0] == "cg-a" and row.split()[-3:] == ["range", "Stable", "1"] or \
            row.split()[-2:] == ["Stable", "1"], row
        # an active group's offsets are not reset
        code, out, _ = kraft("--reset-offsets", "--group", "cg-a", "--topic", TOPIC, "--to-earliest", "--execute")
        assert code == 1 and "can only be reset if the group 'cg-a' is inactive, but the current state is Stable" in out
        assert committed(cluster, "cg-a") == {0: 4, 1: 5, 2: 6}

        # the coordinator exports the same lag
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})  # kept: its futures need it
        coordinator = admin.describe_consumer_groups(["cg-a"])["cg-a"].result(15).coordinator.id
        want = {p: PER_PARTITION - 4 - p for p in range(PARTITIONS)}

        def lag_rows():
            text = scrape(cluster, coordinator)
            found = dict((int(m[1]), float(m[2])) for m in re.finditer(
                r'kraft_consumer_group_lag\{node_id="\d+",group="cg-a",topic="cg",partition="(\d+)"\} (\S+)', text))
            total = re.search(r'kraft_consumer_group_lag_sum\{node_id="\d+",group="cg-a"\} (\S+)', text)
            return found, total and float(total[1])
        assert wait_for(lambda: lag_rows() == (want, sum(want.values())), 15), lag_rows()
    finally:
        c.close()
    code, out, err = kraft("--describe", "--group", "cg-a")
    assert "Consumer group 'cg-a' has no active members." in err
    assert [r[6:] for r in table(out)[1:]] == [["-", "-", "-"]] * PARTITIONS


def test_reset_offsets_plans_by_default_and_commits_with_execute(kraft, cluster, tmp_path):
    active_consumer(cluster, "cg-r", {0: 2, 1: 2, 2: 2}).close()
    code, out, err = kraft("--reset-offsets", "--group", "cg-r", "--topic", TOPIC, "--to-earliest")
    assert code == 0 and out.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert table(out.split("\n", 1)[1])[1:] == [["cg-r", TOPIC, str(p), "0"] for p in range(PARTITIONS)]
    assert committed(cluster, "cg-r") == {0: 2, 1: 2, 2: 2}  # a dry run changes nothing

    def reset(*scenario, topic=TOPIC):
        code, out, err = kraft("--reset-offsets", "--group", "cg-r", "--topic", topic, *scenario, "--execute")
        assert code == 0, out + err
        return committed(cluster, "cg-r"), err

    assert reset("--to-earliest")[0] == {0: 0, 1: 0, 2: 0}
    offsets, err = reset("--to-offset", "25")
    assert offsets == {0: 10, 1: 10, 2: 10} and "is higher than latest offset" in err  # clamped to the end
    assert reset("--shift-by", "-3")[0] == {0: 7, 1: 7, 2: 7}
    offsets, err = reset("--shift-by", "-30")
    assert offsets == {0: 0, 1: 0, 2: 0} and "is lower than earliest offset" in err
    assert reset("--to-latest", topic=f"{TOPIC}:1")[0] == {0: 0, 1: 10, 2: 0}  # one partition only
    assert reset("--to-datetime", "2000-01-01T00:00:00.000")[0] == {0: 0, 1: 0, 2: 0}
    assert reset("--to-datetime", "2999-01-01T00:00:00.000Z")[0] == {0: 10, 1: 10, 2: 10}  # nothing that late
    assert reset("--by-duration", "P1D")[0] == {0: 0, 1: 0, 2: 0}
    code, out, _ = kraft("--reset-offsets", "--group", "cg-r", "--all-topics", "--to-offset", "3", "--dry-run",
                         "--export")
    assert code == 0 and out.split() == [f"{TOPIC},{p},3" for p in range(PARTITIONS)]
    plan = tmp_path / "plan.csv"
    plan.write_text(out)
    code, out, err = kraft("--reset-offsets", "--group", "cg-r", "--from-file", str(plan), "--execute")
    assert code == 0, err
    assert committed(cluster, "cg-r") == {0: 3, 1: 3, 2: 3}
    code, _, err = kraft("--reset-offsets", "--group", "cg-r", "--topic", TOPIC, "--to-earliest", "--to-latest")
    assert code == 1 and err.count("\n") == 1 and "only one scenario" in err
    code, _, err = kraft("--reset-offsets", "--group", "cg-r", "--topic", TOPIC, "--by-duration", "one day")
    assert code == 1 and "ISO-8601" in err


def test_delete_offsets_then_the_group(kraft, cluster):
    active_consumer(cluster, "cg-d", {0: 1, 1: 2, 2: 3}).close()
    code, out, err = kraft("--delete-offsets", "--group", "cg-d", "--topic", f"{TOPIC}:0")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0] == f"Request succeed for deleting offsets with topic {TOPIC}:0 group cg-d"
    assert [line.split() for line in lines[2:]] == [["TOPIC", "PARTITION", "STATUS"], [TOPIC, "0", "Successful"]]
    assert committed(cluster, "cg-d") == {1: 2, 2: 3}
    code, out, _ = kraft("--delete-offsets", "--group", "cg-d", "--topic", "no-such-topic")
    assert code == 1 and "partition level error" in out and "Not Provided" in out
    code, out, err = kraft("--delete", "--group", "cg-d")
    assert (code, out) == (0, "Deletion of requested consumer groups ('cg-d') was successful.\n"), err
    assert "cg-d" not in kraft("--list")[1].splitlines()
    assert committed(cluster, "cg-d") == {}
    code, out, _ = kraft("--describe", "--group", "cg-d")
    assert "Consumer group 'cg-d' does not exist." in out


def test_usage_errors_are_one_line(kraft):
    for args, words in ((["--list", "--describe"], "exactly one action"),
                        (["--describe"], "--group"),
                        (["--list", "--state", "Sleepy"], "Invalid state list")):
        code, out, err = kraft(*args)
        assert code == 1 and err.count("\n") == 1 and words in err, (args, err)
