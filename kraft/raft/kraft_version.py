"""Upgrading a static quorum (``controller.quorum.voters``, kraft.version 0) to a dynamic one
(kraft.version 1), as Kafka 4.1 does (``kafka-features upgrade --feature kraft.version=1``;
Kafka's ``LeaderState.maybeAppendUpgradedKRaftVersion``).

The leader writes one control batch: a KRaftVersion record (1) and a Voters record with the
static voters, each with the directory id its Fetch requests carry and the listener the
configuration gives it. From then on the voters are the log's and can be changed with
Add/Remove/UpdateRaftVoter. Refused, with Kafka's INVALID_UPDATE_VERSION, for a downgrade, a
level this build lacks, while a voter change is uncommitted, or while some voter's directory
id is unknown (it has not fetched from this leader yet); a repeat of the level in force is a
no-op. Sans-I/O: returns what to answer; the caller waits for the commit.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.raft.control_state import KRAFT_VERSION_MAX, membership_control_batch
from kraft.raft.leader import LeaderState
from kraft.raft.membership import Membership
from kraft.raft.voters import VoterSet
from kraft.types import ReplicaKey

FEATURE = "kraft.version"


def upgrade_kraft_version(m: Membership, s, level: int, validate_only: bool, now: int):
    """(error code, message, offset to wait for or None)."""
    if not isinstance(s, LeaderState) or s.resign_requested:
        return ErrorCode.NOT_CONTROLLER, "this controller is not the quorum leader", None
    control = m.control
    current = control.kraft_version
    if level == current:
        return ErrorCode.NONE, None, None
    if level < current:
        return (ErrorCode.INVALID_UPDATE_VERSION, f"Invalid upgrade of {FEATURE} from version {current} to "
                f"{level} because the new version is a downgrade", None)
    if level > KRAFT_VERSION_MAX:
        return (ErrorCode.INVALID_UPDATE_VERSION, f"Invalid upgrade of {FEATURE} to {level}: this controller "
                f"supports versions 0-{KRAFT_VERSION_MAX}", None)
    if m.pending is not None or s.high_watermark < 0 or control.voters.last_offset() >= s.high_watermark:
        return (ErrorCode.INVALID_UPDATE_VERSION, f"Unable to upgrade {FEATURE} to {level} while a voter "
                "change or the leader's first commit is pending", None)
    static = control.voters.last()
    keys, missing = [], []
    for k in static.keys():
        d = m.local.directory_id if k.id == m.local.id else s.fetched_directories.get(k.id)
        (keys if d is not None else missing).append(ReplicaKey(k.id, d))
    if missing or m.local.directory_id is None:
        return (ErrorCode.INVALID_UPDATE_VERSION, f"Invalid upgrade of {FEATURE} to {level}: the directory ids "
                f"of voters {sorted(k.id for k in missing)} are not known yet (they have not fetched from "
                "this leader)", None)
    voters = VoterSet(keys, {k.id: static.endpoints(k.id) for k in keys})
    if validate_only:
        return ErrorCode.NONE, None, None
    m._drain(s, now)
    offset = m.local_log.log.end_offset()
    m.local_log.append_as_leader(membership_control_batch(voters, level, offset, s.epoch, now), s.epoch)
    s.start_appending_at(m.local_log.log.end_offset())
    m.local_log.request_flush()
    m._on_appended(s, now)
    return ErrorCode.NONE, None, offset + 1
