"""One partition's registration (Kafka's ``PartitionRegistration``) and how records change it.

A registration is an immutable named tuple of tuples and ints, built from a
``PartitionRecord`` and replaced (never mutated) by ``merge(PartitionChangeRecord)`` with
Kafka's rules: null/-2/-1 fields mean "unchanged", a new leader bumps the leader epoch, every
change bumps the partition epoch. Replica lists repeat across partitions (a handful of brokers,
a handful of orders), so equal tuples are interned, and so are whole registrations (they hold
no partition or topic id: new partitions placed alike are equal): a million partitions then
share a few dozen registrations. That is most of the image's memory, and what the cyclic
garbage collector no longer walks (a million tracked tuples cost every full collection about
a second). This module must not know about topics.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraft.errors import MetadataReplayError

# Kafka's DirectoryId constants.
UNASSIGNED_DIR = uuid.UUID(int=0)
LOST_DIR = uuid.UUID(int=1)
MIGRATING_DIR = uuid.UUID(int=2)

NO_LEADER = -1
NO_LEADER_CHANGE = -2
RECOVERED, RECOVERING = 0, 1  # LeaderRecoveryState
_NO_RECOVERY_CHANGE = -1

_new_tuple = tuple.__new__  # builds a named tuple without its Python-level __new__
_TUPLES: dict[tuple, tuple] = {}
_TUPLES_LIMIT = 1 << 16  # bound the cache; clearing it only costs sharing, never correctness


def intern_tuple(values) -> tuple:
    """An immutable tuple equal to ``values``, shared with earlier equal tuples."""
    t = tuple(values)
    shared = _TUPLES.get(t)
    if shared is None:
        if len(_TUPLES) >= _TUPLES_LIMIT:
            _TUPLES.clear()
        shared = _TUPLES[t] = t
    return shared


_MIGRATING_BY_COUNT: dict[int, tuple] = {}


def migrating_directories(n: int) -> tuple:
    """(MIGRATING,) * n, one object per count for good (hashing uuids runs Python code; the
    native decoder hands out the same objects)."""
    t = _MIGRATING_BY_COUNT.get(n)
    if t is None:
        t = _MIGRATING_BY_COUNT[n] = (MIGRATING_DIR,) * n
    return t


# Registrations by the identities of their interned parts and their ints (hashing the parts
# themselves would hash uuids in Python). Each entry keeps its parts alive, so their ids cannot
# be reused while it exists; parts that are equal but not the interned object only miss.
_REGISTRATIONS: dict[tuple, tuple] = {}


def intern_registration(fields: tuple) -> "PartitionRegistration":
    """The shared ``PartitionRegistration`` of the eleven ``fields`` (parts interned)."""
    r, d, i, rm, ad, leader, lrs, le, pe, elr, lelr = fields
    key = (id(r), id(d), id(i), id(rm), id(ad), leader, lrs, le, pe, id(elr), id(lelr))
    reg = _REGISTRATIONS.get(key)
    if reg is None:
        if len(_REGISTRATIONS) >= _TUPLES_LIMIT:
            _REGISTRATIONS.clear()
        reg = _REGISTRATIONS[key] = _new_tuple(PartitionRegistration, fields)
    return reg


# Directory lists, keyed by the identities of their uuids: the record decoder hands out one
# uuid object per distinct value, and uuid's __eq__/__hash__ are Python code, far slower than
# hashing ids. Each entry keeps its uuids alive, so their ids cannot be reused while it exists.
_DIRECTORIES: dict[tuple, tuple] = {}


def _directories(dirs, n_replicas: int) -> tuple:
    """Kafka's ``defaultToMigrating``: no directories, or all MIGRATING, means MIGRATING each."""
    if not dirs:
        return migrating_directories(n_replicas)
    key = tuple(map(id, dirs))
    entry = _DIRECTORIES.get(key)
    if entry is None:
        kept = tuple(dirs)
        # None stands for "all MIGRATING", whose answer depends on the number of replicas.
        resolved = None if all(d == MIGRATING_DIR for d in kept) else intern_tuple(kept)
        if len(_DIRECTORIES) >= _TUPLES_LIMIT:
            _DIRECTORIES.clear()
        entry = _DIRECTORIES[key] = (resolved, kept)
    return migrating_directories(n_replicas) if entry[0] is None else entry[0]


class PartitionRegistration(NamedTuple):
    replicas: tuple
    directories: tuple  # one per replica
    isr: tuple
    removing_replicas: tuple
    adding_replicas: tuple
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    elr: tuple
    last_known_elr: tuple

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @classmethod
    def from_record(cls, record) -> "PartitionRegistration":
        """From a ``PartitionRecord`` (any version); MetadataReplayError if inconsistent."""
        replicas = record.replicas
        dirs = record.directories
        if dirs and len(dirs) != len(replicas):
            raise MetadataReplayError(f"partition {record.topic_id}:{record.partition_id} has "
                                      f"{len(replicas)} replicas but {len(dirs)} directories")
        lrs = record.leader_recovery_state
        if lrs != RECOVERED and lrs != RECOVERING:
            raise MetadataReplayError(f"partition {record.topic_id}:{record.partition_id}: "
                                      f"unknown leader recovery state {lrs}")
        intern = intern_tuple
        return intern_registration((intern(replicas), _directories(dirs, len(replicas)), intern(record.isr),
                                    intern(record.removing_replicas), intern(record.adding_replicas), record.leader,
                                    lrs, record.leader_epoch, record.partition_epoch,
                                    intern(record.eligible_leader_replicas or ()), intern(record.last_known_elr or ())))

    def merge(self, record) -> "PartitionRegistration":
        """The registration after a ``PartitionChangeRecord`` (Kafka's ``merge``)."""
        replicas = self.replicas if record.replicas is None else intern_tuple(record.replicas)
        if record.directories is None:
            dirs = self.directories
        else:
            if record.replicas is not None and record.directories and len(record.directories) != len(replicas):
                raise MetadataReplayError(f"partition change {record.topic_id}:{record.partition_id} has "
                                          f"{len(replicas)} replicas but {len(record.directories)} directories")
            dirs = record.directories
        dirs = _directories(dirs, len(replicas))
        if len(dirs) != len(replicas):  # new replicas, old (assigned) directories
            raise MetadataReplayError(f"partition change {record.topic_id}:{record.partition_id}: "
                                      f"{len(replicas)} replicas but {len(dirs)} directories")
        if record.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = record.leader, self.leader_epoch + 1
        lrs = record.leader_recovery_state
        if lrs == _NO_RECOVERY_CHANGE:
            lrs = self.leader_recovery_state
        elif lrs != RECOVERED and lrs != RECOVERING:
            raise MetadataReplayError(f"partition change {record.topic_id}:{record.partition_id}: "
                                      f"unknown leader recovery state {lrs}")
        return intern_registration((
            replicas, dirs,
            self.isr if record.isr is None else intern_tuple(record.isr),
            self.removing_replicas if record.removing_replicas is None else intern_tuple(record.removing_replicas),
            self.adding_replicas if record.adding_replicas is None else intern_tuple(record.adding_replicas),
            leader, lrs, leader_epoch, self.partition_epoch + 1,
            self.elr if record.eligible_leader_replicas is None else intern_tuple(record.eligible_leader_replicas),
            self.last_known_elr if record.last_known_elr is None else intern_tuple(record.last_known_elr)))
