"""The leader's side of replication: proposals drained from the accumulator into the log,
Fetch requests served (with long poll), FetchSnapshot requests served, and the high
watermark published as follower progress moves it.

The Fetch path is the hot path: it works on whole batches (one ``read`` of raw bytes, no
per-record work), and only valid fetches move a replica's progress. It changes no role
(QuorumState does that) and performs no I/O beyond the log port; answers go out as
``Respond`` effects.
"""

from __future__ import annotations

from typing import Callable

from kraft.errors import ErrorCode, StorageError
from kraft.raft.accumulator import PendingBatch
from kraft.raft.config import RaftConfig
from kraft.raft.effects import Respond
from kraft.raft.leader import LeaderState, ParkedFetch
from kraft.raft.local_log import LocalLog
from kraft.raft.quorum_state import QuorumState
from kraft.raft.rpcs import (directory_bytes, fetch_partition, fetch_response, fetch_snapshot_partition,
                             fetch_snapshot_response, snapshot_id_of)
from kraft.raft.validation import cluster_ok, fetch_position_error, fetch_request_malformed, leader_only_error
from kraft.raft.voters import ReplicaKey
from kraft.records import build_batch

NONE = ErrorCode.NONE
NO_DEADLINE = 1 << 62


class LeaderReplication:
    def __init__(self, node_id: int, quorum: QuorumState, local_log: LocalLog, config: RaftConfig,
                 emit: Callable[[object], None]):
        self.node_id = node_id
        self.quorum = quorum
        self.local_log = local_log
        self.config = config
        self._emit = emit
        # A log read that failed with a storage error, as (fetch offset, reason): counted
        # for the driver to log (no I/O here).
        self.on_commit = None  # callable(high watermark): voter changes waiting to commit
        self.storage_read_errors = 0
        self.last_storage_read_error: tuple | None = None

    # ------------------------------------------------------------ proposals
    def drain_if_due(self, s: LeaderState, now: int) -> int:
        """Append what the accumulator holds once its linger is over; the next deadline."""
        due = s.accumulator.drain_deadline()
        if due is None:
            return NO_DEADLINE
        if now >= due:
            self.drain(s, now)
            return NO_DEADLINE
        return due

    def drain(self, s: LeaderState, now: int) -> None:
        """Everything the accumulator holds goes to the log in one append."""
        pending = s.accumulator.drain()
        if not pending:
            return
        parts = []
        for p in pending:
            if type(p) is PendingBatch:
                parts.append(build_batch(p.values, base_offset=p.base_offset,
                                         partition_leader_epoch=s.epoch, timestamp=now))
            else:
                parts.append(p.data)
        # One bytearray: the log patches offsets and epoch into it in place and keeps it
        # (a bytes join would be copied again to patch).
        data = parts[0] if len(parts) == 1 else bytearray().join(parts)
        first, last = self.local_log.append_as_leader(data, s.epoch)
        s.backlog.appended(last + 1, len(data))
        if first != pending[0].base_offset or last != s.accumulator.next_offset - 1:
            raise AssertionError(f"accumulator offsets {pending[0].base_offset}..{s.accumulator.next_offset - 1}"
                                 f" != log {first}..{last}")
        self.local_log.request_flush()
        self.complete_parked(s, now)

    # ------------------------------------------------------------ high watermark
    def on_flushed(self, s: LeaderState, now: int) -> None:
        if s.update_local(self.local_log.flushed):
            self.on_high_watermark(s, now)

    def on_high_watermark(self, s: LeaderState, now: int) -> None:
        self.local_log.set_high_watermark(s.high_watermark)
        s.backlog.committed(s.high_watermark)
        s.high_watermark_announced(now)
        if self.on_commit is not None:
            self.on_commit(s.high_watermark)
        self.complete_parked(s, now)

    # ------------------------------------------------------------ Fetch
    def handle_fetch_request(self, message, now: int) -> None:
        r = message.body
        q = self.quorum
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            self._emit(Respond(message.handle, fetch_response(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)))
            return
        p = fetch_partition(r)
        if p is None:
            self._emit(Respond(message.handle, fetch_response(ErrorCode.INVALID_REQUEST, -1, -1)))
            return
        if fetch_request_malformed(r.replica_state.replica_id, p, self.node_id):
            self._emit(Respond(message.handle, fetch_response(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)))
            return
        s = q.state
        replica_id = r.replica_state.replica_id
        known = s.hw_sent.get(replica_id, -1) if type(s) is LeaderState else -1
        response, waits = self._try_complete_fetch(r, p, now, r.max_wait_ms > 0)
        if waits and r.max_wait_ms > 0:  # (only a leader's answers may wait)
            # Long poll: answer when data arrives, the high watermark differs from the one
            # this replica knows (after the notify delay), or max wait ends.
            s.hw_sent[replica_id] = known
            s.park(ParkedFetch(message.handle, r, p, now + r.max_wait_ms, known))
        else:
            self._emit(Respond(message.handle, response))

    def _try_complete_fetch(self, r, p, now: int, parks: bool = False):
        """(response, may wait): the answer to a well-formed Fetch ``r`` whose partition is
        ``p``; "may wait" when it is valid but finds no data (a long poll may park it).
        ``parks``: the caller parks a fetch that may wait, so its response is None (most
        fetches park on arrival: building an answer to drop cost each of them)."""
        s = self.quorum.state
        err = leader_only_error(s, p.current_leader_epoch)
        if err is not None:
            return fetch_response(err, s.leader_id, s.epoch), False
        log = self.local_log.log
        fetch_offset = p.fetch_offset
        start = log.start_offset()
        snapshot_id, diverging = fetch_position_error(log, fetch_offset, p.last_fetched_epoch)
        if snapshot_id is not None:
            return fetch_response(NONE, self.node_id, s.epoch, s.high_watermark, start,
                                  snapshot_id=snapshot_id), False
        if diverging is not None:
            return fetch_response(NONE, self.node_id, s.epoch, s.high_watermark, start,
                                  diverging_epoch=diverging), False
        # Valid: the replica's log matches ours below fetch_offset, and it has flushed it.
        end = log.end_offset()
        replica = ReplicaKey(r.replica_state.replica_id, directory_bytes(p.replica_directory_id))
        if replica.directory_id is not None:  # a kraft.version 0 -> 1 upgrade needs the voters' (KIP-853)
            s.fetched_directories[replica.id] = replica.directory_id
        if s.update_replica(replica, fetch_offset, now, end):
            self.on_high_watermark(s, now)
        s.hw_sent[r.replica_state.replica_id] = s.high_watermark  # every answer from here carries it
        if fetch_offset >= end:
            return (None if parks else fetch_response(NONE, self.node_id, s.epoch, s.high_watermark, start)), True
        try:
            records = log.read(fetch_offset, max(0, min(r.max_bytes, p.partition_max_bytes)))
        except StorageError as exc:
            # Our own log failed the read (e.g. a batch failing its CRC on disk): never serve
            # it; the follower backs off and asks again.
            self.storage_read_errors += 1
            self.last_storage_read_error = (fetch_offset, str(exc))
            return fetch_response(ErrorCode.KAFKA_STORAGE_ERROR, self.node_id, s.epoch, s.high_watermark, start), False
        return fetch_response(NONE, self.node_id, s.epoch, s.high_watermark, start, records), not records

    def answer_parked(self, s: LeaderState, now: int) -> int:
        """Answer the parked fetches that are due; the deadline of those still waiting."""
        deadline = NO_DEADLINE
        if s.parked:
            self.complete_parked(s, now)
            hw_due = s.hw_changed_ms + self.config.hw_notify_delay_ms
            for p in s.parked:
                deadline = min(deadline, p.deadline if p.hw_seen == s.high_watermark else min(p.deadline, hw_due))
        return deadline

    def complete_parked(self, s: LeaderState, now: int, force: bool = False) -> None:
        """Answer parked fetches that have data, a new high watermark (after the notify
        delay) or an expired max wait; all of them if ``force`` (the leader stepped down,
        so followers learn the new epoch or leader)."""
        if not s.parked:
            return
        end = self.local_log.log.end_offset()
        hw = s.high_watermark
        hw_due = now >= s.hw_changed_ms + self.config.hw_notify_delay_ms
        keep = []
        for p in s.parked:
            if force or now >= p.deadline or end > p.partition.fetch_offset or (hw != p.hw_seen and hw_due):
                self._emit(Respond(p.handle, self._try_complete_fetch(p.request, p.partition, now)[0]))
            else:
                keep.append(p)
        s.keep_parked(keep)

    # ------------------------------------------------------------ FetchSnapshot
    def handle_fetch_snapshot_request(self, source: int, r, now: int):
        q = self.quorum
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return fetch_snapshot_response(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)
        p, bad = fetch_snapshot_partition(r)
        if bad is not None:
            return fetch_snapshot_response(bad, -1, -1)
        err = leader_only_error(q.state, p.current_leader_epoch)
        if err is not None:
            return fetch_snapshot_response(err, q.leader_id, q.epoch)
        snapshot_id = snapshot_id_of(p.snapshot_id)
        reader = self.local_log.log.read_snapshot(snapshot_id)
        if reader is None:
            return fetch_snapshot_response(ErrorCode.SNAPSHOT_NOT_FOUND, self.node_id, q.epoch)
        size = reader.size_in_bytes()
        if p.position >= size:
            return fetch_snapshot_response(ErrorCode.POSITION_OUT_OF_RANGE, self.node_id, q.epoch)
        q.state.note_fetch_snapshot(ReplicaKey(r.replica_id, directory_bytes(p.replica_directory_id)), now)
        chunk = reader.read(p.position, max(1, r.max_bytes))
        return fetch_snapshot_response(NONE, self.node_id, q.epoch, snapshot_id, size, p.position, chunk)
