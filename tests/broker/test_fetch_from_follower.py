"""KIP-392 on the leader, without a network: with ``replica.selector.class`` rack-aware, a
consumer's v11+ Fetch that names a rack is answered with ``preferred_read_replica`` (and no
records) when an in-sync follower in that rack holds the fetch offset; the leader keeps the
consumer when it is in the rack itself, when nobody is, before v11, without a rack, and without
the selector. Followers answering consumers are in ``test_broker_handlers`` (epoch checks) and
``tests/integration/test_fetch_from_follower.py`` (real processes and librdkafka)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest

from kraft.broker.broker_state import BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.log import LogConfig
from kraft.metadata import (
    MetadataDelta,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import FetchRequest, ProduceRequest
from kraft.records import build_batch

T = uuid.UUID(int=0x392)
RACKS = {1: "east", 2: "west", 3: "west", 4: "north"}


def _image():
    d = MetadataDelta(EMPTY_IMAGE)
    for b, rack in RACKS.items():
        d.replay(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=1, end_points=[
            RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host=f"h{b}", port=9000 + b)], rack=rack,
            fenced=False))
    d.replay(TopicRecord(name="t", topic_id=T))
    d.replay(PartitionRecord(partition_id=0, topic_id=T, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0,
                             partition_epoch=0))
    return d.apply()


class Leader:
    def __init__(self, tmp_path, selector="rack"):
        self.logs = PartitionLogs([str(tmp_path)], LogConfig(append_linger_ms=0.0))
        self.state = BrokerState(1, self.logs, cluster_id="cid")
        self.state.replica_selector = selector
        now = int(time.time() * 1000)
        self.handlers = BrokerHandlers(self.state, clock_ms=lambda: now)
        self.image = _image()
        publish_image(self.logs, EMPTY_IMAGE, self.image, 1)
        self.state.image = self.image
        self.logs.on_flushed = None

    def set_isr(self, isr):
        d = MetadataDelta(self.image)
        d.replay(PartitionChangeRecord(partition_id=0, topic_id=T, isr=isr))
        image = d.apply()
        publish_image(self.logs, self.image, image, 1)
        self.image = self.state.image = image
        self.state.replication.on_image(image, self.logs)

    def call(self, request, version):
        ctx = SimpleNamespace(header=SimpleNamespace(api_version=version), listener="PLAINTEXT")
        return self.handlers.handle(ctx, request)

    def produce(self, values):
        P = ProduceRequest
        req = P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            P.Topic(name="t", partition_data=[P.Topic.Partition(index=0, records=build_batch(values))])])
        assert self.call(req, 9).responses[0].partition_responses[0].error_code == 0

    def fetch(self, offset, *, replica=-1, rack="", version=11, session=(0, -1)):
        F = FetchRequest
        req = F(replica_id=replica, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                session_id=session[0], session_epoch=session[1], rack_id=rack,
                topics=[F.Topic(topic="t", partitions=[F.Topic.Partition(
                    partition=0, current_leader_epoch=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[])
        return self.call(req, version)

    def consumer(self, offset=0, **kw):
        """(preferred read replica, error, HW, whether records came) of a consumer's Fetch."""
        resp = self.fetch(offset, **kw)
        if not hasattr(resp, "responses"):  # records spliced in: the consumer got data
            return "records"
        p = resp.responses[0].partitions[0]
        return p.preferred_read_replica, p.error_code, p.high_watermark, len(p.records or b"") > 0

    def close(self):
        self.handlers.close()
        self.logs.close()


@pytest.fixture
def leader(tmp_path):
    b = Leader(tmp_path)
    yield b
    b.close()


def _caught_up(leader, followers=(2, 3), to=None):
    to = leader.logs.get("t", 0).log.end_offset if to is None else to
    for r in followers:
        leader.fetch(0, replica=r, version=12)
        leader.fetch(to, replica=r, version=12)


def test_a_consumer_in_a_followers_rack_is_sent_to_the_most_caught_up_follower_there(leader):
    leader.produce([b"a", b"b"])
    leader.produce([b"c"])
    _caught_up(leader, (2,))
    _caught_up(leader, (3,), to=2)  # 3 holds offsets 0-1 only
    assert leader.consumer(0, rack="west") == (2, 0, 2, False)  # HW: what 3 holds
    assert leader.consumer(0, rack="east") == "records"  # the leader's own rack
    assert leader.consumer(0, rack="") == "records"  # no client.rack
    assert leader.consumer(0, rack="north") == "records"  # no replica in that rack: the leader
    assert leader.consumer(0, rack="west", version=10) == "records"  # no client metadata before v11


def test_only_in_sync_followers_holding_the_offset_are_chosen(leader):
    leader.produce([b"a", b"b"])
    leader.produce([b"c"])
    _caught_up(leader, (2,))
    _caught_up(leader, (3,), to=2)
    assert leader.consumer(2, rack="west")[0] == 2
    leader.set_isr([1, 3])  # 2 dropped out of the ISR: 3 is the only one left in the rack
    assert leader.consumer(0, rack="west")[0] == 3
    assert leader.consumer(3, rack="west")[0] == -1  # past the end of 3's log: the leader
    leader.set_isr([1])
    assert leader.consumer(0, rack="west") == "records"


def test_without_the_rack_aware_selector_the_leader_serves_everyone(tmp_path):
    b = Leader(tmp_path, selector=None)
    try:
        b.produce([b"a"])
        _caught_up(b)
        assert b.consumer(0, rack="west") == "records"
    finally:
        b.close()


def test_an_incremental_session_carries_the_redirect(leader):
    leader.produce([b"a"])
    _caught_up(leader)
    first = leader.fetch(0, rack="west", session=(0, 0))  # a full fetch that opens a session
    sid = first.session_id
    assert sid > 0 and first.responses[0].partitions[0].preferred_read_replica in (2, 3)
    again = leader.fetch(0, rack="west", session=(sid, 1))
    parts = [p for t in again.responses for p in t.partitions]
    assert [p.preferred_read_replica for p in parts] in ([2], [3])
