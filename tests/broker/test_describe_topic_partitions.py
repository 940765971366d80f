"""DescribeTopicPartitions pagination (KIP-966) over an image of many partitions: following the
cursor visits every partition of the asked topics exactly once, in (name, index) order, never
more than the limit per answer; a cursor on a topic not asked for is refused."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kraft.broker.describe_topic_partitions import handle_describe_topic_partitions
from kraft.errors import InvalidRequestError
from kraft.metadata import RegisterBrokerRecord
from kraft.protocol import DescribeTopicPartitionsRequest as T
from kraft.server.broker_node import static_image

TOPICS = {"a": 7, "b": 1, "c": 2500, "d": 3}


def state():
    E = RegisterBrokerRecord.BrokerEndpoint
    reg = RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=1, features=[],
                               end_points=[E(name="PLAINTEXT", host="h", port=9092, security_protocol=0)], rack=None,
                               fenced=False)
    return SimpleNamespace(image=static_image(reg, TOPICS))


@pytest.mark.parametrize("limit, asked", [(4, []), (2000, []), (5000, ["d", "c", "zz"]), (1, ["b", "a"])])
def test_following_the_cursor_visits_every_partition_once(limit, asked):
    s, seen, cursor, answers, errors = state(), [], None, 0, []
    while True:
        resp = handle_describe_topic_partitions(s, T(topics=[T.Topic(name=n) for n in asked],
                                                     response_partition_limit=limit, cursor=cursor), 0)
        answers += 1
        n = sum(len(t.partitions) for t in resp.topics)
        assert n <= min(limit, 2000)
        seen += [(t.name, p.partition_index) for t in resp.topics for p in t.partitions]
        errors += [(t.name, t.error_code) for t in resp.topics if t.error_code]
        assert all(p.leader_id == 1 and p.isr_nodes == [1] for t in resp.topics for p in t.partitions)
        cursor = resp.next_cursor
        if cursor is None:
            break
        assert answers < 10_000
    names = sorted(set(asked) & set(TOPICS)) if asked else sorted(TOPICS)
    assert seen == [(t, p) for t in names for p in range(TOPICS[t])]
    assert errors == ([("zz", 3)] if "zz" in asked else [])


def test_a_cursor_outside_the_asked_topics_is_refused():
    from kraft.protocol.messages.describe_topic_partitions import Cursor
    with pytest.raises(InvalidRequestError):
        handle_describe_topic_partitions(state(), T(topics=[T.Topic(name="a")],
                                                    cursor=Cursor(topic_name="b", partition_index=0)), 0)
