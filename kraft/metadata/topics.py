"""Topics in the image (Kafka's ``TopicImage``/``TopicsImage``) and their deltas.

Images are immutable by contract: their dicts are never mutated after construction, so a new
image shares every untouched ``TopicImage`` (and every untouched ``PartitionRegistration``)
with the image it came from. Applying a delta copies only the top-level topic dicts and the
partition dicts of topics that changed. Deltas validate each record before changing anything,
so a record that raises :class:`MetadataReplayError` leaves the delta as it was.
This module must not know about record framing or other parts of the image.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraft.errors import MetadataReplayError
from kraft.metadata.partition import PartitionRegistration


class TopicImage(NamedTuple):
    name: str
    id: uuid.UUID
    partitions: dict  # partition id -> PartitionRegistration; never mutated


class TopicsImage(NamedTuple):
    by_id: dict  # uuid -> TopicImage; never mutated
    by_name: dict  # name -> TopicImage; never mutated

    def get_topic(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def get_topic_by_name(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def get_partition(self, topic_id: uuid.UUID, partition_id: int) -> PartitionRegistration | None:
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.by_id.values())


EMPTY_TOPICS = TopicsImage({}, {})


# (id(registration), a PartitionChangeRecord's bytes but for its ids) -> (registration, merged):
# a fence changes hundreds of thousands of partitions from a few dozen shared registrations in
# a few dozen ways, so a merge is mostly a lookup. The entry keeps its registration alive (its
# id is not reused meanwhile); cleared when full (only speed is lost).
_MERGES: dict = {}
_MERGES_LIMIT = 1 << 14


class TopicDelta:
    """Changes to one topic: ``partition_changes`` holds the new registration of each
    partition created or changed in this delta."""

    __slots__ = ("image", "partition_changes")

    def __init__(self, image: TopicImage):
        self.image = image
        self.partition_changes: dict[int, PartitionRegistration] = {}

    def replay_partition(self, record) -> None:
        self.partition_changes[record.partition_id] = PartitionRegistration.from_record(record)

    def replay_change(self, record) -> None:
        pid = record.partition_id
        current = self.partition_changes.get(pid) or self.image.partitions.get(pid)
        if current is None:
            raise MetadataReplayError(f"partition change for unknown partition {self.image.name}-{pid} "
                                      f"(topic id {record.topic_id})")
        self.partition_changes[pid] = current.merge(record)

    def replay_change_body(self, pid: int, body: bytes, record_of) -> None:
        """``replay_change`` of a record known by ``body`` (its value but for its partition and
        topic ids: equal bodies merge equally); ``record_of()`` makes the record on a miss."""
        current = self.partition_changes.get(pid) or self.image.partitions.get(pid)
        if current is None:
            self.replay_change(record_of())  # raises the unknown-partition error
            return
        key = (id(current), body)
        hit = _MERGES.get(key)
        if hit is None or hit[0] is not current:
            merged = current.merge(record_of())
            if len(_MERGES) >= _MERGES_LIMIT:
                _MERGES.clear()
            _MERGES[key] = (current, merged)
        else:
            merged = hit[1]
        self.partition_changes[pid] = merged

    def apply(self) -> TopicImage:
        if not self.partition_changes:
            return self.image
        partitions = dict(self.image.partitions)
        partitions.update(self.partition_changes)
        return TopicImage(self.image.name, self.image.id, partitions)


class TopicsDelta:
    """Created, changed and deleted topics since ``image``. ``changed_topics`` maps the id of
    every topic created or changed to its :class:`TopicDelta`; ``deleted_topic_ids`` holds the
    ids of image topics removed; ``created_topic_ids`` the topics new in this delta."""

    __slots__ = ("image", "changed_topics", "deleted_topic_ids", "created_topic_ids", "_created_names",
                 "_last_id", "_last_delta")

    def __init__(self, image: TopicsImage):
        self.image = image
        self.changed_topics: dict[uuid.UUID, TopicDelta] = {}
        self.deleted_topic_ids: set[uuid.UUID] = set()
        self.created_topic_ids: set[uuid.UUID] = set()
        self._created_names: dict[str, uuid.UUID] = {}
        # Partition records come grouped by topic, and the decoder hands out one uuid object per
        # id: an identity check skips uuid's Python-level __hash__ for all but the first.
        self._last_id = self._last_delta = None

    def _name_owner(self, name: str) -> uuid.UUID | None:
        owner = self._created_names.get(name)
        if owner is not None:
            return owner
        topic = self.image.by_name.get(name)
        if topic is not None and topic.id not in self.deleted_topic_ids:
            return topic.id
        return None

    def replay_topic(self, record) -> None:
        topic_id, name = record.topic_id, record.name
        # The id of a topic removed earlier in this delta may come back: whether the removal and
        # the re-creation land in one delta or two must not change the outcome.
        if topic_id in self.changed_topics or (topic_id in self.image.by_id
                                               and topic_id not in self.deleted_topic_ids):
            raise MetadataReplayError(f"topic id {topic_id} of new topic {name!r} is already in use")
        owner = self._name_owner(name)
        if owner is not None:
            raise MetadataReplayError(f"topic {name!r} already exists with id {owner}")
        self.changed_topics[topic_id] = TopicDelta(TopicImage(name, topic_id, {}))
        self.created_topic_ids.add(topic_id)
        self._created_names[name] = topic_id

    def _topic_delta(self, topic_id: uuid.UUID, what: str) -> TopicDelta:
        if topic_id is self._last_id:
            return self._last_delta
        delta = self.changed_topics.get(topic_id)
        if delta is None:
            topic = self.image.by_id.get(topic_id)
            if topic is None or topic_id in self.deleted_topic_ids:
                raise MetadataReplayError(f"{what} for unknown topic id {topic_id}")
            delta = self.changed_topics[topic_id] = TopicDelta(topic)
        self._last_id, self._last_delta = topic_id, delta
        return delta

    def replay_partition(self, record) -> None:
        delta = self._topic_delta(record.topic_id, f"partition {record.partition_id}")
        delta.replay_partition(record)

    def replay_registration(self, topic_id: uuid.UUID, partition_id: int, registration: PartitionRegistration) -> None:
        """``replay_partition`` for a record already decoded into its registration (the batch
        decoder's fast path, see ``batch_codec.py``): same checks, same outcome."""
        if topic_id is self._last_id:
            delta = self._last_delta
        else:
            delta = self._topic_delta(topic_id, f"partition {partition_id}")
        delta.partition_changes[partition_id] = registration

    def replay_change_body(self, topic_id: uuid.UUID, partition_id: int, body: bytes, record_of) -> None:
        """``replay_partition_change`` of a record known by its body (see TopicDelta's)."""
        delta = self._topic_delta(topic_id, f"partition change of partition {partition_id}")
        delta.replay_change_body(partition_id, body, record_of)

    def replay_partition_change(self, record) -> None:
        delta = self._topic_delta(record.topic_id, f"partition change of partition {record.partition_id}")
        delta.replay_change(record)

    def replay_remove_topic(self, record) -> str:
        """Remove the topic; returns its name (its configs go too, see MetadataDelta)."""
        topic_id = record.topic_id
        self._last_id = self._last_delta = None
        delta = self.changed_topics.pop(topic_id, None)
        if delta is not None:
            name = delta.image.name
            if topic_id in self.created_topic_ids:
                self.created_topic_ids.discard(topic_id)
                self._created_names.pop(name, None)
            else:
                self.deleted_topic_ids.add(topic_id)
            return name
        topic = self.image.by_id.get(topic_id)
        if topic is None or topic_id in self.deleted_topic_ids:
            raise MetadataReplayError(f"cannot remove topic id {topic_id}: no such topic")
        self.deleted_topic_ids.add(topic_id)
        return topic.name

    def apply(self) -> TopicsImage:
        if not self.changed_topics and not self.deleted_topic_ids:
            return self.image
        by_id = dict(self.image.by_id)
        by_name = dict(self.image.by_name)
        for topic_id in self.deleted_topic_ids:
            topic = by_id.pop(topic_id)
            del by_name[topic.name]
        for delta in self.changed_topics.values():
            topic = delta.apply()
            by_id[topic.id] = topic
            by_name[topic.name] = topic
        return TopicsImage(by_id, by_name)
