"""Request validation for the Raft core, in one place: cluster id checks, the KIP-853 voter
key check, leader-only requests, and the Fetch validation order of REFERENCE.md section 5.
(That a request addresses exactly our one partition is checked in ``rpcs``.)

Pure functions over a request (Kafka's protocol objects, with the one partition already
picked out) and what the replica knows (its config, state or log port);
they answer with a Kafka error code or a verdict and change nothing. No I/O beyond reads
through the log port.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.raft.leader import LeaderState
from kraft.raft.voters import ReplicaKey
from kraft.types import OffsetAndEpoch


def cluster_ok(ours, theirs) -> bool:
    """A request without a cluster id is accepted (as Kafka does)."""
    return theirs is None or ours is None or theirs == ours


def voter_key_ok(local: ReplicaKey, voter_id: int, directory_id) -> bool:
    """Was this request meant for this replica (KIP-853 voter key)? -1 = unspecified."""
    if voter_id < 0:
        return True
    return local.matches(ReplicaKey(voter_id, directory_id))


def vote_request_malformed(p) -> bool:
    """Kafka's VoteRequest sanity checks (INVALID_REQUEST) on its partition ``p``. A pre-vote
    carries the prospective's current epoch (``replica_epoch``); a real vote a bumped one."""
    bad_epoch = p.last_offset_epoch > p.replica_epoch if p.pre_vote else p.last_offset_epoch >= p.replica_epoch
    return p.last_offset < 0 or p.last_offset_epoch < 0 or bad_epoch or p.replica_id < 0


def leader_only_error(state, request_epoch: int):
    """Kafka validateLeaderOnlyRequest: an error code, or None if we lead that epoch."""
    if request_epoch < state.epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request_epoch > state.epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if type(state) is not LeaderState or state.resign_requested:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return None


def fetch_request_malformed(replica_id: int, p, local_id: int) -> bool:
    """Step 1 of the Fetch validation order, on the request's partition ``p``: INVALID_REQUEST
    for negative offsets or epochs, a last fetched epoch above the leader epoch (a Fetch
    older than v12 has none: -1), or a fetch from ourselves."""
    return (p.fetch_offset < 0 or p.last_fetched_epoch < 0
            or p.last_fetched_epoch > p.current_leader_epoch or replica_id == local_id)


def fetch_position_error(log, fetch_offset: int, last_fetched_epoch: int
                         ) -> tuple[OffsetAndEpoch | None, OffsetAndEpoch | None]:
    """Steps 2 and 3 of the Fetch validation order, for a fetch the leader accepted:
    ``(snapshot_id, None)`` when the replica must load a snapshot, ``(None, diverging)``
    when its log diverges from ours (where our copy of its last fetched epoch ends),
    ``(None, None)`` when it is valid (its log matches ours
    below ``fetch_offset``)."""
    start = log.start_offset()
    if start > 0:
        earliest = log.earliest_snapshot_id()
        # Kafka ReplicatedLog.validateOffsetAndEpoch: the epoch cache cannot judge a
        # position below the earliest snapshot (its entries were cut at the log start),
        # so such a replica must load the latest snapshot instead. With the log intact
        # from offset 0 the cache can judge everything.
        if earliest is not None and (
                fetch_offset < start
                or (fetch_offset == start and last_fetched_epoch != earliest.epoch)
                or last_fetched_epoch < earliest.epoch):
            return log.latest_snapshot_id(), None
    found = log.end_offset_for_epoch(last_fetched_epoch)
    if found.epoch != last_fetched_epoch or found.offset < fetch_offset:
        return None, found
    return None, None
