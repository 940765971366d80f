"""The next producer id block in the image (Kafka's ``ProducerIdsImage``/``ProducerIdsDelta``).

Each ``ProducerIdsRecord`` hands a block to a broker and moves ``next_producer_id`` forward;
a record that does not move it forward is a replay error (Kafka's ``ProducerIdControlManager``
refuses it). This module must not know about other parts of the image.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.errors import MetadataReplayError


class ProducerIdsImage(NamedTuple):
    next_producer_id: int  # -1: no block handed out yet


EMPTY_PRODUCER_IDS = ProducerIdsImage(-1)


class ProducerIdsDelta:
    __slots__ = ("image", "next_producer_id")

    def __init__(self, image: ProducerIdsImage):
        self.image = image
        self.next_producer_id = image.next_producer_id

    def replay(self, record) -> None:
        if record.next_producer_id <= self.next_producer_id:
            raise MetadataReplayError(f"next producer id {record.next_producer_id} is not greater than the "
                                      f"current next producer id {self.next_producer_id}")
        self.next_producer_id = record.next_producer_id

    def apply(self) -> ProducerIdsImage:
        if self.next_producer_id == self.image.next_producer_id:
            return self.image
        return ProducerIdsImage(self.next_producer_id)
