"""The event loop never waits for the disk: a follower whose fdatasync is stuck still
answers a Vote (fsync runs off the loop for leaders and followers alike, on the log's
flusher thread or the SharedLoopFlusher's syncer; only quorum-state, which a vote must persist
first, is written on the loop).

Two real controllers over TCP; node 2 (the follower) has a real on-disk MetadataLog whose
fdatasync blocks until the test releases it."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from kraft.log import LogConfig, _pure_syncer, files
from kraft.server.shared_loop_flusher import SharedLoopFlusher
from kraft.protocol import VoteRequest
from kraft.client.node_client import NodeClient
from kraft.log.replicated_log import MetadataLog

from controller_helpers import Controller
from server_helpers import run, settle


@pytest.mark.parametrize("flusher", ["thread", "loop"])
def test_a_follower_with_a_stuck_fsync_still_answers_a_vote(tmp_path, monkeypatch, flusher):
    """``thread``: the log's own flusher thread; ``loop``: the node's SharedLoopFlusher (cycles on
    the loop, fdatasync on a Syncer thread; the pure twin, whose fdatasync can be held)."""
    stuck_dir = str(tmp_path / "node-2")
    armed, entered, release = threading.Event(), threading.Event(), threading.Event()
    real = files.fdatasync

    def stuck_fdatasync(fd, what):
        if armed.is_set() and str(what).startswith(stuck_dir):
            entered.set()
            release.wait(30)
        return real(fd, what)

    def stuck_syncer_fdatasync(fd):
        if armed.is_set():  # only node 2's log uses this syncer
            entered.set()
            release.wait(30)
        os.fdatasync(fd)

    monkeypatch.setattr(files, "fdatasync", stuck_fdatasync)
    monkeypatch.setattr(_pure_syncer, "fdatasync", stuck_syncer_fdatasync)

    async def main():
        holder = {}
        loop_flusher = SharedLoopFlusher(asyncio.get_running_loop(), 1, _pure_syncer.Syncer) if flusher == "loop" else None
        log2 = MetadataLog(stuck_dir, LogConfig.metadata(), flusher=loop_flusher,
                           on_flushed=lambda off: holder["driver"].on_flushed_threadsafe(off))
        leader = Controller([1, 2], node_id=1, election_timeout_ms=20)
        follower = Controller([1, 2], node_id=2, election_timeout_ms=60_000, log=log2)
        ports = {1: await leader.listen(), 2: await follower.listen()}
        await leader.start(ports, real_peers=True)
        await follower.start(ports, real_peers=True)
        holder["driver"] = follower.driver
        armed.set()  # from now on node 2's disk hangs (opening the log fsyncs too)
        client = NodeClient("127.0.0.1", ports[2])
        try:
            # Node 1 leads; its LeaderChange record reaches node 2, whose fsync then sticks.
            assert await settle(lambda: entered.is_set(), timeout=20)
            assert follower.core.role == "follower" and not release.is_set()
            V = VoteRequest
            vote = V(cluster_id="c", voter_id=2, topics=[V.Topic(topic_name="__cluster_metadata", partitions=[
                V.Topic.Partition(partition_index=0, replica_epoch=0, replica_id=1, last_offset_epoch=0,
                                  last_offset=0, pre_vote=True)])])
            resp = await asyncio.wait_for(client.request(vote, 2), 10)
            part = resp.topics[0].partitions[0]
            assert not part.vote_granted and part.leader_id == 1  # a stale pre-vote, refused
            assert not release.is_set()  # answered while the fsync was still stuck
        finally:
            release.set()
            await client.close()
            await follower.close()
            await leader.close()
            if loop_flusher is not None:
                loop_flusher.stop()

    run(main())
