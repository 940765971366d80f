"""Target-voters reassignment on the leader (seed 002; kraft's own, beyond KIP-853).

``ReassignRaftVoters`` records a target voter set in the log: a Voters record with the
current voters and the target in its TargetVoters tagged field. From then on the leader,
whoever it is, moves the voters toward the target one voter at a time, each step an
ordinary single-server change (one Voters record that carries the target forward), taken
only when the previous Voters record is committed:

* adding when there are at least as many voters to add as to remove, else removing;
* only a caught-up observer is added (the step waits for it);
* non-leaders are removed first, voters that are not caught up before those that are; when
  the leader is the voter left to remove it steps down (EndQuorumEpoch) and stays a voter
  until the next leader removes it;
* a step is taken only if the caught-up voters are a majority of the set it makes, so
  following the target never leaves the quorum unable to elect or commit; if the preferred
  kind of step cannot be taken safely the other kind is tried;
* when the voters equal the target a Voters record with no target ends it; ``cancel``
  writes that record at once (after the step under way commits).

The target lives only in the log (and in snapshots, through the Voters record), so a new
leader resumes where the last one stopped and a truncation reverts it. Sans-I/O like the
rest of the core; answers go out as ``Respond`` effects through ``Membership``.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.raft.leader import LeaderState
from kraft.raft.membership import Membership, PendingChange
from kraft.raft.rpcs import directory_bytes
from kraft.raft.validation import cluster_ok
from kraft.raft.voters import VoterSet
from kraft.types import Endpoint, ReplicaKey

NONE = ErrorCode.NONE
KIND = "reassign"


def remaining_changes(current: VoterSet, target: VoterSet) -> tuple[list[ReplicaKey], list[ReplicaKey]]:
    """(voters to remove, target voters to add). A target entry without a directory id is
    met by any replica of that id; one with a directory id only by that replica."""
    removing = [k for k in current.keys() if not (target.key(k.id) is not None and target.key(k.id).matches(k))]
    adding = [t for t in target.keys() if not (current.key(t.id) is not None and t.matches(current.key(t.id)))]
    return removing, adding


class Reassignment:
    def __init__(self, membership: Membership):
        self.m = membership
        self.control = membership.control
        self.config = membership.config
        self.local = membership.local
        # Voters this leader added without listeners: the next step waits (softly, in this
        # epoch only) for their UpdateRaftVoter so that every voter can be reached.
        self._awaiting_endpoints: set[int] = set()

    # ------------------------------------------------------------ the request
    def handle(self, handle, r, now: int) -> None:
        m = self.m
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return m._respond(handle, KIND, ErrorCode.INCONSISTENT_CLUSTER_ID)
        s = m._leader()
        if s is None:
            return m._respond(handle, KIND, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        busy = m._busy(s, now)
        if busy == "unsupported":
            return m._respond(handle, KIND, ErrorCode.UNSUPPORTED_VERSION,
                              "the quorum is static (kraft.version 0): voters cannot be reassigned")
        if busy is not None:
            return m._respond(handle, KIND, ErrorCode.REQUEST_TIMED_OUT, busy)
        current = self.control.voters.last()
        if r.cancel:
            if self.control.target is None:
                return m._respond(handle, KIND, NONE)
            offset = m._append(s, current, now, target=None)
            return m._park(s, PendingChange(handle, KIND, self.local, offset, now + self.config.request_timeout_ms))
        target, error = self._target_of(r, current)
        if error is not None:
            return m._respond(handle, KIND, ErrorCode.INVALID_REQUEST, error)
        if target == current and self.control.target is None:
            return m._respond(handle, KIND, NONE)  # nothing to do
        offset = m._append(s, current, now, target=target)
        m._park(s, PendingChange(handle, KIND, self.local, offset, now + self.config.request_timeout_ms))

    def _target_of(self, r, current: VoterSet):
        """The target as a VoterSet, with current voters' keys and listeners filled in for the
        ids that name them without a directory id; or an error message."""
        if not r.target_voters:
            return None, "the target voter set is empty"
        keys, endpoints = [], {}
        for tv in r.target_voters:
            if tv.voter_id < 0:
                return None, f"invalid voter id {tv.voter_id}"
            key = ReplicaKey(tv.voter_id, directory_bytes(tv.voter_directory_id))
            eps = tuple(Endpoint(lst.name, lst.host, lst.port) for lst in tv.listeners)
            if eps and not any(e.name == self.config.controller_listener_name for e in eps):
                return None, f"voter {tv.voter_id} needs a {self.config.controller_listener_name} listener"
            now_key = current.key(key.id)
            if now_key is not None and key.matches(now_key):
                key, eps = now_key, eps or current.endpoints(key.id)
            keys.append(key)
            endpoints[key.id] = eps
        try:
            return VoterSet(keys, endpoints), None
        except ValueError:
            return None, "a voter id appears twice in the target"

    # ------------------------------------------------------------ the steps
    def poll(self, s: LeaderState, now: int) -> None:
        """Take the next step toward the target if one is due."""
        target = self.control.target
        if target is None or s.resign_requested or s.high_watermark < 0:
            return
        if self.control.voters.last_offset() >= s.high_watermark:
            return  # the previous step (or the target itself) is not committed yet
        current = self.control.voters.last()
        self._awaiting_endpoints = {i for i in self._awaiting_endpoints if i in current.ids
                                    and not current.endpoints(i)}
        if self._awaiting_endpoints:
            return
        removing, adding = remaining_changes(current, target)
        if not removing and not adding:
            self.m._append(s, current, now, target=None)  # done
            return
        adds = self._add_steps(s, current, target, adding, now)
        removes = self._remove_steps(s, current, removing, now)
        if len(adding) >= len(removing):
            if adds is None:
                return  # wait for the new voters to catch up before removing anyone
            steps = adds + removes
        else:
            steps = removes + (adds or [])
        for key, new in steps:
            if not self._caught_up_majority(s, new, now, extra=() if key.id in current.ids else (key,)):
                continue
            if key.id in current.ids and key.id == self.local.id:
                s.request_resignation()  # the next leader removes us
            else:
                self.m._append(s, new, now)
                if key.id not in current.ids and not new.endpoints(key.id):
                    self._awaiting_endpoints.add(key.id)
            return

    def _add_steps(self, s: LeaderState, current: VoterSet, target: VoterSet, adding, now: int):
        """[(observer key, voters with it)] for each target voter that is a caught-up observer
        now; None if some are still to add but none can be yet."""
        out = []
        for t in adding:
            if t.id in current.ids:
                continue  # another replica of that id holds the seat: it is removed first
            found = self._caught_up_observer(s, t, now)
            if found is not None:
                out.append((found, current.with_voter(found, target.endpoints(t.id))))
        return out if out else (None if any(t.id not in current.ids for t in adding) else [])

    def _remove_steps(self, s: LeaderState, current: VoterSet, removing, now: int):
        order = sorted(removing, key=lambda k: (k.id == self.local.id, self._caught_up(s, k, now), k.id))
        return [(k, current.without_voter(k)) for k in order]

    def _caught_up_observer(self, s: LeaderState, want: ReplicaKey, now: int) -> ReplicaKey | None:
        for key, p in sorted(s.progress.observers.items(), key=lambda kv: kv[0].id):
            if key.id == want.id and want.matches(key) and key.directory_id is not None \
                    and p.last_caught_up_ms >= now - self.config.fetch_timeout_ms:
                return key
        return None

    def _caught_up(self, s: LeaderState, key: ReplicaKey, now: int) -> bool:
        """Fetched up to our end within the fetch timeout, and no other replica of its id has
        fetched since (a node whose disk was replaced runs as a new replica: the old one is gone)."""
        if key == self.local:
            return True
        p = s.progress.voter_progress(key)
        if p is None or p.last_caught_up_ms < now - self.config.fetch_timeout_ms:
            return False
        return not any(k.id == key.id and k != key and o.last_fetch_ms > p.last_fetch_ms
                       for k, o in s.progress.observers.items())

    def _caught_up_majority(self, s: LeaderState, voters: VoterSet, now: int, extra=()) -> bool:
        """Are the caught-up replicas (``extra``: an observer just checked) a majority of ``voters``?"""
        n = sum(1 for k in voters.keys() if k in extra or self._caught_up(s, k, now))
        return n >= len(voters) // 2 + 1
