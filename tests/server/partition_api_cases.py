"""Cases of the every-advertised-version sweep for the controller's partition-change APIs
(ElectLeaders, AlterPartitionReassignments, AlterPartition): per API, requests that must succeed
and ones that must fail with Kafka's error code. Runs after the CreateTopics sweep, which leaves
the topic ``keep7`` (led by broker 1, the one registered broker) behind."""

from __future__ import annotations

import uuid

from kraft.errors import ErrorCode
from kraft.protocol.messages.alter_partition import AlterPartitionRequest
from kraft.protocol.messages.elect_leaders import ElectLeadersRequest
from kraft.protocol.messages.partition_reassignments import AlterPartitionReassignmentsRequest


def _keep7(node):
    """(topic id, leader epoch, partition epoch) of keep7-0 in the node's image (zeros when the
    node has none: a non-leader answers before looking)."""
    topic = node.controller.image.topics.get_topic_by_name("keep7")
    if topic is None:
        return uuid.UUID(int=(1 << 64) + 1), 0, 0
    p = topic.partitions[0]
    return topic.id, p.leader_epoch, p.partition_epoch


def partition_cases(expect, ok):
    def elect_leaders(node, version):
        TP = ElectLeadersRequest.TopicPartitions

        def req(topic, kind=0):
            return ElectLeadersRequest(election_type=kind, timeout_ms=1000,
                                       topic_partitions=[TP(topic=topic, partitions=[0])])
        cases = [("preferred", req("keep7"), expect(ok, ErrorCode.ELECTION_NOT_NEEDED)),
                 ("unknown", req("nope"), expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]
        if version >= 1:
            cases.append(("unclean", req("keep7", 1), expect(ErrorCode.ELECTION_NOT_NEEDED)))
            cases.append(("bad type", req("keep7", 9), expect(ErrorCode.INVALID_REQUEST)))
        return cases

    def alter_reassignments(node, version):
        T = AlterPartitionReassignmentsRequest.Topic

        def req(replicas, topic="keep7"):
            return AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[T(name=topic, partitions=[
                T.Partition(partition_index=0, replicas=replicas)])])
        return [("same replicas", req([1]), expect(ok)),
                ("unknown broker", req([99]), expect(ErrorCode.INVALID_REPLICA_ASSIGNMENT)),
                ("cancel none", req(None), expect(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)),
                ("unknown topic", req([1], "nope"), expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]

    def alter_partition(node, version):
        tid, leader_epoch, partition_epoch = _keep7(node)
        A = AlterPartitionRequest
        P = A.Topic.Partition

        def req(broker_epoch, partition=0):
            p = P(partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch)
            if version >= 3:
                p.new_isr_with_epochs = [P.BrokerState(broker_id=1, broker_epoch=node.broker_epoch)]
            else:
                p.new_isr = [1]
            t = A.Topic(partitions=[p])
            if version >= 2:
                t.topic_id = tid
            else:
                t.topic_name = "keep7"
            return A(broker_id=1, broker_epoch=broker_epoch, topics=[t])
        return [("same isr", req(node.broker_epoch), expect(ok)),
                ("unknown partition", req(node.broker_epoch, partition=99),
                 expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
                ("stale broker epoch", req(node.broker_epoch + 5), expect(ErrorCode.STALE_BROKER_EPOCH))]

    return {43: elect_leaders, 45: alter_reassignments, 56: alter_partition}
