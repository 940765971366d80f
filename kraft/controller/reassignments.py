"""ListPartitionReassignments (46): the reassignments in progress, read from the image (Kafka's
``ReplicationControlManager.listPartitionReassignments``).

A partition is being reassigned while its registration has adding or removing replicas. A null
topic list lists every such partition; a named topic or partition that does not exist, or is not
being reassigned, is simply left out (Kafka answers no error for it). A read: no records.
AlterPartitionReassignments, which writes, belongs with the partition-change logic.
"""

from __future__ import annotations

from kraft.controller.result import ControllerContext, ControllerResult
from kraft.protocol.messages.partition_reassignments import ListPartitionReassignmentsResponse

Topic = ListPartitionReassignmentsResponse.Topic
Partition = Topic.Partition


def _ongoing(topic, partition_ids) -> Topic | None:
    entry = Topic(name=topic.name)
    for partition_id in partition_ids:
        registration = topic.partitions.get(partition_id)
        if registration is None or not (registration.adding_replicas or registration.removing_replicas):
            continue
        entry.partitions.append(Partition(partition_index=partition_id, replicas=list(registration.replicas),
                                          adding_replicas=list(registration.adding_replicas),
                                          removing_replicas=list(registration.removing_replicas)))
    return entry if entry.partitions else None


def handle_list_partition_reassignments(ctx: ControllerContext, request) -> ControllerResult:
    topics = ctx.image.topics
    response = ListPartitionReassignmentsResponse()
    if request.topics is None:
        wanted = [(topic, sorted(topic.partitions)) for _, topic in sorted(topics.by_name.items())]
    else:
        wanted = [(topics.get_topic_by_name(t.name), t.partition_indexes) for t in request.topics]
    for topic, partition_ids in wanted:
        if topic is None:
            continue
        entry = _ongoing(topic, partition_ids)
        if entry is not None:
            response.topics.append(entry)
    return ControllerResult(response=response)


HANDLERS = {46: handle_list_partition_reassignments}


def list_reassignments_error(req, version: int, code: int, message: str | None = None):
    return ListPartitionReassignmentsResponse(error_code=int(code), error_message=message, topics=[])


ERROR_RESPONSES = {46: list_reassignments_error}
