"""RaftDriver: runs a sans-I/O ``RaftCore`` on the asyncio loop, executing its effects.

The I/O contract of ``kraft.raft.core`` is kept here: effects run in order;
``PersistElection`` is written durably (temp, fsync, rename, fsync dir) before any later
effect, so no vote or leader message leaves before the state it depends on is on disk;
``Flush`` on the leader asks the log's flusher thread for an fdatasync, whose completion
comes back through ``call_soon_threadsafe`` as ``core.on_flushed``; a follower fsyncs inline
(like Kafka's raft thread) and reports on the next loop turn; ``Send`` goes out on a
``NodeClient`` per peer and its answer (or failure) is stepped back in; ``Respond`` resolves
the future an inbound request is waiting on; ``Commit``/``LoadSnapshot``/``LeaderChange``
go to the listener through a ``ListenerCursor``. The core is only ever called from the
loop thread. Timers come from ``Ready.next_deadline_ms``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time

from kraft.errors import ErrorCode, KraftError, NetworkError, NotLeaderError
from kraft.log.state_files import QuorumStateData
from kraft.raft import (Append, Commit, ElectionState, Flush, InboundRequest, InboundResponse, LeaderChange,
                        ListenerCursor, LoadSnapshot, PersistElection, Respond, Send)
from kraft.raft.messages import RequestFailed
from kraft.raft.voters import ReplicaKey
from kraft.server import raft_wire
from kraft.server.client import NodeClient

log = logging.getLogger("kraft.raft")


def wall_ms() -> int:
    # Kafka's raft client uses wall-clock milliseconds for timeouts and record timestamps alike.
    return time.time_ns() // 1_000_000


def election_from_file(data: QuorumStateData | None) -> ElectionState | None:
    if data is None or data.leader_epoch < 0:
        return None
    voted = ReplicaKey(data.voted_id, None) if data.voted_id >= 0 else None
    return ElectionState(data.leader_epoch, data.leader_id, voted)


def election_to_file(state: ElectionState, cluster_id: str, voters) -> QuorumStateData:
    return QuorumStateData(leader_id=state.leader_id, leader_epoch=state.epoch,
                           voted_id=state.voted_key.id if state.voted_key is not None else -1,
                           data_version=0, cluster_id=cluster_id, current_voters=tuple(sorted(voters)))


class CommitWaiters:
    """Futures waiting for offsets to commit, in proposal order (offsets only grow)."""

    def __init__(self):
        self._q: collections.deque = collections.deque()

    def add(self, last_offset: int, fut: asyncio.Future) -> None:
        self._q.append((last_offset, fut))

    def committed(self, high_watermark: int) -> None:
        q = self._q
        while q and q[0][0] < high_watermark:
            _, fut = q.popleft()
            if not fut.done():
                fut.set_result(high_watermark)

    def fail_all(self, exc: Exception) -> None:
        q, self._q = self._q, collections.deque()
        for _, fut in q:
            if not fut.done():
                fut.set_exception(exc)

    def __len__(self) -> int:
        return len(self._q)


class RaftDriver:
    def __init__(self, core, log_, state_file, listener, *, peers: dict, cluster_id: str, voters,
                 metrics=None, client_factory=NodeClient, request_timeout_ms: int = 2000,
                 retry_backoff_ms: int = 20):
        self.core = core
        self.log = log_
        self.state_file = state_file
        self.cursor = ListenerCursor(listener, log_, core.node_id)
        self.peers = dict(peers)  # node id -> (host, port)
        self.cluster_id = cluster_id
        self.voters = tuple(voters)
        self.metrics = metrics
        self.loop = asyncio.get_event_loop()
        self._clients = {nid: client_factory(h, p, client_id=f"kraft-raft-{core.node_id}",
                                              request_timeout_ms=request_timeout_ms,
                                              retry_backoff_ms=retry_backoff_ms)
                         for nid, (h, p) in self.peers.items() if nid != core.node_id}
        self._handles = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = None
        self._tasks: set = set()
        self.commits = CommitWaiters()
        self._propose_times: collections.deque = collections.deque()
        self._last_leader = None
        self.snapshot_policy = None  # set by the node: called after each Commit
        self.closed = False

    # --- inputs -------------------------------------------------------------------------
    def start(self) -> None:
        self._drain()

    def on_flushed_threadsafe(self, offset: int) -> None:
        """Called by the log's flusher thread."""
        if not self.closed:
            self.loop.call_soon_threadsafe(self._on_flushed, offset)

    def _on_flushed(self, offset: int) -> None:
        if self.closed:
            return
        self.core.on_flushed(offset, wall_ms())
        self._drain()

    def inbound_request(self, source: int, request) -> asyncio.Future:
        """Step a core request in; the returned future gets the core's response."""
        handle = next(self._handles)
        fut = self.loop.create_future()
        self._pending[handle] = fut
        self.core.step(InboundRequest(source, request, handle), wall_ms())
        self._drain()
        return fut

    def propose(self, values) -> tuple[int, asyncio.Future]:
        """Append ``values`` as one atomic group on the leader; returns (last offset, future
        that completes once committed). Raises NotLeaderError."""
        last = self.core.propose(values, wall_ms())
        fut = self.loop.create_future()
        self.commits.add(last, fut)
        if self.metrics is not None:
            self._propose_times.append((last, len(values), time.perf_counter()))
        self._drain()
        return last, fut

    def resign(self) -> None:
        if self.core.is_leader():
            self.core.resign(wall_ms())
            self._drain()

    # --- effects ------------------------------------------------------------------------
    def _drain(self) -> None:
        core = self.core
        while True:
            ready = core.poll_effects()
            for effect in ready.effects:
                self._execute(effect)
            if not ready.effects:
                break
        self._arm(ready.next_deadline_ms)
        self._observe()

    def _execute(self, e) -> None:
        if isinstance(e, Send):
            self._send(e)
        elif isinstance(e, Respond):
            fut = self._pending.pop(e.handle, None)
            if fut is not None and not fut.done():
                fut.set_result(e.response)
        elif isinstance(e, Flush):
            if self.core.is_leader():
                # The leader keeps serving while the flusher thread fsyncs (group commit).
                self.log.request_flush()
            else:
                # A follower has nothing to do until its data is durable (its next fetch waits
                # for it), so it fsyncs here, as Kafka's raft thread does, saving a thread hand-off
                # each way. on_flushed runs on the next loop turn so effects stay in order.
                flushed = self.log.flush_now()
                self.loop.call_soon(self._on_flushed, flushed)
        elif isinstance(e, PersistElection):
            self.state_file.write(election_to_file(e.state, self.cluster_id, self.voters))
        elif isinstance(e, Commit):
            self.cursor.execute(e)
            self.commits.committed(e.up_to)
            self._observe_commit(e.up_to)
            if self.snapshot_policy is not None:
                self.snapshot_policy.after_commit(wall_ms())
        elif isinstance(e, (LoadSnapshot, LeaderChange)):
            self.cursor.execute(e)
        elif isinstance(e, Append):
            pass
        else:  # an effect this driver does not know is a bug, not something to skip
            raise TypeError(f"unknown effect {e!r}")

    def _send(self, e: Send) -> None:
        client = self._clients.get(e.destination)
        if client is None:
            self.loop.call_soon(self._step_failed, e.destination, e.correlation_id)
            return
        task = self.loop.create_task(self._roundtrip(client, e))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _roundtrip(self, client: NodeClient, e: Send) -> None:
        wire, version = raft_wire.request_to_wire(e.request)
        started = time.perf_counter()
        try:
            resp = await client.request(wire, version)
        except NetworkError:
            self._step_failed(e.destination, e.correlation_id)
            return
        if self.closed:
            return
        if self.metrics is not None and type(e.request).__name__ == "FetchRequest":
            self.metrics.fetch_latency.observe(time.perf_counter() - started)
        try:
            body = raft_wire.response_from_wire(resp, type(e.request))
        except (IndexError, AttributeError, TypeError, KraftError) as exc:
            # Decodable but malformed (e.g. no partitions): as good as no answer at all.
            log.warning("node %d: malformed %s response from node %d: %r", self.core.node_id,
                        type(e.request).__name__, e.destination, exc)
            self._step_failed(e.destination, e.correlation_id)
            return
        self.core.step(InboundResponse(e.destination, e.correlation_id, body), wall_ms())
        self._drain()

    def _step_failed(self, dest: int, cid: int) -> None:
        if self.closed:
            return
        self.core.step(RequestFailed(dest, cid), wall_ms())
        self._drain()

    def _arm(self, deadline_ms: int) -> None:
        if deadline_ms == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline_ms
        delay = max(0.0, (deadline_ms - wall_ms()) / 1000)
        self._timer = self.loop.call_later(min(delay, 3600.0), self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._timer_at = None
        if self.closed:
            return
        self.core.tick(wall_ms())
        self._drain()

    # --- metrics ------------------------------------------------------------------------
    def _observe(self) -> None:
        core, m = self.core, self.metrics
        leader = (core.leader_id, core.epoch)
        if leader != self._last_leader:
            if self._last_leader is not None and not core.is_leader():
                # Lost (or never had) leadership: pending writes have an unknown fate.
                self.commits.fail_all(NotLeaderError("leadership changed before commit",
                                                     core.leader_id, core.epoch))
            self._last_leader = leader
            log.info("node %d: epoch %d, leader %s, role %s", core.node_id, core.epoch,
                     core.leader_id if core.leader_id >= 0 else "unknown", core.role)
            if m is not None:
                if core.leader_id >= 0:  # a new known leader, not every role/epoch transition
                    m.leader_changes.inc()
                if core.role == "candidate":
                    m.elections.inc()
        if m is not None:
            m.current_epoch.set(core.epoch)
            m.current_leader.set(core.leader_id)
            m.is_leader.set(1 if core.is_leader() else 0)
            m.high_watermark.set(core.high_watermark)
            m.log_end_offset.set(self.log.end_offset())

    def _observe_commit(self, up_to: int) -> None:
        m = self.metrics
        if m is None:
            return
        q, now = self._propose_times, time.perf_counter()
        while q and q[0][0] < up_to:
            _, n, t = q.popleft()
            m.commit_latency.observe(now - t)
        # Every node: records its state machine has applied (the listener counts them).
        applied = getattr(self.cursor.listener, "records", None)
        if applied is not None:
            m.committed_records.value = applied

    # --- shutdown -----------------------------------------------------------------------
    async def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self.commits.fail_all(NotLeaderError("node shutting down", -1, -1))
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)


__all__ = ["CommitWaiters", "RaftDriver", "election_from_file", "election_to_file", "wall_ms", "ErrorCode"]
