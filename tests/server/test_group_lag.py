"""The coordinator's lag gauges (``kraft.server.group_lag``) with a stand-in broker state and
leader connections: ends come from the local high watermark for partitions this broker leads
and from one ListOffsets per other leader; a leader that cannot be asked leaves its partitions
without a lag row (never a stale one); a shard still loading contributes nothing; the text is
Prometheus' with escaped label values."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

from kraft.errors import RequestTimeoutError
from kraft.protocol.messages import ListOffsetsResponse
from kraft.server.group_lag import GroupLag
from kraft.server.metrics import NodeMetrics

ME = 1


class State:
    broker_id = ME

    def __init__(self, leaders: dict):
        self.leaders = leaders  # (topic, partition) -> leader id

    def partition(self, topic, partition):
        leader = self.leaders.get((topic, partition))
        return (None, None) if leader is None else (NS(), NS(leader=leader))

    def local_leader(self, topic, partition):
        return 0, NS(hw=100 + partition), NS(leader=ME)

    def advance_high_watermark(self, plog, reg):
        return plog.hw

    def leader_endpoint(self, broker_id, listener):
        return ("127.0.0.1", 9000 + broker_id, None)


class Leader:
    def __init__(self, ends: dict | None):
        self.ends, self.asked, self.closed = ends, [], False

    async def request(self, request, version, timeout_ms=None):
        self.asked.append([(t.name, p.partition_index, p.timestamp) for t in request.topics for p in t.partitions])
        if self.ends is None:
            raise RequestTimeoutError("no answer")
        R = ListOffsetsResponse.Topic
        return ListOffsetsResponse(topics=[R(name=t, partitions=[
            R.Partition(partition_index=p, error_code=0, offset=self.ends[(t, p)])
            for (tt, p) in sorted(self.ends) if tt == t]) for t in sorted({t for t, _ in self.ends})])

    async def close(self):
        self.closed = True


def shard(offsets: dict, ready=True):
    table = {}
    for (group, topic, partition), offset in offsets.items():
        table.setdefault(group, {})[(topic, partition)] = NS(offset=offset)
    return NS(ready=ready, shard=NS(offsets=table))


def run(lag):
    asyncio.run(lag.sample())


def test_lag_from_local_and_remote_ends_and_nothing_for_an_unreachable_leader():
    state = State({("t", 0): ME, ("t", 1): 2, ("t", 2): 3, ("u", 0): 2})
    leaders = {2: Leader({("t", 1): 50, ("u", 0): 7}), 3: Leader(None)}
    groups = NS(shards={0: shard({("g", "t", 0): 90, ("g", "t", 1): 45, ("g", "t", 2): 1, ("h", "u", 0): 9}),
                        1: shard({("loading", "t", 0): 0}, ready=False)})
    lag = GroupLag(state, groups, "PLAINTEXT", 1000, connect=lambda host, port: leaders[port - 9000])
    run(lag)
    assert lag.lag.rows == {("g", "t", 0): 10, ("g", "t", 1): 5, ("h", "u", 0): -2}  # t-2: its leader is down
    assert lag.lag_sum.rows == {("g",): 15, ("h",): -2}
    assert lag.committed.rows[("g", "t", 2)] == 1 and ("loading", "t", 0) not in lag.committed.rows
    assert leaders[2].asked == [[("t", 1, -1), ("u", 0, -1)]]  # one request per leader, for the latest offset
    leaders[3].ends = {("t", 2): 4}
    run(lag)
    assert lag.lag.rows[("g", "t", 2)] == 3


def test_a_deleted_topic_or_an_offline_partition_has_no_lag():
    state = State({("t", 0): -1})
    groups = NS(shards={0: shard({("g", "t", 0): 5, ("g", "gone", 0): 5})})
    lag = GroupLag(state, groups, "PLAINTEXT", 1000, connect=lambda *a: Leader({}))
    run(lag)
    assert lag.lag.rows == {} and len(lag.committed.rows) == 2


def test_the_gauges_render_with_the_node_label_and_escaped_values():
    state = State({("t", 0): ME})
    groups = NS(shards={0: shard({('we"ird\\grp', "t", 0): 95})})
    lag = GroupLag(state, groups, "PLAINTEXT", 1000)
    metrics = NodeMetrics(7)
    lag.export(metrics)
    run(lag)
    text = metrics.render()
    assert 'kraft_consumer_group_lag{node_id="7",group="we\\"ird\\\\grp",topic="t",partition="0"} 5' in text
    assert "# TYPE kraft_consumer_group_lag gauge" in text
    assert 'kraft_consumer_group_lag_sum{node_id="7",group="we\\"ird\\\\grp"} 5' in text


def test_series_past_the_cap_keep_the_groups_lagging_most_and_count_the_rest():
    state = State({("t", p): ME for p in range(4)})  # ends: 100 + partition
    offsets = {}
    for g, behind in (("calm", 0), ("slow", 50), ("stuck", 90), ("late", 10)):
        offsets.update({(g, "t", p): 100 + p - behind for p in range(4)})
    groups = NS(shards={0: shard(offsets)})
    lag = GroupLag(state, groups, "PLAINTEXT", 1000, max_series=9)
    metrics = NodeMetrics(1)
    lag.export(metrics)
    run(lag)
    # two whole groups fit in 9 rows: the two lagging most; sums of all four groups fit too
    assert {k[0] for k in lag.lag.rows} == {"stuck", "slow"} and len(lag.lag.rows) == 8
    assert set(lag.committed.rows) == set(lag.lag.rows)
    assert lag.lag_sum.rows == {("stuck",): 360, ("slow",): 200, ("late",): 40, ("calm",): 0}
    assert lag.dropped.value == 8
    assert "kraft_consumer_group_lag_series_dropped" in metrics.render()
    lag.max_series = 100
    run(lag)
    assert len(lag.lag.rows) == 16 and lag.dropped.value == 0
