"""A replica fetcher's incremental requests cost what changed: once its fetch session is open,
it asks its local port only about the partitions its last answer or the image touched, and
falls back to the pass over every partition whenever it cannot know (a partition backed off
or fenced, a local log made, replaced or cut by retention, a changed byte limit, a port that
counts no changes). Each test would fail on a fetcher that skips a partition it must look at,
or on one that still reads every partition per request."""

from __future__ import annotations

import uuid

from kraft.broker.replica_fetcher import AppendAsFollower, ReplicaFetcher, UpdateLogStart
from kraft.errors import ErrorCode
from kraft.protocol import FetchResponse
from kraft.records import build_batch

R = FetchResponse
TID = uuid.UUID(int=7)
N = 1_000


class CountingLocal:
    """Per-partition local state; counts the ``position`` questions; ``changes`` as
    ``PartitionLogs.changes`` (None: a port that does not count)."""

    def __init__(self, counts=True):
        self.end: dict = {}
        self.start: dict = {}
        self.asked = 0
        self._changes = 0 if counts else None
        if counts:
            self.changes = lambda: self._changes

    def position(self, tp):
        self.asked += 1
        return self.end.get(tp, 0), self.start.get(tp, 0), 0

    def end_offset(self, tp):
        return self.end.get(tp, 0)

    def start_offset(self, tp):
        return self.start.get(tp, 0)

    def high_watermark(self, tp):
        return 0

    def end_offset_for_epoch(self, tp, epoch):
        return self.end.get(tp, 0), 0


def part(p, *, code=0, hw=0, log_start=0, records=None):
    return R.Topic.Partition(partition_index=p, error_code=code, high_watermark=hw, last_stable_offset=hw,
                             log_start_offset=log_start, aborted_transactions=None, preferred_read_replica=-1,
                             records=records)


def answer(*parts, session_id=77):
    return R(throttle_time_ms=0, error_code=0, session_id=session_id,
             responses=[R.Topic(topic_id=TID, partitions=list(parts))] if parts else [])


def sent(req):
    return sorted((p.partition, p.fetch_offset, p.log_start_offset, p.current_leader_epoch)
                  for t in req.topics for p in t.partitions)


def open_session(local=None, n=N):
    local = local or CountingLocal()
    f = ReplicaFetcher(2, 1, 0, local, backoff_ms=1000)
    for p in range(n):
        f.add_or_update(("t", p), TID, 5)
    first = f.poll(0)
    assert first.session_epoch == 0 and len(sent(first)) == n
    f.on_response(answer(), 1)
    local.asked = 0
    return f, local


def test_an_idle_session_asks_nothing_and_sends_nothing():
    f, local = open_session()
    req = f.poll(2)
    assert req.session_epoch == 1 and sent(req) == [] and local.asked == 0


def test_only_the_answered_partition_is_looked_at_and_sent_again():
    f, local = open_session()
    f.poll(2)
    records = build_batch([b"x"] * 3, base_offset=0)
    effects = f.on_response(answer(part(17, hw=3, records=records)), 3)
    assert [type(e) for e in effects if type(e) is AppendAsFollower] == [AppendAsFollower]
    local.end[("t", 17)] = 3  # what the driver's append of those effects does
    req = f.poll(4)
    assert sent(req) == [(17, 3, 0, 5)]
    assert local.asked == 1  # not N: the other partitions were not touched


def test_an_answered_partition_that_did_not_move_is_not_sent():
    f, local = open_session()
    f.poll(2)
    f.on_response(answer(part(3, hw=0)), 3)  # a high watermark only
    req = f.poll(4)
    assert sent(req) == [] and local.asked == 1


def test_a_log_start_moved_by_the_leader_goes_out_with_the_next_request():
    f, local = open_session()
    f.poll(2)
    local.end[("t", 5)] = 10
    effects = f.on_response(answer(part(5, hw=10, log_start=4)), 3)
    assert UpdateLogStart(("t", 5), 4) in effects
    local.start[("t", 5)] = 4
    assert sent(f.poll(4)) == [(5, 10, 4, 5)]


def test_a_change_the_answers_cannot_show_takes_the_full_pass():
    """Retention cut partition 900's log (PartitionLogs.changes moves): the fetcher looks at
    every partition and sends that one's new log start."""
    f, local = open_session()
    f.poll(2)
    f.on_response(answer(), 3)
    local.start[("t", 900)] = 2
    local.end[("t", 900)] = 2
    local._changes += 1
    req = f.poll(4)
    assert sent(req) == [(900, 2, 2, 5)] and local.asked == N
    f.on_response(answer(), 5)
    local.asked = 0
    assert sent(f.poll(6)) == [] and local.asked == 0  # and back to what changed


def test_a_new_leader_epoch_is_sent_and_a_new_partition_takes_the_full_pass():
    f, local = open_session()
    f.poll(2)
    f.on_response(answer(), 3)
    f.add_or_update(("t", 8), TID, 6)
    assert sent(f.poll(4)) == [(8, 0, 0, 6)] and local.asked == 1
    f.on_response(answer(), 5)
    f.add_or_update(("t", N), TID, 5)  # one more partition
    local.asked = 0
    assert sent(f.poll(6)) == [(N, 0, 0, 5)] and local.asked == N + 1


def test_an_answer_to_a_request_sent_before_an_epoch_change_is_not_applied():
    f, local = open_session()
    f.poll(2)
    f.add_or_update(("t", 4), TID, 6)  # the image moved on while the request was out
    records = build_batch([b"x"], base_offset=0)
    effects = f.on_response(answer(part(4, hw=1, records=records), part(9, hw=1, records=records)), 3)
    assert [e.tp for e in effects if type(e) is AppendAsFollower] == [("t", 9)]


def test_a_backed_off_partition_takes_the_full_pass_until_it_is_back():
    f, local = open_session()
    f.poll(2)
    f.on_response(answer(part(6, code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER))), 3)
    local.asked = 0
    req = f.poll(4)
    assert local.asked == N - 1  # every ready partition looked at; 6 is held back
    f.on_response(answer(), 5)
    local.asked = 0
    f.poll(2_000)  # 6 is back: full pass once more
    assert local.asked == N
    f.on_response(answer(), 2_001)
    local.asked = 0
    f.poll(2_002)
    assert local.asked == 0
    assert req is not None


def test_a_failed_request_is_retried_with_a_full_fetch_after_the_back_off():
    f, local = open_session()
    f.poll(2)
    f.on_failure(3)
    assert f.poll(4) is None  # every partition backed off
    again = f.poll(1_010)
    assert again.session_epoch == 0 and len(sent(again)) == N


def test_a_port_without_a_change_count_always_takes_the_full_pass():
    f, local = open_session(CountingLocal(counts=False))
    f.poll(2)
    f.on_response(answer(), 3)
    local.asked = 0
    f.poll(4)
    assert local.asked == N


def test_a_changed_partition_byte_limit_takes_the_full_pass():
    f, local = open_session()
    f.poll(2)
    f.on_response(answer(), 3)
    f.partition_max_bytes = 4096
    req = f.poll(4)
    assert local.asked == N and len(sent(req)) == N
