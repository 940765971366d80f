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

from kraft.controller.quorum_controller import QuorumController
from kraft.controller.request_runner import READ_ONLY, read_only_response, submit_write
from kraft.metadata.snapshot_image import write_image_snapshot
from kraft.raft import OffsetAndEpoch
from kraft.testing.node import SimNode

TICK_INTERVAL_MS = 100
CLUSTER_ID = "sim"


class ControllerListener:
    """The node's RaftListener: feeds the controller and reports what it committed."""

    def __init__(self, node_id: int, controller: QuorumController, sim):
        self.node_id = node_id
        self.controller = controller
        self.sim = sim
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
    __slots__ = ("src", "incarnation", "cid", "wait", "epoch", "answered")

    def __init__(self, src, incarnation, cid):
        self.src, self.incarnation, self.cid = src, incarnation, cid
        self.wait = self.epoch = None
        self.answered = False


class ControllerSimNode(SimNode):
    """``sim`` is a ``ControllerCluster``: it has ``checks``, ``links`` and ``controller_settings``."""

    @property
    def controller(self) -> QuorumController | None:
        return None if self.state_machine is None else self.state_machine.controller

    def new_listener(self):
        ctl = QuorumController(self.id, cluster_id=CLUSTER_ID, settings=self.sim.controller_settings,
                               append=self._append, respond=self._respond)
        ctl.max_records_per_proposal = self.sim.max_records_per_proposal
        return ControllerListener(self.id, ctl, self.sim)

    def start(self, now: int) -> None:
        super().start(now)
        self.sim.schedule(now + TICK_INTERVAL_MS, self._controller_tick, self.incarnation)

    def _controller_tick(self, incarnation: int) -> None:
        if not self.alive or self.incarnation != incarnation:
            return
        now = self.sim.now
        fenced = self.controller.tick(now)
        if fenced:
            self.sim.checks.fenced_by_expiry += fenced
            self.sim.checks.check_view(self.id, self.controller)
        self.drain(now)
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
        before = ctl.view.cluster.brokers.get(request.broker_id) if api_key == 63 else None
        submit_write(ctl, self.core, api_key, request, version, now, token)
        if before is not None and before.fenced:
            after = ctl.view.cluster.brokers.get(request.broker_id)
            if after is not None and not after.fenced:
                self.sim.checks.check_unfence(self.id, before.id, before.epoch, request.current_metadata_offset)
        if not token.answered:
            token.wait = ctl.next_offset + ctl.uncommitted_offsets - 1
            token.epoch = ctl.epoch
        if ctl.active:
            self.sim.checks.check_view(self.id, ctl)
        self.drain(now)

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
        last = self.core.propose(values, now)
        self.drain(now)
        return last

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
