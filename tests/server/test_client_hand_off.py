"""NodeClient.hand_off / hand_back: a held request lent to another thread that writes it
straight to the socket (the fsync thread writing a follower's next Fetch). What must hold:
nothing the client writes meanwhile overtakes or interleaves with the lent frame; a partial
write is completed in order; a frame that did not leave (-1) is still held and leaves on
``release``; a lent frame is never lent twice nor written by ``release`` after it left."""

from __future__ import annotations

import asyncio
import os

from test_client import FakeServer, _connected, _req, _resp

from kraft.client.node_client import NodeClient
from server_helpers import run, settle


def test_writes_made_while_a_frame_is_lent_leave_after_it_and_a_partial_write_is_completed():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        await _connected(c, srv)
        got = []
        held = c.hold_nowait(_req("lent"), 3, lambda r, e: got.append(("lent", r, e)))
        lent = c.hand_off(held)
        assert lent is not None
        sock, frame = lent
        assert c.hand_off(held) is None  # one lent frame at a time
        later = asyncio.ensure_future(c.request(_req("later"), 3))  # queues behind the lent frame
        await asyncio.sleep(0.01)
        assert c.request_nowait(_req("nowait"), 3, lambda r, e: got.append(("nowait", r, e)))
        await asyncio.sleep(0.05)
        assert srv.requests.empty()  # nothing overtook the lent frame
        # The borrower writes only the first 5 bytes (a short write): the client finishes it.
        assert os.write(sock, bytes(frame[:5])) == 5
        c.hand_back(held, 5)
        names = []
        for _ in range(3):
            item = await srv.next_request()
            names.append(item[1].client_software_name)
            FakeServer.answer(item, _resp(len(names)))
        assert names == ["lent", "later", "nowait"]
        assert (await later).throttle_time_ms == 2
        assert await settle(lambda: len(got) == 2)
        c.release(held)  # it left already: release writes nothing
        await asyncio.sleep(0.05)
        assert srv.requests.empty()
        await c.close()
        await srv.close()
    run(main())


def test_a_lent_frame_that_did_not_leave_is_still_held_and_leaves_on_release():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        await _connected(c, srv)
        got = []
        held = c.hold_nowait(_req("held"), 3, lambda r, e: got.append((r, e)))
        assert c.hand_off(held) is not None
        others = []
        # Nothing queued: this one would be written at once if the frame were not lent.
        assert c.request_nowait(_req("other"), 3, lambda r, e: others.append((r, e)))
        await asyncio.sleep(0.05)
        assert srv.requests.empty()
        c.hand_back(held, -1)  # the flush failed or was withdrawn: nothing was written
        item = await srv.next_request()  # what queued meanwhile leaves now
        assert item[1].client_software_name == "other"
        FakeServer.answer(item, _resp(1))
        assert await settle(lambda: len(others) == 1)
        assert srv.requests.empty() and got == []
        c.release(held)  # still held: it leaves the usual way
        item = await srv.next_request()
        assert item[1].client_software_name == "held"
        FakeServer.answer(item, _resp(2))
        assert await settle(lambda: len(got) == 1) and got[0][0].throttle_time_ms == 2
        await c.close()
        await srv.close()
    run(main())


def test_nothing_is_lent_behind_queued_bytes_nor_from_another_connection():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        first = await _connected(c, srv)
        held = c.hold_nowait(_req("a"), 3, lambda r, e: None)
        c._queue_write(b"")  # a frame queued ahead (an empty one: nothing reaches the server)
        assert c.hand_off(held) is None
        c._flush_writes()
        first[2].close()  # the connection drops: the held request belongs to it
        assert await settle(lambda: not c.connected)
        await _connected(c, srv)
        assert c.hand_off(held) is None
        await c.close()
        await srv.close()
    run(main())
