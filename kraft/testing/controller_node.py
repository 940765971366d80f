"""A simulated controller node: a ``SimNode`` whose Raft listener is a ``QuorumController``,
driven as the controller listener in ``server/`` drives it (``kraft.controller.request_runner``:
reads from the committed image, writes submitted unless the core moved on; answers released
by the controller; ``tick`` every ``TICK_INTERVAL_MS`` for lease expiry), and snapshots of the
committed image taken as ``server/metadata_snapshots.py`` takes them (never inside an open
metadata transaction, only at the committed offset).

Client requests arrive as ``("creq", client incarnation, correlation id, request, version)``
and are answered with ``("cresp", client incarnation, correlation id, response, leader hint)``;
the hint is the Raft leader this node knows of (what a broker learns from the metadata log).
Every commit, snapshot and answer is reported to ``ControllerChecks``. No real I/O or time.
"""

from __future__ import annotations

import collections

from kraft.controller.quorum_controller import QuorumController
from kraft.controller.request_queue import ControllerQueue
from kraft.controller.request_runner import READ_ONLY, read_only_response
from kraft.metadata.snapshot_image import write_image_snapshot
from kraft.raft import Commit, OffsetAndEpoch
from kraft.testing.node import SimNode

TICK_INTERVAL_MS = 100
CLUSTER_ID = "sim"
#: Simulated CPU a queue run may use before the node looks at its inputs again (the server's
#: ControllerRequests.WORK_SLICE_S).
WORK_SLICE_MS = 20
#: Committed bytes the listener gets per step when CPU is simulated (RaftDriver.APPLY_STEP_BYTES,
#: scaled to the simulator's small logs).
APPLY_STEP_BYTES = 4096


class ControllerListener:
    """The node's RaftListener: feeds the controller and reports what it committed."""

    def __init__(self, node_id: int, controller: QuorumController, sim, node=None):
        self.node_id = node_id
        self.controller = controller
        self.sim = sim
        self.node = node
        self.checks = sim.checks
        self.last_epoch = 0

    @property
    def next_offset(self) -> int:
        return self.controller.next_offset

    def handle_commit(self, batches) -> None:
        # One batch at a time (a grouping the cursor may choose too), so that the image at every
        # batch boundary is seen and checked; the batch first, so that answers released inside
        # handle_commit are checked against it.
        ctl = self.controller
        cost = self.sim.cpu_ms_per_record
        if cost and not ctl.active:  # a standby replays what it applies (the active one adopts its views)
            self.node.charge(cost * sum(b.records_count for b in batches if not b.is_control), self.sim.now)
        for b in batches:
            self.checks.committed_batch(self.node_id, b)
            self.last_epoch = b.partition_leader_epoch
            ctl.handle_commit([b])
            self.checks.committed_image(self.node_id, ctl.next_offset, ctl.image, ctl.open_transaction)
            self.checks.no_metadata_errors(self.node_id, ctl)
            if ctl.active and ctl.open_transaction and self.sim.on_open_transaction is not None:
                self.sim.on_open_transaction(self.node_id)  # a moment worth a fault

    def handle_load_snapshot(self, reader) -> None:
        ctl = self.controller
        ctl.handle_load_snapshot(reader)
        self.last_epoch = reader.snapshot_id.epoch
        self.checks.snapshots_loaded += 1
        self.checks.committed_image(self.node_id, ctl.next_offset, ctl.image, ctl.open_transaction)
        self.checks.no_metadata_errors(self.node_id, ctl)

    def handle_leader_change(self, leader_and_epoch) -> None:
        was_active = self.controller.active
        if was_active:
            self.checks.dropped_uncommitted += self.controller.uncommitted_offsets
        self.controller.handle_leader_change(leader_and_epoch)
        if self.controller.active and not was_active:
            self.checks.activations += 1
            if self.controller.open_transaction:  # the previous controller died inside one
                self.checks.inherited_transactions += 1


class _Token:
    __slots__ = ("src", "incarnation", "cid", "wait", "epoch", "answered", "fenced_before")

    def __init__(self, src, incarnation, cid):
        self.src, self.incarnation, self.cid = src, incarnation, cid
        self.wait = self.epoch = self.fenced_before = None
        self.answered = False


class ControllerSimNode(SimNode):
    """``sim`` is a ``ControllerCluster``: it has ``checks``, ``links``, ``controller_settings``
    and ``cpu_ms_per_record``. Write requests go through a ``ControllerQueue`` as in the server.
    With ``cpu_ms_per_record`` set, the node spends simulated CPU on every record it proposes or
    replays (and reads no input meanwhile), runs its queue in slices of ``WORK_SLICE_MS`` and
    hands its listener committed records a step at a time, as the server's loop does."""

    @property
    def controller(self) -> QuorumController | None:
        return None if self.state_machine is None else self.state_machine.controller

    def new_listener(self):
        ctl = QuorumController(self.id, cluster_id=CLUSTER_ID, settings=self.sim.controller_settings,
                               append=self._append, respond=self._respond)
        ctl.max_records_per_proposal = self.sim.max_records_per_proposal
        return ControllerListener(self.id, ctl, self.sim, self)

    def start(self, now: int) -> None:
        self._to_apply: collections.deque = collections.deque()
        self._apply_due = False
        self._queue_due = False
        self.queue = None  # (commits delivered while the core starts find no queue yet)
        super().start(now)
        self.queue = ControllerQueue(self.controller, self.core, on_started=self._started)
        self.sim.schedule(now + TICK_INTERVAL_MS, self._controller_tick, self.incarnation)

    def _controller_tick(self, incarnation: int) -> None:
        if not self.alive or self.incarnation != incarnation:
            return
        now = self.sim.now
        if self.busy_until > now:
            self.sim.schedule(self.busy_until, self._controller_tick, incarnation)
            return
        fenced = self.controller.tick(now)
        if fenced:
            self.sim.checks.fenced_by_expiry += fenced
            self.sim.checks.check_view(self.id, self.controller)
        self.queue.expire(now)
        self.drain(now)
        self._run_queue(incarnation)
        self.sim.schedule(now + TICK_INTERVAL_MS, self._controller_tick, incarnation)

    # --- client requests ------------------------------------------------------------------
    def deliver(self, src: int, payload, now: int) -> None:
        if payload[0] != "creq":
            super().deliver(src, payload, now)
            return
        _, incarnation, cid, request, version = payload
        ctl = self.controller
        api_key = request.API_KEY
        if api_key in READ_ONLY:
            self._send(src, incarnation, cid, read_only_response(ctl, api_key, request, version, now,
                                                                 self.core.leader_id))
            return
        token = _Token(src, incarnation, cid)
        if api_key == 63:
            before = ctl.view.cluster.brokers.get(request.broker_id)
            if before is not None and before.fenced:
                token.fenced_before = (before, request.current_metadata_offset)
        self.queue.add(api_key, request, version, now, token)
        self._run_queue(self.incarnation)

    def _run_queue(self, incarnation: int) -> None:
        """Start queued requests, for one slice of simulated CPU when CPU is simulated; the
        rest after the inputs that came meanwhile, or after a commit when the log is full."""
        self._queue_due = False
        if not self.alive or self.incarnation != incarnation:
            return
        now = self.sim.now
        if self.busy_until > now:
            self._queue_later()
            return
        if self.sim.cpu_ms_per_record:
            end = max(float(now), self._cpu_ms) + WORK_SLICE_MS
            self.queue.run(now, lambda: self._cpu_ms < end)
        else:
            self.queue.run(now)
        self.drain(now)
        if self.queue.has_work() and not self.queue.blocked():
            self._queue_later()

    def _queue_later(self) -> None:
        if not self._queue_due:
            self._queue_due = True
            self.sim.schedule(max(self.sim.now + 1, self.busy_until), self._run_queue, self.incarnation)

    def _started(self, token: _Token, api_key: int, waited_ms: int) -> None:
        ctl = self.controller
        if token.fenced_before is not None:
            b, reported = token.fenced_before
            after = ctl.view.cluster.brokers.get(b.id)
            if after is not None and not after.fenced:
                self.sim.checks.check_unfence(self.id, b.id, b.epoch, reported)
        if not token.answered:
            token.wait = ctl.next_offset + ctl.uncommitted_offsets - 1
            token.epoch = ctl.epoch
        if ctl.active:
            self.sim.checks.check_view(self.id, ctl)

    def _respond(self, token: _Token, response) -> None:
        token.answered = True
        self.sim.checks.check_answer(self.id, self.controller, response, token.wait, token.epoch)
        self._send(token.src, token.incarnation, token.cid, response)

    def _send(self, dst: int, incarnation: int, cid: int, response) -> None:
        hint = self.core.leader_id if self.core is not None else -1
        self.sim.links.send(self.id, dst, ("cresp", incarnation, cid, response, hint))

    def _append(self, values) -> int:
        # As the server's RaftDriver.propose: the effects run right after each proposal (with no
        # linger, each proposal is then its own batch).
        now = self.sim.now
        cost = self.sim.cpu_ms_per_record
        if cost:
            self.charge(cost * len(values), now)
        last = self.core.propose(values, now)
        self.drain(now)
        return last

    # --- the listener, a step at a time -----------------------------------------------------
    def to_listener(self, eff, now: int) -> None:
        if not self.sim.cpu_ms_per_record:
            super().to_listener(eff, now)
            self._after_commit(eff)
            return
        self._to_apply.append(eff)
        if not self._apply_due:
            self._apply_next(self.incarnation)

    def _apply_next(self, incarnation: int) -> None:
        """As RaftDriver._apply_next: effects in order, a Commit in steps of
        ``APPLY_STEP_BYTES``, the node's inputs read between steps."""
        self._apply_due = False
        if not self.alive or self.incarnation != incarnation:
            return
        q = self._to_apply
        while q:
            e = q[0]
            if type(e) is Commit:
                before = self.cursor.next_offset
                done = self.cursor.apply_some(e.up_to, APPLY_STEP_BYTES)
                if not done and self.cursor.next_offset > before:
                    self._apply_due = True
                    self.sim.schedule(max(self.sim.now + 1, self.busy_until), self._apply_next, incarnation)
                    return
            else:
                self.cursor.execute(e)
            q.popleft()
            self._after_commit(e)

    def _after_commit(self, eff) -> None:
        """A commit may let held-back admin requests start (the server's on_commit hook)."""
        if type(eff) is Commit and self.queue is not None and self.queue.has_work() and not self._queue_due:
            self._queue_later()

    # --- snapshots of the committed image ---------------------------------------------------
    def maybe_snapshot(self, now: int) -> None:
        lst = self.state_machine
        ctl = lst.controller
        offset = ctl.next_offset
        if not self.snapshot_interval or offset - self.last_snapshot_offset < self.snapshot_interval:
            return
        if offset > self.core.high_watermark or offset <= self.log.start_offset() or ctl.open_transaction:
            return
        snapshot_id = OffsetAndEpoch(offset, lst.last_epoch)
        try:
            writer = self.core.create_snapshot(snapshot_id, now)
        except ValueError:
            return
        self.last_snapshot_offset = offset
        if writer is not None:
            write_image_snapshot(ctl.image, writer.append)
            writer.freeze()
            self.sim.checks.snapshot_written(self.id, self.log, snapshot_id)
