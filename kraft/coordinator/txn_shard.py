"""The transactions of one ``__transaction_state`` partition and the coordinator's handlers over
them (Kafka's ``TransactionCoordinator`` + ``TransactionStateManager`` for one partition).

Contract (as ``GroupShard``'s): a handler changes memory and queues ``Append``s (the record to
write, what to do once durable, what to do if the write fails) and ``MarkerJob``s (the COMMIT or
ABORT markers to write on the transaction's partitions); answers go through the ``respond``
callable the caller passes, called exactly once, perhaps later. An add arriving while the
previous transaction completes (PrepareCommit/PrepareAbort: markers, then the Complete record)
is held and run once the Complete record is durable (the first one's Ongoing record goes in the
Complete record's batch) instead of being answered CONCURRENT_TRANSACTIONS at once (Kafka's
answer, which librdkafka retries every 20 ms and the Java client every ``retry.backoff.ms``):
the client sees a slower success. A held add is answered CONCURRENT_TRANSACTIONS after
``completion_wait_ms`` (by ``tick``), NOT_COORDINATOR on ``unload``, and dropped by ``forget``
when its requester is gone (its connection reset). The driver drains
``take_appends()`` / ``take_markers()`` after every call and ``tick(now_ms)``, and reports each
marker written with ``marker_written``. When the last one is, the shard writes the Complete
record. The coordinator epoch is the partition's leader epoch: partition leaders refuse markers
of an older coordinator. Sans-I/O: no clock (``now_ms`` is passed in), no producer id
allocation (a fresh id is passed in when ``needs_producer_id`` says so), no sockets.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace

from kraft.coordinator.shard_state import Append, coordinator_error
from kraft.coordinator.txn_metadata import (MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnConfig, TxnMetadata,
                                            TxnState, from_record)
from kraft.coordinator.txn_records import (COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING, PREPARE_ABORT,
                                           PREPARE_COMMIT, STATES, decode_txn_record)
from kraft.errors import ErrorCode as E

log = logging.getLogger("kraft.transactions")
MAX_TRANSACTIONAL_ID_CHARS = 32767


@dataclass(frozen=True)
class MarkerJob:
    """Write ``committed`` markers for ``producer_id``/``producer_epoch`` on ``partitions``."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple


class TxnShard:
    def __init__(self, partition: int, coordinator_epoch: int, config: TxnConfig | None = None):
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.config = config or TxnConfig()
        self.txns: dict[str, TxnMetadata] = {}
        self._appends: list[Append] = []
        self._markers: list[MarkerJob] = []

    def take_appends(self) -> list:
        out, self._appends = self._appends, []
        return out

    def take_markers(self) -> list:
        out, self._markers = self._markers, []
        return out

    # --- loading -------------------------------------------------------------------------------
    def replay(self, key, value) -> None:
        """Apply one record of this partition, in log order (ProtocolError if it does not decode)."""
        self.apply(*decode_txn_record(key, value))

    def apply(self, transactional_id: str, value) -> None:
        if value is None:
            self.txns.pop(transactional_id, None)
            return
        state = from_record(value)
        if state.state == DEAD:
            self.txns.pop(transactional_id, None)
            return
        # The record does not carry the epoch before the last bump: a loaded id has none (as Kafka's).
        self.txns[transactional_id] = TxnMetadata(transactional_id, state)

    def loaded(self) -> None:
        """The partition is replayed: transactions that were completing when the previous
        coordinator stopped get their markers again (Kafka's ``TransactionMarkerChannelManager``
        on load); Ongoing ones are left to finish or to time out."""
        for meta in self.txns.values():
            if meta.state.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._send_markers(meta)

    def unload(self) -> None:
        held = []
        for meta in self.txns.values():
            held.extend(r for _, _, r in meta.held)
            meta.held = []
        self.txns.clear()
        self._markers.clear()
        for respond in held:
            respond(E.NOT_COORDINATOR)

    def forget(self, respond) -> None:
        """The requester of a held add is gone (its connection closed): drop the add, so it
        changes nothing when the transaction completes."""
        for meta in self.txns.values():
            if meta.held:
                meta.held = [h for h in meta.held if h[2] is not respond]

    # --- InitProducerId ------------------------------------------------------------------------
    def needs_producer_id(self, transactional_id: str) -> bool:
        meta = self.txns.get(transactional_id)
        return meta is None or meta.state.producer_epoch >= MAX_EPOCH

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int,
                         now_ms: int, respond, new_producer_id: int | None = None) -> None:
        """``respond(code, producer_id, epoch)``. ``new_producer_id``: a fresh id when
        ``needs_producer_id`` said so (None: none could be had)."""
        def fail(code):
            respond(code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if not transactional_id or len(transactional_id) > MAX_TRANSACTIONAL_ID_CHARS:
            return fail(E.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return fail(E.INVALID_TRANSACTION_TIMEOUT)
        if (expected_pid == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
            return fail(E.INVALID_REQUEST)
        expected = None if expected_pid == NO_PRODUCER_ID else (expected_pid, expected_epoch)
        meta = self.txns.get(transactional_id)
        if meta is None:
            if new_producer_id is None:
                return fail(E.COORDINATOR_NOT_AVAILABLE)
            meta = self.txns[transactional_id] = TxnMetadata(
                transactional_id, TxnState(new_producer_id, NO_PRODUCER_EPOCH, timeout_ms, EMPTY))
        cur = meta.state
        if meta.pending is not None:
            return fail(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and cur.producer_epoch != NO_PRODUCER_EPOCH and expected[0] != cur.producer_id:
            return fail(E.PRODUCER_FENCED)
        if cur.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return fail(E.CONCURRENT_TRANSACTIONS)
        if cur.state == ONGOING:
            # A new incarnation of the producer: fence the old one (epoch + 1) and abort its
            # transaction; this one retries once the abort completes.
            return self._abort_fencing(meta, now_ms, lambda code: fail(E.CONCURRENT_TRANSACTIONS if code == 0
                                                                          else code))
        # Empty, CompleteCommit, CompleteAbort
        if cur.producer_epoch >= MAX_EPOCH and (expected is None or expected[1] == cur.producer_epoch):
            if new_producer_id is None:
                return fail(E.COORDINATOR_NOT_AVAILABLE)
            nxt = meta.transit(now_ms, producer_id=new_producer_id, producer_epoch=0, timeout_ms=timeout_ms,
                               state=EMPTY, partitions=(), start_ms=-1, last_producer_epoch=NO_PRODUCER_EPOCH)
        elif expected is None or cur.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == cur.producer_epoch:
            nxt = meta.transit(now_ms, producer_epoch=cur.producer_epoch + 1, timeout_ms=timeout_ms, state=EMPTY,
                               partitions=(), start_ms=-1,
                               last_producer_epoch=NO_PRODUCER_EPOCH if expected is None else cur.producer_epoch)
        elif expected[1] == cur.last_producer_epoch:
            # KIP-360: a retry of a bump that already happened gets the bumped epoch again.
            nxt = meta.transit(now_ms, timeout_ms=timeout_ms, state=EMPTY, partitions=(), start_ms=-1)
        else:
            return fail(E.PRODUCER_FENCED)
        self._write(meta, nxt, lambda: respond(E.NONE, nxt.producer_id, nxt.producer_epoch), fail)

    # --- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------
    def _check(self, transactional_id: str, producer_id: int, producer_epoch: int, completing_ok: bool = False):
        """(error, metadata) for a request of a producer naming its id and epoch;
        ``completing_ok``: a transaction completing (its Complete record perhaps in flight) is
        no CONCURRENT_TRANSACTIONS."""
        if not transactional_id:
            return E.INVALID_REQUEST, None
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if meta.state.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, None
        if meta.pending is not None and not (completing_ok and meta.state.state in (PREPARE_COMMIT, PREPARE_ABORT)):
            return E.CONCURRENT_TRANSACTIONS, None
        return E.NONE, meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions,
                       now_ms: int, respond, deadline_ms: int | None = None) -> None:
        """``respond(code)``: one code for every partition, as Kafka's coordinator answers;
        later if the previous transaction is completing (held until ``deadline_ms``, by
        default ``completion_wait_ms`` from now)."""
        code, meta = self._check(transactional_id, producer_id, producer_epoch, completing_ok=True)
        if meta is None:
            return respond(code)
        cur = meta.state
        if cur.state in (PREPARE_COMMIT, PREPARE_ABORT):
            if deadline_ms is None:
                deadline_ms = now_ms + self.config.completion_wait_ms
            if now_ms >= deadline_ms:
                return respond(E.CONCURRENT_TRANSACTIONS)
            meta.held.append((deadline_ms, (producer_id, producer_epoch, tuple(partitions)), respond))
            return None
        have = set(cur.partitions)
        new = tuple(dict.fromkeys(p for p in partitions if p not in have))
        if cur.state == ONGOING and not new:
            return respond(E.NONE)
        start = cur.start_ms if cur.state == ONGOING else now_ms
        nxt = meta.transit(now_ms, state=ONGOING, partitions=cur.partitions + new, start_ms=start)
        self._write(meta, nxt, lambda: respond(E.NONE), respond)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> dict:
        """KIP-890's verify_only form: for each partition NONE if it is in this producer's
        ongoing transaction, else why not."""
        meta = self.txns.get(transactional_id) if transactional_id else None
        if meta is None or meta.state.producer_id != producer_id:
            code = E.INVALID_PRODUCER_ID_MAPPING
        elif meta.state.producer_epoch != producer_epoch:
            code = E.PRODUCER_FENCED
        elif meta.state.state != ONGOING:
            code = E.INVALID_TXN_STATE
        else:
            have = set(meta.state.partitions)
            return {p: (E.NONE if p in have else E.INVALID_TXN_STATE) for p in partitions}
        return {p: code for p in partitions}

    # --- EndTxn --------------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool, now_ms: int,
                respond) -> None:
        """``respond(code)`` once the PrepareCommit/PrepareAbort record is durable; the markers
        and the Complete record follow (Kafka's transaction.version 1 order)."""
        code, meta = self._check(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return respond(code)
        state = meta.state.state
        if state == ONGOING:
            nxt = meta.transit(now_ms, state=PREPARE_COMMIT if committed else PREPARE_ABORT)
            return self._write(meta, nxt, lambda: self._prepared(meta, respond), respond)
        if state == (COMPLETE_COMMIT if committed else COMPLETE_ABORT):
            return respond(E.NONE)  # a retry of an EndTxn that completed
        if state == (PREPARE_COMMIT if committed else PREPARE_ABORT):
            return respond(E.CONCURRENT_TRANSACTIONS)
        respond(E.INVALID_TXN_STATE)  # Empty, or the other outcome

    def _prepared(self, meta: TxnMetadata, respond) -> None:
        respond(E.NONE)
        self._send_markers(meta)

    def _abort_fencing(self, meta: TxnMetadata, now_ms: int, respond) -> None:
        """Abort ``meta``'s ongoing transaction with its epoch bumped, so the producer that began
        it is fenced on every partition its markers reach (Kafka's PrepareEpochFence path)."""
        cur = meta.state
        epoch = cur.producer_epoch + 1 if cur.producer_epoch < MAX_EPOCH else cur.producer_epoch
        nxt = meta.transit(now_ms, state=PREPARE_ABORT, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH)
        self._write(meta, nxt, lambda: self._prepared(meta, respond), respond)

    # --- markers -------------------------------------------------------------------------------
    def _send_markers(self, meta: TxnMetadata) -> None:
        cur = meta.state
        meta.markers_left = set(cur.partitions)
        if not meta.markers_left:
            return self._complete(meta, cur.last_update_ms)
        self._markers.append(MarkerJob(meta.transactional_id, cur.producer_id, cur.producer_epoch,
                                       cur.state == PREPARE_COMMIT, self.coordinator_epoch, cur.partitions))

    def marker_written(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                       partition: int, now_ms: int) -> None:
        """The marker of this transaction is durable on ``topic``-``partition`` (or the
        partition is gone); the last one completes the transaction."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state.producer_id != producer_id or meta.state.producer_epoch != producer_epoch \
                or meta.state.state not in (PREPARE_COMMIT, PREPARE_ABORT):
            return  # a late answer for a transaction that moved on
        meta.markers_left.discard((topic, partition))
        if not meta.markers_left and meta.pending is None:
            self._complete(meta, now_ms)

    def _complete(self, meta: TxnMetadata, now_ms: int) -> None:
        done = meta.transit(now_ms, state=COMPLETE_COMMIT if meta.state.state == PREPARE_COMMIT else COMPLETE_ABORT,
                            partitions=())
        if meta.held:
            # The next transaction's first add waited for this one: its Ongoing record goes in the
            # same batch as the Complete record (one replicated write instead of two in a row;
            # replayed in order, so a reload sees both or neither).
            deadline_ms, (producer_id, producer_epoch, partitions), respond = first = meta.held.pop(0)
            if producer_id == done.producer_id and producer_epoch == done.producer_epoch:
                nxt = replace(done, state=ONGOING, partitions=tuple(dict.fromkeys(partitions)), start_ms=now_ms)

                def durable():
                    respond(E.NONE)
                    self._run_held(meta, now_ms)

                def failed(code):
                    if self.txns.get(meta.transactional_id) is not meta:
                        return respond(E.NOT_COORDINATOR)  # unloaded meanwhile
                    meta.held.insert(0, first)  # the Complete record is written again by ``tick``
                return self._write(meta, nxt, durable, failed, also=done)
            meta.held.insert(0, first)
        # A failed write is tried again by ``tick`` (the markers are written; only the record is missing).
        self._write(meta, done, lambda: self._run_held(meta, now_ms), lambda code: None)

    def _run_held(self, meta: TxnMetadata, now_ms: int) -> None:
        """The transaction completed: run the adds that waited for it, in arrival order (one
        arriving while a record is in flight gets CONCURRENT_TRANSACTIONS, as any request then)."""
        held, meta.held = meta.held, []
        if self.txns.get(meta.transactional_id) is not meta:
            for _, _, respond in held:
                respond(E.NOT_COORDINATOR)
            return
        for deadline_ms, (producer_id, producer_epoch, partitions), respond in held:
            self.add_partitions(meta.transactional_id, producer_id, producer_epoch, partitions, now_ms, respond,
                                deadline_ms)

    # --- timers --------------------------------------------------------------------------------
    def tick(self, now_ms: int, *, abort_expired: bool = True, expire_ids: bool = False) -> None:
        for meta in list(self.txns.values()):
            if meta.held:
                expired = [h for h in meta.held if h[0] <= now_ms]
                if expired:
                    meta.held = [h for h in meta.held if h[0] > now_ms]
                    for _, _, respond in expired:
                        respond(E.CONCURRENT_TRANSACTIONS)
            if meta.pending is not None:
                continue
            cur = meta.state
            if cur.state in (PREPARE_COMMIT, PREPARE_ABORT) and not meta.markers_left:
                self._complete(meta, now_ms)
            elif abort_expired and cur.state == ONGOING and cur.start_ms + cur.timeout_ms < now_ms:
                log.info("transactions: aborting %s (producer %d epoch %d): it began %d ms ago, its timeout is %d ms",
                         meta.transactional_id, cur.producer_id, cur.producer_epoch, now_ms - cur.start_ms,
                         cur.timeout_ms)
                self._abort_fencing(meta, now_ms, lambda code: None)
            elif expire_ids and cur.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) \
                    and cur.last_update_ms + self.config.id_expiration_ms <= now_ms:
                tid = meta.transactional_id
                self._write(meta, meta.transit(now_ms, state=DEAD), lambda tid=tid: self.txns.pop(tid, None),
                            lambda code: None)

    # --- admin ---------------------------------------------------------------------------------
    def describe(self, transactional_id: str):
        meta = self.txns.get(transactional_id)
        return (E.TRANSACTIONAL_ID_NOT_FOUND, None) if meta is None else (E.NONE, meta.state)

    def list(self, states, producer_ids, duration_ms: int, pattern, now_ms: int):
        """[(transactional id, TxnState)] matching every filter given (Kafka's
        ``listTransactionStates``; ``pattern`` a compiled regex matched in full, or None)."""
        out = []
        for tid, meta in self.txns.items():
            s = meta.state
            if producer_ids and s.producer_id not in producer_ids:
                continue
            if states and s.state not in states:
                continue
            if duration_ms >= 0 and now_ms - s.start_ms <= duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            out.append((tid, s))
        return out

    # --- writing -------------------------------------------------------------------------------
    def _write(self, meta: TxnMetadata, nxt: TxnState, on_durable, on_failed, also: TxnState | None = None) -> None:
        """Append ``nxt``'s record (after ``also``'s, in one batch, if given)."""
        meta.pending = nxt

        def durable():
            if self.txns.get(meta.transactional_id) is meta and meta.pending is nxt:
                meta.pending = None
                meta.state = nxt
            on_durable()

        def failed(code):
            if meta.pending is nxt:
                meta.pending = None
            log.warning("transactions: writing %s of %s failed: %s", nxt.state, meta.transactional_id, E(code).name)
            on_failed(coordinator_error(code))
        records = [nxt.record(meta.transactional_id)]
        if also is not None:
            records.insert(0, also.record(meta.transactional_id))
        self._appends.append(Append(records, durable, failed))


def valid_state_names(names) -> tuple[set, list]:
    """(known states, unknown names) of a ListTransactions state filter."""
    known = {n for n in names if n in STATES}
    return known, [n for n in names if n not in STATES]


def compile_pattern(pattern):
    """A ListTransactions v2 pattern: None or empty = no filter; an invalid one = None with
    False (the request is answered INVALID_REQUEST)."""
    if not pattern:
        return None, True
    try:
        return re.compile(pattern), True
    except re.error:
        return None, False
