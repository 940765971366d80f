"""A handler's CLOSE_CONNECTION (Kafka's closeConnection after a failed acks=0 Produce): the
answers owed to earlier requests of the connection are still written, nothing after it is
handled, and the connection closes."""

from __future__ import annotations

import asyncio

from kraft.server.network import KafkaServer
from server_helpers import RawConnection, ToyHandler, api_versions_frame, decode_api_versions, run, settle


def test_close_connection_writes_what_is_owed_then_closes():
    async def main():
        toy = ToyHandler()
        server = KafkaServer(toy, "127.0.0.1", 0, listener_name="TEST")
        await server.start()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "defer") + api_versions_frame(2, "close") + api_versions_frame(3, "ok"))
        await settle(lambda: 1 in toy.deferred)
        await asyncio.sleep(0.05)
        toy.resolve(1)
        frame = await conn.read_frame()
        assert frame is not None and decode_api_versions(frame)[0] == 1
        assert await conn.is_closed_by_peer()
        assert 3 not in toy.calls  # read after the failure: never handled
        other = await RawConnection.open(server.port)  # the listener itself goes on
        await other.send(api_versions_frame(4, "ok"))
        assert decode_api_versions(await other.read_frame())[0] == 4
        await other.close()
        await server.close()
    run(main())
