"""RaftDriver: runs a sans-I/O ``RaftCore`` on the asyncio loop, executing its effects.

The I/O contract of ``kraft.raft.core`` is kept here: effects run in order;
``PersistElection`` is written durably (temp, fsync, rename, fsync dir) before any later
effect, so no vote or leader message leaves before the state it depends on is on disk;
``Flush`` (leader and follower alike) asks the log's flusher for an fdatasync, whose
completion comes back on the loop as ``core.on_flushed`` (the node's flusher runs its cycles
on this loop and only the fdatasync on a native thread, so nothing here waits for the disk); ``Send`` goes out on a
``NodeClient`` per peer, encoded at ``SEND_VERSIONS``, and its decoded answer (or failure)
is stepped back in as it is (the core checks its shape); ``Respond`` resolves
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

from kraft.errors import ErrorCode, NetworkError, NotLeaderError, PeerGoneError
from kraft.log.state_files import QuorumStateData, uuid_bytes_to_text, uuid_text_to_bytes
from kraft.raft import (Append, Commit, ElectionState, Flush, InboundRequest, InboundResponse, LeaderChange,
                        ListenerCursor, LoadSnapshot, PersistElection, RequestFailed, Respond, Send)
from kraft.raft.voters import ReplicaKey
from kraft.server.wire_versions import SEND_VERSIONS
from kraft.client.node_client import NodeClient
from kraft.server.commit_waiters import CommitWaiters
from kraft.server.log_throttle import LogThrottle, held_note
from kraft.server.reply import Reply
from kraft.server.eventloop import LoopThread
from kraft.server.turn import turn_queue

log = logging.getLogger("kraft.raft")

#: Committed bytes handed to the listener per loop turn (about 4,000 metadata records).
APPLY_STEP_BYTES = 256 * 1024


def wall_ms() -> int:
    # Kafka's raft client uses wall-clock milliseconds for timeouts and record timestamps alike.
    return time.time_ns() // 1_000_000


def election_from_file(data: QuorumStateData | None) -> ElectionState | None:
    if data is None or data.leader_epoch < 0:
        return None
    voted_dir = uuid_text_to_bytes(data.voted_directory_id) if data.data_version >= 1 else None
    voted = ReplicaKey(data.voted_id, voted_dir) if data.voted_id >= 0 else None
    return ElectionState(data.leader_epoch, data.leader_id, voted)


def election_to_file(state: ElectionState, cluster_id: str, voters, kraft_version: int = 0) -> QuorumStateData:
    """Kafka writes quorum-state version 0 under kraft.version 0 (static voters) and version
    1, with the voted replica's directory id, under kraft.version 1 (KIP-853)."""
    voted = state.voted_key
    if kraft_version >= 1:
        return QuorumStateData(leader_id=state.leader_id, leader_epoch=state.epoch,
                               voted_id=voted.id if voted is not None else -1, data_version=1,
                               voted_directory_id=uuid_bytes_to_text(voted.directory_id if voted else None))
    return QuorumStateData(leader_id=state.leader_id, leader_epoch=state.epoch,
                           voted_id=state.voted_key.id if state.voted_key is not None else -1,
                           data_version=0, cluster_id=cluster_id, current_voters=tuple(sorted(voters)))


class RaftDriver:
    def __init__(self, core, log_, state_file, listener, *, peers: dict, cluster_id: str, voters,
                 metrics=None, client_factory=NodeClient, request_timeout_ms: int = 2000,
                 retry_backoff_ms: int = 20, listener_name: str = "CONTROLLER", on_voters_changed=None,
                 client_options: dict | None = None):
        self.core = core
        self.log = log_
        self.state_file = state_file
        self.cursor = ListenerCursor(listener, log_, core.node_id)
        self.peers = dict(peers)  # node id -> (host, port)
        self.cluster_id = cluster_id
        self.voters = tuple(voters)
        self.metrics = metrics
        self.loop = asyncio.get_event_loop()
        extra = dict(client_options or {})  # the controller listener's TLS and SASL
        self._new_client = lambda h, p: client_factory(h, p, client_id=f"kraft-raft-{core.node_id}",
                                                        request_timeout_ms=request_timeout_ms,
                                                        retry_backoff_ms=retry_backoff_ms, **extra)
        self._clients = {nid: self._new_client(h, p) for nid, (h, p) in self.peers.items() if nid != core.node_id}
        self._client_addresses = {nid: a for nid, a in self.peers.items() if nid != core.node_id}
        # KIP-853: addresses of nodes not in the configuration — from the Voters records in
        # the log (``listener_name``'s endpoint) or the NodeEndpoints of answers.
        self.listener_name = listener_name
        self._learned: dict[int, tuple] = {}
        #: (leader id, epoch, (host, port)) the leader gave in its BeginQuorumEpoch
        self._leader_said: tuple | None = None
        self.on_voters_changed = on_voters_changed
        self._known_voters = getattr(core, "voters", None)
        self._handles = itertools.count(1)
        self._pending: dict[int, Reply] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = None  # when _timer fires
        self._want_at = None  # when the core wants its next tick (_timer may fire before)
        self._tick_soon = False
        self._turn = turn_queue(self.loop)
        self._thread = LoopThread(self.loop)
        self._tasks: set = set()
        self.commits = CommitWaiters(self.loop)
        #: called with the new high watermark after each Commit effect (what waits for the log to
        #: drain: the controller's queue)
        self.on_commit: list = []
        self._propose_times: collections.deque = collections.deque()
        self._last_leader = None
        self.snapshot_policy = None  # set by the node: called after each Commit
        self.peer_log_throttle = LogThrottle()
        self._seen_problems = (0, 0)  # the core's (corrupt_fetches, storage_read_errors) last reported
        # Sends waiting for a flush (Send.after_flushed), as (offset, client, held request or
        # None, effect, [sent at]); released by the flusher's report before the core hears it.
        self._gated: list = []
        # Effects for the listener, in order (``_apply_next`` hands them over step by step).
        self._to_apply: collections.deque = collections.deque()
        self._applying = False  # a step is scheduled
        self.closed = False
        if metrics is not None:
            metrics.on_render(self._refresh_gauges)

    # --- inputs -------------------------------------------------------------------------
    def start(self) -> None:
        self._drain()

    def on_flushed_threadsafe(self, offset: int) -> None:
        """Called by the log's flusher: on the loop (a SharedLoopFlusher's cycle, which ends with
        the log's flush mutex held, hence deferred to the end of that callback) or from another
        thread."""
        if self.closed:
            return
        if self._thread.on_loop():
            self._flushed_to(offset)
            # After the cycle that reports it has let go of the log (TurnQueue: at the end of
            # the flusher's callback, not a loop turn later).
            self._turn.soon(self._on_flushed, offset)
        else:
            self.loop.call_soon_threadsafe(self._on_flushed, offset)

    def _on_flushed(self, offset: int) -> None:
        if self.closed:
            return
        self._flushed_to(offset)
        self.core.on_flushed(offset, wall_ms())
        self._drain()

    def _flushed_to(self, offset: int) -> None:
        """Release the sends this flush was holding: a follower's next Fetch leaves here,
        first thing after the fsync, not after the core has stepped the report (its answer
        can only be read in a later callback, after the core has)."""
        if not self._gated:
            return
        due = [g for g in self._gated if g[0] <= offset]
        self._gated = [g for g in self._gated if g[0] > offset]
        for _, client, held, e, sent_at in due:
            if held is None:
                self._send(e, flushed=True)  # it was not connected when held: the usual way
            else:
                sent_at[0] = time.perf_counter()
                client.release(held)

    def inbound_request(self, source: int, request, answer=None) -> Reply:
        """Step a request (a protocol message in its newest form) into the core; the returned
        Reply gets the core's response, through ``answer(response)`` if given (done already if
        the core answered at once)."""
        handle = next(self._handles)
        fut = Reply(answer)  # completes inline: the answer reaches its connection this turn
        self._pending[handle] = fut
        if getattr(request, "leader_endpoints", None):
            self._learn_leader_endpoints(request)
        self.core.step(InboundRequest(source, request, handle), wall_ms())
        self._drain()
        return fut

    def upgrade_kraft_version(self, level: int, validate_only: bool):
        """The core's kraft.version upgrade (leader only): (error code, message, offset)."""
        out = self.core.upgrade_kraft_version(level, validate_only, wall_ms())
        self._drain()
        return out

    def wait_committed(self, offset: int) -> asyncio.Future:
        """A future completed once ``offset`` is committed (or failed when leadership ends)."""
        fut = self.loop.create_future()
        self.commits.add(offset, fut)
        return fut

    def propose(self, values) -> tuple[int, asyncio.Future]:
        """Append ``values`` as one atomic group on the leader; returns (last offset, future
        that completes once committed). Raises NotLeaderError."""
        last = self.core.propose(values, wall_ms())
        fut = self.loop.create_future()
        self.commits.add(last, fut)
        self._proposed(last, len(values))
        return last, fut

    def propose_batches(self, data, records: int, fut: asyncio.Future, timeout_s: float, result_of) -> int:
        """Append validated RecordBatch bytes (``records`` records) as they are; ``fut`` gets
        ``result_of(error_code)`` once committed, when leadership is lost, or after
        ``timeout_s``. Returns the last offset. Raises NotLeaderError."""
        last = self.core.propose_batches(data, records, wall_ms())
        self.commits.add(last, fut, self.loop.time() + timeout_s, result_of)
        self._proposed(last, records)
        return last

    def _proposed(self, last: int, records: int) -> None:
        if self.metrics is not None:
            self._propose_times.append((last, records, time.perf_counter()))
        core = self.core
        if core.has_effects:
            self._drain()
        else:  # the usual case: the proposal waits for the append tick; only the timer may move
            self._arm(core.next_deadline_ms)

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
            # Leader and follower alike: the flusher thread fsyncs (group commit) and reports
            # back through on_flushed, so the loop never blocks on the disk (a Vote or a
            # Fetch is answered while an fsync runs).
            self.log.request_flush()
        elif isinstance(e, PersistElection):
            self.state_file.write(election_to_file(e.state, self.cluster_id, self.voters,
                                                   getattr(self.core, "kraft_version", 0)))
        elif isinstance(e, (Commit, LoadSnapshot, LeaderChange)):
            # Applied once this batch's answers have left (TurnQueue, in order with failures
            # of waiters below): a follower's next Fetch waits on the answer, not on the
            # state machine reading and applying what just committed.
            self._turn.soon(self._answer_then_apply, e)
        elif isinstance(e, Append):
            pass
        else:  # an effect this driver does not know is a bug, not something to skip
            raise TypeError(f"unknown effect {e!r}")

    def _answer_then_apply(self, e) -> None:
        """Writers waiting for a commit are answered first: what they wait for is the commit
        (durable on a majority), and their answers then leave with the next writes, ahead of
        this node's state machine applying it (a write's latency at one in flight carried the
        apply). Every effect takes this second step, so applies keep the effects' order."""
        if self.closed:
            return
        if isinstance(e, Commit):
            self.commits.committed(e.up_to)
            for fn in self.on_commit:
                fn(e.up_to)
        self._turn.soon(self._apply, e)

    def _apply(self, e) -> None:
        if self.closed:
            return
        self._to_apply.append(e)
        if not self._applying:
            self._apply_next()

    def _apply_next(self) -> None:
        """Hand the listener its effects in order, a committed step of at most
        ``APPLY_STEP_BYTES`` per loop turn: between steps the loop answers Fetches and Votes
        and sends this node's next Fetch, so a node applying a large commit (a million
        partitions' records) keeps replicating and is never taken for dead."""
        self._applying = False
        q = self._to_apply
        while q and not self.closed:
            e = q[0]
            if isinstance(e, Commit):
                before = self.cursor.next_offset
                done = self.cursor.apply_some(e.up_to, APPLY_STEP_BYTES)
                self._observe_commit(self.cursor.next_offset)
                if self.snapshot_policy is not None:
                    self.snapshot_policy.after_commit(wall_ms())
                if not done and self.cursor.next_offset > before:
                    self._applying = True
                    self.loop.call_soon(self._apply_next)
                    return
            else:
                self.cursor.execute(e)
            q.popleft()

    def address_of(self, node_id: int):
        """(host, port) of a node: the current leader where it said itself in this epoch
        (BeginQuorumEpoch: Kafka's leaderEndpoints); else its Voters-record endpoint (addresses
        may change across restarts; the log has the latest), then the configuration, then
        answers. A leader restarted on a new port is in the Voters record at the old one until
        it commits UpdateRaftVoter, which needs its followers to fetch from the new one."""
        said = self._leader_said
        if said is not None and said[0] == node_id and said[1] == self.core.epoch and \
                self.core.leader_id == node_id:
            return said[2]
        voters = getattr(self.core, "voters", None)
        if voters is not None:
            for ep in voters.endpoints(node_id):
                if ep.name == self.listener_name:
                    return ep.host, ep.port
        return self.peers.get(node_id) or self._learned.get(node_id)

    def _client_for(self, node_id: int):
        address = self.address_of(node_id)
        client = self._clients.get(node_id)
        if client is not None and self._client_addresses.get(node_id) == address:
            return client
        if client is not None:  # the node moved: drop the old connection
            task = self.loop.create_task(client.close())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            del self._clients[node_id]
        if address is None or node_id == self.core.node_id:
            return None
        client = self._clients[node_id] = self._new_client(*address)
        self._client_addresses[node_id] = address
        return client

    def _learn_leader_endpoints(self, req) -> None:
        """BeginQuorumEpoch v1 names the leader's listeners: where to fetch from when the
        Voters record has no address for it yet (KIP-853)."""
        try:
            leader = req.topics[0].partitions[0].leader_id
            epoch = req.topics[0].partitions[0].leader_epoch
        except (AttributeError, IndexError):
            return
        for ep in req.leader_endpoints:
            if ep.name == self.listener_name and leader >= 0 and leader != self.core.node_id:
                self._learned[leader] = (ep.host, ep.port)
                self._leader_said = (leader, epoch, (ep.host, ep.port))

    def _learn_endpoints(self, resp) -> None:
        for ep in getattr(resp, "node_endpoints", None) or ():
            if ep.node_id >= 0 and ep.node_id != self.core.node_id:
                self._learned[ep.node_id] = (ep.host, ep.port)

    def _send(self, e: Send, flushed: bool = False) -> None:
        client = self._client_for(e.destination)
        if client is None:
            self.loop.call_soon(self._step_failed, e.destination, e.correlation_id)
            return
        version = SEND_VERSIONS[type(e.request)]
        # Gated by what the core knows to be durable (it accounts for truncations); a later
        # report of at least ``after_flushed`` is what the core will accept as that flush.
        if e.after_flushed >= 0 and not flushed and e.after_flushed > self.core.flushed_offset:
            # Encoded and registered now, written when the flush is reported (_flushed_to),
            # which also sets when it was sent.
            sent_at = [0.0]
            held = client.hold_nowait(e.request, version, lambda resp, exc: self._answered(e, sent_at[0], resp, exc))
            self._gated.append((e.after_flushed, client, held, e, sent_at))
            return
        started = time.perf_counter()
        # Connected (the usual case): no task per request, the answer steps the core from the
        # client's read loop. Otherwise a task waits for the connection.
        if client.request_nowait(e.request, version, lambda resp, exc: self._answered(e, started, resp, exc)):
            return
        task = self.loop.create_task(self._roundtrip(client, e, started))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _roundtrip(self, client: NodeClient, e: Send, started: float) -> None:
        try:
            resp = await client.request(e.request, SEND_VERSIONS[type(e.request)])
        except NetworkError as exc:
            self._answered(e, started, None, exc)
            return
        self._answered(e, started, resp, None)

    def _answered(self, e: Send, started: float, resp, exc) -> None:
        if exc is not None:
            if isinstance(exc, NetworkError):
                self._step_failed(e.destination, e.correlation_id, isinstance(exc, PeerGoneError))
                return
            raise exc
        if self.closed:
            return
        request = e.request
        if self.metrics is not None and type(request).__name__ == "FetchRequest":
            self.metrics.fetch_latency.observe(time.perf_counter() - started)
        if resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
            held = self.peer_log_throttle.allow(("cluster id", e.destination))
            if held is not None:
                log.error("node %d: node %d rejected our %s with INCONSISTENT_CLUSTER_ID: this node's cluster id "
                          "%r does not match the quorum's (was this node formatted for another cluster?)%s",
                          self.core.node_id, e.destination, type(request).__name__, self.cluster_id,
                          held_note(held))
        self._learn_endpoints(resp)
        self.core.step(InboundResponse(e.destination, e.correlation_id, resp), wall_ms())
        self._drain()
        self._turn.run()  # what the answer queued (a tick, answers to flush) runs now

    def _step_failed(self, dest: int, cid: int, peer_gone: bool = False) -> None:
        if self.closed:
            return
        self.core.step(RequestFailed(dest, cid, peer_gone), wall_ms())
        self._drain()

    def _arm(self, deadline_ms: int) -> None:
        """Tick the core at ``deadline_ms``. Timers are lazy: one already due earlier stays
        and re-checks when it fires (a deadline that moved later re-arms it then), and a
        deadline already reached ticks at the end of the current I/O callback (TurnQueue), so
        requests read together still share one append. Re-arming on every
        drain cost several timer handles per write, each a heap push in Python comparisons
        through a heap kept long by the cancelled ones."""
        self._want_at = deadline_ms
        now = wall_ms()
        if deadline_ms <= now:
            if not self._tick_soon:
                self._tick_soon = True
                # At the end of the callback that read the requests: they share this append.
                self._turn.soon(self._tick)
            return
        if self._timer is not None:
            if self._timer_at <= deadline_ms:
                return
            self._timer.cancel()
        self._timer_at = deadline_ms
        self._timer = self.loop.call_later(min((deadline_ms - now) / 1000, 3600.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if self.closed:
            return
        if self._want_at is not None and self._want_at > wall_ms():
            self._arm(self._want_at)  # the deadline moved later since this timer was set
            return
        self._tick()

    def _tick(self) -> None:
        self._tick_soon = False
        self._want_at = None
        if self.closed:
            return
        self.core.tick(wall_ms())
        self._drain()

    # --- metrics ------------------------------------------------------------------------
    def _observe(self) -> None:
        """After every drain: log problems the core counted, note a new leader or epoch, and
        pass on a new voter set (``core.observed``: one call, a drain runs per request)."""
        core, m = self.core, self.metrics
        leader_id, epoch, corrupt, read_errors, voters = core.observed()
        if corrupt != self._seen_problems[0] or read_errors != self._seen_problems[1]:
            self._report_log_problems()
        leader = (leader_id, epoch)
        if leader != self._last_leader:
            if self._last_leader is not None and not core.is_leader():
                # Lost (or never had) leadership: pending writes have an unknown fate.
                # After the commits drained before this change (they are applied in order).
                self._turn.soon(self.commits.fail_all, NotLeaderError("leadership changed before commit",
                                                                      core.leader_id, core.epoch))
            self._last_leader = leader
            log.info("node %d: epoch %d, leader %s, role %s", core.node_id, core.epoch,
                     core.leader_id if core.leader_id >= 0 else "unknown", core.role)
            if m is not None:
                if core.leader_id >= 0:  # a new known leader, not every role/epoch transition
                    m.leader_changes.inc()
                if core.role == "candidate":
                    m.elections.inc()
        if voters is not self._known_voters:
            self._known_voters = voters
            if self.on_voters_changed is not None:
                self.on_voters_changed(voters)

    def _refresh_gauges(self) -> None:
        """Pulled when /metrics is rendered, not set on every drain: a drain runs per request."""
        core, m = self.core, self.metrics
        m.current_epoch.set(core.epoch)
        m.current_leader.set(core.leader_id)
        m.is_leader.set(1 if core.is_leader() else 0)
        m.high_watermark.set(core.high_watermark)
        m.log_end_offset.set(self.log.end_offset())

    def _report_log_problems(self) -> None:
        """Log (at a bounded rate) and count what the core met and could not log: records
        from the leader that failed validation, and our own log failing a read it serves."""
        core, m = self.core, self.metrics
        corrupt = core.corrupt_fetches - self._seen_problems[0]
        read_errors = core.storage_read_errors - self._seen_problems[1]
        self._seen_problems = (core.corrupt_fetches, core.storage_read_errors)
        if corrupt:
            leader, offset, reason = core.last_corrupt_fetch
            if m is not None:
                m.fetch_corrupt_records.inc(corrupt)
            held = self.peer_log_throttle.allow(("corrupt fetch", leader))
            if held is not None:
                log.error("node %d: records fetched from leader %d at offset %d failed validation, not appended "
                          "(will retry): %s%s", core.node_id, leader, offset, reason, held_note(held))
        if read_errors:
            offset, reason = core.last_storage_read_error
            if m is not None:
                m.log_read_errors.inc(read_errors)
            held = self.peer_log_throttle.allow(("read error",))
            if held is not None:
                log.error("node %d: storage error reading the metadata log at offset %d for a Fetch, answered "
                          "KAFKA_STORAGE_ERROR: %s%s", core.node_id, offset, reason, held_note(held))

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
        self._gated = []
        if self._timer is not None:
            self._timer.cancel()
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self.commits.fail_all(NotLeaderError("node shutting down", -1, -1))
        self.commits.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)


__all__ = ["CommitWaiters", "RaftDriver", "election_from_file", "election_to_file", "wall_ms", "ErrorCode"]
