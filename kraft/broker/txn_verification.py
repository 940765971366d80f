"""KIP-890 part 1: the partition leader asks the transaction coordinator whether a transactional
produce belongs to an ongoing transaction before it appends the transaction's first batch there.

Without it a produce delayed in the network (or retried) can land after its transaction ended:
it opens a transaction no coordinator knows, which no marker will ever close, and the partition's
last stable offset stops there for good (a *hanging transaction*; read_committed consumers stall).
With it, as Kafka 3.6+ (``transaction.partition.verification.enable``, default true):

* a transactional batch of a producer with no ongoing transaction on the partition is held
  while this broker sends the coordinator (the leader of the id's ``__transaction_state``
  partition) an AddPartitionsToTxn v4 with ``verify_only`` (Kafka's AddPartitionsToTxnManager:
  one request per coordinator at a time, the transactions of a loop turn batched in it);
* a *verification guard* is put in the partition's producer state when the check starts; a
  COMMIT/ABORT marker for that producer removes it (``ProducerStateTable.apply``), so a produce
  verified while its transaction was still open, but appended after the marker, is refused
  INVALID_TXN_STATE instead of opening a hanging transaction;
* the coordinator's answers are turned into produce errors as Kafka's ReplicaManager does:
  PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE -> INVALID_TXN_STATE,
  the retriable coordinator errors (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) -> NOT_ENOUGH_REPLICAS so every client retries,
  a lost connection -> NETWORK_EXCEPTION; a coordinator that does not know v4 means "skip".

This module holds the partition side's pure parts; the requests to the coordinators are
``kraft.server.txn_verifier.TxnVerifier``'s.
"""

from __future__ import annotations

import struct

from kraft.errors import ErrorCode as E

_ATTRIBUTES, _PRODUCER_ID, _EPOCH = 21, 43, 51
_TRANSACTIONAL = 0x10
_HEAD = struct.Struct(">qh")

#: coordinator answers a client retries, turned into one every producer retries (Kafka's mapping)
_RETRIABLE = {int(E.CONCURRENT_TRANSACTIONS), int(E.COORDINATOR_LOAD_IN_PROGRESS),
              int(E.COORDINATOR_NOT_AVAILABLE), int(E.NOT_COORDINATOR)}


def produce_error(code: int) -> tuple[int, str | None]:
    """The produce answer for a verification answer ``code`` (Kafka's ReplicaManager mapping)."""
    if code == E.PRODUCER_FENCED:
        return int(E.INVALID_PRODUCER_EPOCH), None
    if code in (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE):
        return int(E.INVALID_TXN_STATE), "Partition was not added to the transaction"
    if code in _RETRIABLE:
        return int(E.NOT_ENOUGH_REPLICAS), ("Unable to verify the partition has been added to the transaction. "
                                            f"Underlying error: {E(code).name}")
    return code, None


def transactional_head(data) -> tuple[int, int] | None:
    """(producer id, epoch) of the first batch of ``data`` if it is transactional, else None."""
    if data is None or len(data) < _EPOCH + 2 or not data[_ATTRIBUTES + 1] & _TRANSACTIONAL:
        return None
    return _HEAD.unpack_from(data, _PRODUCER_ID)
