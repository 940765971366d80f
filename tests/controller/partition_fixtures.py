"""Images for the partition-change handler tests (AlterPartition, ElectLeaders,
AlterPartitionReassignments): brokers 1..5 and one topic, built by replaying records."""

from __future__ import annotations

import uuid

from admin_fixtures import apply, broker, context
from kraft.controller.handlers import ERROR_RESPONSES, HANDLERS
from kraft.controller.result import ControllerResult
from kraft.errors import KraftError
from kraft.metadata import EMPTY_IMAGE, FeatureLevelRecord, PartitionRecord, TopicRecord
from kraft.metadata.records import BrokerRegistrationChangeRecord, FenceBrokerRecord

TID = uuid.UUID(int=(1 << 64) + 0x77)
EPOCH = 100  # every broker's epoch


def image_with(replicas=(1, 2, 3), isr=None, leader=None, partitions=1, brokers=(1, 2, 3, 4, 5), fenced=(),
               shutting_down=(), leader_epoch=5, partition_epoch=9, **fields):
    """Brokers (some fenced or in controlled shutdown) and topic ``t`` whose partitions all have
    ``replicas``/``isr``/``leader``."""
    isr = list(replicas if isr is None else isr)
    records = [FeatureLevelRecord(name="metadata.version", feature_level=21)]
    records += [broker(b, EPOCH) for b in brokers]
    records += [FenceBrokerRecord(id=b, epoch=EPOCH) for b in fenced]
    records += [BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=EPOCH, in_controlled_shutdown=1)
                for b in shutting_down]
    records.append(TopicRecord(name="t", topic_id=TID))
    for p in range(partitions):
        records.append(PartitionRecord(partition_id=p, topic_id=TID, replicas=list(replicas), isr=isr,
                                       leader=isr[0] if leader is None else leader, leader_epoch=leader_epoch,
                                       partition_epoch=partition_epoch, **fields))
    return apply(EMPTY_IMAGE, records)


def part(image, pid=0):
    return image.topics.by_id[TID].partitions[pid]


def run(api_key, image, request, version, settings=None):
    """(result, image after its records) — or the whole-request error answer, as the controller
    would send it, when the handler refuses the request."""
    try:
        result = HANDLERS[api_key](context(image, version, settings), request)
    except KraftError as e:
        resp = ERROR_RESPONSES[api_key](request, version, e.code, getattr(e, "message", None))
        return ControllerResult([], resp), image
    return result, apply(image, result.records)
