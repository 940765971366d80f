"""Controller units larger than one batch (10,000 records; here a few, set on the controller):
two bugs found with the controller simulation (kraft.testing.controller_chaos), the first by its
seeds, the second while writing its unfence invariant:

- Fencing is not atomic: its records commit in parts, and no committed part may show a fenced
  broker leading a partition. With the FenceBrokerRecord first, the standby's image after the
  first batch had the fenced broker still leading the partitions whose changes were in later
  batches; Kafka orders the partition changes first (ReplicationControlManager.handleBrokerFenced).
- A re-registration that needs a transaction (Begin, RegisterBroker, leader moves, End): the
  broker is unfenced once it read its RegisterBrokerRecord, not the BeginTransactionRecord
  before it (the controller remembered the Begin's offset, one too early).
"""

import uuid

from controller_fakes import (FakeRaft, active_controller, cluster_of, create_topics, heartbeat, registration,
                              standby)

from kraft.controller.broker_handlers import fence_records
from kraft.metadata.records import FenceBrokerRecord
from kraft.testing.controller_checks import check_leadership


def test_every_committed_part_of_a_lease_fence_keeps_leaders_unfenced():
    raft = FakeRaft()
    ctl, _ = active_controller(raft, **{"broker.session.timeout.ms": 1000})
    other, _ = standby()
    cluster_of(raft, ctl, 3, others=[other])
    ctl.submit(19, create_topics(("t", 12, 3)), 7, 0, "t")
    raft.commit(ctl, other)
    assert 1 in {p.leader for p in ctl.image.topics.by_name["t"].partitions.values()}
    ctl.max_records_per_proposal = 3  # as if the fence were more than 10,000 records
    ctl.leases.touch(2, 5000)
    ctl.leases.touch(3, 5000)
    assert ctl.tick(5000) == 1  # broker 1's lease expired
    while ctl.stepping:  # (a step at a time, as the controller's queue runs it)
        ctl.run_step()
    parts = len(raft.batches) - raft.committed_batches
    assert parts > 2
    for i in range(parts):
        raft.commit(other, batches=1)
        check_leadership(other.image, f"standby after part {i + 1} of {parts}")
    assert other.image.cluster.brokers[1].fenced
    assert 1 not in {p.leader for p in other.image.topics.by_name["t"].partitions.values()}


def test_the_fence_record_comes_after_the_partition_changes():
    raft = FakeRaft()
    ctl, _ = active_controller(raft, **{"broker.session.timeout.ms": 1000})
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("t", 3, 3)), 7, 0, "t")
    raft.commit(ctl)
    records = fence_records(ctl.image, [1], ctl.settings)
    assert type(records[-1]) is FenceBrokerRecord and len(records) > 1
    assert all(type(r) is not FenceBrokerRecord for r in records[:-1])


def test_a_broker_registered_inside_a_transaction_is_unfenced_only_after_its_registration_record():
    raft = FakeRaft()
    ctl, answers = active_controller(raft, **{"broker.session.timeout.ms": 1000})
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("t", 6, 3)), 7, 0, "t")
    raft.commit(ctl)
    ctl.max_records_per_proposal = 2
    begin = raft.end
    # broker 1 restarts (new incarnation, its lease expired): Register + moves off it, wrapped
    ctl.submit(62, registration(1, incarnation=uuid.UUID(int=99)), 0, 5000, "re")
    raft.commit(ctl)
    epoch = answers.got["re"].broker_epoch
    assert ctl.leases.registered_at[1] == begin + 1  # the RegisterBrokerRecord, after the Begin
    ctl.submit(63, heartbeat(1, epoch, begin), 0, 5000, "read only the Begin")
    raft.commit(ctl)
    assert ctl.image.cluster.brokers[1].fenced and answers.got["read only the Begin"].is_fenced
    ctl.submit(63, heartbeat(1, epoch, begin + 1), 0, 5000, "read the registration")
    raft.commit(ctl)
    assert not ctl.image.cluster.brokers[1].fenced
