"""The controller listener's door to the ``QuorumController``: queues its write requests
(``ControllerQueue``: back-pressure from the Raft log), runs their handlers, proposes their
records through the ``RaftDriver`` and answers once they commit; ticks the
controller so expired broker leases are fenced. A node that is not the active controller
answers NOT_CONTROLLER (the controller itself decides). Also the listener fan-out that feeds
one Raft log to both the ``CommittedRecordsListener`` (digest checks, snapshots) and the
controller. The controller's gauges are in ``controller_gauges.py``.
"""

from __future__ import annotations

import logging
import time

from kraft.controller.handlers import HANDLERS, READ_ONLY, WRITE_APIS
from kraft.controller.quorum_controller import QuorumController
from kraft.controller.request_queue import ControllerQueue
from kraft.controller.request_runner import read_only_response
from kraft.server.controller_gauges import queue_gauges
from kraft.server.metrics import MS_BUCKETS, Histogram
from kraft.server.raft_driver import wall_ms

log = logging.getLogger("kraft.controller")

#: How often the active controller looks for expired leases (a fence decision follows an expiry
#: by at most this much).
TICK_INTERVAL_S = 0.1
#: How long after taking over the active controller waits before it looks for voters that never
#: fetched from it (a live voter fetches within milliseconds of the new epoch).
SILENT_VOTER_CHECK_MS = 1000
#: Longest run of controller requests between two looks at the network.
WORK_SLICE_S = 0.02

SETTINGS = ("num.partitions", "default.replication.factor", "min.insync.replicas",
            "unclean.leader.election.enable", "broker.session.timeout.ms", "broker.heartbeat.interval.ms",
            "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
            "leader.imbalance.per.broker.percentage", "eligible.leader.replicas.enable", "authorizer.class.name",
            "super.users", "allow.everyone.if.no.acl.found",
            "kraft.broker.disconnected.session.timeout.ms")


def controller_settings(cfg) -> dict:
    """The controller's settings by Kafka name from a NodeConfig (values as configured)."""
    return {k: cfg.values[k] for k in SETTINGS if k in cfg.values}


class ListenerFanOut:
    """One RaftListener that feeds several, in order (the first one's counters are the node's)."""

    def __init__(self, *listeners):
        self.listeners = listeners

    @property
    def records(self):
        return getattr(self.listeners[0], "records", None)

    def handle_commit(self, batches) -> None:
        for lst in self.listeners:
            lst.handle_commit(batches)

    def handle_load_snapshot(self, reader) -> None:
        for lst in self.listeners:
            lst.handle_load_snapshot(reader)

    def handle_leader_change(self, leader_and_epoch) -> None:
        for lst in self.listeners:
            lst.handle_leader_change(leader_and_epoch)


def _retrieve(fut) -> None:
    if not fut.cancelled():
        fut.exception()  # the controller learns of failures through the listener


class ControllerRequests:
    """``apis``: the API keys this serves. Answers are futures completed at commit.

    Write requests wait in a ``ControllerQueue`` (``kraft.controller.request_queue``): the
    broker lane runs as it comes, the admin lane only while the Raft leader's uncommitted tail
    is below its bound, and resumes as commits drain it. Also the listener's admission gate
    (``KafkaServer(admission=...)``): while the queue is full, connections stop reading write
    requests until it drains."""

    def __init__(self, driver, controller: QuorumController, endpoints=()):
        self.driver = driver
        self.controller = controller
        controller.append = self._append
        controller.respond = self._respond
        controller.settings.setdefault("controller.endpoints", tuple(endpoints))
        self.apis = frozenset(HANDLERS)
        self.writes = WRITE_APIS
        # Kafka's ControllerEventManager histograms: time queued, time handling (ms).
        self.queue_time = Histogram("kraft_controller_event_queue_time_ms",
                                    "Controller requests: time waiting in the queue (ms)", MS_BUCKETS)
        self.processing_time = Histogram("kraft_controller_event_queue_processing_time_ms",
                                         "Controller requests: time running the handler and proposing (ms)",
                                         MS_BUCKETS)
        self.queue = ControllerQueue(controller, driver.core, on_started=self._started, gone=_gone,
                                     on_error=self._failed)
        metrics = getattr(driver, "metrics", None)
        if metrics is not None:
            metrics.controller_event_queue_time = self.queue_time
            metrics.controller_event_queue_processing_time = self.processing_time
            queue_gauges(metrics, self.queue, driver.core)
        self._timer = None
        self._expiry = None  # (timer, when) of the next deadline in the queue
        self._scheduled = False
        self._gated: list = []  # connections waiting for the queue to have room (admission gate)
        self._slice_mark = 0.0
        driver.on_commit.append(self._on_commit)
        self.closed = False
        self._peer_of: dict[int, str] = {}  # broker id -> connection its last heartbeat came over
        self._took_over_ms: int | None = None  # when this node last became the active controller
        self._voters_checked = False

    def _check_silent_voters(self, now_ms: int) -> None:
        """A new active controller gives every broker a fresh session (Kafka does), so a combined
        node that died with the old controller would keep leading its partitions (group
        coordinators among them) for a whole session. Its Raft replica is the evidence: a voter
        that has not fetched from this leader ``SILENT_VOTER_CHECK_MS`` after the takeover is
        treated as a broker whose connection closed at the takeover (fenced
        ``kraft.broker.disconnected.session.timeout.ms`` after it unless it heartbeats)."""
        ctl, core = self.controller, self.driver.core
        if not (ctl.active and core.is_leader()):
            self._took_over_ms, self._voters_checked = None, False
            return
        if self._took_over_ms is None:
            self._took_over_ms = now_ms
            return
        if self._voters_checked or now_ms - self._took_over_ms < SILENT_VOTER_CHECK_MS:
            return
        self._voters_checked = True
        progress = core.quorum.state.progress
        silent = [b for b in ctl.view.cluster.brokers if b != ctl.node_id
                  and (p := progress.voters.get(b)) is not None and p.last_fetch_ms < 0]
        if silent:
            log.info("node %d: voters %s have not fetched since this node took over: their brokers are fenced "
                     "unless they heartbeat", ctl.node_id, silent)
            ctl.broker_disconnected(silent, self._took_over_ms)

    def disconnected(self, peer: str) -> None:
        """A connection of the controller listener closed: the brokers that heartbeated over
        it must be heard from again soon (``QuorumController.broker_disconnected``)."""
        gone = [b for b, p in self._peer_of.items() if p == peer]
        if gone:
            for b in gone:
                del self._peer_of[b]
            self.controller.broker_disconnected(gone, wall_ms())

    def start(self) -> None:
        self._timer = self.driver.loop.call_later(TICK_INTERVAL_S, self._tick)

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self._expiry is not None:
            self._expiry[0].cancel()

    def handle(self, request, version: int, peer: str | None = None):
        api_key = request.API_KEY
        ctl = self.controller
        if api_key in (62, 63) and peer is not None:
            self._peer_of[request.broker_id] = peer
        if api_key in READ_ONLY:  # from the committed image, on any controller
            return read_only_response(ctl, api_key, request, version, wall_ms(), self.driver.core.leader_id)
        fut = self.driver.loop.create_future()
        self.queue.add(api_key, request, version, wall_ms(), fut)
        self._schedule()
        return fut

    # --- the admission gate (network.KafkaServer) --------------------------------------
    def holds(self, api_key: int) -> bool:
        """Must a request of ``api_key`` stay unread for now? (Writes, while the queue is full.)"""
        return api_key in self.writes and self.queue.full

    def wait(self, resume) -> None:
        """``resume()`` is called once the queue has room again."""
        self._gated.append(resume)

    def _open_gate(self) -> None:
        if self._gated and not self.queue.full:
            waiting, self._gated = self._gated, []
            for resume in waiting:
                resume()

    # --- running the queue ----------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._scheduled and not self.closed:
            self._scheduled = True
            self.driver.loop.call_soon(self._work)

    def _on_commit(self, up_to: int) -> None:
        """The log drained a little: admin requests held back may start now."""
        if self.queue.has_work():
            self._schedule()

    def _work(self) -> None:
        """Start queued requests for at most ``WORK_SLICE_S``, then let the loop serve others
        (Raft fetches above all: a burst of big CreateTopics must not starve replication)."""
        self._scheduled = False
        if self.closed:
            return
        q = self.queue
        end = time.perf_counter() + WORK_SLICE_S
        self._slice_mark = time.perf_counter()

        def keep_going() -> bool:
            now = time.perf_counter()
            self.processing_time.observe((now - self._slice_mark) * 1000.0)
            self._slice_mark = now
            return now < end
        q.run(wall_ms(), keep_going)
        if q.has_work() and not q.blocked():
            self._schedule()  # more to do: after the loop served what came meanwhile
        self._arm_expiry()
        self._open_gate()

    def _arm_expiry(self) -> None:
        """A timer for the next deadline in the queue (a blocked lane must still time out)."""
        due = self.queue.next_deadline_ms()
        if self._expiry is not None:
            if due is not None and self._expiry[1] == due:
                return
            self._expiry[0].cancel()
            self._expiry = None
        if due is not None:
            delay = max(0.0, (due + 1 - wall_ms()) / 1000)
            self._expiry = (self.driver.loop.call_later(delay, self._expire), due)

    def _expire(self) -> None:
        self._expiry = None
        if not self.closed:
            self.queue.expire(wall_ms())
            self._arm_expiry()
            self._open_gate()

    def _started(self, fut, api_key: int, waited_ms: int) -> None:
        self.queue_time.observe(float(waited_ms))

    @staticmethod
    def _failed(fut, exc) -> None:
        log.error("controller request failed: %r", exc, exc_info=exc)
        if not fut.done():
            fut.set_exception(exc)

    def _append(self, values) -> int:
        last, fut = self.driver.propose(values)
        fut.add_done_callback(_retrieve)
        return last

    @staticmethod
    def _respond(fut, response) -> None:
        if not fut.done():
            fut.set_result(response)

    def _tick(self) -> None:
        self._timer = None
        if self.closed or self.driver.closed:
            return
        try:
            self.controller.tick(wall_ms())
            self._check_silent_voters(wall_ms())
        finally:
            self._timer = self.driver.loop.call_later(TICK_INTERVAL_S, self._tick)
        if self.queue.has_work():
            self._schedule()  # a fence begun by the tick, or work no commit callback will wake


def _gone(fut) -> bool:
    return fut.done()  # the connection went away (its answer was cancelled)
