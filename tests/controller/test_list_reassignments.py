"""ListPartitionReassignments on the controller: a pure read of the image's adding/removing
replicas (Kafka's ``listPartitionReassignments``)."""

from __future__ import annotations

import pytest

from kraft.controller.reassignments import HANDLERS, handle_list_partition_reassignments
from kraft.metadata import PartitionChangeRecord
from kraft.protocol import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
from admin_fixtures import FOO, apply, cluster_image, context

L = ListPartitionReassignmentsRequest


def reassigning_image():
    """foo-1 moving from [1,2,3] to [2,3,4]: replicas [2,3,4,1], adding [4], removing [1]."""
    return apply(cluster_image(), [PartitionChangeRecord(topic_id=FOO, partition_id=1, replicas=[2, 3, 4, 1],
                                                         adding_replicas=[4], removing_replicas=[1])])


def listed(image, topics=None):
    result = handle_list_partition_reassignments(context(image, 0), L(topics=topics))
    assert result.records == [] and result.response.error_code == 0
    return [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions])
            for t in result.response.topics]


def test_handlers_table():
    assert set(HANDLERS) == {46}


def test_null_topics_lists_every_ongoing_reassignment():
    assert listed(reassigning_image()) == [("foo", [(1, [2, 3, 4, 1], [4], [1])])]
    assert listed(cluster_image()) == []


def test_named_topics_and_partitions_filter_and_unknowns_are_left_out():
    image = reassigning_image()
    assert listed(image, [L.Topic(name="foo", partition_indexes=[0, 1, 7])]) == [("foo", [(1, [2, 3, 4, 1], [4], [1])])]
    assert listed(image, [L.Topic(name="foo", partition_indexes=[0])]) == []
    assert listed(image, [L.Topic(name="nope", partition_indexes=[0]), L.Topic(name="bar", partition_indexes=[0])]) \
        == []


def test_finished_reassignment_is_no_longer_listed():
    image = apply(reassigning_image(), [PartitionChangeRecord(topic_id=FOO, partition_id=1, replicas=[2, 3, 4],
                                                              isr=[2, 3, 4], adding_replicas=[], removing_replicas=[])])
    assert listed(image) == []


def test_response_encodes_and_kafka_python_reads_it():
    response = handle_list_partition_reassignments(context(reassigning_image(), 0), L(topics=None)).response
    assert ListPartitionReassignmentsResponse.decode(response.encode(0), 0) == response
    topics = pytest.importorskip("kafka.protocol.admin.topics", reason="kafka-python is not installed")
    theirs = topics.ListPartitionReassignmentsResponse.decode(response.encode(0), version=0)
    [topic] = theirs.topics
    assert (topic.name, topic.partitions[0].adding_replicas, topic.partitions[0].removing_replicas) == ("foo", [4], [1])
