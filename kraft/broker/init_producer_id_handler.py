"""InitProducerId (API key 22, v0-v5) for idempotent producers (Kafka's
``TransactionCoordinator.handleInitProducerId`` without a transactional id): each call gets a
new producer id at epoch 0 from this broker's current block of ids. Blocks come from the
active controller (AllocateProducerIds, API 67, KIP-730) through the injected
``fetch_block()``, which returns ``(start, length)`` or an awaitable of it; requests that
arrive while a block is being fetched wait for it, in order. Transactional ids are not
served (no transaction coordinator): COORDINATOR_NOT_AVAILABLE.

``local_block_source`` is the fallback for a broker without a controller (the static-image
broker of tests and demos): blocks derived from the wall clock and the broker id, unique
across restarts of that broker but not coordinated with anyone. No sockets here.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

from kraft.errors import ErrorCode
from kraft.protocol import InitProducerIdRequest, InitProducerIdResponse

log = logging.getLogger("kraft.broker.producer_ids")
R = InitProducerIdResponse
LOCAL_BLOCK_SIZE = 1024


def local_block_source(broker_id: int, clock_ms=None):
    """``fetch_block`` for a broker with no controller: ``(now_ms << 20 | broker bits, 1024)``,
    strictly increasing (see the module doc for what it does not guarantee)."""
    clock = clock_ms or (lambda: int(time.time() * 1000))
    last = [-1]

    def fetch_block():
        start = (clock() << 20) | ((broker_id & 0x3FF) << 10)
        if start <= last[0]:
            start = last[0] + (1 << 20)
        last[0] = start
        return start, LOCAL_BLOCK_SIZE
    return fetch_block


class InitProducerIdHandler:
    def __init__(self, fetch_block):
        self.fetch_block = fetch_block
        self._next = self._end = 0  # the current block is [_next, _end)
        self._waiters: list = []  # (future, version) waiting for a block
        self._fetching = False

    def handle(self, request: InitProducerIdRequest, version: int):
        if request.transactional_id is not None:
            return _answer(int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if self._next < self._end:
            return self._take()
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if not self._fetching:
            self._fetch()
        return fut

    def _take(self) -> InitProducerIdResponse:
        pid = self._next
        self._next += 1
        return _answer(int(ErrorCode.NONE), pid, 0)

    def _fetch(self) -> None:
        self._fetching = True
        try:
            got = self.fetch_block()
        except Exception as exc:  # noqa: BLE001 - any failure: clients retry
            self._on_block(None, exc)
            return
        if inspect.isawaitable(got):
            task = asyncio.ensure_future(got)
            task.add_done_callback(lambda t: self._on_block(None if t.cancelled() or t.exception() else t.result(),
                                                            None if t.cancelled() else t.exception()))
        else:
            self._on_block(got, None)

    def _on_block(self, block, exc) -> None:
        self._fetching = False
        if block is not None and block[1] > 0 and block[0] >= 0:
            self._next, self._end = block[0], block[0] + block[1]
        else:
            log.warning("no producer id block: %s", exc or block)
        waiters, self._waiters = self._waiters, []
        for i, fut in enumerate(waiters):
            if fut.done():
                continue
            if self._next < self._end:
                fut.set_result(self._take())
            elif block is not None and not self._fetching:
                self._waiters = [f for f in waiters[i:] if not f.done()]  # block used up: fetch another
                self._fetch()
                return
            else:
                fut.set_result(_answer(int(ErrorCode.COORDINATOR_NOT_AVAILABLE)))


def _answer(code: int, producer_id: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return R(throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch)
