"""SimNode: one simulated kraft node — a RaftCore driven exactly as the I/O contract in
``kraft.raft.core`` says, over a simulated network, a flusher with latency and an
in-memory disk (log + quorum-state) that survives crashes except for unflushed data.

This is the reference driver: the asyncio server must execute effects the same way. No
real I/O, time or threads.
"""

from __future__ import annotations

import random

from kraft.protocol import FetchRequest
from kraft.raft import (
    Append,
    Commit,
    Flush,
    InboundRequest,
    InboundResponse,
    LeaderChange,
    ListenerCursor,
    LoadSnapshot,
    OffsetAndEpoch,
    PersistElection,
    RaftConfig,
    RaftCore,
    RequestFailed,
    Respond,
    Send,
)
from kraft.testing.invariants import InvariantViolation
from kraft.testing.memory_log import InMemoryLog
from kraft.testing.state_machine import CommittedHistory, SimStateMachine


def through_codec(message):
    """``message`` as its receiver sees it: encoded at its newest version and decoded again."""
    cls = type(message)
    version = cls.MAX_VERSION
    return cls.decode(message.encode(version), version)


class SimNode:
    """A node's durable parts (``log``, ``store``) outlive crashes; ``core``, ``cursor``
    and ``state_machine`` are rebuilt at every start (``incarnation`` counts starts)."""

    def __init__(self, node_id: int, voters, config: RaftConfig, sim, *, directory_id: bytes | None,
                 history: CommittedHistory, snapshot_interval: int = 0, bootstrap_ids=()):
        self.id = node_id
        self.bootstrap_ids = tuple(bootstrap_ids)
        self.voters = voters
        self.config = config
        self.sim = sim
        self.directory_id = directory_id
        self.history = history
        self.snapshot_interval = snapshot_interval
        self.log = InMemoryLog()
        self.store = None  # the persisted ElectionState (quorum-state file)
        self.core: RaftCore | None = None
        self.cursor: ListenerCursor | None = None
        self.state_machine: SimStateMachine | None = None
        self.incarnation = 0
        self.tick_at: int | None = None
        self.flush_done_at = 0
        self.held_sends: list[Send] = []  # Sends waiting for a flush (Send.after_flushed)
        self.last_snapshot_offset = 0
        self.appended = 0
        # Simulated CPU: until this time the node computes and reads no input (``charge``).
        # Nodes that never charge (the Raft seeds) are never busy.
        self.busy_until = 0
        self._cpu_ms = 0.0

    @property
    def alive(self) -> bool:
        return self.core is not None

    # --- lifecycle --------------------------------------------------------------------
    def charge(self, ms: float, now: int) -> None:
        """Spend ``ms`` of simulated CPU from ``now`` (or from when the node is next free)."""
        start = max(float(now), self._cpu_ms)
        self._cpu_ms = start + ms
        self.busy_until = int(self._cpu_ms + 0.999999)

    def start(self, now: int) -> None:
        self.incarnation += 1
        self.busy_until, self._cpu_ms = 0, 0.0
        rng = random.Random(self.sim.seed * 7919 + self.id * 104729 + self.incarnation)
        self.state_machine = self.new_listener()
        self.cursor = ListenerCursor(self.state_machine, self.log, self.id)
        self.core = RaftCore(self.id, self.log, self.config, self.voters, rng,
                             directory_id=self.directory_id, election_state=self.store, now_ms=now,
                             bootstrap_ids=self.bootstrap_ids)
        self.tick_at = None
        self.outstanding: dict[int, int] = {}  # correlation id -> destination, until answered
        self.flush_done_at = now
        self.last_snapshot_offset = self.log.start_offset()
        self.drain(now)

    def new_listener(self):
        """The Raft listener of a new incarnation (the controller simulation runs its own)."""
        return SimStateMachine(self.id, self.history)

    def write_bootstrap_voters(self, voters) -> None:
        """The 0-0 bootstrap checkpoint of ``storage format --initial-controllers``."""
        from kraft.raft.control_state import voters_record_of
        from kraft.records.bootstrap_snapshot import bootstrap_snapshot_bytes

        w = self.log.create_snapshot(OffsetAndEpoch(0, 0))
        w.append(bootstrap_snapshot_bytes(voters_record_of(voters)))
        w.freeze()

    def admin_request(self, kind: str, body, now: int) -> None:
        self.core.step(InboundRequest(-1, body, ("admin", kind)), now)
        self.drain(now)

    def crash(self) -> None:
        """kill -9: the core and everything in memory vanish, so does unflushed data."""
        self.core = None
        self.cursor = None
        self.state_machine = None
        self.tick_at = None
        self.outstanding = {}
        self.held_sends = []
        self.log.crash()

    def wipe(self, new_directory_id: bytes) -> None:
        """Lose the whole disk; the node comes back as a new replica (new directory id)."""
        self.crash()
        self.log = InMemoryLog()
        self.store = None
        self.directory_id = new_directory_id
        self.last_snapshot_offset = 0

    # --- inputs -----------------------------------------------------------------------
    def deliver(self, src: int, payload, now: int) -> None:
        kind = payload[0]
        if kind == "req":
            _, src_incarnation, cid, request = payload
            self.core.step(InboundRequest(src, request, (src, src_incarnation, cid)), now)
        else:
            _, dst_incarnation, cid, response = payload
            if dst_incarnation != self.incarnation:
                return  # an answer to a previous life of this node: its connection is gone
            self.outstanding.pop(cid, None)
            self.core.step(InboundResponse(src, cid, response), now)
        self.drain(now)

    def peer_gone(self, peer: int, cid: int, now: int) -> None:
        self.outstanding.pop(cid, None)
        self.core.step(RequestFailed(peer, cid, peer_gone=True), now)
        self.drain(now)

    def tick(self, now: int) -> None:
        self.tick_at = None
        self.core.tick(now)
        self.drain(now)

    def flushed(self, up_to: int, now: int) -> None:
        self.log.flush(up_to)
        # As the RaftDriver does: requests waiting for this flush leave before the core hears
        # of it (their answers can only come later).
        held, self.held_sends = self.held_sends, []
        for eff in held:
            if eff.after_flushed <= self.log.flushed_offset():
                self._send_request(eff)
            else:
                self.held_sends.append(eff)
        self.core.on_flushed(up_to, now)
        self.drain(now)

    def propose(self, values, now: int):
        try:
            last = self.core.propose(values, now)
        except Exception:  # NotLeaderError: the client tries elsewhere later
            last = None
        self.drain(now)
        return last

    # --- executing effects (the I/O contract) -------------------------------------------
    def drain(self, now: int) -> None:
        core = self.core
        sim = self.sim
        while True:
            ready = core.poll_effects()
            if not ready.effects:
                break
            for eff in ready.effects:
                t = type(eff)
                if t is Send:
                    if eff.after_flushed > self.log.flushed_offset():
                        self.held_sends.append(eff)
                    else:
                        self._send_request(eff)
                elif t is Respond and eff.handle[0] == "admin":
                    sim.admin_answers.append((eff.handle[1], eff.response.error_code))
                elif t is Respond:
                    src, src_incarnation, cid = eff.handle
                    sim.record_response(self.id, eff.response)
                    response = through_codec(eff.response) if sim.wire_codec else eff.response
                    sim.network.send(self.id, src, ("resp", src_incarnation, cid, response))
                elif t is PersistElection:
                    self.store = eff.state  # synchronous and durable before what follows
                elif t is Flush:
                    # A FIFO flusher: completions come back in request order.
                    self.flush_done_at = max(self.flush_done_at, now) + sim.rng.randint(0, sim.max_flush_ms)
                    sim.queue.at(self.flush_done_at, ("flush", self.id, self.incarnation, eff.up_to))
                elif t is Commit or t is LeaderChange:
                    self.to_listener(eff, now)
                elif t is LoadSnapshot:
                    if core.is_leader():
                        raise InvariantViolation(f"leader {self.id} asked to load snapshot {eff.snapshot_id}")
                    self.to_listener(eff, now)
                elif t is Append:
                    self.appended += eff.last_offset - eff.base_offset + 1
            self.maybe_snapshot(now)
        deadline = ready.next_deadline_ms
        if self.tick_at is None or deadline < self.tick_at:
            self.tick_at = deadline
            sim.queue.at(deadline, ("tick", self.id, self.incarnation, deadline))

    def to_listener(self, eff, now: int) -> None:
        """Hand a Commit, LeaderChange or LoadSnapshot to the listener (at once, here)."""
        self.cursor.execute(eff)

    def _send_request(self, eff: Send) -> None:
        request = eff.request
        if type(request) is FetchRequest:
            # The core's promise: a fetch offset is never beyond what this replica flushed.
            offset = request.topics[0].partitions[0].fetch_offset
            if offset > self.log.flushed_offset():
                raise InvariantViolation(f"node {self.id} fetches at {offset} with only "
                                         f"{self.log.flushed_offset()} flushed")
        self.outstanding[eff.correlation_id] = eff.destination
        sim = self.sim
        request = through_codec(request) if sim.wire_codec else request
        sim.network.send(self.id, eff.destination, ("req", self.incarnation, eff.correlation_id, request))

    def maybe_snapshot(self, now: int) -> None:
        sm = self.state_machine
        if not self.snapshot_interval or sm.next_offset - self.last_snapshot_offset < self.snapshot_interval:
            return
        if sm.next_offset > self.core.high_watermark or sm.next_offset <= self.log.start_offset():
            return
        snapshot_id = OffsetAndEpoch(sm.next_offset, sm.last_epoch)
        writer = self.core.create_snapshot(snapshot_id, now)
        self.last_snapshot_offset = sm.next_offset
        if writer is not None:
            writer.append([sm.snapshot_value()])
            writer.freeze()
