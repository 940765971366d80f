"""The active controller's "future state" (seed 004): answers only after commit, exact revert
to the committed image on leadership loss or truncation, standbys replaying to the same image,
foreign writers' records, and atomic units larger than one batch."""

import uuid

from kraft.controller import quorum_controller as qc
from kraft.errors import ErrorCode as E
from kraft.metadata import TopicRecord, encode_record
from kraft.raft.election import LeaderAndEpoch
from kraft.metadata.records import NoOpRecord
from kraft.server.controller_gauges import image_stats
from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, encode, standby


def test_an_answer_is_released_only_when_its_records_commit():
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("a", 3, 3)), 7, 0, "a")
    ctl.submit(19, create_topics(("b", 3, 3)), 7, 0, "b")
    assert "a" not in answers.got and "b" not in answers.got
    assert "a" in ctl.view.topics.by_name and "a" not in ctl.image.topics.by_name
    raft.commit(ctl, batches=1)
    assert "a" in answers.got and "b" not in answers.got
    raft.commit(ctl)
    assert answers.got["b"].topics[0].error_code == 0


def test_a_request_that_writes_nothing_waits_for_what_was_proposed_before_it():
    """validate-only on a name an uncommitted create took must not be answered before that
    create commits (it would reveal uncommitted state)."""
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("a", 1, 1)), 7, 0, "create")
    ctl.submit(19, create_topics(("a", 1, 1), validate_only=True), 7, 0, "check")
    assert answers.got == {} or "check" not in answers.got
    raft.commit(ctl)
    assert answers.got["check"].topics[0].error_code == E.TOPIC_ALREADY_EXISTS
    ctl.submit(19, create_topics(("z", 1, 1), validate_only=True), 7, 0, "now")
    assert answers.got["now"].topics[0].error_code == 0  # nothing uncommitted: at once


def test_losing_leadership_reverts_to_the_committed_image_exactly_and_fails_waiters_once_replaced():
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("kept", 2, 3)), 7, 0, "kept")
    raft.commit(ctl)
    committed = ctl.image
    ctl.submit(19, create_topics(("lost", 2, 3)), 7, 0, "lost")
    assert ctl.view is not committed
    ctl.handle_leader_change(LeaderAndEpoch(2, 2))
    raft.truncate_uncommitted()
    assert ctl.view is committed and ctl.image is committed
    assert "lost" not in answers.got  # its fate is not known yet
    # a standby meanwhile: requests are answered NOT_CONTROLLER at once
    ctl.submit(19, create_topics(("x", 1, 1)), 7, 0, "x")
    assert answers.got["x"].topics[0].error_code == E.NOT_CONTROLLER
    raft.epoch = 2  # the next leader writes other records where "lost" was
    raft.append_foreign(encode([NoOpRecord()] * 5))
    raft.commit(ctl)
    assert answers.got["lost"].topics[0].error_code == E.NOT_CONTROLLER  # not applied: a retry is safe


def test_records_of_a_deposed_leader_that_commit_later_are_replayed_and_acknowledged():
    """Its records reached a follower and commit under the next leader: the request is answered
    as applied (issue 38: answered NOT_CONTROLLER, its client retried and found "already exists")."""
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("late", 2, 3)), 7, 0, "late")
    ctl.handle_leader_change(LeaderAndEpoch(2, 2))  # the new leader had replicated it
    assert "late" not in answers.got
    raft.commit(ctl)
    assert "late" in ctl.image.topics.by_name
    assert answers.got["late"].topics[0].error_code == 0


def test_a_standby_replaying_the_log_builds_the_leaders_image():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    other, _ = standby()
    epochs = cluster_of(raft, ctl, 4, others=[other])
    ctl.submit(19, create_topics(("a", 50, 3), ("b", 7, 2)), 7, 0, 1)
    raft.commit(ctl, other)
    # Nobody heartbeated since: one broker fenced per tick (Kafka's maybeFenceOneStaleBroker).
    assert [ctl.tick(9000 + i) for i in range(5)] == [1, 1, 1, 1, 0]
    raft.commit(ctl, other)
    assert image_stats(ctl.image) == image_stats(other.image)
    assert image_stats(ctl.image)["offline"] == 57
    assert other.leases.registered_at.keys() == epochs.keys()


def test_raw_bytes_from_another_writer_are_counted_and_skipped():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    other, _ = standby()
    # frame version 'n' (0x6e) and an empty or null value are refused without a parse; 0x01 0x02
    # (frame 1, type 2, no version) and a two-byte varint frame go through the parser
    raft.append_foreign([b"not a metadata record", b"\x01\x02", b"", None, b"\x81\x00\x02"])
    raft.commit(ctl, other)
    assert ctl.metadata_errors == 5 and other.metadata_errors == 5
    assert ctl.image.is_empty


def test_a_metadata_record_from_another_writer_rebases_the_uncommitted_view():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    other, _ = standby()
    cluster_of(raft, ctl, 3, others=[other])
    foreign = TopicRecord(name="foreign", topic_id=uuid.UUID(int=1 << 65))
    raft.append_foreign([encode_record(foreign)])  # another writer's valid record, before ours
    ctl.submit(19, create_topics(("mine", 2, 3)), 7, 0, "mine")
    assert "foreign" not in ctl.view.topics.by_name
    raft.commit(ctl, other, batches=1)  # the foreign record commits while ours waits
    assert "foreign" in ctl.image.topics.by_name and "mine" not in ctl.image.topics.by_name
    assert {"foreign", "mine"} <= set(ctl.view.topics.by_name)  # the view moved onto it
    raft.commit(ctl, other)
    assert image_stats(ctl.image) == image_stats(other.image)
    assert set(ctl.image.topics.by_name) == {"foreign", "mine"}


def test_an_atomic_unit_larger_than_a_batch_is_a_transaction_that_partial_commits_never_show(monkeypatch):
    monkeypatch.setattr(qc, "MAX_RECORDS_PER_PROPOSAL", 5)
    raft = FakeRaft()
    ctl, answers = active_controller(raft)
    other, _ = standby()
    cluster_of(raft, ctl, 3, others=[other])
    before = len(raft.batches)
    ctl.submit(19, create_topics(("big", 12, 3)), 7, 0, "big")  # 1 + 12 records + Begin/End
    assert len(raft.batches) - before == 3
    raft.commit(ctl, other, batches=2)
    assert "big" not in ctl.image.topics.by_name and "big" not in other.image.topics.by_name
    assert "big" in ctl.view.topics.by_name
    # the leader dies before the last batch commits; the standby takes over and aborts
    ctl.handle_leader_change(LeaderAndEpoch(2, 2))
    raft.truncate_uncommitted()
    assert "big" not in answers.got and "big" not in ctl.view.topics.by_name
    raft.epoch = 2
    other.append = raft.append
    other.handle_leader_change(LeaderAndEpoch(2, 2))
    other.tick(0)  # first act: end the open transaction
    raft.commit(ctl, other)
    assert ctl._txn is None and other._txn is None
    other.submit(19, create_topics(("small", 4, 1)), 7, 0, "small")
    raft.commit(ctl, other)
    assert answers.got["big"].topics[0].error_code == E.NOT_CONTROLLER  # its last offset now holds others
    assert "small" in ctl.image.topics.by_name and "big" not in ctl.image.topics.by_name
    assert image_stats(ctl.image) == image_stats(other.image)


def test_the_active_controller_writes_the_bootstrap_features_once_and_a_new_leader_retries():
    """``storage format`` leaves metadata.version in bootstrap.checkpoint; the first active
    controller writes it into the log. If it loses leadership before that commits, the next
    active controller writes it again; once committed, nobody writes it again."""
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    ctl.bootstrap_features = {"metadata.version": 21, "group.version": 1}
    assert ctl.image.features.metadata_version == 0
    ctl.tick(0)
    assert ctl.view.features.metadata_version == 21
    ctl.tick(10)  # proposed once per epoch, not per tick
    assert raft.end == 2  # metadata.version, group.version (one batch: atomic without a transaction)
    raft.truncate_uncommitted()
    ctl.handle_leader_change(LeaderAndEpoch(2, 2))
    ctl.handle_leader_change(LeaderAndEpoch(1, 3))
    assert ctl.view.features.metadata_version == 0
    ctl.tick(20)
    raft.commit(ctl)
    assert ctl.image.features.finalized_versions == {"metadata.version": 21, "group.version": 1}
    written = raft.end
    ctl.handle_leader_change(LeaderAndEpoch(1, 4))
    ctl.tick(30)
    assert raft.end == written
