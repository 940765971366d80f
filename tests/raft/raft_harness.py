"""A tiny hand-driven harness for one RaftCore: feed messages, collect effects, elect.

Paper-style tests use it to put a single replica in an exact situation and check one rule.
"""

from __future__ import annotations

import random

from types import SimpleNamespace

from kraft.errors import ErrorCode
from kraft.protocol import EndQuorumEpochRequest, FetchRequest, FetchResponse, FetchSnapshotResponse, VoteRequest
from kraft.raft import (
    Flush,
    InboundRequest,
    InboundResponse,
    OffsetAndEpoch,
    PersistElection,
    RaftConfig,
    RaftCore,
    Respond,
    Send,
    rpcs,
)
from kraft.records import build_batch
from kraft.testing import InMemoryLog

CONFIG = RaftConfig(cluster_id="test")
NONE = ErrorCode.NONE


def flat(msg) -> SimpleNamespace:
    """A KRaft message read flat, for assertions: the fields of its one partition and of the
    top level; for responses ``error_code`` is the top-level one or else the partition's,
    ``leader_id``/``leader_epoch`` come from CurrentLeader where the message has it, absent
    DivergingEpoch/SnapshotId are None and snapshot ids are OffsetAndEpoch. Requests also get
    the names the core gives their fields (``candidate_epoch``, ``preferred_successors``...)."""
    topics = msg.responses if isinstance(msg, FetchResponse) else msg.topics
    p = topics[0].partitions[0]
    out = {f.name: getattr(msg, f.name) for f in type(msg).FIELDS}
    out.update({f.name: getattr(p, f.name) for f in type(p).FIELDS})
    if isinstance(msg, rpcs.RESPONSE_TYPES):
        out["error_code"] = rpcs.response_error(msg)
    leader = out.get("current_leader")
    if leader is not None:
        out["leader_id"], out["leader_epoch"] = leader.leader_id, leader.leader_epoch
    if isinstance(msg, FetchResponse):
        out["diverging_epoch"] = p.diverging_epoch if p.diverging_epoch.epoch >= 0 else None
        sid = p.snapshot_id
        out["snapshot_id"] = OffsetAndEpoch(sid.end_offset, sid.epoch) if sid.end_offset >= 0 else None
        out["records"] = bytes(p.records or b"")
    elif isinstance(msg, FetchSnapshotResponse):
        out["snapshot_id"] = rpcs.snapshot_id_of(p.snapshot_id)
    elif isinstance(msg, VoteRequest):
        out["candidate_epoch"], out["candidate_id"] = p.replica_epoch, p.replica_id
    elif isinstance(msg, EndQuorumEpochRequest):
        out["preferred_successors"] = tuple(c.candidate_id for c in p.preferred_candidates)
    elif isinstance(msg, FetchRequest):
        out["replica_id"] = msg.replica_state.replica_id
    return SimpleNamespace(**out)


class Replica:
    def __init__(self, node_id=1, voters=(1, 2, 3), *, log=None, election=None, config=CONFIG, seed=0, now=0,
                 directory_id=None):
        self.id = node_id
        self.log = log if log is not None else InMemoryLog()
        self.now = now
        self.core = RaftCore(node_id, self.log, config, voters, random.Random(seed),
                             election_state=election, now_ms=now, directory_id=directory_id)
        self.effects: list = []
        self.deadline = now
        self._handles = 0
        self.collect()

    # --- effects -------------------------------------------------------------------
    def collect(self) -> list:
        ready = self.core.poll_effects()
        self.effects.extend(ready.effects)
        self.deadline = ready.next_deadline_ms
        return ready.effects

    def take(self, kind=None, dest=None) -> list:
        """Remove and return pending effects of a type (and destination for Send). A Send
        waiting for a flush (``after_flushed``) stays until the log is flushed that far, as
        the driver holds it."""
        out, keep = [], []
        flushed = self.log.flushed_offset()
        for e in self.effects:
            if type(e) is Send and e.after_flushed > flushed:
                keep.append(e)
            elif (kind is None or isinstance(e, kind)) and (dest is None or getattr(e, "destination", None) == dest):
                out.append(e)
            else:
                keep.append(e)
        self.effects = keep
        return out

    def sent(self, request_type, dest=None) -> list:
        return [e for e in self.take(Send, dest) if isinstance(e.request, request_type)]

    def flush_all(self) -> None:
        """Complete every pending Flush (the driver's fsync), in order."""
        while True:
            flushes = self.take(Flush)
            if not flushes:
                return
            for f in flushes:
                self.log.flush(f.up_to)
                self.core.on_flushed(f.up_to, self.now)
                self.collect()

    # --- inputs ----------------------------------------------------------------------
    def request(self, source: int, body):
        """Deliver a request; return the immediate response read ``flat`` (None if parked)."""
        self._handles += 1
        handle = ("h", self._handles)
        self.core.step(InboundRequest(source, body, handle), self.now)
        self.collect()
        for e in self.take(Respond):
            if e.handle == handle:
                return flat(e.response)
            self.effects.append(e)
        return None

    def respond(self, send: Send, body) -> None:
        self.core.step(InboundResponse(send.destination, send.correlation_id, body), self.now)
        self.collect()

    def advance(self, ms: int) -> None:
        self.now += ms
        self.core.tick(self.now)
        self.collect()

    def advance_to_deadline(self) -> None:
        self.now = max(self.now, self.deadline)
        self.core.tick(self.now)
        self.collect()

    # --- scripted elections --------------------------------------------------------------
    def elect(self, granting=None) -> None:
        """Run a pre-election and an election in which ``granting`` voters say yes."""
        self.flush_all()
        for _ in range(20):
            if self.core.role == "prospective":
                break
            self.advance_to_deadline()
            self.flush_all()
        assert self.core.role in ("prospective", "leader"), self.core.state
        for kind in (True, False):
            for send in self.sent(VoteRequest):
                asked = flat(send.request)
                if asked.pre_vote == kind and (granting is None or send.destination in granting):
                    self.respond(send, rpcs.vote_response(NONE, -1, asked.candidate_epoch, True))
            self.flush_all()
        assert self.core.role == "leader", self.core.state
        self.take(PersistElection)

    def append_leader_batch(self, values, epoch: int) -> None:
        """Put a batch straight into the log as if a leader of ``epoch`` wrote it."""
        self.log.append_as_leader(build_batch(values, partition_leader_epoch=epoch, timestamp=0), epoch)
        self.log.flush(self.log.end_offset())
