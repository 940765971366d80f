"""One client per broker, made again when the broker's address changes: what a node's
coordinators keep for the brokers they call (the transaction coordinator's markers, a partition
leader's KIP-890 checks). A replaced client is closed in the background."""

from __future__ import annotations

import asyncio


class ClientPool:
    """``address_of(broker_id)``: (host, port) or None (unknown: no client); ``connect(host,
    port)``: a new client (``close()`` a coroutine)."""

    def __init__(self, address_of, connect):
        self.address_of = address_of
        self.connect = connect
        self.clients: dict = {}  # broker id -> ((host, port), client)
        self._closing: set = set()

    def get(self, broker_id: int):
        address = self.address_of(broker_id)
        known = self.clients.get(broker_id)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:  # the broker moved: its old connection goes
            del self.clients[broker_id]
            self._close_later(known[1])
        if address is None:
            return None
        client = self.connect(*address)
        self.clients[broker_id] = (address, client)
        return client

    def _close_later(self, client) -> None:
        task = asyncio.get_running_loop().create_task(client.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def close_all(self) -> None:
        """Close every client in the background (from a synchronous shutdown)."""
        for _, client in self.clients.values():
            self._close_later(client)
        self.clients.clear()

    async def aclose(self) -> None:
        clients = [c for _, c in self.clients.values()]
        self.clients.clear()
        for client in clients:
            await client.close()
