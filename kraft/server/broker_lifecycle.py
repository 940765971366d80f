"""Runs a broker's ``BrokerLifecycle`` on the asyncio loop: registers with the active
controller (retrying with a pause while it is refused or no controller answers), then sends a
heartbeat every ``broker.heartbeat.interval.ms`` (at once-ish while fenced or shutting down)
with the metadata offset the broker has applied, and re-registers after a lost registration.
``controlled_shutdown`` asks to shut down and waits, bounded, for ``should_shut_down``.
One request at a time, from one task; ``ControllerClient`` follows NOT_CONTROLLER. Decisions
are ``kraft.broker.lifecycle``'s; this module only does the I/O and the logging.
"""

from __future__ import annotations

import asyncio
import logging

from kraft.broker.lifecycle import BrokerLifecycle, BrokerState
from kraft.client.controller_client import ControllerClient
from kraft.errors import ErrorCode, KraftError
from kraft.server.raft_driver import wall_ms

log = logging.getLogger("kraft.broker.lifecycle")


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class BrokerLifecycleDriver:
    def __init__(self, lifecycle: BrokerLifecycle, client: ControllerClient, metadata_offset, *,
                 retry_backoff_ms: int = 1000, request_deadline_s: float = 5.0, on_change=None):
        self.lifecycle = lifecycle
        self.client = client
        self.metadata_offset = metadata_offset  # () -> the last metadata offset the broker applied
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.request_deadline_s = request_deadline_s
        self.on_change = on_change  # () -> None, after every state change
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._last_logged_error = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="broker-lifecycle")
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            # A bug here would leave the broker fenced forever: say so loudly.
            log.critical("broker %d: lifecycle stopped: %r", self.lifecycle.broker_id, task.exception(),
                         exc_info=task.exception())

    async def _run(self) -> None:
        lc = self.lifecycle
        while not lc.done:
            if lc.wants_registration():
                pause = self.retry_backoff_s if not await self._register() else 0
            else:
                await self._heartbeat()
                pause = lc.next_heartbeat_ms() / 1000
            if lc.done:
                break
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), pause)
            except asyncio.TimeoutError:
                pass

    async def _register(self) -> bool:
        lc = self.lifecycle
        sent = wall_ms()
        try:
            resp = await self.client.call(lc.registration_request(), deadline_s=self.request_deadline_s)
        except KraftError as exc:
            self._log_error(-1, "registration: %s", exc)
            return False
        code = lc.on_registration(resp, sent)
        if code != 0:
            self._log_error(code, "broker %d: the controller refused the registration: %s (retrying)",
                            lc.broker_id, _name(code))
            return False
        self._last_logged_error = 0
        self._changed()
        log.info("broker %d: registered with broker epoch %d (incarnation %s); fenced until caught up",
                 lc.broker_id, lc.broker_epoch, lc.incarnation_id)
        return True

    async def _heartbeat(self) -> None:
        lc = self.lifecycle
        before = lc.state
        sent = wall_ms()
        try:
            resp = await self.client.call(lc.heartbeat_request(self.metadata_offset()),
                                          deadline_s=self.request_deadline_s)
        except KraftError as exc:
            self._log_error(-1, "broker %d: heartbeat: %s", lc.broker_id, exc)
            return
        code = lc.on_heartbeat(resp, sent)
        if lc.state != before:
            self._changed()
        if code != 0:
            if not lc.registered:
                log.warning("broker %d: registration lost (%s): registering again", lc.broker_id, _name(code))
            else:
                self._log_error(code, "broker %d: heartbeat answered %s", lc.broker_id, _name(code))
            return
        self._last_logged_error = 0
        if lc.state != before:
            log.info("broker %d: %s -> %s (fenced=%s, caught up=%s)", lc.broker_id, before.name, lc.state.name,
                     lc.fenced, lc.caught_up)

    def wake(self) -> None:
        """Heartbeat now (a log directory just went offline: the controller should move its
        partitions without waiting for the next interval)."""
        self._wake.set()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _log_error(self, code: int, fmt: str, *args) -> None:
        # Once per distinct error: a broker retrying every second must not flood its log.
        if code != self._last_logged_error or code == -1:
            log.warning(fmt, *args)
        self._last_logged_error = code

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away; True if it said ``should_shut_down``
        (or there was nothing to move) within ``timeout_s``."""
        lc = self.lifecycle
        was = lc.state
        lc.begin_controlled_shutdown()
        if lc.done:
            return True
        log.info("broker %d: controlled shutdown (from %s): waiting up to %.1f s for the controller",
                 lc.broker_id, was.name, timeout_s)
        self._wake.set()
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while not lc.done and loop.time() < end:
            await asyncio.sleep(0.02)
        if lc.state == BrokerState.SHUTTING_DOWN:
            log.info("broker %d: the controller moved every leadership away: shutting down", lc.broker_id)
            return True
        log.warning("broker %d: controlled shutdown did not complete within %.1f s: shutting down anyway",
                    lc.broker_id, timeout_s)
        return False

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.client.close()
