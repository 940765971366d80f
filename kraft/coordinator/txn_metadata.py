"""One transactional id's state on its coordinator (Kafka's ``TransactionMetadata``) and the
configuration the transaction coordinator runs with. No I/O.

A transaction's state changes only once the record that says so is durable on
``__transaction_state``: meanwhile ``pending`` holds the target (a ``TxnState``) and every other
request for that id is answered CONCURRENT_TRANSACTIONS, as Kafka's ``pendingState`` does.
Legal transitions (Kafka's ``TransactionState.validPreviousStates``)::

    Empty, CompleteCommit, CompleteAbort  -> Empty (InitProducerId: epoch bump)
    Empty, Ongoing, CompleteCommit, CompleteAbort -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn)
    Ongoing -> PrepareCommit | PrepareAbort (EndTxn; a fence or a timeout aborts with epoch + 1)
    PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort (every marker written)
    Empty, CompleteCommit, CompleteAbort -> Dead (transactional.id.expiration.ms: a tombstone)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kraft.coordinator.txn_records import (COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING, PREPARE_ABORT,
                                           PREPARE_COMMIT, STATES, txn_record, txn_tombstone)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka's ``TransactionMetadata.isEpochExhausted``: an epoch of Short.MaxValue - 1 or more
#: cannot be bumped (one value is kept for the coordinator's own fencing bump).
MAX_EPOCH = 32767 - 1

VALID_PREVIOUS = {
    EMPTY: (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT),
    ONGOING: (EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT),
    PREPARE_COMMIT: (ONGOING,),
    PREPARE_ABORT: (ONGOING,),
    COMPLETE_COMMIT: (PREPARE_COMMIT,),
    COMPLETE_ABORT: (PREPARE_ABORT,),
    DEAD: (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT),
}


@dataclass
class TxnConfig:
    max_timeout_ms: int = 900_000                 # transaction.max.timeout.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms
    abort_check_interval_ms: int = 10_000         # transaction.abort.timed.out.transaction.cleanup.interval.ms
    expiration_check_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    offsets_partitions: int = 50                  # offsets.topic.num.partitions (AddOffsetsToTxn)
    #: kraft's own: how long an AddPartitionsToTxn / AddOffsetsToTxn arriving while the previous
    #: transaction completes is held for its completion before CONCURRENT_TRANSACTIONS
    completion_wait_ms: int = 500


@dataclass(frozen=True)
class TxnState:
    """What a transactional id's record says: the durable part of its metadata."""
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: tuple = ()        # (topic, partition) in the order they were added
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (KIP-360 retries)

    def record(self, transactional_id: str):
        if self.state == DEAD:
            return txn_tombstone(transactional_id)
        return txn_record(transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                          self.partitions, self.last_update_ms, self.start_ms)


@dataclass
class TxnMetadata:
    """Invariant: ``state.state`` is never Dead (a dead id is removed); ``pending`` is the
    target of the one write in flight for this id, or None (a Complete record and the next
    transaction's Ongoing record share one batch: ``pending`` is then the Ongoing state).
    ``markers_left`` is non-empty only in PrepareCommit/PrepareAbort: the partitions whose
    marker is not yet written. ``held`` is non-empty only in PrepareCommit/PrepareAbort: the
    adds waiting for the Complete record, as
    ``(deadline_ms, (producer_id, producer_epoch, partitions), respond)``."""
    transactional_id: str
    state: TxnState
    pending: TxnState | None = None
    markers_left: set = field(default_factory=set)
    held: list = field(default_factory=list)

    def transit(self, now_ms: int, **changes) -> TxnState:
        """The next state, checked against Kafka's legal transitions."""
        nxt = replace(self.state, last_update_ms=now_ms, **changes)
        if self.state.state not in VALID_PREVIOUS[nxt.state]:
            raise ValueError(f"{self.transactional_id}: {self.state.state} -> {nxt.state} is not a legal transition")
        return nxt


def from_record(value) -> TxnState:
    """The TxnState of a decoded ``TransactionLogValue``."""
    parts = tuple((p.topic, i) for p in (value.transaction_partitions or []) for i in p.partition_ids)
    return TxnState(value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                    STATES[value.transaction_status], parts, value.transaction_start_timestamp_ms,
                    value.transaction_last_update_timestamp_ms)
