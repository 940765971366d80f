"""The transaction coordinator's state machine (``TxnShard``): every transition and refusal of
Kafka's TransactionCoordinator, fencing, KIP-360 epoch recovery, timeouts, expiration, and the
load of a partition holding transactions in flight."""

import re

import pytest

from kraft.coordinator.txn_metadata import TxnConfig
from kraft.coordinator.txn_records import decode_txn_record
from kraft.coordinator.txn_shard import TxnShard
from kraft.errors import ErrorCode as E

T = "txn-1"


class Harness:
    def __init__(self, **cfg):
        self.shard = TxnShard(7, coordinator_epoch=3, config=TxnConfig(**cfg))
        self.log = []  # every durable record, as (key, value)
        self.answers = []

    def respond(self, *a):
        self.answers.append(a if len(a) > 1 else a[0])

    def last(self):
        return self.answers[-1]

    def durable(self):
        """Make every queued append durable, in order, and those they queue."""
        while appends := self.shard.take_appends():
            for a in appends:
                self.log.extend((r.key, r.value) for r in a.records)
                a.on_durable()

    def fail_appends(self, code):
        for a in self.shard.take_appends():
            a.on_failed(code)

    def init(self, tid=T, timeout=60000, pid=-1, epoch=-1, new_pid=1000, now=0):
        self.shard.init_producer_id(tid, timeout, pid, epoch, now, self.respond, new_pid)
        self.durable()
        return self.last()

    def add(self, parts, pid=1000, epoch=0, now=10, tid=T):
        self.shard.add_partitions(tid, pid, epoch, parts, now, self.respond)
        self.durable()
        return self.last()

    def end(self, committed, pid=1000, epoch=0, now=20, tid=T):
        self.shard.end_txn(tid, pid, epoch, committed, now, self.respond)
        self.durable()
        return self.last()

    def write_markers(self, now=30):
        jobs = self.shard.take_markers()
        for j in jobs:
            for topic, p in j.partitions:
                self.shard.marker_written(j.transactional_id, j.producer_id, j.producer_epoch, topic, p, now)
        self.durable()
        return jobs

    def state(self, tid=T):
        return self.shard.txns[tid].state

    def states_written(self):
        return [decode_txn_record(k, v)[1].transaction_status for k, v in self.log]


def test_init_gives_a_new_producer_id_at_epoch_0_and_writes_empty():
    h = Harness()
    assert h.init() == (E.NONE, 1000, 0)
    assert h.states_written() == [0] and h.state().state == "Empty"


def test_reinit_bumps_the_epoch_keeping_the_producer_id():
    h = Harness()
    h.init()
    assert h.init(new_pid=None) == (E.NONE, 1000, 1)


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_timeout_above_max_or_not_positive_is_invalid_transaction_timeout(timeout):
    h = Harness()
    h.shard.init_producer_id(T, timeout, -1, -1, 0, h.respond, 1)
    assert h.last() == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1) and not h.shard.take_appends()


def test_empty_transactional_id_and_half_given_producer_are_invalid_request():
    h = Harness()
    h.shard.init_producer_id("", 1000, -1, -1, 0, h.respond, 1)
    assert h.last()[0] == E.INVALID_REQUEST
    h.shard.init_producer_id(T, 1000, 5, -1, 0, h.respond, 1)
    assert h.last()[0] == E.INVALID_REQUEST


def test_commit_path_prepare_markers_complete():
    h = Harness()
    h.init()
    assert h.add([("a", 0), ("b", 1)]) == E.NONE
    assert h.state().state == "Ongoing" and h.state().start_ms == 10
    assert h.end(True) == E.NONE  # answered once PrepareCommit is durable
    assert h.state().state == "PrepareCommit"
    jobs = h.write_markers()
    assert len(jobs) == 1 and jobs[0].committed and jobs[0].coordinator_epoch == 3
    assert set(jobs[0].partitions) == {("a", 0), ("b", 1)} and jobs[0].producer_epoch == 0
    assert h.state().state == "CompleteCommit" and h.state().partitions == ()
    assert h.states_written() == [0, 1, 2, 4]


def test_complete_waits_for_every_marker():
    h = Harness()
    h.init()
    h.add([("a", 0), ("b", 1)])
    h.end(False)
    (job,) = h.shard.take_markers()
    assert not job.committed
    h.shard.marker_written(T, 1000, 0, "a", 0, 30)
    assert not h.shard.take_appends() and h.state().state == "PrepareAbort"
    h.shard.marker_written(T, 1000, 0, "b", 1, 30)
    h.durable()
    assert h.state().state == "CompleteAbort"


def test_add_of_partitions_already_in_the_transaction_writes_nothing():
    h = Harness()
    h.init()
    h.add([("a", 0)])
    n = len(h.log)
    assert h.add([("a", 0)]) == E.NONE and len(h.log) == n


def test_add_refusals():
    h = Harness()
    assert h.add([("a", 0)]) == E.INVALID_PRODUCER_ID_MAPPING  # unknown id
    h.init()
    assert h.add([("a", 0)], pid=999) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add([("a", 0)], epoch=1) == E.PRODUCER_FENCED
    h.add([("a", 0)])
    h.shard.end_txn(T, 1000, 0, True, 20, h.respond)  # PrepareCommit in flight
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 21, h.respond)
    assert h.last() == E.CONCURRENT_TRANSACTIONS
    h.durable()
    h.answers.clear()
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 22, h.respond)  # PrepareCommit: held for the completion ...
    assert h.answers == []
    h.shard.tick(22 + 500, abort_expired=False)  # ... until completion_wait_ms
    assert h.answers == [E.CONCURRENT_TRANSACTIONS]
    assert h.add([("b", 0)], epoch=1) == E.PRODUCER_FENCED  # a held add is for this producer only


@pytest.mark.parametrize("first,second,code", [(True, True, E.CONCURRENT_TRANSACTIONS),
                                               (True, False, E.INVALID_TXN_STATE),
                                               (False, False, E.CONCURRENT_TRANSACTIONS),
                                               (False, True, E.INVALID_TXN_STATE)])
def test_end_while_preparing(first, second, code):
    h = Harness()
    h.init()
    h.add([("a", 0)])
    h.end(first)
    assert h.end(second) == code


@pytest.mark.parametrize("first,second,code", [(True, True, E.NONE), (True, False, E.INVALID_TXN_STATE),
                                               (False, False, E.NONE), (False, True, E.INVALID_TXN_STATE)])
def test_end_after_complete_is_a_retry_or_invalid(first, second, code):
    h = Harness()
    h.init()
    h.add([("a", 0)])
    h.end(first)
    h.write_markers()
    assert h.end(second) == code


def test_end_without_a_transaction_is_invalid_txn_state_and_zombie_is_fenced():
    h = Harness()
    h.init()
    assert h.end(True) == E.INVALID_TXN_STATE
    assert h.end(True, epoch=7) == E.PRODUCER_FENCED
    assert h.end(True, pid=5) == E.INVALID_PRODUCER_ID_MAPPING


def test_new_incarnation_fences_and_aborts_the_ongoing_transaction():
    h = Harness()
    h.init()
    h.add([("a", 0)])
    h.shard.init_producer_id(T, 60000, -1, -1, 40, h.respond, None)
    h.durable()
    assert h.last() == (E.CONCURRENT_TRANSACTIONS, -1, -1)  # retry once the abort completes
    assert h.state().state == "PrepareAbort" and h.state().producer_epoch == 1
    (job,) = h.write_markers()
    assert not job.committed and job.producer_epoch == 1  # markers carry the bumped epoch: zombies fenced
    assert h.state().state == "CompleteAbort"
    assert h.init(new_pid=None) == (E.NONE, 1000, 2)
    # The old producer (epoch 0) is fenced now.
    assert h.add([("a", 0)], epoch=0) == E.PRODUCER_FENCED
    assert h.end(True, epoch=0) == E.PRODUCER_FENCED


def test_init_while_completing_is_concurrent_transactions():
    h = Harness()
    h.init()
    h.add([("a", 0)])
    h.end(True)
    h.shard.init_producer_id(T, 60000, -1, -1, 40, h.respond, None)
    assert h.last()[0] == E.CONCURRENT_TRANSACTIONS


def test_kip360_epoch_recovery():
    h = Harness()
    h.init()                                              # epoch 0
    assert h.init(pid=1000, epoch=0) == (E.NONE, 1000, 1)  # the producer asks for a bump
    assert h.init(pid=1000, epoch=0) == (E.NONE, 1000, 1)  # its retry gets the same epoch
    assert h.init(pid=1000, epoch=5) == (E.PRODUCER_FENCED, -1, -1)
    assert h.init(pid=42, epoch=1) == (E.PRODUCER_FENCED, -1, -1)


def test_exhausted_epoch_rotates_to_a_new_producer_id():
    h = Harness()
    h.init()
    h.shard.txns[T].state = h.state().__class__(**{**h.state().__dict__, "producer_epoch": 32766})
    assert h.shard.needs_producer_id(T)
    assert h.init(new_pid=2000) == (E.NONE, 2000, 0)


def test_failed_write_leaves_the_state_and_answers_a_coordinator_error():
    h = Harness()
    h.init()
    h.shard.add_partitions(T, 1000, 0, [("a", 0)], 10, h.respond)
    h.fail_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert h.last() == E.NOT_COORDINATOR and h.state().state == "Empty"
    assert h.add([("a", 0)]) == E.NONE  # nothing stuck pending


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    h = Harness()
    h.init(timeout=1000)
    h.add([("a", 0)], now=10)
    h.shard.tick(1010)
    assert not h.shard.take_appends()  # not yet expired
    h.shard.tick(1011)
    h.durable()
    assert h.state().state == "PrepareAbort" and h.state().producer_epoch == 1
    h.write_markers()
    assert h.state().state == "CompleteAbort"
    assert h.end(True, epoch=0) == E.PRODUCER_FENCED


def test_transactional_id_expires_after_its_expiration_ms():
    h = Harness(id_expiration_ms=5000)
    h.init(now=0)
    h.shard.tick(4999, expire_ids=True)
    assert not h.shard.take_appends()
    h.shard.tick(5000, expire_ids=True)
    h.durable()
    assert T not in h.shard.txns and h.log[-1][1] is None  # a tombstone


def test_complete_record_write_failure_is_retried_by_tick():
    h = Harness()
    h.init()
    h.add([("a", 0)])
    h.end(True)
    (job,) = h.shard.take_markers()
    h.shard.marker_written(T, 1000, 0, "a", 0, 30)
    h.fail_appends(E.REQUEST_TIMED_OUT)
    assert h.state().state == "PrepareCommit"
    h.shard.tick(40)
    h.durable()
    assert h.state().state == "CompleteCommit"


def test_load_keeps_ongoing_and_completed_transactions_without_markers():
    h = Harness()
    h.init(tid="c")
    h.add([("a", 0)], tid="c")
    h.end(True, tid="c")
    h.init(tid="o", new_pid=2000)
    h.add([("b", 0)], pid=2000, tid="o")      # left Ongoing
    h.init(tid="e", new_pid=3000)
    h.add([("b", 1)], pid=3000, tid="e")
    h.end(False, pid=3000, tid="e")
    h.write_markers()                          # (c's job is taken here too)
    # A new coordinator replays the log.
    other = TxnShard(7, coordinator_epoch=4)
    for k, v in h.log:
        other.replay(k, v)
    other.loaded()
    jobs = other.take_markers()
    assert jobs == [] and other.txns["c"].state.state == "CompleteCommit"
    assert other.txns["o"].state.state == "Ongoing" and other.txns["e"].state.state == "CompleteAbort"


def test_load_of_a_prepare_commit_sends_its_markers_with_the_new_coordinator_epoch():
    h = Harness()
    h.init()
    h.add([("a", 0), ("a", 1)])
    h.end(True)
    other = TxnShard(7, coordinator_epoch=9)
    for k, v in h.log:
        other.replay(k, v)
    other.loaded()
    (job,) = other.take_markers()
    assert job.committed and job.coordinator_epoch == 9 and set(job.partitions) == {("a", 0), ("a", 1)}
    for p in (0, 1):
        other.marker_written(T, 1000, 0, "a", p, 50)
    (append,) = other.take_appends()
    append.on_durable()
    assert other.txns[T].state.state == "CompleteCommit"


def test_late_marker_answer_for_an_older_epoch_is_ignored():
    h = Harness()
    h.init()
    h.add([("a", 0)])
    h.end(True)
    h.shard.marker_written(T, 1000, 5, "a", 0, 30)
    assert not h.shard.take_appends() and h.state().state == "PrepareCommit"


def test_verify_only():
    h = Harness()
    h.init()
    h.add([("a", 0)])
    assert h.shard.verify_partitions(T, 1000, 0, [("a", 0), ("a", 1)]) == {("a", 0): E.NONE,
                                                                          ("a", 1): E.INVALID_TXN_STATE}
    assert h.shard.verify_partitions(T, 1000, 1, [("a", 0)]) == {("a", 0): E.PRODUCER_FENCED}
    assert h.shard.verify_partitions("nope", 1000, 0, [("a", 0)]) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}


def test_describe_and_list_filters():
    h = Harness()
    h.init(tid="x")
    h.init(tid="y", new_pid=2000)
    h.add([("a", 0)], pid=2000, tid="y", now=100)
    assert h.shard.describe("zz") == (E.TRANSACTIONAL_ID_NOT_FOUND, None)
    code, s = h.shard.describe("y")
    assert code == E.NONE and s.state == "Ongoing" and s.partitions == (("a", 0),) and s.start_ms == 100
    names = lambda res: sorted(t for t, _ in res)  # noqa: E731
    assert names(h.shard.list(set(), set(), -1, None, 200)) == ["x", "y"]
    assert names(h.shard.list({"Ongoing"}, set(), -1, None, 200)) == ["y"]
    assert names(h.shard.list(set(), {1000}, -1, None, 200)) == ["x"]
    assert names(h.shard.list({"Ongoing"}, set(), 100, None, 200)) == []   # running exactly 100 ms: not longer
    assert names(h.shard.list({"Ongoing"}, set(), 99, None, 200)) == ["y"]
    assert names(h.shard.list(set(), set(), -1, re.compile("x|z"), 200)) == ["x"]


def test_empty_transactional_id_is_invalid_request_everywhere():
    h = Harness()
    h.shard.add_partitions("", 1, 0, [("a", 0)], 0, h.respond)
    assert h.last() == E.INVALID_REQUEST
    h.shard.end_txn("", 1, 0, True, 0, h.respond)
    assert h.last() == E.INVALID_REQUEST
    assert h.shard.verify_partitions("", 1, 0, [("a", 0)]) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert not h.shard.take_appends()


def test_ongoing_transactions_never_expire_their_id():
    h = Harness(id_expiration_ms=10)
    h.init(timeout=900_000)
    h.add([("a", 0)], now=5)
    h.shard.tick(1000, abort_expired=False, expire_ids=True)
    assert not h.shard.take_appends() and h.state().state == "Ongoing"


def test_requests_while_a_record_is_in_flight_are_concurrent_transactions():
    h = Harness()
    h.init()
    h.shard.add_partitions(T, 1000, 0, [("a", 0)], 10, h.respond)  # Ongoing record not yet durable
    h.shard.end_txn(T, 1000, 0, True, 11, h.respond)
    assert h.last() == E.CONCURRENT_TRANSACTIONS
    h.shard.init_producer_id(T, 1000, -1, -1, 11, h.respond, None)
    assert h.last()[0] == E.CONCURRENT_TRANSACTIONS
    h.durable()
    assert h.state().state == "Ongoing"


# --- an add arriving while the previous transaction completes is held, not refused -------------
def completing(h, committed=True):
    """A transaction of ("a", 0) whose EndTxn is answered; its markers are not written."""
    h.init()
    h.add([("a", 0)])
    assert h.end(committed) == E.NONE
    h.answers.clear()


@pytest.mark.parametrize("committed", [True, False])
def test_add_while_completing_is_answered_once_the_complete_record_is_durable(committed):
    h = Harness()
    completing(h, committed)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    assert h.answers == [] and not h.shard.take_appends()  # held: no record, no answer
    jobs = h.shard.take_markers()
    for j in jobs:
        for topic, p in j.partitions:
            h.shard.marker_written(T, 1000, 0, topic, p, 30)
    (complete,) = h.shard.take_appends()
    assert h.answers == []  # not before the Complete record is durable ...
    assert len(complete.records) == 2  # ... which shares its batch with the next Ongoing record
    h.log.extend((r.key, r.value) for r in complete.records)
    complete.on_durable()
    assert h.answers == [E.NONE] and not h.shard.take_appends()  # answered exactly once
    s = h.state()
    assert s.state == "Ongoing" and s.partitions == (("b", 0),) and s.start_ms == 30
    assert h.states_written()[-2:] == [4 if committed else 5, 1]


def test_held_add_of_a_fenced_or_unknown_producer_is_answered_at_once():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 1, [("b", 0)], 25, h.respond)
    h.shard.add_partitions(T, 999, 0, [("b", 0)], 25, h.respond)
    assert h.answers == [E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING]


def test_held_adds_run_in_arrival_order_the_first_beginning_the_next_transaction():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    h.shard.add_partitions(T, 1000, 0, [("__consumer_offsets", 3)], 26, h.respond)
    h.write_markers()
    assert h.answers == [E.NONE, E.NONE]  # the first in the Complete batch, the second added after it
    assert h.state().partitions == (("b", 0), ("__consumer_offsets", 3))


def test_held_add_times_out_as_concurrent_transactions_when_markers_stall():
    h = Harness(completion_wait_ms=100)
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    h.shard.tick(124, abort_expired=False)
    assert h.answers == []
    h.shard.tick(125, abort_expired=False)
    assert h.answers == [E.CONCURRENT_TRANSACTIONS]
    h.write_markers()  # completing later changes nothing for the answered add
    assert h.answers == [E.CONCURRENT_TRANSACTIONS] and h.state().state == "CompleteCommit"


def test_held_add_when_complete_write_fails_waits_for_the_retry():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    for j in h.shard.take_markers():
        for topic, p in j.partitions:
            h.shard.marker_written(T, 1000, 0, topic, p, 30)
    h.fail_appends(int(E.NOT_LEADER_OR_FOLLOWER))
    assert h.answers == []
    h.shard.tick(40, abort_expired=False)  # writes the Complete record again
    h.durable()
    assert h.answers == [E.NONE] and h.state().state == "Ongoing"


def test_unload_answers_held_adds_not_coordinator_once():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    markers = h.shard.take_markers()
    h.shard.unload()
    assert h.answers == [E.NOT_COORDINATOR]
    for j in markers:  # late marker answers and appends after the unload answer nothing more
        for topic, p in j.partitions:
            h.shard.marker_written(T, 1000, 0, topic, p, 30)
    h.durable()
    h.shard.tick(10_000)
    assert h.answers == [E.NOT_COORDINATOR]


def test_forgotten_held_add_changes_nothing():
    h = Harness()
    completing(h)
    gone = []
    respond = gone.append
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, respond)
    h.shard.forget(respond)
    h.write_markers()
    assert gone == [] and h.state().state == "CompleteCommit"


def test_held_add_in_the_complete_batch_that_fails_is_retried_with_it():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    for j in h.shard.take_markers():
        for topic, p in j.partitions:
            h.shard.marker_written(T, 1000, 0, topic, p, 30)
    h.fail_appends(int(E.NOT_LEADER_OR_FOLLOWER))
    assert h.answers == [] and h.state().state == "PrepareCommit"
    h.shard.tick(40, abort_expired=False)
    (again,) = h.shard.take_appends()
    assert len(again.records) == 2
    again.on_durable()
    assert h.answers == [E.NONE] and h.state().state == "Ongoing" and h.state().start_ms == 40


def test_held_add_in_an_in_flight_complete_batch_is_answered_once_on_unload():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    for j in h.shard.take_markers():
        for topic, p in j.partitions:
            h.shard.marker_written(T, 1000, 0, topic, p, 30)
    (batch,) = h.shard.take_appends()
    h.shard.unload()
    batch.on_failed(int(E.NOT_LEADER_OR_FOLLOWER))  # the driver fails an unloaded shard's writes
    assert h.answers == [E.NOT_COORDINATOR]


def test_complete_and_next_ongoing_batch_replays_to_the_ongoing_transaction():
    h = Harness()
    completing(h)
    h.shard.add_partitions(T, 1000, 0, [("b", 0)], 25, h.respond)
    h.write_markers()
    again = TxnShard(7, coordinator_epoch=4)
    for k, v in h.log:
        again.replay(k, v)
    again.loaded()
    assert again.txns[T].state.state == "Ongoing" and again.txns[T].state.partitions == (("b", 0),)
    assert not again.take_markers() and h.states_written()[-2:] == [4, 1]
