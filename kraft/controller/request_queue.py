"""``ControllerQueue``: the write requests waiting for the active controller (Kafka's controller
event queue), and the back-pressure that keeps a burst of them from outrunning the Raft log.

Two lanes, each first in, first out:

* the broker lane (``BROKER_APIS``: registration, heartbeats, AlterPartition, producer id
  blocks) runs whatever arrives: a broker's lease and ISR must not wait behind an admin's burst
  (a heartbeat stuck behind a million partitions of CreateTopics gets its broker fenced);
* the admin lane (everything else) starts a request only while the Raft leader accepts
  proposals (``RaftCore.accepting_proposals``: its uncommitted tail below the bound), so the
  controller proposes as fast as a majority acknowledges and no faster. A request that cannot
  start waits here; once started it runs whole (an atomic unit is never cut) and is answered
  when its records commit.

Deadlines, as Kafka's ``appendWithDeadline``: a request carrying a timeout (CreateTopics,
DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments: ``timeout_ms``)
that has not started when it runs out is answered REQUEST_TIMED_OUT and never runs. So that
answer always means "nothing was applied": a client may retry it and will not find its own
first attempt. A request that started is answered at its commit, whatever the time.

Bound: at most ``max_queued`` requests wait; past it ``full`` tells the driver to stop reading
write requests (Kafka's ``queued.max.requests`` blocks its network threads the same way), so
the waiting requests and their memory stay bounded however many clients push.

Sans-I/O: time comes in as ``now_ms``, how long a ``run`` may go on is the caller's
``keep_going()``; answers go out through the controller's ``respond``. This module must not
import asyncio, sockets or time.
"""

from __future__ import annotations

import collections
from typing import Callable

from kraft.controller.request_runner import core_leads_epoch, submit_write
from kraft.errors import ErrorCode

#: Requests brokers send about themselves: never held back by the log's backlog.
BROKER_APIS = frozenset({62, 63, 56, 67})
#: Requests whose ``timeout_ms`` bounds their wait in the queue (Kafka's ControllerApis gives
#: these, and only these, a deadline from the request).
TIMED_APIS = frozenset({19, 20, 37, 43, 45})
#: Waiting write requests past which the driver stops reading more (Kafka's queued.max.requests).
MAX_QUEUED_REQUESTS = 500
TIMED_OUT_MESSAGE = ("The request waited in the controller's queue past its timeout (the metadata log was "
                     "busy) and was not applied.")


class _Queued:
    __slots__ = ("api_key", "request", "version", "token", "deadline_ms", "arrived_ms")

    def __init__(self, api_key, request, version, token, deadline_ms, arrived_ms):
        self.api_key, self.request, self.version, self.token = api_key, request, version, token
        self.deadline_ms, self.arrived_ms = deadline_ms, arrived_ms


class ControllerQueue:
    """``controller``: a ``QuorumController``; ``core``: the Raft core it proposes through.
    Optional hooks: ``on_started(token, api_key, waited_ms)`` once each request was submitted;
    ``gone(token)``: the asker went away, skip it; ``on_error(token, exc)``: a handler raised
    (without it the exception propagates: the simulator wants bugs to surface)."""

    def __init__(self, controller, core, *, max_queued: int = MAX_QUEUED_REQUESTS, on_started=None, gone=None,
                 on_error=None):
        self.controller = controller
        self.core = core
        self.max_queued = max_queued
        self.on_started = on_started
        self.gone = gone
        self.on_error = on_error
        self._broker: collections.deque[_Queued] = collections.deque()
        self._admin: collections.deque[_Queued] = collections.deque()
        self.timed_out = 0  # requests answered REQUEST_TIMED_OUT without running
        self.held_back = 0  # times the admin lane waited for the log to drain
        self.peak_backlog = 0  # the most uncommitted records seen at an admission

    def __len__(self) -> int:
        return len(self._broker) + len(self._admin)

    @property
    def full(self) -> bool:
        """As many requests wait as the bound allows: read no more write requests for now."""
        return len(self) >= self.max_queued

    def add(self, api_key: int, request, version: int, now_ms: int, token) -> None:
        deadline = None
        if api_key in TIMED_APIS:
            deadline = now_ms + max(0, int(getattr(request, "timeout_ms", 0) or 0))
        item = _Queued(api_key, request, version, token, deadline, now_ms)
        (self._broker if api_key in BROKER_APIS else self._admin).append(item)
        if api_key == 63:
            self.controller.heartbeat_arrived(request.broker_id, request.broker_epoch, now_ms)

    def admits(self) -> bool:
        """May an admin request start now? Always when this node cannot propose (it is then
        answered NOT_CONTROLLER at once, which must not wait for a log that will not drain)."""
        ctl, core = self.controller, self.core
        if not ctl.active or not core_leads_epoch(core, ctl):
            return True
        records = core.uncommitted()[0]
        if records > self.peak_backlog:
            self.peak_backlog = records
        return core.accepting_proposals()

    def run(self, now_ms: int, keep_going: Callable[[], bool] = lambda: True) -> int:
        """Start queued requests while ``keep_going()`` (asked after each): first the steps of a
        unit in progress (``QuorumController.stepping``: nothing else until it is done), then the
        broker lane, then the admin lane; steps and admin requests only while the log admits.
        Returns how many steps and requests ran."""
        self.expire(now_ms)
        started = 0
        ctl = self.controller
        while True:
            if ctl.stepping:
                if not ctl.step_ready or not self.admits():
                    self.held_back += 1
                    return started
                ctl.run_step()
            else:
                lane = self._broker if self._broker else self._admin
                if not lane:
                    return started
                if lane is self._admin and not self.admits():
                    self.held_back += 1
                    return started
                q = lane.popleft()
                if self.gone is not None and self.gone(q.token):
                    continue
                self._start(q, now_ms)
            started += 1
            if not keep_going():
                return started

    def has_work(self) -> bool:
        """Requests wait, or a unit is in progress."""
        return bool(self._broker or self._admin) or self.controller.stepping

    def blocked(self) -> bool:
        """What is left waits for the log to drain (a commit, not time, unblocks it)."""
        ctl = self.controller
        if ctl.stepping:
            return not ctl.step_ready or not self.admits()
        if not self._broker:
            return bool(self._admin) and not self.admits()
        return False

    def expire(self, now_ms: int) -> int:
        """Answer REQUEST_TIMED_OUT to every request whose deadline passed before it started."""
        n = 0
        for lane in (self._broker, self._admin):
            if not any(q.deadline_ms is not None and q.deadline_ms < now_ms for q in lane):
                continue
            keep = collections.deque()
            for q in lane:
                if q.deadline_ms is not None and q.deadline_ms < now_ms:
                    self.controller.answer_error(q.token, q.api_key, q.request, q.version,
                                                 ErrorCode.REQUEST_TIMED_OUT, TIMED_OUT_MESSAGE)
                    n += 1
                else:
                    keep.append(q)
            lane.clear()
            lane.extend(keep)
        self.timed_out += n
        return n

    def next_deadline_ms(self) -> int | None:
        """When the next waiting request times out, if one can."""
        deadlines = [q.deadline_ms for lane in (self._broker, self._admin) for q in lane if q.deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def _start(self, q: _Queued, now_ms: int) -> None:
        if self.on_error is None:
            submit_write(self.controller, self.core, q.api_key, q.request, q.version, now_ms, q.token)
        else:
            try:
                submit_write(self.controller, self.core, q.api_key, q.request, q.version, now_ms, q.token)
            except Exception as exc:  # a handler bug: that request fails, the queue goes on
                self.on_error(q.token, exc)
                return
        if self.on_started is not None:
            self.on_started(q.token, q.api_key, now_ms - q.arrived_ms)
