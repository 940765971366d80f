"""Idempotent and transactional producer state of one partition (Kafka's
``ProducerStateManager`` / ``ProducerAppendInfo``): per producer id the epoch, the metadata of
the last five batches (so a retried batch is answered with its original offsets and a gap or
a stale epoch is refused before anything is appended), the coordinator epoch of its last
transaction marker and the first offset of its ongoing transaction. The ongoing transactions
give the last stable offset; an applied ABORT/COMMIT marker ends one and is reported as a
``CompletedTxn`` (the caller indexes the aborted ones in ``.txnindex``).

Rules (Kafka's ``checkProducerEpoch`` / ``checkSequence`` / ``findDuplicateBatch``):
  * a batch whose (epoch, first sequence, last sequence) equals one of the producer's last
    five batches is a duplicate: nothing is appended, the answer is NONE with the original
    offsets (Kafka's produce path answers duplicates this way; DUPLICATE_SEQUENCE_NUMBER is
    not what a current broker returns);
  * an epoch below the producer's is INVALID_PRODUCER_EPOCH;
  * a higher epoch must start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise);
  * within an epoch the first sequence must follow the last one (wrapping at 2^31 - 1);
  * an unknown producer may start at any sequence (its earlier records may have been
    removed by retention, KIP-360).

Work is per batch header, never per record. The table only decides and records; appends,
snapshots files and log reads belong to the caller (``producer_snapshots`` does the files).
"""

from __future__ import annotations

import collections
import struct
from typing import NamedTuple

from kraft.errors import ErrorCode

#: Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``.
BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
NO_PRODUCER_ID = -1
_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch v2 header, 61 bytes
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
#: ControlRecordType of an end-transaction marker's key.
ABORT, COMMIT = 0, 1


class BatchHeader(NamedTuple):
    """What the producer state needs from one batch header."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    transactional: bool
    control: bool
    #: for a control batch: its ControlRecordType (ABORT 0, COMMIT 1, ...) and, for a
    #: transaction marker, the coordinator epoch in its value; -1 otherwise
    marker: int = -1
    coordinator_epoch: int = -1


class CompletedTxn(NamedTuple):
    """A transaction an end marker closed: ``last_offset`` is the marker's offset;
    ``last_stable_offset`` the LSO right after it (the oldest other open transaction's first
    offset, else the offset after the marker), as Kafka's ``AbortedTxn`` records it."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int = -1


def read_varint(view, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, next position)."""
    shift = raw = 0
    while True:
        b = view[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def control_marker(view, pos: int) -> tuple[int, int]:
    """(control type, coordinator epoch) of the first record of the uncompressed control batch
    at ``pos``: key = int16 version + int16 type; a transaction marker's value = int16 version
    + int32 coordinator epoch (Kafka's ``EndTransactionMarker``). (-1, -1) if unreadable."""
    try:
        p = pos + _HEADER.size
        _len, p = read_varint(view, p)
        p += 1  # record attributes
        _ts, p = read_varint(view, p)
        _od, p = read_varint(view, p)
        klen, p = read_varint(view, p)
        if klen < 4:
            return -1, -1
        ctype = int.from_bytes(view[p + 2:p + 4], "big", signed=True)
        p += klen
        vlen, p = read_varint(view, p)
        coord = int.from_bytes(view[p + 2:p + 6], "big", signed=True) if vlen >= 6 and ctype in (ABORT, COMMIT) \
            else -1
        return ctype, coord
    except (IndexError, ValueError):
        return -1, -1


def producer_batches(buf, *, only_idempotent: bool = True) -> list[BatchHeader]:
    """The headers of the (already validated) batches in ``buf``; with ``only_idempotent``
    only those that carry a producer id."""
    out = []
    view = memoryview(buf)
    pos, end = 0, len(view)
    while pos + _HEADER.size <= end:
        (base, length, _ple, _magic, _crc, attrs, delta, _bts, max_ts, pid, epoch, seq,
         _count) = _HEADER.unpack_from(view, pos)
        if pid < 0 and only_idempotent:
            pos += 12 + length
            continue
        marker = coord = -1
        if attrs & _CONTROL and pid >= 0 and not attrs & 0x07:  # markers are never compressed
            marker, coord = control_marker(view, pos)
        pos += 12 + length
        out.append(BatchHeader(base, base + delta, max_ts, pid, epoch, seq, _add_sequence(seq, delta),
                               bool(attrs & _TRANSACTIONAL), bool(attrs & _CONTROL), marker, coord))
    return out


def _add_sequence(seq: int, delta: int) -> int:
    if seq < 0:
        return seq
    n = seq + delta
    return n - INT32_MAX - 1 if n > INT32_MAX else n


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """One producer id on one partition. Invariant: ``batches`` holds at most
    ``BATCHES_TO_RETAIN`` entries of epoch ``epoch``, oldest first."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp", "coordinator_epoch", "txn_first_offset")

    def __init__(self, producer_id: int, epoch: int = -1, *, last_timestamp: int = -1, coordinator_epoch: int = -1,
                 txn_first_offset: int = -1):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: collections.deque = collections.deque(maxlen=BATCHES_TO_RETAIN)
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.txn_first_offset = txn_first_offset

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def record(self, h: BatchHeader) -> CompletedTxn | None:
        """Apply one appended batch; an end-transaction marker returns the transaction it
        closed (None if the producer had none open on this partition)."""
        if h.producer_epoch != self.epoch:
            self.epoch = h.producer_epoch
            self.batches.clear()  # sequences restart with a new epoch
        if not h.control and h.first_sequence >= 0:
            self.batches.append(BatchMetadata(h.first_sequence, h.last_sequence, h.base_offset, h.last_offset,
                                              h.max_timestamp))
        self.last_timestamp = max(self.last_timestamp, h.max_timestamp)
        if not h.control:
            if h.transactional and self.txn_first_offset < 0:
                self.txn_first_offset = h.base_offset  # the first batch of a transaction opens it here
            return None
        if h.marker not in (ABORT, COMMIT):
            return None
        self.coordinator_epoch = h.coordinator_epoch
        first, self.txn_first_offset = self.txn_first_offset, -1
        if first < 0:
            return None  # a marker for a transaction that wrote nothing here (Kafka writes it too)
        return CompletedTxn(self.producer_id, first, h.last_offset, h.marker == ABORT)

    def __eq__(self, other) -> bool:
        return isinstance(other, ProducerEntry) and (
            self.producer_id, self.epoch, list(self.batches), self.last_timestamp, self.coordinator_epoch,
            self.txn_first_offset) == (other.producer_id, other.epoch, list(other.batches), other.last_timestamp,
                                       other.coordinator_epoch, other.txn_first_offset)

    def __repr__(self) -> str:
        return (f"ProducerEntry(pid={self.producer_id}, epoch={self.epoch}, batches={list(self.batches)}, "
                f"coordinator_epoch={self.coordinator_epoch}, txn_first_offset={self.txn_first_offset})")


class Verdict(NamedTuple):
    """The outcome of checking a client append: ``code`` NONE and ``duplicate`` None means
    append; a ``duplicate`` means answer NONE with its offsets and append nothing."""

    code: int
    message: str | None = None
    duplicate: BatchMetadata | None = None


ACCEPT = Verdict(int(ErrorCode.NONE))


class ProducerStateTable:
    """The producers of one partition. ``end_offset`` is the log offset the table covers up
    to (everything below it has been applied); it only moves forward through ``apply`` and
    is reset by the loader after a truncation."""

    def __init__(self, end_offset: int = 0):
        self.producers: dict[int, ProducerEntry] = {}
        self.end_offset = end_offset
        #: producer id -> first offset of its open transaction; None until first needed
        #: (a loader fills ``producers`` directly), then kept by ``apply``
        self._ongoing: dict[int, int] | None = None
        #: (first offset, marker offset) of ended transactions whose marker the high watermark
        #: may not cover yet, in log order: they hold the LSO back until it does (Kafka's
        #: ``unreplicatedTxns``), so a read_committed consumer never reads past a marker a
        #: leader change could still take away
        self._unreplicated: list[tuple[int, int]] = []
        #: producer id -> the guard of a transactional produce being verified with the
        #: coordinator (KIP-890, ``kraft.broker.txn_verification``); a marker removes it
        self.verification: dict[int, object] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    # --- the leader's check before a client append ----------------------------------------------
    def check_client_append(self, headers: list[BatchHeader], *, coordinator: bool = False) -> Verdict:
        """Decide on a client's batches (``producer_batches`` of the request) before the
        append. Several batches of one producer in one request must continue each other.
        ``coordinator``: this broker's group coordinator writing a producer's transactional
        offsets (Kafka's AppendOrigin.COORDINATOR): only the epoch is checked, as Kafka checks
        sequences for client writes alone (those batches carry no sequence of the producer's,
        and are never retried as duplicates)."""
        pending: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last seq) after earlier batches here
        for h in headers:
            if h.control:
                return Verdict(int(ErrorCode.INVALID_RECORD), "clients may not write control batches")
            entry = self.producers.get(h.producer_id)
            if not h.transactional and entry is not None and entry.txn_first_offset >= 0 \
                    and h.producer_epoch == entry.epoch:
                # Kafka's ProducerAppendInfo: a producer inside a transaction writes only transactionally.
                return Verdict(int(ErrorCode.INVALID_TXN_STATE),
                               f"producer {h.producer_id} wrote a non-transactional batch inside its transaction")
            if coordinator:
                if entry is not None and h.producer_epoch < entry.epoch:
                    return Verdict(int(ErrorCode.INVALID_PRODUCER_EPOCH),
                                   f"producer {h.producer_id} epoch {h.producer_epoch} is older than {entry.epoch}")
                continue
            if h.producer_id not in pending and entry is not None:
                dup = entry.find_duplicate(h.producer_epoch, h.first_sequence, h.last_sequence)
                if dup is not None:
                    return Verdict(int(ErrorCode.NONE), None, dup)
            epoch, last_seq = pending.get(h.producer_id) or (
                (entry.epoch, entry.last_seq) if entry is not None else (-1, -1))
            known = entry is not None or h.producer_id in pending
            if known and h.producer_epoch < epoch:
                return Verdict(int(ErrorCode.INVALID_PRODUCER_EPOCH),
                               f"producer {h.producer_id} epoch {h.producer_epoch} is older than {epoch}")
            if h.first_sequence < 0:
                return Verdict(int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
                               f"producer {h.producer_id} sent no sequence number")
            if known and h.producer_epoch > epoch:
                if h.first_sequence != 0 and epoch >= 0:
                    return Verdict(int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
                                   f"new epoch {h.producer_epoch} of producer {h.producer_id} starts at sequence "
                                   f"{h.first_sequence}, not 0")
            elif known and last_seq >= 0 and not in_sequence(last_seq, h.first_sequence):
                return Verdict(int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
                               f"producer {h.producer_id} sequence {h.first_sequence} does not follow {last_seq}")
            pending[h.producer_id] = (h.producer_epoch, h.last_sequence)
        return ACCEPT

    # --- the leader's check before appending a transaction marker ----------------------------
    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> Verdict:
        """Kafka's ``appendEndTxnMarker`` checks: a marker of an older producer epoch is
        INVALID_PRODUCER_EPOCH; one from a coordinator epoch older than the last marker's is
        TRANSACTION_COORDINATOR_FENCED (a deposed coordinator still retrying). An unknown
        producer is fine: its marker is written anyway."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ACCEPT
        if producer_epoch < entry.epoch:
            return Verdict(int(ErrorCode.INVALID_PRODUCER_EPOCH),
                           f"marker epoch {producer_epoch} of producer {producer_id} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            return Verdict(int(ErrorCode.TRANSACTION_COORDINATOR_FENCED),
                           f"coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}")
        return ACCEPT

    # --- recording what the log holds -----------------------------------------------------------
    def apply(self, headers: list[BatchHeader], end_offset: int | None = None) -> list[CompletedTxn]:
        """Record appended batches (with their final offsets): after a leader append, a
        follower append, or while replaying the log on recovery. No checks: the log is the
        truth (Kafka's ``AppendOrigin.REPLICATION``). Returns the transactions closed by
        markers among them, in log order."""
        producers = self.producers
        ongoing = self.ongoing()
        completed = []
        for h in headers:
            if h.producer_id < 0:
                continue
            entry = producers.get(h.producer_id)
            if entry is None:
                entry = producers[h.producer_id] = ProducerEntry(h.producer_id)
            done = entry.record(h)
            if h.control and self.verification:
                self.verification.pop(h.producer_id, None)  # the transaction a check was for ended
            if entry.txn_first_offset >= 0:
                ongoing[h.producer_id] = entry.txn_first_offset
            else:
                ongoing.pop(h.producer_id, None)
            if done is not None:
                first = min(ongoing.values()) if ongoing else h.last_offset + 1
                completed.append(done._replace(last_stable_offset=first))
                self._unreplicated.append((done.first_offset, done.last_offset))
        if end_offset is not None:
            self.end_offset = max(self.end_offset, end_offset)
        elif headers:
            self.end_offset = max(self.end_offset, headers[-1].last_offset + 1)
        return completed

    # --- transactions ----------------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction, None if there is none (Kafka's
        ``firstUndecidedOffset``)."""
        ongoing = self.ongoing()
        return min(ongoing.values()) if ongoing else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO: below the oldest transaction that is ongoing or whose end marker the
        HW does not cover yet, and never above the HW."""
        unrep = self._unreplicated
        if unrep:
            # Kafka's onHighWatermarkUpdated: a marker below the HW is replicated.
            self._unreplicated = unrep = [t for t in unrep if t[1] >= high_watermark]
        first = self.first_unstable_offset()
        if unrep:
            u = min(t[0] for t in unrep)
            first = u if first is None else min(first, u)
        return high_watermark if first is None else min(first, high_watermark)

    def ongoing(self) -> dict[int, int]:
        """producer id -> first offset of its ongoing transaction (the table's own dict)."""
        if self._ongoing is None:
            self._ongoing = {pid: e.txn_first_offset for pid, e in self.producers.items() if e.txn_first_offset >= 0}
        return self._ongoing

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        doomed = [pid for pid, e in self.producers.items()
                  if e.txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)
