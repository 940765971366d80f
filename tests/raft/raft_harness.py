"""A tiny hand-driven harness for one RaftCore: feed messages, collect effects, elect.

Paper-style tests use it to put a single replica in an exact situation and check one rule.
"""

from __future__ import annotations

import random

from kraft.errors import ErrorCode
from kraft.raft import (
    Flush,
    InboundRequest,
    InboundResponse,
    PersistElection,
    RaftConfig,
    RaftCore,
    Respond,
    Send,
    VoteRequest,
    VoteResponse,
)
from kraft.records import build_batch
from kraft.testing import InMemoryLog

CONFIG = RaftConfig(cluster_id="test")
NONE = ErrorCode.NONE


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
        """Remove and return pending effects of a type (and destination for Send)."""
        out, keep = [], []
        for e in self.effects:
            if (kind is None or isinstance(e, kind)) and (dest is None or getattr(e, "destination", None) == dest):
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
        """Deliver a request; return the immediate response (or None if parked)."""
        self._handles += 1
        handle = ("h", self._handles)
        self.core.step(InboundRequest(source, body, handle), self.now)
        self.collect()
        for e in self.take(Respond):
            if e.handle == handle:
                return e.response
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
                if send.request.pre_vote == kind and (granting is None or send.destination in granting):
                    self.respond(send, VoteResponse(NONE, -1, send.request.candidate_epoch, True))
            self.flush_all()
        assert self.core.role == "leader", self.core.state
        self.take(PersistElection)

    def append_leader_batch(self, values, epoch: int) -> None:
        """Put a batch straight into the log as if a leader of ``epoch`` wrote it."""
        self.log.append_as_leader(build_batch(values, partition_leader_epoch=epoch, timestamp=0), epoch)
        self.log.flush(self.log.end_offset())
