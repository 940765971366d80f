"""Replication RPCs of the Raft core: Fetch (leader side with long-poll, follower side with
divergence handling) and FetchSnapshot.

A mixin of ``RaftCore``, split out to keep files small. The leader's Fetch path is the hot
path: it works on whole batches (one ``read`` of raw bytes, no per-record work), and only
valid fetches move a replica's progress. No I/O beyond the log port.
"""

from __future__ import annotations

from kraft.errors import ErrorCode, KraftError, StorageError
from kraft.raft.effects import Respond
from kraft.raft.leader import LeaderState, ParkedFetch
from kraft.raft.messages import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.raft.roles import FollowerState
from kraft.raft.voters import ReplicaKey

NONE = ErrorCode.NONE


class ReplicationRpcs:
    # ------------------------------------------------------------ building requests
    def _build_fetch(self) -> FetchRequest:
        log = self.log
        return FetchRequest(self.node_id, self.quorum.epoch, log.end_offset(), log.last_fetched_epoch(),
                            self.config.fetch_max_wait_ms, self.config.fetch_max_bytes, -1,
                            self.local.directory_id, self.config.cluster_id)

    def _build_fetch_or_snapshot(self):
        s = self.quorum.state
        w = s.fetching_snapshot
        if w is None:
            return self._build_fetch()
        return FetchSnapshotRequest(self.node_id, s.epoch, w.snapshot_id, w.size_in_bytes(),
                                    self.config.fetch_snapshot_max_bytes, self.local.directory_id,
                                    self.config.cluster_id)

    def _leader_only_error(self, request_epoch: int):
        """Kafka validateLeaderOnlyRequest: an error code, or None if we lead that epoch."""
        s = self.quorum.state
        if request_epoch < s.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request_epoch > s.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if type(s) is not LeaderState or s.resign_requested:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    # ------------------------------------------------------------ Fetch, leader side
    def _handle_fetch_request(self, message, now: int) -> None:
        r = message.body
        if not self._cluster_ok(r.cluster_id):
            self._effects.append(Respond(message.handle, FetchResponse(
                ErrorCode.INCONSISTENT_CLUSTER_ID, self.quorum.leader_id, self.quorum.epoch)))
            return
        if (r.max_wait_ms < 0 or r.fetch_offset < 0 or r.last_fetched_epoch < 0
                or r.last_fetched_epoch > r.current_leader_epoch or r.replica_id == self.node_id):
            self._effects.append(Respond(message.handle, FetchResponse(
                ErrorCode.INVALID_REQUEST, self.quorum.leader_id, self.quorum.epoch)))
            return
        response = self._try_complete_fetch(message.source, r, now)
        s = self.quorum.state
        if (response.error_code != NONE or response.records or r.max_wait_ms == 0
                or response.diverging_epoch is not None or response.snapshot_id is not None):
            self._effects.append(Respond(message.handle, response))
        else:
            # Long poll: answer when data arrives, the high watermark moves, or max wait ends.
            s.parked.append(ParkedFetch(message.handle, message.source, r, now + r.max_wait_ms,
                                        s.high_watermark))

    def _try_complete_fetch(self, source: int, r: FetchRequest, now: int) -> FetchResponse:
        err = self._leader_only_error(r.current_leader_epoch)
        s = self.quorum.state
        if err is not None:
            return FetchResponse(err, s.leader_id, s.epoch)
        log = self.log
        fetch_offset = r.fetch_offset
        start = log.start_offset()
        if start > 0:
            earliest = log.earliest_snapshot_id()
            # Kafka ReplicatedLog.validateOffsetAndEpoch: the epoch cache cannot judge a
            # position below the earliest snapshot (its entries were cut at the log start),
            # so such a replica must load the latest snapshot instead. With the log intact
            # from offset 0 the cache can judge everything.
            if earliest is not None and (
                    fetch_offset < start
                    or (fetch_offset == start and r.last_fetched_epoch != earliest.epoch)
                    or r.last_fetched_epoch < earliest.epoch):
                return FetchResponse(NONE, self.node_id, s.epoch, s.high_watermark, start,
                                     snapshot_id=log.latest_snapshot_id())
        found = log.end_offset_for_epoch(r.last_fetched_epoch)
        if found.epoch != r.last_fetched_epoch or found.offset < fetch_offset:
            return FetchResponse(NONE, self.node_id, s.epoch, s.high_watermark, start,
                                 diverging_epoch=EpochEndOffset(found.epoch, found.offset))
        # Valid: the replica's log matches ours below fetch_offset, and it has flushed it.
        if s.update_replica(ReplicaKey(r.replica_id, r.replica_directory_id), fetch_offset, now,
                            log.end_offset()):
            self._on_leader_high_watermark(s, now)
        try:
            records = log.read(fetch_offset, r.max_bytes) if fetch_offset < log.end_offset() else b""
        except StorageError as exc:
            # Our own log failed the read (e.g. a batch failing its CRC on disk): never serve
            # it; the follower backs off and asks again. Counted for the driver to log.
            self.storage_read_errors += 1
            self.last_storage_read_error = (fetch_offset, str(exc))
            return FetchResponse(ErrorCode.KAFKA_STORAGE_ERROR, self.node_id, s.epoch, s.high_watermark, start)
        return FetchResponse(NONE, self.node_id, s.epoch, s.high_watermark, start, records)

    def _complete_parked(self, s: LeaderState, now: int, force: bool = False) -> None:
        if not s.parked:
            return
        end = self.log.end_offset()
        hw = s.high_watermark
        hw_due = now >= s.hw_changed_ms + self.config.hw_notify_delay_ms
        keep = []
        for p in s.parked:
            if force or now >= p.deadline or end > p.request.fetch_offset or (hw != p.hw_seen and hw_due):
                self._effects.append(Respond(p.handle, self._try_complete_fetch(p.source, p.request, now)))
            else:
                keep.append(p)
        s.parked = keep

    # ------------------------------------------------------------ Fetch, follower side
    def _handle_fetch_response(self, source: int, request: FetchRequest, r: FetchResponse, now: int) -> bool:
        handled = self._common_response(r.error_code, r.leader_id, r.leader_epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if not isinstance(s, FollowerState) or s.leader_id != source or request.current_leader_epoch != s.epoch:
            return False
        log = self.log
        if r.diverging_epoch is not None:
            d = r.diverging_epoch
            if d.epoch < 0 or d.end_offset < 0:
                return False
            self._truncate(self._divergence_truncation_offset(d))
        elif r.snapshot_id is not None:
            sid = r.snapshot_id
            if sid.epoch < 0 or sid.offset < 0:
                return False
            writer = log.create_snapshot(sid)
            if writer is not None:
                s.fetching_snapshot = writer
            elif log.truncate_to_latest_snapshot():
                self._on_snapshot_installed(s, log.latest_snapshot_id())
        else:
            if request.fetch_offset != log.end_offset():
                return False  # our log moved since we asked: ask again
            if r.records and not self._append_as_follower(r.records):
                return False  # corrupt data: the log is unchanged, retry after backoff
            if r.high_watermark > s.leader_high_watermark:
                s.leader_high_watermark = r.high_watermark
            self._update_follower_high_watermark(s)
        s.last_fetch_ok_ms = now
        s.fetch_deadline = now + self.config.fetch_timeout_ms
        return True

    def _divergence_truncation_offset(self, d: EpochEndOffset) -> int:
        """Kafka's truncateToEndOffset: cut where our copy of the leader's epoch ends."""
        log = self.log
        if d.epoch == 0:
            return min(d.end_offset, log.end_offset())
        local = log.end_offset_for_epoch(d.epoch)
        if local.epoch == d.epoch:
            return min(local.offset, d.end_offset)
        return max(local.offset, 0)

    # ------------------------------------------------------------ FetchSnapshot
    def _handle_fetch_snapshot_request(self, source: int, r: FetchSnapshotRequest, now: int) -> FetchSnapshotResponse:
        q = self.quorum
        if not self._cluster_ok(r.cluster_id):
            return FetchSnapshotResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)
        err = self._leader_only_error(r.current_leader_epoch)
        if err is not None:
            return FetchSnapshotResponse(err, q.leader_id, q.epoch)
        reader = self.log.read_snapshot(r.snapshot_id)
        if reader is None:
            return FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, self.node_id, q.epoch)
        size = reader.size_in_bytes()
        if r.position < 0 or r.position >= size:
            return FetchSnapshotResponse(ErrorCode.POSITION_OUT_OF_RANGE, self.node_id, q.epoch)
        q.state.note_fetch_snapshot(ReplicaKey(r.replica_id, r.replica_directory_id), now)
        chunk = reader.read(r.position, max(1, r.max_bytes))
        return FetchSnapshotResponse(NONE, self.node_id, q.epoch, r.snapshot_id, size, r.position, chunk)

    def _handle_fetch_snapshot_response(self, source: int, request, r: FetchSnapshotResponse, now: int) -> bool:
        handled = self._common_response(r.error_code, r.leader_id, r.leader_epoch, now)
        if handled is not None and r.error_code not in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
            return handled
        s = self.quorum.state
        if not isinstance(s, FollowerState) or s.leader_id != source or request.current_leader_epoch != s.epoch:
            return False
        w = s.fetching_snapshot
        if r.error_code != NONE or w is None or r.snapshot_id != w.snapshot_id:
            # The leader no longer has it (or we lost track): start over with a Fetch.
            s.fetching_snapshot = None
            s.fetch_deadline = now + self.config.fetch_timeout_ms
            return r.error_code == NONE
        if r.position != w.size_in_bytes() or r.size <= 0 or not r.unaligned_records:
            return False
        w.append(r.unaligned_records)
        s.last_fetch_ok_ms = now
        s.fetch_deadline = now + self.config.fetch_timeout_ms
        if w.size_in_bytes() >= r.size:
            try:
                w.freeze()  # validates the whole snapshot before making it visible
            except KraftError:
                # Corrupt in transit (or the leader's file changed under us): drop it and
                # start over with a Fetch, which will point us at the snapshot again.
                abort = getattr(w, "abort", None)
                if abort is not None:
                    abort()
                s.fetching_snapshot = None
                return False
            s.fetching_snapshot = None
            if not self.log.truncate_to_latest_snapshot():
                raise AssertionError(f"snapshot {w.snapshot_id} installed but the log was not reset")
            self._on_snapshot_installed(s, w.snapshot_id)
        return True
