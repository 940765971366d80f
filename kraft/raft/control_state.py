"""The quorum's own state as the log defines it: the voter set and ``kraft.version``
(Kafka's KRaftControlRecordStateMachine, KIP-853).

The voter set is the latest Voters control record in the log or in the snapshot the log
starts from; without one it is the bootstrap set (``controller.quorum.voters``, or the Voters
record of the ``0-0`` bootstrap checkpoint ``kraft storage format --standalone`` writes, which
holds from offset -1). Records take effect when *appended*, not when committed (Raft's
single-server changes), so appends apply them and truncations revert them. ``kraft.version``
is 0 (static quorum) until a KRaftVersion record says 1.

Reads only through the log port and the records codec; no I/O of its own, no roles.
"""

from __future__ import annotations

from kraft.errors import CorruptRecordError
from kraft.raft.voters import VoterSet, VoterSetHistory
from kraft.records import (KRaftVersionRecord, RecordBatch, Voter, VotersRecord, build_control_batch,
                           decode_control_record, encode_control_value)
from kraft.records.format import CONTROL_MASK
from kraft.types import ReplicaKey

# RecordBatch v2 header: base offset 8, length 4, leader epoch 4, magic 1, crc 4,
# attributes 2 (at 21), last offset delta 4 (at 23). Read with int.from_bytes: the core may
# not import struct (tests/raft/test_sans_io.py).
_ATTRIBUTES_AT = 21


def _int(view, pos: int, size: int) -> int:
    return int.from_bytes(view[pos:pos + size], "big", signed=True)


def _header(view, pos: int):
    """(base offset, batch length) of the batch at ``pos``."""
    return _int(view, pos, 8), _int(view, pos + 8, 4)
_READ_CHUNK = 8 * 1024 * 1024
ZERO_DIRECTORY = bytes(16)
KRAFT_VERSION_MAX = 1  # what this build supports: 0 static, 1 dynamic quorum


def control_records(data, first: int = 0, last: int = 1 << 62):
    """``(offset, message)`` for each KRaftVersion/Voters record of the control batches in
    ``data`` whose offsets lie in [first, last]. Data batches are skipped by their header
    alone, so the cost is one header read per batch."""
    view = memoryview(data)
    pos, n = 0, len(view)
    while pos + _ATTRIBUTES_AT + 2 <= n:
        length = _int(view, pos + 8, 4)
        end = pos + 12 + length
        if length <= 0 or end > n:
            break
        # the control bit is in the attributes' low byte: one byte read per data batch
        if view[pos + _ATTRIBUTES_AT + 1] & CONTROL_MASK and first <= _int(view, pos, 8) <= last:
            for r in RecordBatch(view[pos:end]):
                msg = decode_control_record(r.key, r.value)
                if isinstance(msg, (KRaftVersionRecord, VotersRecord)) and first <= r.offset <= last:
                    yield r.offset, msg
        pos = end


def voter_set_of(record: VotersRecord) -> VoterSet:
    return _voters_of(record.voters)


def target_of(record: VotersRecord) -> VoterSet | None:
    """The reassignment target a Voters record carries (seed 002), or None."""
    return None if record.target_voters is None else _voters_of(record.target_voters)


def _voters_of(entries) -> VoterSet:
    keys, endpoints = [], {}
    for v in entries:
        d = bytes(v.directory_id)
        keys.append(ReplicaKey(v.voter_id, None if d == ZERO_DIRECTORY else d))
        endpoints[v.voter_id] = tuple(v.endpoints)
    return VoterSet(keys, endpoints)


def _entries(voters: VoterSet) -> tuple:
    return tuple(Voter(k.id, k.directory_id or ZERO_DIRECTORY, voters.endpoints(k.id), 0, KRAFT_VERSION_MAX)
                 for k in voters.keys())


def voters_record_of(voters: VoterSet, target: VoterSet | None = None) -> VotersRecord:
    return VotersRecord(_entries(voters), target_voters=None if target is None else _entries(target))


def membership_control_batch(voters: VoterSet, kraft_version: int | None, base_offset: int, epoch: int,
                             timestamp: int, target: VoterSet | None = None) -> bytes:
    """Control batches holding (optionally) a KRaftVersion record and a Voters record
    (with the reassignment ``target``, if any), at consecutive offsets from ``base_offset``."""
    out, offset = [], base_offset
    if kraft_version is not None:
        out.append(build_control_batch(KRaftVersionRecord.TYPE, encode_control_value(KRaftVersionRecord(kraft_version)),
                                       base_offset=offset, partition_leader_epoch=epoch, timestamp=timestamp))
        offset += 1
    out.append(build_control_batch(VotersRecord.TYPE, encode_control_value(voters_record_of(voters, target)),
                                   base_offset=offset, partition_leader_epoch=epoch, timestamp=timestamp))
    return b"".join(out)


class ControlState:
    """Voter set and kraft.version at every offset of this replica's log.

    Invariant: the history holds exactly the Voters/KRaftVersion records of the log (and of
    the snapshot it starts from), plus the bootstrap entry at offset -1."""

    def __init__(self, bootstrap: VoterSet):
        self.bootstrap = bootstrap
        self.voters = VoterSetHistory(bootstrap)
        self._kv_offsets = [-1]
        self._kv_levels = [0]
        # The reassignment target (seed 002) of each Voters record, parallel to ``voters``'
        # history: None where a record carries none (no reassignment under way).
        self._targets: list[VoterSet | None] = [None]

    # --- queries --------------------------------------------------------------------
    @property
    def kraft_version(self) -> int:
        return self._kv_levels[-1]

    def kraft_version_at(self, offset: int) -> int:
        level = self._kv_levels[0]
        for o, v in zip(self._kv_offsets, self._kv_levels):
            if o > offset:
                break
            level = v
        return level

    @property
    def target(self) -> VoterSet | None:
        """The voter set a reassignment moves to (the latest Voters record's), or None."""
        return self._targets[-1]

    def target_at(self, offset: int) -> VoterSet | None:
        return self._targets[self.voters.index_at(offset)]

    def voters_from_bootstrap(self) -> bool:
        """Is the voter set the bootstrap one (no Voters record in the log yet)?"""
        return self.voters.last_offset() < 0

    # --- changes --------------------------------------------------------------------
    def apply(self, offset: int, msg) -> None:
        if isinstance(msg, VotersRecord):
            if offset > self.voters.last_offset():
                self.voters.add_at(offset, voter_set_of(msg))
                self._targets.append(target_of(msg))
        elif isinstance(msg, KRaftVersionRecord):
            if offset > self._kv_offsets[-1]:
                self._kv_offsets.append(offset)
                self._kv_levels.append(msg.kraft_version)

    def apply_appended(self, data, first: int, last: int) -> bool:
        """Apply the records of batches appended at offsets [first, last]; True if the voter
        set changed."""
        before = self.voters.last()
        for offset, msg in control_records(data, first, last):
            self.apply(offset, msg)
        return self.voters.last() is not before

    def truncate(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: records at or above it are gone."""
        self.voters.truncate_new_entries(end_offset)
        del self._targets[len(self.voters):]
        while len(self._kv_offsets) > 1 and self._kv_offsets[-1] >= end_offset:
            self._kv_offsets.pop()
            self._kv_levels.pop()

    def load_snapshot(self, data, snapshot_end: int) -> None:
        """The log now starts at a snapshot ending at ``snapshot_end``: its records (if any)
        replace all history; they hold from offset ``snapshot_end - 1``."""
        self.voters.reset(self.bootstrap)
        self._targets = [None]
        self._kv_offsets, self._kv_levels = [-1], [0]
        at = snapshot_end - 1
        for _, msg in control_records(data):
            if isinstance(msg, VotersRecord):
                self.voters.reset(voter_set_of(msg), at)
                self._targets = [target_of(msg)]
            else:
                self._kv_offsets, self._kv_levels = [at], [msg.kraft_version]

    def load(self, log) -> None:
        """Rebuild from a log at start-up: its latest snapshot, then every batch after it."""
        sid = log.latest_snapshot_id()
        if sid is not None:
            reader = log.read_snapshot(sid)
            if reader is not None:
                self.load_snapshot(reader.read(0, reader.size_in_bytes()), sid.offset)
        offset, end = log.start_offset(), log.end_offset()
        while offset < end:
            data = log.read(offset, _READ_CHUNK)
            if not data:
                break
            nxt = offset
            for base, last in _batch_bounds(data):
                nxt = last + 1
            for o, msg in control_records(data, offset):
                self.apply(o, msg)
            if nxt <= offset:
                raise CorruptRecordError(f"no progress reading the log at {offset}")
            offset = nxt


def _batch_bounds(data):
    """(base offset, last offset) of each whole batch in ``data``."""
    view = memoryview(data)
    pos, n = 0, len(view)
    while pos + 61 <= n:
        base, length = _header(view, pos)
        end = pos + 12 + length
        if length <= 0 or end > n:
            break
        delta = _int(view, pos + 23, 4)
        yield base, base + delta
        pos = end
