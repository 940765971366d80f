"""The active controller of the replication simulator: the real broker-lifecycle and
AlterPartition handlers (``broker_handlers``, ``alter_partition``: Kafka's rules for
registration, fencing, ISR changes and election from the ISR, ``partition_change.build``)
over a ``MetadataImage`` kept by replaying their records, with ``BrokerLeases`` deciding when a
silent broker is fenced. Records commit as soon as they are written (the controller quorum's
own Raft is simulated elsewhere); brokers read them by pulling ``records[offset:]`` over the
simulated network, so each broker's image lags by a network delay or a partition.

Creates the one test topic directly (TopicRecord + PartitionRecords) once every broker is
registered and unfenced. Never crashes. No real I/O or time.
"""

from __future__ import annotations

import uuid

from kraft.controller.alter_partition import alter_partition_error, handle_alter_partition
from kraft.controller.api_error import ApiError
from kraft.controller.record_cache import expand_records
from kraft.controller.broker_handlers import (broker_heartbeat_error, broker_registration_error, fence_records,
                                              handle_broker_heartbeat, handle_broker_registration)
from kraft.controller.leases import BrokerLeases
from kraft.controller.result import ControllerContext
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import EMPTY_IMAGE
from kraft.metadata.records import PartitionRecord, RegisterBrokerRecord, TopicRecord
from kraft.protocol import AlterPartitionRequest
from kraft.protocol.messages.broker_lifecycle import BrokerHeartbeatRequest, BrokerRegistrationRequest

CLUSTER_ID = "replsim"
TOPIC = "t"
#: The versions the simulated brokers speak (AlterPartition v3 carries broker epochs).
VERSIONS = {BrokerRegistrationRequest: 2, BrokerHeartbeatRequest: 1, AlterPartitionRequest: 2}
_HANDLERS = {BrokerRegistrationRequest: (handle_broker_registration, broker_registration_error),
             BrokerHeartbeatRequest: (handle_broker_heartbeat, broker_heartbeat_error),
             AlterPartitionRequest: (handle_alter_partition, alter_partition_error)}


class SimController:
    def __init__(self, broker_ids, *, partitions: int, replication_factor: int, settings: dict,
                 session_timeout_ms: int, rng):
        self.broker_ids = sorted(broker_ids)
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.settings = dict(settings)
        self.rng = rng
        self.image = EMPTY_IMAGE
        self.records: list = []  # the committed metadata log (offset = index)
        self.leases = BrokerLeases(session_timeout_ms)
        self.topic_id = uuid.UUID(int=rng.getrandbits(128))
        self.topic_created = False
        self.fenced_by_lease = 0
        self.on_records = None  # on_records(records): the checks see every committed record

    # --- the log ---------------------------------------------------------------------------------
    def write(self, records) -> None:
        if not records:
            return
        records = list(expand_records(records))
        delta = MetadataDelta(self.image)
        for r in records:
            if isinstance(r, RegisterBrokerRecord):
                self.leases.registered_at[r.broker_id] = len(self.records)
            self.records.append(r)
            delta.replay(r)
        self.image = delta.apply()
        if self.on_records is not None:
            self.on_records(records)

    @property
    def next_offset(self) -> int:
        return len(self.records)

    # --- requests --------------------------------------------------------------------------------
    def handle(self, request, now_ms: int):
        """The answer to a broker's request (its records already committed)."""
        kind = type(request)
        handler, error = _HANDLERS[kind]
        version = VERSIONS[kind]
        if kind is BrokerHeartbeatRequest:
            b = self.image.cluster.brokers.get(request.broker_id)
            if b is not None and b.epoch == request.broker_epoch:
                self.leases.touch(request.broker_id, now_ms, request.current_metadata_offset)
        ctx = ControllerContext(self.image, version, now_ms, self.settings, node_id=0, cluster_id=CLUSTER_ID,
                                leases=self.leases, next_offset=self.next_offset)
        try:
            result = handler(ctx, request)
        except ApiError as exc:
            return error(request, version, int(exc.code), str(exc))
        self.write(result.records)
        if result.steps is not None:  # the rest of the unit, a step at a time (all at once here)
            done = False
            while not done:
                records, done = result.steps(self.image)
                self.write(records)
        if kind is BrokerRegistrationRequest and not result.records:
            pass  # a retry of the same incarnation
        elif kind is BrokerRegistrationRequest:
            self.leases.touch(request.broker_id, now_ms)
        return result.response

    # --- time ------------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """Fence brokers whose lease ran out (Kafka's ``BrokerHeartbeatManager``), and create
        the topic once every broker is up."""
        brokers = self.image.cluster.brokers
        live = [b for b in sorted(brokers) if not brokers[b].fenced]
        expired = self.leases.expired(live, now_ms)
        if expired:
            self.fenced_by_lease += len(expired)
            self.write(fence_records(self.image, expired, self.settings))
        if not self.topic_created and len(live) == len(self.broker_ids) and not expired:
            self._create_topic()

    def _create_topic(self) -> None:
        self.topic_created = True
        records = [TopicRecord(name=TOPIC, topic_id=self.topic_id)]
        for p in range(self.partitions):
            replicas = self.rng.sample(self.broker_ids, self.replication_factor)
            records.append(PartitionRecord(partition_id=p, topic_id=self.topic_id, replicas=replicas, isr=replicas,
                                           removing_replicas=[], adding_replicas=[], leader=replicas[0],
                                           leader_epoch=0, partition_epoch=0))
        self.write(records)
