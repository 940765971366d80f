"""RaftDriver (kraft/server/raft_driver.py) with a fake core, state file and peer clients:
effects run in order and election state is on disk before any later Send leaves; responses,
failures, flush completions and timers are stepped back into the core. Also the quorum-state
conversion helpers and CommitWaiters."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kraft.errors import NetworkError, NotLeaderError, StorageError
from kraft.log.state_files import QuorumStateData, QuorumStateFile
from kraft.protocol import FetchResponse, VoteResponse
from kraft.raft import (Commit, ElectionState, Flush, InboundRequest, InboundResponse, LeaderAndEpoch, LeaderChange,
                        PersistElection, RequestFailed, Respond, Send, rpcs)
from kraft.raft.effects import Ready
from kraft.raft.voters import ReplicaKey
from kraft.records import build_batch
from kraft.server.raft_driver import CommitWaiters, RaftDriver, election_from_file, election_to_file
from kraft.server.turn import turn_queue
from kraft.testing import InMemoryLog

from server_helpers import run, settle

# --- quorum-state conversion ---------------------------------------------------------------------

ELECTIONS = [
    ElectionState(0),
    ElectionState(5),
    ElectionState(5, leader_id=2),
    ElectionState(6, voted_key=ReplicaKey(3)),
    ElectionState(6, leader_id=3, voted_key=ReplicaKey(3)),  # the vote is kept once the leader is known
    ElectionState(7, leader_id=1, voted_key=ReplicaKey(1)),
]


@pytest.mark.parametrize("state", ELECTIONS, ids=repr)
def test_election_state_round_trips_through_the_quorum_state_file(tmp_path, state):
    f = QuorumStateFile.in_directory(str(tmp_path))
    f.write(election_to_file(state, "clusterAAAAAAAAAAAAAAA", [3, 1, 2]))
    data = f.read()
    assert (data.data_version, data.cluster_id, tuple(data.current_voters)) == (0, "clusterAAAAAAAAAAAAAAA", (1, 2, 3))
    assert election_from_file(data) == state


def test_no_or_unset_quorum_state_means_no_election():
    assert election_from_file(None) is None
    assert election_from_file(QuorumStateData()) is None  # leader_epoch -1


def test_election_to_file_writes_minus_one_for_unknowns():
    data = election_to_file(ElectionState(4), "c", [1])
    assert (data.leader_id, data.leader_epoch, data.voted_id) == (-1, 4, -1)


# --- CommitWaiters -------------------------------------------------------------------------------


def test_commit_waiters_complete_in_order_once_the_high_watermark_passes_them():
    async def main():
        loop = asyncio.get_running_loop()
        waiters, order = CommitWaiters(), []
        futs = {}
        for last in (4, 9, 14):
            futs[last] = loop.create_future()
            futs[last].add_done_callback(lambda f, last=last: order.append(last))
            waiters.add(last, futs[last])
        waiters.committed(4)  # offset 4 is not below 4: nothing yet
        await asyncio.sleep(0)
        assert order == [] and len(waiters) == 3
        waiters.committed(10)
        await asyncio.sleep(0)
        assert order == [4, 9] and len(waiters) == 1
        assert futs[9].result() == 10
        waiters.committed(3)  # a lower value never un-commits or re-completes
        waiters.committed(15)
        await asyncio.sleep(0)
        assert order == [4, 9, 14] and len(waiters) == 0
    run(main())


def test_commit_waiters_skip_cancelled_futures_and_fail_all():
    async def main():
        loop = asyncio.get_running_loop()
        waiters = CommitWaiters()
        a, b, c = (loop.create_future() for _ in range(3))
        waiters.add(1, a)
        waiters.add(2, b)
        waiters.add(3, c)
        a.cancel()
        waiters.committed(3)
        assert b.result() == 3 and not c.done()
        waiters.fail_all(NotLeaderError("gone", -1, -1))
        assert isinstance(c.exception(), NotLeaderError) and len(waiters) == 0
    run(main())


# --- RaftDriver with fakes ---------------------------------------------------------------------


class FakeCore:
    """Hands out scripted Ready objects and records every input."""

    def __init__(self, node_id=1, script=()):
        self.node_id = node_id
        self.readies = list(script)
        self.inputs: list = []
        self.leader_id, self.epoch, self.role, self.high_watermark = -1, 0, "follower", 0
        self.next_last_offset = 0
        self.flushed_offset = 0
        self.deadline = 10 ** 15
        self.corrupt_fetches = self.storage_read_errors = 0  # RaftCore's problem counters
        self.last_corrupt_fetch = self.last_storage_read_error = None

    def queue(self, *effects):
        self.readies.append(list(effects))

    def poll_effects(self):
        effects = self.readies.pop(0) if self.readies else []
        return Ready(effects, self.deadline)

    @property
    def has_effects(self):
        return bool(self.readies and self.readies[0])

    @property
    def next_deadline_ms(self):
        return self.deadline

    def step(self, message, now_ms):
        self.inputs.append(message)

    def tick(self, now_ms):
        self.inputs.append("tick")

    def on_flushed(self, offset, now_ms):
        self.inputs.append(("flushed", offset))

    def is_leader(self):
        return self.role == "leader"

    def observed(self):
        return (self.leader_id, self.epoch, self.corrupt_fetches, self.storage_read_errors, None)

    def propose(self, values, now_ms):
        if not self.is_leader():
            raise NotLeaderError("not leader", self.leader_id, self.epoch)
        self.next_last_offset += len(values)
        return self.next_last_offset - 1


class Recorder:
    def __init__(self):
        self.events: list = []


class FakeStateFile:
    def __init__(self, rec: Recorder, fail: bool = False):
        self.rec, self.fail, self.written = rec, fail, []

    def write(self, data: QuorumStateData) -> None:
        if self.fail:
            raise StorageError("disk on fire")
        self.rec.events.append(("persist", data.leader_epoch))
        self.written.append(data)


class FakeClient:
    """Peer client: records each request, then answers from ``reply`` (a response, an
    exception to raise, or a future to await)."""

    def __init__(self, rec: Recorder, dest: int):
        self.rec, self.dest = rec, dest
        self.reply = None
        self.closed = False
        self.sent: list = []  # (request, version)

    def request_nowait(self, wire, version, on_done, timeout_ms=None):
        return False  # as a client not yet connected: the driver awaits request() in a task

    def hold_nowait(self, wire, version, on_done, timeout_ms=None):
        return None  # not connected: the driver sends the usual way once the flush is reported

    async def request(self, wire, version):
        self.rec.events.append(("send", self.dest, type(wire).__name__))
        self.sent.append((wire, version))
        reply = self.reply
        if isinstance(reply, asyncio.Future):
            reply = await reply
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def close(self):
        self.closed = True


class FakeLog:
    def __init__(self):
        self.flush_requests = 0
        self.inline_flushes = 0

    def request_flush(self):
        self.flush_requests += 1

    def flush_now(self):  # must never be called: the loop does not fsync
        self.inline_flushes += 1
        return 10

    def end_offset(self):
        return 0


class NullListener:
    def handle_commit(self, batches):
        pass

    def handle_load_snapshot(self, reader):
        pass

    def handle_leader_change(self, leader_and_epoch):
        pass


def make_driver(core, *, log=None, state_fail=False, listener=None):
    rec = Recorder()
    clients = {}

    def factory(host, port, **kw):
        dest = port  # peers below are {node: ("h", node)}
        clients[dest] = FakeClient(rec, dest)
        return clients[dest]
    state = FakeStateFile(rec, fail=state_fail)
    driver = RaftDriver(core, log if log is not None else FakeLog(), state, listener or NullListener(),
                        peers={1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}, cluster_id="c", voters=(3, 1, 2),
                        client_factory=factory)
    return driver, rec, clients, state


def _vote_request():
    return rpcs.vote_request(candidate_epoch=3, candidate_id=1, last_offset_epoch=0, last_offset=0, pre_vote=False)


def _vote_response_wire(granted=True):
    P = VoteResponse.Topic.Partition
    return VoteResponse(error_code=0, topics=[VoteResponse.Topic(topic_name="__cluster_metadata", partitions=[
        P(partition_index=0, error_code=0, leader_id=-1, leader_epoch=3, vote_granted=granted)])])


def test_persist_election_is_written_before_a_later_send_is_executed():
    async def main():
        core = FakeCore(script=[[PersistElection(ElectionState(3, voted_key=ReplicaKey(1))),
                                 Send(2, 7, _vote_request()), Send(3, 8, _vote_request())]])
        driver, rec, clients, state = make_driver(core)
        clients[2].reply = clients[3].reply = _vote_response_wire()
        driver.start()
        await settle(lambda: len(rec.events) == 3)
        assert rec.events[0] == ("persist", 3)
        assert sorted(rec.events[1:]) == [("send", 2, "VoteRequest"), ("send", 3, "VoteRequest")]
        data = state.written[0]
        assert (data.voted_id, data.cluster_id, tuple(data.current_voters)) == (1, "c", (1, 2, 3))
        await driver.close()
    run(main())


def test_a_failed_election_write_stops_the_sends_that_depend_on_it():
    async def main():
        core = FakeCore(script=[[PersistElection(ElectionState(3, voted_key=ReplicaKey(1))),
                                 Send(2, 7, _vote_request())]])
        driver, rec, clients, _ = make_driver(core, state_fail=True)
        with pytest.raises(StorageError):
            driver.start()
        await asyncio.sleep(0.05)
        assert rec.events == []
        await driver.close()
    run(main())


def test_a_peer_answer_is_stepped_back_into_the_core():
    async def main():
        core = FakeCore(script=[[Send(2, 7, _vote_request())]])
        driver, rec, clients, _ = make_driver(core)
        clients[2].reply = _vote_response_wire(granted=True)
        driver.start()
        msg = await settle(lambda: next((m for m in core.inputs if isinstance(m, InboundResponse)), None))
        # The decoded wire response itself: no translation between the network and the core.
        assert msg == InboundResponse(2, 7, _vote_response_wire(granted=True))
        await driver.close()
    run(main())


def test_the_cores_requests_go_out_as_they_are_at_the_newest_version_we_implement():
    async def main():
        fetch = rpcs.fetch_request(replica_id=1, current_leader_epoch=3, fetch_offset=0, last_fetched_epoch=0)
        core = FakeCore(script=[[Send(2, 7, _vote_request()), Send(3, 8, fetch)]])
        driver, rec, clients, _ = make_driver(core)
        clients[2].reply = _vote_response_wire()
        clients[3].reply = rpcs.fetch_response(0, 1, 3)
        driver.start()
        await settle(lambda: sum(isinstance(m, InboundResponse) for m in core.inputs) == 2)
        [(vote, vote_version)] = clients[2].sent
        [(sent_fetch, fetch_version)] = clients[3].sent
        assert (vote_version, fetch_version) == (2, 17)
        assert sent_fetch is fetch and vote == _vote_request()
        await driver.close()
    run(main())


def test_network_failures_and_unknown_peers_become_request_failed():
    async def main():
        core = FakeCore(script=[[Send(2, 7, _vote_request()), Send(9, 8, _vote_request())]])
        driver, rec, clients, _ = make_driver(core)
        clients[2].reply = NetworkError("refused")
        driver.start()
        await settle(lambda: sum(isinstance(m, RequestFailed) for m in core.inputs) == 2)
        assert {m for m in core.inputs if isinstance(m, RequestFailed)} == {RequestFailed(2, 7), RequestFailed(9, 8)}
        await driver.close()
    run(main())


def test_a_malformed_peer_response_is_reported_to_the_core():
    async def main():
        fetch = rpcs.fetch_request(replica_id=1, current_leader_epoch=3, fetch_offset=0, last_fetched_epoch=0,
                                   max_wait_ms=0, cluster_id="c")
        core = FakeCore(script=[[Send(2, 7, fetch)]])
        driver, rec, clients, _ = make_driver(core)
        clients[2].reply = FetchResponse(error_code=0, responses=[])
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda loop, ctx: None)  # the bug's unretrieved task exception
        driver.start()
        told = await settle(lambda: any(isinstance(m, (RequestFailed, InboundResponse)) for m in core.inputs),
                            timeout=0.5)
        await driver.close()
        assert told
    run(main())


def test_respond_resolves_the_inbound_requests_future():
    async def main():
        core = FakeCore()
        driver, _, _, _ = make_driver(core)
        driver.start()
        resp = rpcs.vote_response(error_code=0, leader_id=-1, leader_epoch=3, vote_granted=False)
        core.queue(Respond(1, resp))  # the driver's first handle is 1
        fut = driver.inbound_request(2, _vote_request())
        assert core.inputs[-1] == InboundRequest(2, _vote_request(), 1)
        assert await asyncio.wait_for(fut, 5) == resp
        await driver.close()
    run(main())


def test_leader_flush_is_requested_and_its_completion_comes_back_on_the_loop_thread():
    async def main():
        core = FakeCore(script=[[Flush(10)]])
        core.role = "leader"
        log = FakeLog()
        driver, _, _, _ = make_driver(core, log=log)
        driver.start()
        assert log.flush_requests == 1
        t = threading.Thread(target=driver.on_flushed_threadsafe, args=(10,))
        t.start()
        t.join()
        assert await settle(lambda: ("flushed", 10) in core.inputs)
        await driver.close()
    run(main())


def test_a_follower_asks_the_flusher_thread_too_and_never_flushes_on_the_loop():
    async def main():
        core = FakeCore(script=[[Flush(10), Send(2, 7, _vote_request())]])
        log = FakeLog()
        driver, _, _, _ = make_driver(core, log=log)
        driver.start()
        assert (log.inline_flushes, log.flush_requests) == (0, 1)
        await driver.close()
    run(main())


def test_the_core_is_ticked_at_its_deadline():
    async def main():
        from kraft.server.raft_driver import wall_ms
        core = FakeCore()
        core.deadline = wall_ms() + 30
        driver, _, _, _ = make_driver(core)
        driver.start()
        assert "tick" not in core.inputs
        assert await settle(lambda: "tick" in core.inputs)
        await driver.close()
    run(main())


def test_unknown_effects_are_a_bug_not_skipped():
    async def main():
        core = FakeCore(script=[["not an effect"]])
        driver, _, _, _ = make_driver(core)
        with pytest.raises(TypeError):
            driver.start()
        await driver.close()
    run(main())


def test_proposals_complete_on_commit_and_fail_when_leadership_is_lost():
    async def main():
        log = InMemoryLog()
        for i in range(3):
            log.append_as_leader(build_batch([b"x"] * 5, timestamp=0), 1)
        core = FakeCore()
        core.role, core.leader_id, core.epoch = "leader", 1, 1
        driver, _, _, _ = make_driver(core, log=log)
        log.request_flush = lambda: None
        driver.start()
        last1, fut1 = driver.propose([b"a"] * 5)
        last2, fut2 = driver.propose([b"b"] * 5)
        assert (last1, last2) == (4, 9)
        core.queue(Commit(5))
        driver._drain()
        assert await asyncio.wait_for(fut1, 5) == 5 and not fut2.done()
        core.role, core.leader_id, core.epoch = "follower", 2, 2
        core.queue(LeaderChange(LeaderAndEpoch(2, 2)))
        driver._drain()
        with pytest.raises(NotLeaderError):
            await asyncio.wait_for(fut2, 5)
        with pytest.raises(NotLeaderError):
            driver.propose([b"c"])
        await driver.close()
    run(main())


def test_close_cancels_waiting_requests_and_closes_peer_clients():
    async def main():
        core = FakeCore()
        core.role, core.leader_id = "leader", 1
        driver, _, clients, _ = make_driver(core)
        driver.start()
        inbound = driver.inbound_request(2, _vote_request())
        _, committed = driver.propose([b"a"])
        await driver.close()
        assert inbound.cancelled()
        with pytest.raises(NotLeaderError):
            committed.result()
        assert all(c.closed for c in clients.values())
        driver.on_flushed_threadsafe(5)  # late flusher callbacks are ignored
        await asyncio.sleep(0.01)
        assert ("flushed", 5) not in core.inputs
    run(main())


def test_writers_are_answered_before_the_commit_is_applied_and_applies_keep_their_order():
    """A commit completes the writers waiting for it one step before the listener applies
    it (their answers leave first), and the listener still gets every effect in order."""
    async def main():
        log = InMemoryLog()
        for i in range(2):
            log.append_as_leader(build_batch([b"x"] * 5, timestamp=0), 1)
        seen = []

        class OrderListener(NullListener):
            def handle_commit(self, batches):
                seen.append(("applied", batches[-1].next_offset, fut.done()))

            def handle_leader_change(self, leader_and_epoch):
                seen.append(("leader", leader_and_epoch.leader_id))

        core = FakeCore()
        core.role, core.leader_id, core.epoch = "leader", 1, 1
        driver, _, _, _ = make_driver(core, log=log, listener=OrderListener())
        log.request_flush = lambda: None
        driver.start()
        _, fut = driver.propose([b"a"] * 5)
        core.queue(Commit(5), LeaderChange(LeaderAndEpoch(2, 2)), Commit(10))
        driver._drain()
        driver._turn.run()
        # (5, True): the writer of offsets 0-4 was answered before offset 5's apply began.
        assert seen == [("applied", 5, True), ("leader", 2), ("applied", 10, True)]
        assert fut.result() == 5
        await driver.close()
    run(main())


class HoldingClient(FakeClient):
    """A connected client: requests are held and released (NodeClient.hold_nowait/release),
    each step recorded; answers come from ``reply``."""

    def hold_nowait(self, wire, version, on_done, timeout_ms=None):
        self.rec.events.append(("hold", self.dest, type(wire).__name__))
        return (wire, on_done)

    def release(self, held):
        wire, on_done = held
        self.rec.events.append(("release", self.dest, type(wire).__name__))
        self.sent.append((wire, 17))
        asyncio.get_running_loop().call_soon(on_done, self.reply, None)


def test_a_send_gated_on_a_flush_leaves_when_the_flusher_reports_it_before_the_core_hears():
    """Send.after_flushed: held until the flusher reports at least that offset, then
    written inside the report (before the core's on_flushed), never before."""
    async def main():
        fetch = rpcs.fetch_request(replica_id=1, current_leader_epoch=3, fetch_offset=5, last_fetched_epoch=3)
        core = FakeCore(script=[[Flush(5), Send(2, 7, fetch, after_flushed=5)]])
        rec = Recorder()
        clients = {}

        def factory(host, port, **kw):
            clients[port] = HoldingClient(rec, port)
            return clients[port]
        driver = RaftDriver(core, FakeLog(), FakeStateFile(rec), NullListener(), peers={1: ("h", 1), 2: ("h", 2)},
                            cluster_id="c", voters=(1, 2), client_factory=factory)
        clients_reply = rpcs.fetch_response(0, 2, 3)
        driver.start()
        clients[2].reply = clients_reply
        assert rec.events == [("hold", 2, "FetchRequest")] and clients[2].sent == []
        driver.on_flushed_threadsafe(4)  # not far enough
        await asyncio.sleep(0.01)
        assert clients[2].sent == [] and ("flushed", 4) in core.inputs

        def flushed_then_look():
            driver.on_flushed_threadsafe(5)
            # Written in the report itself; the core steps it at the end of this callback.
            return list(clients[2].sent), ("flushed", 5) in core.inputs
        sent, core_knew = flushed_then_look()
        assert [type(w).__name__ for w, _ in sent] == ["FetchRequest"] and not core_knew
        turn_queue(asyncio.get_running_loop()).run()  # the end of the flusher's callback
        assert ("flushed", 5) in core.inputs
        assert await settle(lambda: InboundResponse(2, 7, clients_reply) in core.inputs)
        assert core.inputs.index(("flushed", 5)) < core.inputs.index(InboundResponse(2, 7, clients_reply))
        await driver.close()
    run(main())


def test_a_gated_send_is_not_held_when_the_core_has_that_much_flushed():
    async def main():
        core = FakeCore(script=[[Send(2, 7, _vote_request(), after_flushed=5)]])
        core.flushed_offset = 5
        driver, rec, clients, _ = make_driver(core)
        clients[2].reply = _vote_response_wire()
        driver.start()
        assert await settle(lambda: ("send", 2, "VoteRequest") in rec.events)
        await driver.close()
    run(main())


def test_a_gated_send_to_an_unconnected_peer_goes_the_usual_way_after_the_flush():
    async def main():
        core = FakeCore(script=[[Send(2, 7, _vote_request(), after_flushed=3)]])
        driver, rec, clients, _ = make_driver(core)
        clients[2].reply = _vote_response_wire()
        driver.start()
        await asyncio.sleep(0.02)
        assert rec.events == []  # FakeClient is not connected: nothing held, nothing sent
        threading.Thread(target=driver.on_flushed_threadsafe, args=(3,)).start()  # a flusher thread
        assert await settle(lambda: ("send", 2, "VoteRequest") in rec.events)
        assert await settle(lambda: any(isinstance(m, InboundResponse) for m in core.inputs))
        await driver.close()
    run(main())

