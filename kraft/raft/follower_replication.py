"""The follower's (and observer's) side of replication: Fetch and FetchSnapshot requests
built and sent, responses applied to the local log (append, truncate on divergence, install
a snapshot), the follower's high watermark, and leader discovery for observers.

A follower never reports or commits an offset it has not flushed and validated. Roles change
only through ``Transitions`` or named methods on ``FollowerState``. No I/O beyond the log
port.
"""

from __future__ import annotations

from kraft.errors import ErrorCode, KraftError
from kraft.raft.config import RaftConfig
from kraft.raft.local_log import LocalLog
from kraft.raft.quorum_state import QuorumState
from kraft.raft.requests import Outbox
from kraft.protocol import UpdateRaftVoterRequest
from kraft.raft.control_state import KRAFT_VERSION_MAX
from kraft.raft.rpcs import directory_uuid, fetch_request, fetch_snapshot_request, response_partition
from kraft.raft.roles import FollowerState
from kraft.raft.transitions import Transitions
from kraft.raft.voters import ReplicaKey, VoterSetHistory
from kraft.types import OffsetAndEpoch

NONE = ErrorCode.NONE
NO_DEADLINE = 1 << 62
DISCOVERY_INTERVAL_MS = 100


class FollowerReplication:
    def __init__(self, local: ReplicaKey, quorum: QuorumState, local_log: LocalLog,
                 voter_history: VoterSetHistory, outbox: Outbox, transitions: Transitions,
                 config: RaftConfig, bootstrap_ids: tuple = ()):
        self.local = local
        self.node_id = local.id
        self.quorum = quorum
        self.local_log = local_log
        self.voter_history = voter_history
        self.outbox = outbox
        self.transitions = transitions
        self.config = config
        self.bootstrap_ids = bootstrap_ids
        # KIP-853: this replica's own listeners; a voter whose Voters-record endpoints differ
        # (it restarted on another address) asks the leader to update them (UpdateRaftVoter).
        self.local_endpoints: tuple = ()
        self.control = None  # ControlState, set by the core
        self._update_due = 0
        self._bootstrap_cursor = 0
        self._discovery_due = 0

    # ------------------------------------------------------------ timers
    def poll_follower(self, s: FollowerState, now: int) -> int:
        voter = self.quorum.is_electable()
        if now >= s.fetch_deadline:
            if voter:
                self.transitions.become_prospective(now)
                return now
            # An observer that lost its leader asks any voter who leads now.
            return min(self.fetch_from_any_voter(now), now + self.config.fetch_timeout_ms)
        deadline = s.fetch_deadline
        # The next Fetch claims our end offset: it is decided now, while the flush that makes
        # the end durable runs, and leaves once that flush completes (Send.after_flushed),
        # so the driver can send it without waiting for this core to hear of the flush.
        gate = self.local_log.durable_once_flushed()
        if gate is not None:
            deadline = min(deadline, self.outbox.send_if_ready(
                s.leader_id, lambda: self._build_fetch_or_snapshot(now), now, gate))
        return deadline

    def poll_observer(self, now: int) -> int:
        """An unattached observer looks for the leader."""
        return min(self.fetch_from_any_voter(now), now + self.config.fetch_timeout_ms)

    def fetch_from_any_voter(self, now: int) -> int:
        """Leader discovery for observers: one Fetch at a time, round robin over the bootstrap
        servers (default: the voters), at most every DISCOVERY_INTERVAL_MS (a node that is
        not the leader answers with what it knows of the leader)."""
        ids = sorted(set(self.bootstrap_ids or self.voter_history.last().ids) - {self.node_id})
        if not ids or not self.local_log.position_durable():
            return NO_DEADLINE
        if now < self._discovery_due:
            return self._discovery_due
        requests = self.outbox.requests
        busy = [d for d in ids if requests.has_in_flight(d) and not requests.is_ready(d, now)]
        if busy:
            return min(requests.ready_at(d) for d in busy)
        for _ in range(len(ids)):
            dest = ids[self._bootstrap_cursor % len(ids)]
            self._bootstrap_cursor += 1
            if requests.is_ready(dest, now):
                self.outbox.send(dest, self._build_fetch(), now)
                self._discovery_due = now + DISCOVERY_INTERVAL_MS
                return self._discovery_due
        return max(now + 1, min(requests.ready_at(d) for d in ids))

    # ------------------------------------------------------------ building requests
    def _build_fetch(self):
        log = self.local_log.log
        return fetch_request(self.node_id, self.quorum.epoch, log.end_offset(), log.last_fetched_epoch(),
                            self.config.fetch_max_wait_ms, self.config.fetch_max_bytes, -1,
                            self.local.directory_id, self.config.cluster_id)

    def _endpoints_stale(self, s: FollowerState) -> bool:
        c = self.control
        return (bool(self.local_endpoints) and c is not None and c.kraft_version >= 1 and s.last_fetch_ok_ms >= 0
                and self.quorum.is_voter() and c.voters.last().endpoints(self.node_id) != self.local_endpoints)

    def _build_update_voter(self, s: FollowerState):
        W = UpdateRaftVoterRequest
        return W(cluster_id=self.config.cluster_id, current_leader_epoch=s.epoch, voter_id=self.node_id,
                 voter_directory_id=directory_uuid(self.local.directory_id),
                 listeners=[W.Listener(name=e.name, host=e.host, port=e.port) for e in self.local_endpoints],
                 kraft_version_feature=W.KRaftVersionFeature(min_supported_version=0,
                                                             max_supported_version=KRAFT_VERSION_MAX))

    def _build_fetch_or_snapshot(self, now: int = -1):
        s = self.quorum.state
        w = s.fetching_snapshot
        if w is None:
            if now >= self._update_due and self._endpoints_stale(s):
                # In place of one Fetch (one request in flight to the leader), at most once
                # per fetch timeout while our listeners differ from the Voters record's.
                self._update_due = now + self.config.fetch_timeout_ms
                return self._build_update_voter(s)
            return self._build_fetch()
        return fetch_snapshot_request(self.node_id, s.epoch, w.snapshot_id, w.size_in_bytes(),
                                    self.config.fetch_snapshot_max_bytes, self.local.directory_id,
                                    self.config.cluster_id)

    # ------------------------------------------------------------ high watermark
    def update_high_watermark(self, s: FollowerState) -> None:
        # Only what the leader says is committed *and* we hold durably and have validated.
        hw = min(s.leader_high_watermark, self.local_log.flushed)
        if s.advance_high_watermark(hw):
            self.local_log.set_high_watermark(hw)

    def _snapshot_installed(self, s: FollowerState, snapshot_id: OffsetAndEpoch) -> None:
        s.advance_high_watermark(snapshot_id.offset)  # a snapshot is only taken at a committed offset
        self.local_log.snapshot_installed(snapshot_id)

    # ------------------------------------------------------------ Fetch
    def handle_fetch_response(self, source: int, request, r, now: int) -> bool:
        p = response_partition(r)
        if r.error_code or p is None:
            return False
        leader = p.current_leader
        handled = self.transitions.common_response(p.error_code, leader.leader_id, leader.leader_epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        asked = request.topics[0].partitions[0]
        if not isinstance(s, FollowerState) or asked.current_leader_epoch != s.epoch:
            return False
        if s.leader_id != source and not (source < 0 and leader.leader_id == s.leader_id
                                          and leader.leader_epoch == s.epoch):
            # Only the leader's answers carry data. A bootstrap server (negative id) that
            # answers as the leader of our epoch is the leader under another name.
            return False
        log = self.local_log.log
        d, sid = p.diverging_epoch, p.snapshot_id
        if d.epoch >= 0:
            if d.end_offset < 0:
                return False
            self.local_log.truncate(self._divergence_truncation_offset(d.epoch, d.end_offset))
        elif sid.end_offset >= 0:
            if sid.epoch < 0:
                return False
            snapshot_id = OffsetAndEpoch(sid.end_offset, sid.epoch)
            writer = log.create_snapshot(snapshot_id)
            if writer is not None:
                s.start_snapshot_download(writer)
            elif log.truncate_to_latest_snapshot():
                self._snapshot_installed(s, log.latest_snapshot_id())
        else:
            if asked.fetch_offset != log.end_offset():
                return False  # our log moved since we asked: ask again
            records = p.records
            if records and not self.local_log.append_as_follower(records, self.quorum.leader_id, self.quorum.epoch):
                return False  # corrupt data: the log is unchanged, retry after backoff
            s.note_leader_high_watermark(p.high_watermark)
            self.update_high_watermark(s)
        s.fetch_succeeded(now)
        return True

    def _divergence_truncation_offset(self, epoch: int, end_offset: int) -> int:
        """Kafka's truncateToEndOffset: cut where our copy of the leader's epoch ends."""
        log = self.local_log.log
        if epoch == 0:
            return min(end_offset, log.end_offset())
        local = log.end_offset_for_epoch(epoch)
        if local.epoch == epoch:
            return min(local.offset, end_offset)
        return max(local.offset, 0)

    # ------------------------------------------------------------ FetchSnapshot
    def handle_fetch_snapshot_response(self, source: int, request, r, now: int) -> bool:
        p = response_partition(r)
        if r.error_code or p is None:
            return False
        error = p.error_code
        leader = p.current_leader
        handled = self.transitions.common_response(error, leader.leader_id, leader.leader_epoch, now)
        if handled is not None and error not in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
            return handled
        s = self.quorum.state
        if (not isinstance(s, FollowerState) or s.leader_id != source
                or request.topics[0].partitions[0].current_leader_epoch != s.epoch):
            return False
        w = s.fetching_snapshot
        sid = p.snapshot_id
        if error != NONE or w is None or (sid.end_offset, sid.epoch) != (w.snapshot_id.offset, w.snapshot_id.epoch):
            # The leader no longer has it (or we lost track): start over with a Fetch.
            s.restart_fetching(now)
            return error == NONE
        chunk = p.unaligned_records
        if p.position != w.size_in_bytes() or p.size <= 0 or not chunk:
            return False
        w.append(chunk)
        s.fetch_succeeded(now)
        if w.size_in_bytes() >= p.size:
            try:
                w.freeze()  # validates the whole snapshot before making it visible
            except KraftError:
                # Corrupt in transit (or the leader's file changed under us): drop it and
                # start over with a Fetch, which will point us at the snapshot again.
                abort = getattr(w, "abort", None)
                if abort is not None:
                    abort()
                s.end_snapshot_download()
                return False
            s.end_snapshot_download()
            if not self.local_log.log.truncate_to_latest_snapshot():
                raise AssertionError(f"snapshot {w.snapshot_id} installed but the log was not reset")
            self._snapshot_installed(s, w.snapshot_id)
        return True
