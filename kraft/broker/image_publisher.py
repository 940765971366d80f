"""Turns a metadata image change into local partition logs (Kafka's broker-side
``ReplicaManager.applyDelta`` for log creation and deletion): a partition that names this
broker among its replicas gets a log; a partition whose topic was removed (or that no longer
names this broker) loses its log (``-delete`` rename, removal in the background). On the
first image after a start (``previous`` empty), local logs the image does not know, or whose
topic id differs, are renamed ``-stray`` instead of deleted, as Kafka does. Leadership and
high watermarks are read from the image by the request handlers; nothing else happens here.

The first image must be a caught-up one (``InitialCatchUp``): a stray is judged by Kafka's
rule (``LogManager.isStrayKraftReplica``), by topic id: a local log is a stray only if the
image has no partition of that topic id and number, or does not name this broker among its
replicas, or the log has no topic id at all.
"""

from __future__ import annotations

import logging

from kraft.broker import partition_dir as names
from kraft.broker.partition_logs import PartitionLogs
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition import LOST_DIR, MIGRATING_DIR, UNASSIGNED_DIR

#: Kafka's DirectoryId.RESERVED: ids that name no real directory
RESERVED_DIRS = frozenset((UNASSIGNED_DIR, LOST_DIR, MIGRATING_DIR))

log = logging.getLogger("kraft.broker.publisher")


class LogChanges:
    """What ``publish_image`` did, for logs and tests."""

    __slots__ = ("created", "deleted", "strays")

    def __init__(self):
        self.created: list[tuple[str, int]] = []
        self.deleted: list[tuple[str, int]] = []
        self.strays: list[tuple[str, int]] = []

    def __repr__(self) -> str:
        return f"LogChanges(created={self.created}, deleted={self.deleted}, strays={self.strays})"


def hosted_partitions(image: MetadataImage, broker_id: int) -> dict:
    """(topic, partition) -> topic id of every partition with ``broker_id`` among its replicas."""
    out = {}
    for topic in image.topics.by_id.values():
        for pid, reg in topic.partitions.items():
            if broker_id in reg.replicas:
                out[(topic.name, pid)] = topic.id
    return out


def assigned_directory(image: MetadataImage, topic_id, partition: int, broker_id: int):
    """The directory id the image assigns to this broker's replica (PartitionRecord
    ``Directories``); None while unassigned (the broker then picks, and tells the controller)."""
    reg = image.topics.by_id[topic_id].partitions[partition]
    d = reg.directories[reg.replicas.index(broker_id)]
    return None if d in RESERVED_DIRS else d


def stray_reason(image: MetadataImage, broker_id: int, topic_id, partition: int) -> str | None:
    """Why a local log of ``topic_id``/``partition`` is a stray in ``image``, None if it is not
    (Kafka's ``isStrayKraftReplica``: by topic id, never by name)."""
    if topic_id is None:
        return "it has no topic id"
    topic = image.topics.by_id.get(topic_id)
    if topic is None:
        return f"topic id {topic_id} is not in the metadata image"
    reg = topic.partitions.get(partition)
    if reg is None:
        return f"topic {topic.name} ({topic_id}) has no partition {partition}"
    if broker_id not in reg.replicas:
        return f"its replicas {list(reg.replicas)} do not include broker {broker_id}"
    return None


def publish_image(logs: PartitionLogs, previous: MetadataImage, image: MetadataImage, broker_id: int, *,
                  first: bool = False, create=None) -> LogChanges:
    """Make the local logs follow ``image``. ``first``: the first caught-up image since the
    broker started (the only one that judges strays). ``create(missing)`` makes the new logs
    (default: ``logs.create_many``, before this returns)."""
    changes = LogChanges()
    if previous is image and not first:
        return changes
    if previous.topics is image.topics and not first:
        return changes
    wanted = hosted_partitions(image, broker_id)
    for plog in list(logs):
        tp = (plog.topic, plog.partition)
        topic_id = wanted.get(tp)
        if topic_id == plog.topic_id:
            # The image's own object from now on: the per-request checks compare by identity
            # first (a log read from disk holds an equal UUID, not the same one).
            plog.topic_id = topic_id
            continue
        if first:
            reason = (stray_reason(image, broker_id, plog.topic_id, plog.partition)
                      or f"the image calls topic id {plog.topic_id} {image.topics.by_id[plog.topic_id].name!r}")
            log.warning("partition %s-%d is a stray (%s): renamed %s", plog.topic, plog.partition, reason,
                        names.STRAY_SUFFIX)
            logs.delete(*tp, suffix=names.STRAY_SUFFIX)
            changes.strays.append(tp)
        else:
            logs.delete(*tp)
            changes.deleted.append(tp)
    # A partition of a failed directory stays missing (KIP-858: the controller moves it away).
    missing = [(tp, topic_id, assigned_directory(image, topic_id, tp[1], broker_id))
               for tp, topic_id in wanted.items() if logs.get(*tp) is None and not logs.is_offline(*tp)]
    if missing:  # at once: a new topic of 1,000 partitions is 6,000 fsyncs
        (create or logs.create_many)(missing)
    changes.created.extend(item[0] for item in missing)
    return changes
