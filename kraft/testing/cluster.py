"""SimCluster: a deterministic simulated KRaft cluster — voters, observers, a network, a
virtual clock — with fault injection and invariant checks after every event.

Use it from tests and scenarios::

    c = SimCluster(seed=7, voters=3)
    c.start_all()
    c.run_for(5_000)
    leader = c.wait_for_leader()
    c.crash(leader.id); c.run_for(10_000)

Everything is driven by one ``random.Random(seed)`` family and the event queue, so a seed
replays exactly. No real time, sockets or threads.
"""

from __future__ import annotations

import random

from kraft.errors import ErrorCode
from kraft.protocol import AddRaftVoterRequest, ReassignRaftVotersRequest, RemoveRaftVoterRequest
from kraft.raft import RaftConfig, ReplicaKey, VoterSet, rpcs
from kraft.testing.invariants import InvariantChecker, InvariantViolation
from kraft.testing.network import NetworkFaults, SimulatedNetwork
from kraft.testing.node import SimNode
from kraft.testing.scheduler import EventQueue
from kraft.testing.state_machine import CommittedHistory

OBSERVER_ID_BASE = 100


class SimCluster:
    def __init__(self, seed: int, voters: int = 3, observers: int = 0, *, config: RaftConfig | None = None,
                 faults: NetworkFaults | None = None, snapshot_interval: int = 0, max_flush_ms: int = 3,
                 check_invariants: bool = True, wire_codec: bool = False, node_class=SimNode,
                 dynamic: bool = False):
        """``dynamic``: a KIP-853 quorum — the voters' logs start from a 0-0 bootstrap
        checkpoint naming them (``storage format --initial-controllers``), observers' logs
        are empty (``--no-initial-controllers``), every node finds the leader through any
        other node (bootstrap servers), and voters change with AddRaftVoter/RemoveRaftVoter
        (``admin``). A wiped node comes back empty, as an observer."""
        self.seed = seed
        self.dynamic = dynamic
        self.admin_answers: list[tuple[str, int]] = []  # (kind, error code) of voter changes
        # True: every message crosses the network as bytes, encoded and decoded with the real
        # codec at its newest version (records arrive as views into the received buffer), as
        # between real nodes. False: the objects themselves travel, which is faster. A seed
        # runs the same either way.
        self.wire_codec = wire_codec
        self.rng = random.Random(seed)
        self.queue = EventQueue()
        self.network = SimulatedNetwork(self.queue, random.Random(seed * 31 + 1), faults)
        self.config = config or RaftConfig(cluster_id="sim")
        self.max_flush_ms = max_flush_ms
        self.history = CommittedHistory()
        self.checker = InvariantChecker() if check_invariants else None
        self.voter_ids = list(range(1, voters + 1))
        self.observer_ids = [OBSERVER_ID_BASE + i for i in range(observers)]
        dirs = {i: self._new_directory_id() for i in self.voter_ids + self.observer_ids}
        self.voter_set = VoterSet([ReplicaKey(i, dirs[i]) for i in self.voter_ids])
        all_ids = self.voter_ids + self.observer_ids
        self.nodes: dict[int, SimNode] = {
            i: node_class(i, VoterSet([]) if dynamic else self.voter_set, self.config, self, directory_id=dirs[i],
                       history=self.history, snapshot_interval=snapshot_interval,
                       bootstrap_ids=tuple(all_ids) if dynamic else ())
            for i in all_ids}
        if dynamic:
            for i in self.voter_ids:
                self.nodes[i].write_bootstrap_voters(self.voter_set)
        self.wiped_durable: dict[ReplicaKey, int] = {}  # a wiped voter's data, for the majority check
        self.events = 0
        self._next_value = 0
        # Other network endpoints by id (simulated clients): ``alive`` and ``deliver(src, payload, now)``.
        self.endpoints: dict = {}

    def _new_directory_id(self) -> bytes:
        return self.rng.getrandbits(128).to_bytes(16, "big")

    @property
    def now(self) -> int:
        return self.queue.now

    # --- running ----------------------------------------------------------------------
    def start_all(self) -> None:
        for node in self.nodes.values():
            if not node.alive:
                node.start(self.now)
        self.check()

    def check(self) -> None:
        if self.checker is not None:
            self.checker.check(self)

    def step(self) -> bool:
        event = self.queue.pop()
        if event is None:
            return False
        self.events += 1
        kind = event[0]
        now = self.queue.now
        if kind in ("deliver", "gone", "tick", "flush"):
            node = self.nodes.get(event[2] if kind in ("deliver", "gone") else event[1])
            if node is not None and node.alive and node.busy_until > now:
                # A node busy computing (``SimNode.charge``) reads its inputs once it is done,
                # in the order they came: its single loop thread was not listening meanwhile.
                self.queue.at(node.busy_until, event)
                self.check()
                return True
        if kind == "deliver":
            _, src, dst, payload = event
            node = self.nodes.get(dst) or self.endpoints[dst]
            if node.alive and self.network.can_reach(src, dst):
                node.deliver(src, payload, now)
            elif not node.alive and payload[0] == "req" and self.network.can_reach(dst, src):
                # Nobody listens there: the sender's connection is refused (a TCP RST back).
                self.queue.at(now + 1, ("gone", dst, src, payload[1], payload[2]))
        elif kind == "gone":
            _, peer, nid, incarnation, cid = event
            node = self.nodes[nid]
            if node.alive and node.incarnation == incarnation:
                node.peer_gone(peer, cid, now)
        elif kind == "tick":
            _, nid, incarnation, deadline = event
            node = self.nodes[nid]
            if node.alive and node.incarnation == incarnation and node.tick_at == deadline:
                node.tick(now)
        elif kind == "flush":
            _, nid, incarnation, up_to = event
            node = self.nodes[nid]
            if node.alive and node.incarnation == incarnation:
                node.flushed(up_to, now)
        elif kind == "call":
            event[1](*event[2:])
        self.check()
        return True

    def run_until(self, time_ms: int, stop=None) -> bool:
        """Process events up to ``time_ms``; with ``stop``, return True as soon as it holds."""
        q = self.queue
        while True:
            if stop is not None and stop():
                return True
            t = q.peek_time()
            if t is None or t > time_ms:
                q.now = max(q.now, time_ms)
                return stop() if stop is not None else False
            self.step()

    def run_for(self, duration_ms: int, stop=None) -> bool:
        return self.run_until(self.now + duration_ms, stop)

    def schedule(self, at_ms: int, fn, *args) -> None:
        self.queue.at(at_ms, ("call", fn) + args)

    # --- faults -------------------------------------------------------------------------
    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            node.crash()
            # The kernel closes a killed process's connections: whoever waits on a request to
            # it (a long-poll Fetch) sees the connection reset, if the network still connects.
            for other in self.alive_nodes():
                for cid, dest in list(other.outstanding.items()):
                    if dest == node_id and self.network.can_reach(node_id, other.id):
                        del other.outstanding[cid]
                        self.queue.at(self.now + 1, ("gone", node_id, other.id, other.incarnation, cid))

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if not node.alive:
            node.start(self.now)

    def wipe(self, node_id: int) -> None:
        """Destroy a node's disk; it restarts as a new replica (new directory id)."""
        node = self.nodes[node_id]
        key = ReplicaKey(node_id, node.directory_id)
        if self.dynamic or self.voter_set.is_voter(key):
            self.wiped_durable[key] = node.log.flushed_offset()
        node.wipe(self._new_directory_id())

    def admin(self, kind: str, key: ReplicaKey, node: SimNode | None = None) -> bool:
        """An operator's AddRaftVoter / RemoveRaftVoter sent to ``node`` (default: the
        leader); the answer lands in ``admin_answers``. False if there is no leader."""
        node = node or self.leader()
        if node is None:
            return False
        directory = rpcs.directory_uuid(key.directory_id)
        if kind == "add":
            body = AddRaftVoterRequest(cluster_id=self.config.cluster_id, timeout_ms=3_000, voter_id=key.id,
                                       voter_directory_id=directory, listeners=[AddRaftVoterRequest.Listener(
                                           name=self.config.controller_listener_name, host="sim", port=key.id)])
        else:
            body = RemoveRaftVoterRequest(cluster_id=self.config.cluster_id, voter_id=key.id,
                                          voter_directory_id=directory)
        node.admin_request(kind, body, self.now)
        return True

    def reassign(self, target, node: SimNode | None = None, cancel: bool = False) -> bool:
        """An operator's ReassignRaftVoters (kraft's own, seed 002) sent to ``node`` (default:
        the leader): ``target`` is node ids or ReplicaKeys; the answer lands in
        ``admin_answers`` as ("reassign", code). False if there is no leader."""
        node = node or self.leader()
        if node is None:
            return False
        R = ReassignRaftVotersRequest
        voters = []
        for t in target:
            key = t if isinstance(t, ReplicaKey) else ReplicaKey(int(t))
            voters.append(R.TargetVoter(voter_id=key.id, voter_directory_id=rpcs.directory_uuid(key.directory_id),
                                        listeners=[R.Listener(name=self.config.controller_listener_name,
                                                              host="sim", port=key.id)]))
        body = R(cluster_id=self.config.cluster_id, target_voters=voters, cancel=cancel)
        node.admin_request("reassign", body, self.now)
        return True

    def isolate(self, node_id: int) -> None:
        self.network.isolate(node_id, self.nodes)

    def heal(self) -> None:
        self.network.heal()

    def record_response(self, node_id: int, response) -> None:
        if rpcs.response_error(response) == ErrorCode.INVALID_REQUEST:
            raise InvariantViolation(f"node {node_id} answered INVALID_REQUEST to a correct peer: {response}")

    # --- observation ------------------------------------------------------------------------
    def durable_end(self, key: ReplicaKey) -> int:
        if key in self.wiped_durable:
            return self.wiped_durable[key]
        node = self.nodes.get(key.id)
        if node is None or not key.matches(ReplicaKey(node.id, node.directory_id)):
            return -1
        return node.log.flushed_offset()

    def describe(self) -> str:
        """One line per node: role, epoch, leader, high watermark, log and state machine."""
        lines = [f"t={self.now}ms blocked={sorted(self.network.blocked)}"]
        for nid in sorted(self.nodes):
            n = self.nodes[nid]
            if not n.alive:
                lines.append(f"  node {nid}: down (log {n.log.start_offset()}..{n.log.end_offset()})")
                continue
            c = n.core
            lines.append(f"  node {nid}: {c.role} epoch={c.epoch} leader={c.leader_id} hw={c.high_watermark} "
                         f"log={n.log.start_offset()}..{n.log.end_offset()} flushed={c.flushed_offset} "
                         f"applied={n.state_machine.next_offset} state={c.state!r}")
        return "\n".join(lines)

    def alive_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.alive]

    def leader(self) -> SimNode | None:
        """The live leader of the highest epoch, if any."""
        leaders = [n for n in self.alive_nodes() if n.core.is_leader()]
        return max(leaders, key=lambda n: n.core.epoch) if leaders else None

    def wait_for_leader(self, timeout_ms: int = 30_000) -> SimNode:
        if not self.run_for(timeout_ms, lambda: self.leader() is not None):
            raise AssertionError(f"no leader within {timeout_ms} ms (seed {self.seed})")
        return self.leader()

    def next_value(self) -> bytes:
        self._next_value += 1
        return b"v%d" % self._next_value

    def propose(self, values=None):
        """Propose to the current leader; returns (node, epoch, last offset) or None."""
        leader = self.leader()
        if leader is None:
            return None
        values = values or [self.next_value()]
        last = leader.propose(values, self.now)
        return None if last is None else (leader, leader.core.epoch, last)

    def commit(self, values=None, timeout_ms: int = 30_000):
        """Propose through the leader and wait until it is committed there; returns the
        last offset. Retries through new leaders if leadership changes."""
        deadline = self.now + timeout_ms
        while self.now < deadline:
            if self.leader() is None:
                self.run_until(deadline, lambda: self.leader() is not None)
                continue
            placed = self.propose(values)
            if placed is None:
                self.run_for(10)
                continue
            node, epoch, last = placed

            def done():
                c = node.core
                return c is None or c.epoch != epoch or c.high_watermark > last

            self.run_until(deadline, done)
            if node.core is not None and node.core.epoch == epoch and node.core.high_watermark > last:
                return last
        raise AssertionError(f"nothing committed within {timeout_ms} ms (seed {self.seed})\n{self.describe()}")
