"""Units made a step at a time (``ControllerResult.steps``, issue 38): a fence moving thousands of
leaders is proposed in steps of about ``step_records`` records, each computed on the view the
previous one left, with nothing else run in between; its answer comes once the last step
commits; the fence records come last; losing leadership midway answers NOT_CONTROLLER."""

from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, heartbeat

from kraft.controller.request_queue import ControllerQueue
from kraft.errors import ErrorCode
from kraft.metadata import decode_record
from kraft.raft.election import LeaderAndEpoch
from kraft.records import iter_batches


class Core:
    def __init__(self, epoch):
        self.epoch = epoch

    def is_leader(self):
        return True

    def uncommitted(self):
        return 0, 0

    def accepting_proposals(self):
        return True


def big_cluster(step_records=50):
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    epochs = cluster_of(raft, ctl, 5)
    ctl.submit(19, create_topics(*[(f"t{i}", 20, 3) for i in range(30)]), 7, 0, "create")  # 600 partitions
    raft.commit(ctl)
    ctl.max_records_per_proposal = step_records
    return raft, ctl, answers, epochs


def test_a_fence_goes_a_step_at_a_time_and_is_answered_after_the_last():
    raft, ctl, answers, epochs = big_cluster()
    touched = sum(1 for t in ctl.image.topics.by_id.values() for p in t.partitions.values()
                  if p.leader == 1 or 1 in p.isr)
    first_batch = len(raft.batches)
    ctl.submit(63, heartbeat(1, epochs[1], raft.end, want_fence=True), 1, 0, "fence")
    assert ctl.stepping and "fence" not in answers.got  # one step proposed, more to come
    q = ControllerQueue(ctl, Core(ctl.epoch))
    q.add(19, create_topics(("meanwhile", 1, 1)), 7, 0, "meanwhile")
    steps = held = 0
    while ctl.stepping:
        assert "meanwhile" not in ctl.view.topics.by_name  # nothing runs between steps
        before = len(raft.batches)
        q.run(0, keep_going=lambda: False)
        if len(raft.batches) == before:
            # Held after the step that gave the last of broker 1's partitions a new leader: no
            # ISR bookkeeping competes with the followers until those leaders commit.
            assert not ctl.step_ready and q.blocked()
            held += 1
            raft.commit(ctl)
            assert not any(p.leader == 1 for t in ctl.image.topics.by_id.values() for p in t.partitions.values())
            assert ctl.step_ready and not q.blocked()
        else:
            steps += 1
    assert held == 1
    assert steps >= touched // (50 + 20)  # (a step ends with the topic that passed 50 records)
    q.run(0)  # the request that waited for the unit
    raft.commit(ctl)
    assert answers.got["fence"].is_fenced and answers.got["meanwhile"].topics[0].error_code == 0
    image = ctl.image
    assert image.cluster.brokers[1].fenced
    assert not any(p.leader == 1 or 1 in p.isr for t in image.topics.by_id.values() for p in t.partitions.values())
    records = [decode_record(v).record for raw in raft.batches[first_batch:] for b in iter_batches(raw)
               for v in b.values()]
    names = [type(r).__name__ for r in records]
    fence_at = names.index("FenceBrokerRecord")
    assert names[:fence_at].count("PartitionChangeRecord") == touched  # every move before the fence


def test_leadership_lost_midway_answers_not_controller():
    raft, ctl, answers, epochs = big_cluster()
    ctl.submit(63, heartbeat(1, epochs[1], raft.end, want_fence=True), 1, 0, "fence")
    assert ctl.stepping
    ctl.handle_leader_change(LeaderAndEpoch(2, ctl.epoch + 1))
    assert not ctl.stepping and answers.got["fence"].error_code == ErrorCode.NOT_CONTROLLER


def test_a_lease_expiry_fences_a_step_at_a_time_and_no_other_fence_starts_meanwhile():
    raft, ctl, answers, epochs = big_cluster()
    session = ctl.leases.session_timeout_ms
    assert ctl.tick(session + 1) == 1 and ctl.stepping
    assert ctl.tick(session + 2) == 0  # the second expired broker waits for the first fence
    while ctl.stepping:
        ctl.run_step()
    raft.commit(ctl)
    assert sum(b.fenced for b in ctl.image.cluster.brokers.values()) == 1
