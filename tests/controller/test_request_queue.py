"""The controller's request queue (``kraft.controller.request_queue``, issue 38): the admin lane
starts a request only while the Raft leader accepts proposals, the broker lane never waits for
the log, a request whose timeout passes before it starts is answered REQUEST_TIMED_OUT and never
applied, and a request larger than Kafka's per-operation record limit is refused whole."""

from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, heartbeat

from kraft.controller.quorum_controller import TOO_LARGE_MESSAGE
from kraft.controller.request_queue import ControllerQueue
from kraft.errors import ErrorCode
from kraft.protocol import CreatePartitionsRequest


class Core:
    """What the queue asks of a Raft core: the leader's epoch, and whether it accepts work."""

    def __init__(self, epoch=1):
        self.epoch = epoch
        self.accepting = True

    def is_leader(self):
        return True

    def uncommitted(self):
        return 0, 0

    def accepting_proposals(self):
        return self.accepting


def setup():
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    epochs = cluster_of(raft, ctl, 3)
    return raft, ctl, answers, epochs, Core(ctl.epoch)


def test_admin_requests_wait_while_the_log_is_full_and_start_in_order_as_it_drains():
    raft, ctl, answers, _, core = setup()
    q = ControllerQueue(ctl, core)
    core.accepting = False
    for i in range(3):
        q.add(19, create_topics((f"t{i}", 2, 1)), 7, 0, ("c", i))
    assert q.run(10) == 0 and len(q) == 3 and q.blocked()
    assert "t0" not in ctl.view.topics.by_name  # nothing proposed
    core.accepting = True
    assert q.run(20, keep_going=lambda: False) == 1  # one per turn when the driver says so
    assert "t0" in ctl.view.topics.by_name and "t1" not in ctl.view.topics.by_name
    assert q.run(30) == 2
    raft.commit(ctl)
    assert all(answers.got[("c", i)].topics[0].error_code == 0 for i in range(3))


def test_a_heartbeat_is_never_held_back_by_the_log():
    raft, ctl, answers, epochs, core = setup()
    q = ControllerQueue(ctl, core)
    core.accepting = False
    q.add(19, create_topics(("t", 1, 1)), 7, 0, "create")
    q.add(63, heartbeat(1, epochs[1], raft.end), 1, 0, "hb")
    q.run(5)
    assert "hb" in answers.got and answers.got["hb"].error_code == 0
    assert "create" not in answers.got and len(q) == 1


def test_a_request_whose_timeout_passes_in_the_queue_is_answered_timed_out_and_never_applied():
    raft, ctl, answers, _, core = setup()
    q = ControllerQueue(ctl, core)
    core.accepting = False
    req = create_topics(("late", 1, 1))
    req.timeout_ms = 1000
    q.add(19, req, 7, 0, "late")
    assert q.next_deadline_ms() == 1000
    q.run(1000)  # the deadline itself: still in time
    assert "late" not in answers.got
    q.run(1001)
    got = answers.got["late"].topics[0]
    assert got.error_code == ErrorCode.REQUEST_TIMED_OUT and len(q) == 0 and q.timed_out == 1
    core.accepting = True
    q.run(2000)
    raft.commit(ctl)
    assert "late" not in ctl.image.topics.by_name and "late" not in ctl.view.topics.by_name


def test_a_started_request_is_answered_at_its_commit_however_late():
    raft, ctl, answers, _, core = setup()
    q = ControllerQueue(ctl, core)
    req = create_topics(("slow", 1, 1))
    req.timeout_ms = 10
    q.add(19, req, 7, 0, "slow")
    q.run(5)  # started in time
    q.expire(10_000)
    assert "slow" not in answers.got  # waiting for its commit, not timed out
    raft.commit(ctl)
    assert answers.got["slow"].topics[0].error_code == 0


def test_requests_without_a_timeout_wait_as_long_as_it_takes():
    raft, ctl, answers, _, core = setup()
    q = ControllerQueue(ctl, core)
    core.accepting = False
    q.add(44, _alter_config("t"), 1, 0, "cfg")
    assert q.next_deadline_ms() is None
    q.run(10**9)
    assert "cfg" not in answers.got and len(q) == 1


def test_a_queue_at_its_bound_is_full():
    _, ctl, _, _, core = setup()
    q = ControllerQueue(ctl, core, max_queued=2)
    core.accepting = False
    q.add(19, create_topics(("a", 1, 1)), 7, 0, 1)
    assert not q.full
    q.add(19, create_topics(("b", 1, 1)), 7, 0, 2)
    assert q.full


def test_a_node_that_is_not_the_controller_answers_at_once_even_when_its_log_is_full():
    raft, ctl, answers, _, core = setup()
    core.epoch = ctl.epoch + 1  # the core moved on
    core.accepting = False
    q = ControllerQueue(ctl, core)
    q.add(19, create_topics(("x", 1, 1)), 7, 0, "x")
    q.run(1)
    assert answers.got["x"].topics[0].error_code == ErrorCode.NOT_CONTROLLER


def test_a_request_over_the_per_operation_record_limit_is_refused_whole():
    """Kafka: BoundedList(MAX_RECORDS_PER_USER_OP = 10,000) -> POLICY_VIOLATION, every topic."""
    raft, ctl, answers, _, _ = setup()
    end = raft.end
    ctl.submit(19, create_topics(("big", 9_999, 1), ("small", 1, 1)), 7, 0, "big")  # 10,002 records
    got = answers.got["big"].topics
    assert {t.error_code for t in got} == {ErrorCode.POLICY_VIOLATION}
    assert {t.error_message for t in got} == {TOO_LARGE_MESSAGE}
    assert "small" not in ctl.view.topics.by_name and raft.end == end  # nothing written
    ctl.submit(19, create_topics(("fits", 9_999, 1)), 7, 0, "fits")  # 10,000 records
    raft.commit(ctl)
    assert answers.got["fits"].topics[0].error_code == 0
    P = CreatePartitionsRequest.Topic
    ctl.submit(37, CreatePartitionsRequest(topics=[P(name="fits", count=20_000, assignments=None)], timeout_ms=100,
                                           validate_only=False), 3, 0, "grow")
    assert answers.got["grow"].results[0].error_code == ErrorCode.POLICY_VIOLATION
    assert len(ctl.view.topics.by_name["fits"].partitions) == 9_999


def _alter_config(topic):
    from kraft.metadata.configs import TOPIC
    from kraft.protocol.messages.configs import OP_SET, IncrementalAlterConfigsRequest
    R = IncrementalAlterConfigsRequest.Resource
    return IncrementalAlterConfigsRequest(resources=[R(resource_type=TOPIC, resource_name=topic, configs=[
        R.Config(name="retention.ms", config_operation=OP_SET, value="1000")])], validate_only=False)


def test_a_heartbeat_waiting_in_the_queue_keeps_its_broker_alive():
    """Kafka's BrokerHeartbeatTracker: contact counts when the heartbeat arrives, not when it runs."""
    raft, ctl, answers, epochs, core = setup()
    q = ControllerQueue(ctl, core)
    session = ctl.leases.session_timeout_ms
    q.add(63, heartbeat(2, epochs[2], raft.end), 1, session - 1, "hb")  # read, not run yet
    ctl.tick(session + 10)
    raft.commit(ctl)
    brokers = ctl.image.cluster.brokers
    assert not brokers[2].fenced and sum(b.fenced for b in brokers.values()) == 1  # 1 or 3, one per tick
    q.add(63, heartbeat(3, epochs[3] + 99, raft.end), 1, session * 2, "stale")  # a stale epoch: no contact
    assert ctl.leases.has_valid_session(3, session * 2) is False
