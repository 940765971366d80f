"""The controller simulation must be able to fail: break the controller on purpose, one rule at
a time, and check that the invariant written for that rule catches it within a few seeds
(mutation testing of ``kraft.testing.controller_checks``). Each test also names the invariant
that must be the one to fire, so a mutant caught only by accident (a crash elsewhere) fails."""

import pytest

from kraft.controller import broker_handlers, partition_change, quorum_controller, topic_handlers
from kraft.controller.partition_change import NO_LEADER
from kraft.controller.result import ControllerResult
from kraft.metadata import image_records
from kraft.testing.chaos import ChaosFailure, run_controller


def first_failure(seeds, profile="quick") -> str | None:
    for seed in seeds:
        try:
            run_controller(seed, profile)
        except ChaosFailure as exc:
            return str(exc)
    return None


def test_the_unbroken_controller_passes_the_seeds_the_mutants_use():
    assert first_failure(range(25)) is None


def test_answering_at_append_instead_of_commit_is_caught(monkeypatch):
    """(e) uncommitted state never answered: release every waiting answer as soon as the
    request's records are appended."""
    original = quorum_controller.QuorumController.submit

    def submit_and_answer_now(self, api_key, request, version, now_ms, token):
        original(self, api_key, request, version, now_ms, token)
        waiters, self._waiters = self._waiters, type(self._waiters)()
        for w in waiters:
            self.respond(w.token, w.response)

    monkeypatch.setattr(quorum_controller.QuorumController, "submit", submit_and_answer_now)
    failure = first_failure(range(10))
    assert failure is not None and "uncommitted" in failure


def test_releasing_answers_one_commit_early_is_caught(monkeypatch):
    """(e) again, subtler: answers released when the commit reached the offset before theirs."""
    def release_early(self):
        w = self._waiters
        while w and w[0].offset <= self.next_offset:
            x = w.popleft()
            self.respond(x.token, x.response)

    monkeypatch.setattr(quorum_controller.QuorumController, "_release", release_early)
    failure = first_failure(range(40))
    assert failure is not None and "before it committed" in failure


def test_fencing_without_moving_leadership_is_caught(monkeypatch):
    """(c) a fenced broker never leads: fence records without the leader elections (a fence is
    made a step at a time by ``broker_handlers.MoveOff``, which elects away then fences)."""
    monkeypatch.setattr(broker_handlers, "elect_away", lambda *args, **kwargs: [])
    failure = first_failure(range(40))
    assert failure is not None and "led by fenced broker" in failure


def test_electing_a_live_replica_outside_the_isr_is_caught(monkeypatch):
    """(b) no leader outside its ISR: an election that takes any live replica (an unclean
    election that forgets to reset the ISR)."""
    def elect_any_live(part, acceptable, target_isr, election=partition_change.ONLINE, *, replicas=None,
                       target_elr=()):
        if part.leader != NO_LEADER and part.leader in target_isr and acceptable(part.leader):
            return part.leader, False
        for r in (replicas if replicas is not None else part.replicas):
            if acceptable(r):
                return r, False
        return NO_LEADER, False

    monkeypatch.setattr(partition_change, "elect", elect_any_live)
    failure = first_failure(range(200))  # the first failure comes within ~70 seeds
    assert failure is not None and "outside its ISR" in failure


def test_acknowledging_a_topic_without_writing_it_is_caught(monkeypatch):
    """(d) no acknowledged topic lost: CreateTopics answers success but proposes nothing."""
    original = topic_handlers.HANDLERS[19]

    def create_without_records(ctx, req):
        return ControllerResult([], original(ctx, req).response)

    monkeypatch.setitem(quorum_controller.HANDLERS, 19, create_without_records)
    failure = first_failure(range(10))
    assert failure is not None and "acknowledged topic" in failure and "lost" in failure


def test_a_snapshot_that_drops_configs_is_caught(monkeypatch):
    """(a) snapshot + log replays to the leader's image: snapshots written without configs."""
    monkeypatch.setattr(image_records, "config_records", lambda image: iter(()))
    failure = first_failure(range(60))
    assert failure is not None and "snapshot" in failure and "configs" in failure


@pytest.mark.parametrize("seeds", [range(60)])
def test_a_standby_that_replays_differently_is_caught(monkeypatch, seeds):
    """(a) all nodes' committed images agree: standbys (not the active controller, which
    adopts the images it computed) skip ConfigRecords when they replay the log."""
    from kraft.metadata import decode_record
    replay = quorum_controller.replay_values
    apply_foreign = quorum_controller.QuorumController._apply_foreign

    def skip_configs(image, open_txn, values, *args):
        kept = [v for v in values if type(decode_record(v).record).__name__ != "ConfigRecord"]
        return replay(image, open_txn, kept, *args)

    def standby_apply(self, batches):
        quorum_controller.replay_values = skip_configs
        try:
            apply_foreign(self, batches)
        finally:
            quorum_controller.replay_values = replay

    monkeypatch.setattr(quorum_controller.QuorumController, "_apply_foreign", standby_apply)
    failure = first_failure(seeds)
    assert failure is not None and "differs" in failure


def test_not_aborting_a_transaction_the_previous_controller_left_open_is_caught(monkeypatch):
    """A new active controller must first abort a metadata transaction its predecessor died
    inside (seeds crash active controllers mid-transaction): without it, its own next
    transaction cannot begin (records that do not replay), or later acknowledged records are
    swallowed by the open transaction (a lost topic)."""
    def start_leases_without_abort(self, now_ms):
        if not self._leases_started:
            self._leases_started = True
            self.leases.reset(self.view.cluster.brokers, now_ms)

    monkeypatch.setattr(quorum_controller.QuorumController, "_start_leases", start_leases_without_abort)
    failure = first_failure(range(60), profile="ci")
    assert failure is not None and any(s in failure for s in ("lost", "inside an open transaction",
                                                                "did not decode or replay"))
