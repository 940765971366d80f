"""ClientPool: one client per broker, reused while its address holds, replaced (the old one
closed) when the broker moves, none for a broker with no address."""

import asyncio

from kraft.client.client_pool import ClientPool


class _Client:
    def __init__(self, host, port):
        self.address, self.closed = (host, port), False

    async def close(self):
        self.closed = True


def test_a_client_per_broker_replaced_when_the_broker_moves():
    async def main():
        where = {1: ("h", 1), 2: ("h", 2)}
        pool = ClientPool(where.get, _Client)
        a = pool.get(1)
        assert pool.get(1) is a and pool.get(2) is not a and pool.get(3) is None
        where[1] = ("h", 11)
        b = pool.get(1)
        await asyncio.sleep(0)
        assert b is not a and b.address == ("h", 11) and a.closed and not b.closed
        del where[1]
        assert pool.get(1) is None
        await asyncio.sleep(0)
        assert b.closed
        c = pool.get(2)
        await pool.aclose()
        assert c.closed and pool.clients == {}
    asyncio.run(main())
