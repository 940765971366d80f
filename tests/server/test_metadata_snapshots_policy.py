"""MetadataSnapshots asks the schedule after every commit only when something can have become
due: with a timer armed for the time rule, a commit that does not reach the byte rule is not
decided again, and one that does starts a snapshot at once; the timer starts one when the
interval is over."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kraft.metadata.snapshot_schedule import ScheduleConfig
from kraft.server.metadata_snapshots import MetadataSnapshots


class FakeCore:
    def __init__(self):
        self.asked = []

    def create_snapshot(self, sid, now_ms, last_timestamp):
        self.asked.append((sid.offset, now_ms))
        return None  # nothing to write: the policy still counts it as taken


def policy(clock, max_bytes=1000, interval_ms=200):
    listener = SimpleNamespace(bytes_since_snapshot=0, next_offset=0, last_epoch=1, last_timestamp=-1)
    controller = SimpleNamespace(next_offset=0, open_transaction=False, image=None)
    core = FakeCore()
    snaps = MetadataSnapshots(core, listener, controller, node_id=1, voters=[1],
                              config=ScheduleConfig(max_bytes=max_bytes, max_interval_ms=interval_ms),
                              clock_ms=lambda: clock[0])
    return snaps, listener, controller, core


def commit(snaps, listener, controller, clock, nbytes):
    listener.bytes_since_snapshot += nbytes
    listener.next_offset += 1
    controller.next_offset = listener.next_offset
    snaps.after_commit(clock[0])


def test_bytes_start_a_snapshot_at_the_commit_that_reaches_them_even_with_the_timer_armed():
    async def main():
        clock = [1_000_000]
        snaps, listener, controller, core = policy(clock)
        commit(snaps, listener, controller, clock, 10)
        assert snaps._timer is not None and core.asked == []  # the time rule is armed
        for _ in range(98):
            commit(snaps, listener, controller, clock, 10)
        assert core.asked == []
        commit(snaps, listener, controller, clock, 10)  # 1,000 bytes
        assert core.asked == [(100, 1_000_000)]
        snaps.close()
    asyncio.run(main())


def test_the_armed_timer_starts_a_snapshot_when_the_interval_is_over():
    async def main():
        clock = [1_000_000]
        snaps, listener, controller, core = policy(clock, interval_ms=50)
        commit(snaps, listener, controller, clock, 10)
        assert core.asked == []
        clock[0] += 60  # the schedule reads this clock; the loop's timer fires on its own
        await asyncio.sleep(0.1)
        assert core.asked == [(1, 1_000_060)]
        snaps.close()
    asyncio.run(main())
