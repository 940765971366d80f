"""Brokers and controllers in the image (Kafka's ``ClusterImage``/``ClusterDelta``).

A broker registration carries its epoch, listeners, supported features, rack and its fencing
and controlled-shutdown state. Fence/Unfence/BrokerRegistrationChange records must name a
registered broker at its current epoch (Kafka's ``getBrokerOrThrow``); unregistering needs no
check, as in Kafka. This module must not know about topics or record framing.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraft.errors import MetadataReplayError
from kraft.metadata.partition import intern_tuple


class Endpoint(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: int


class SupportedFeature(NamedTuple):
    name: str
    min_version: int
    max_version: int


class BrokerRegistration(NamedTuple):
    id: int
    epoch: int
    incarnation_id: uuid.UUID
    listeners: tuple  # of Endpoint
    supported_features: tuple  # of SupportedFeature
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool
    directories: tuple  # log directory ids

    @classmethod
    def from_record(cls, r) -> "BrokerRegistration":
        return cls(r.broker_id, r.broker_epoch, r.incarnation_id,
                   tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points),
                   tuple(SupportedFeature(f.name, f.min_supported_version, f.max_supported_version)
                         for f in r.features),
                   r.rack, r.fenced, r.in_controlled_shutdown, r.is_migrating_zk_broker,
                   intern_tuple(r.log_dirs))


class ControllerRegistration(NamedTuple):
    id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool
    listeners: tuple
    supported_features: tuple

    @classmethod
    def from_record(cls, r) -> "ControllerRegistration":
        return cls(r.controller_id, r.incarnation_id, r.zk_migration_ready,
                   tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points),
                   tuple(SupportedFeature(f.name, f.min_supported_version, f.max_supported_version)
                         for f in r.features))


class ClusterImage(NamedTuple):
    brokers: dict  # id -> BrokerRegistration; never mutated
    controllers: dict  # id -> ControllerRegistration; never mutated

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def unfenced_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers.values() if not b.fenced)


EMPTY_CLUSTER = ClusterImage({}, {})

# BrokerRegistrationChangeRecord.fenced: -1 unfence, 0 no change, 1 fence.
_FENCING = {-1: False, 0: None, 1: True}
# BrokerRegistrationChangeRecord.in_controlled_shutdown: 0 no change, 1 in controlled shutdown.
_SHUTDOWN = {0: None, 1: True}


class ClusterDelta:
    """``changed_brokers``/``changed_controllers`` map an id to its new registration, or to
    None when it was unregistered."""

    __slots__ = ("image", "changed_brokers", "changed_controllers")

    def __init__(self, image: ClusterImage):
        self.image = image
        self.changed_brokers: dict[int, BrokerRegistration | None] = {}
        self.changed_controllers: dict[int, ControllerRegistration | None] = {}

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self.changed_brokers:
            return self.changed_brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def _broker_or_raise(self, broker_id: int, epoch: int, action: str) -> BrokerRegistration:
        broker = self.broker(broker_id)
        if broker is None:
            raise MetadataReplayError(f"tried to {action} broker {broker_id}, but that broker was not registered")
        if broker.epoch != epoch:
            raise MetadataReplayError(f"tried to {action} broker {broker_id}, but the given epoch, {epoch}, "
                                      f"did not match the current broker epoch, {broker.epoch}")
        return broker

    def replay_register(self, record) -> None:
        self.changed_brokers[record.broker_id] = BrokerRegistration.from_record(record)

    def replay_unregister(self, record) -> None:
        self.changed_brokers[record.broker_id] = None

    def replay_fence(self, record) -> None:
        broker = self._broker_or_raise(record.id, record.epoch, "fence")
        self.changed_brokers[record.id] = broker._replace(fenced=True)

    def replay_unfence(self, record) -> None:
        broker = self._broker_or_raise(record.id, record.epoch, "unfence")
        self.changed_brokers[record.id] = broker._replace(fenced=False)

    def replay_registration_change(self, record) -> None:
        broker = self._broker_or_raise(record.broker_id, record.broker_epoch, "change")
        if record.fenced not in _FENCING:
            raise MetadataReplayError(f"unknown value for fenced: {record.fenced}")
        if record.in_controlled_shutdown not in _SHUTDOWN:
            raise MetadataReplayError(f"unknown value for in_controlled_shutdown: {record.in_controlled_shutdown}")
        changed = broker
        fenced = _FENCING[record.fenced]
        if fenced is not None:
            changed = changed._replace(fenced=fenced)
        if _SHUTDOWN[record.in_controlled_shutdown]:
            changed = changed._replace(in_controlled_shutdown=True)
        if record.log_dirs:
            changed = changed._replace(directories=intern_tuple(record.log_dirs))
        if changed != broker:
            self.changed_brokers[record.broker_id] = changed

    def replay_register_controller(self, record) -> None:
        self.changed_controllers[record.controller_id] = ControllerRegistration.from_record(record)

    def apply(self) -> ClusterImage:
        brokers = self.image.brokers
        if self.changed_brokers:
            brokers = dict(brokers)
            for broker_id, reg in self.changed_brokers.items():
                if reg is None:
                    brokers.pop(broker_id, None)
                else:
                    brokers[broker_id] = reg
        controllers = self.image.controllers
        if self.changed_controllers:
            controllers = dict(controllers)
            for controller_id, reg in self.changed_controllers.items():
                if reg is None:
                    controllers.pop(controller_id, None)
                else:
                    controllers[controller_id] = reg
        if brokers is self.image.brokers and controllers is self.image.controllers:
            return self.image
        return ClusterImage(brokers, controllers)
