"""KRaft RPCs address exactly one partition, ``__cluster_metadata``-0 (KafkaRaftClient: "until
we support multi-raft, we treat individual topic partition mismatches as invalid requests").
The core itself answers these, on Kafka's protocol objects: a top-level INVALID_REQUEST, except
FetchSnapshot and DescribeQuorum, which answer UNKNOWN_TOPIC_OR_PARTITION on the partition."""

import pytest
from raft_harness import NONE, Replica

from kraft.errors import ErrorCode
from kraft.raft import InboundRequest, OffsetAndEpoch, Respond, rpcs


def answer(r: Replica, request):
    r.core.step(InboundRequest(-1, request, "probe"), r.now)
    r.collect()
    [resp] = [e.response for e in r.take(Respond) if e.handle == "probe"]
    return resp


def elsewhere(request, attr_partition):
    """The same request for partition 3 of the metadata topic."""
    setattr(request.topics[0].partitions[0], attr_partition, 3)
    return request


def two_partitions(request):
    request.topics[0].partitions.append(request.topics[0].partitions[0])
    return request


BUILDERS = [
    ("Vote", lambda: rpcs.vote_request(2, 2, 0, 0), "partition_index"),
    ("BeginQuorumEpoch", lambda: rpcs.begin_quorum_epoch_request(2, 2), "partition_index"),
    ("EndQuorumEpoch", lambda: rpcs.end_quorum_epoch_request(2, 2, (1,)), "partition_index"),
    ("Fetch", lambda: rpcs.fetch_request(2, 0, 0, 0), "partition"),
]


@pytest.mark.parametrize("name,build,attr", BUILDERS, ids=[b[0] for b in BUILDERS])
def test_a_request_for_another_partition_or_for_two_is_invalid_and_changes_nothing(name, build, attr):
    r = Replica(node_id=1)
    before = (r.core.role, r.core.epoch)
    for bad in (elsewhere(build(), attr), two_partitions(build())):
        resp = answer(r, bad)
        assert resp.error_code == ErrorCode.INVALID_REQUEST  # top level
        assert rpcs.response_partition(resp).error_code == NONE
    assert (r.core.role, r.core.epoch) == before


def test_fetch_snapshot_for_another_partition_is_unknown_topic_or_partition():
    r = Replica(node_id=1)
    req = rpcs.fetch_snapshot_request(2, 0, OffsetAndEpoch(10, 1), 0)
    req.topics[0].name = "other"
    resp = answer(r, req)
    assert resp.error_code == NONE and rpcs.response_partition(resp).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    resp = answer(r, two_partitions(rpcs.fetch_snapshot_request(2, 0, OffsetAndEpoch(10, 1), 0)))
    assert resp.error_code == ErrorCode.INVALID_REQUEST


def test_fetch_snapshot_with_a_negative_position_or_id_is_invalid():
    r = Replica(node_id=1)
    for sid, position in ((OffsetAndEpoch(10, 1), -1), (OffsetAndEpoch(-1, 1), 0), (OffsetAndEpoch(10, -1), 0)):
        resp = answer(r, rpcs.fetch_snapshot_request(2, 0, sid, position))
        assert rpcs.response_error(resp) == ErrorCode.INVALID_REQUEST


def test_describe_quorum_for_other_partitions_answers_each_with_unknown_topic_or_partition():
    r = Replica(node_id=1)
    req = rpcs.describe_quorum_request()
    req.topics[0].topic_name = "other"
    req.topics[0].partitions.append(type(req.topics[0].partitions[0])(partition_index=4))
    resp = answer(r, req)
    parts = resp.topics[0].partitions
    assert resp.topics[0].topic_name == "other" and [p.partition_index for p in parts] == [0, 4]
    assert {p.error_code for p in parts} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
