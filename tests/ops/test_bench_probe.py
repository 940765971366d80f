"""The failover probe of bench/peers/load.py reports the first commit after the kill even
when the writer's recovery cancels the writes in flight (etcd's closes its gRPC channel):
a cancelled write is not a failure of the probe."""

from __future__ import annotations

import asyncio
import time
import types

from bench.peers import load


class ChannelWriter:
    """Writes commit at once until the kill; then they hang on the dead channel until
    ``recover`` closes it, which cancels them; on the new channel they commit."""

    def __init__(self):
        self.dead = False
        self.hanging: set = set()

    async def connect(self):
        pass

    async def write(self, count):
        if not self.dead:
            return
        fut = asyncio.get_running_loop().create_future()
        self.hanging.add(fut)
        await fut  # cancelled by recover()

    async def recover(self, exc=None):
        await asyncio.sleep(0.02)
        for fut in self.hanging:
            fut.cancel()
        self.hanging.clear()
        self.dead = False

    async def close(self):
        pass


class Box(list):
    def put(self, x):
        self.append(x)


def test_the_probe_reports_the_first_commit_when_recovery_cancels_the_writes_in_flight(monkeypatch):
    writer = ChannelWriter()
    monkeypatch.setattr(load, "make_writer", lambda spec, worker: writer)
    killed = types.SimpleNamespace(value=0.0)
    ready, out = Box(), Box()

    async def run():
        probe = asyncio.ensure_future(load._probe({}, ready, killed, out))
        while not ready:
            await asyncio.sleep(0.001)
        writer.dead = True
        killed.value = time.monotonic()
        # the first write after the kill times out on the dead channel: recovery follows
        for _ in range(400):
            await asyncio.sleep(0.005)
            if writer.hanging:
                break
        # as the driver of a gRPC channel would, fail one write so the probe recovers
        next(iter(writer.hanging)).set_exception(ConnectionError("channel down"))
        await asyncio.wait_for(probe, 20)

    asyncio.run(run())
    assert len(out) == 1 and isinstance(out[0], float), out
    assert 0 < out[0] < 10
