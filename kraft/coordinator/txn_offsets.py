"""Transactional offset commits of a shard's groups (Kafka's ``OffsetMetadataManager`` for
TxnOffsetCommit, KIP-98): a transactional producer's offsets are written to the group's
``__consumer_offsets`` partition inside its transaction and stay pending, per producer, until
the transaction's marker lands on that partition: COMMIT makes them the group's committed
offsets, ABORT drops them. A mixin of ``GroupShard``; sans-I/O like it."""

from __future__ import annotations

from kraft.coordinator.classic_group import DEAD
from kraft.coordinator.group_records import OffsetCommitKey, offset_commit_record
from kraft.coordinator.shard_state import Append, OffsetEntry, commit_error, valid_group_id
from kraft.errors import ErrorCode as E
from kraft.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse


class TxnOffsetHandlers:
    # self.pending_txn: producer id -> group -> (topic, partition) -> OffsetEntry

    def txn_commit(self, req, version: int, now_ms: int, respond) -> None:
        """``respond(TxnOffsetCommitResponse)`` once the records are durable (still pending)."""
        R = TxnOffsetCommitResponse

        def answer(code_of):
            respond(R(topics=[R.Topic(name=t.name, partitions=[
                R.Topic.Partition(partition_index=p.partition_index, error_code=code_of(p))
                for p in t.partitions]) for t in req.topics]))
        code = self._check_txn_commit(req, version)
        if code != E.NONE:
            return answer(lambda p: code)
        limit = self.config.offset_metadata_max_bytes

        def too_large(p):
            return len((p.committed_metadata or "").encode("utf-8")) > limit
        records, entries = [], []
        for t in req.topics:
            for p in t.partitions:
                if too_large(p):
                    continue
                meta = p.committed_metadata or ""
                entries.append(((t.name, p.partition_index),
                                OffsetEntry(p.committed_offset, p.committed_leader_epoch, meta, now_ms)))
                records.append(offset_commit_record(req.group_id, t.name, p.partition_index, p.committed_offset,
                                                    p.committed_leader_epoch, meta, now_ms))

        def durable():
            pending = self.pending_txn.setdefault(req.producer_id, {}).setdefault(req.group_id, {})
            pending.update(entries)
            answer(lambda p: E.OFFSET_METADATA_TOO_LARGE if too_large(p) else E.NONE)

        def failed(code):
            answer(lambda p: E.OFFSET_METADATA_TOO_LARGE if too_large(p) else txn_commit_error(code))
        if not records:
            return durable()
        self._appends.append(Append(records, durable, failed, producer_id=req.producer_id,
                                    producer_epoch=req.producer_epoch))

    def _check_txn_commit(self, req, version: int) -> int:
        """Kafka's ``validateTransactionalOffsetCommit``: with a member id, generation or instance
        id (v3+), the member must be the group's and of its generation; a consumer (KIP-848)
        group's member of its epoch."""
        if not valid_group_id(req.group_id):
            return E.INVALID_GROUP_ID
        modern = self.consumer_groups.get(req.group_id)
        if modern is not None:
            if modern.deleted:
                return E.COORDINATOR_NOT_AVAILABLE
            # Kafka checks the member once any of its fields is given; a transactional commit
            # is never refused for its API version (9: past OffsetCommit's KIP-848 check).
            if version >= 3 and (req.member_id or req.generation_id >= 0 or req.group_instance_id is not None):
                return self.check_consumer_commit(modern, req.member_id or "", req.generation_id, 9)
            return E.NONE
        if version < 3:  # no member fields: a producer's offsets, checked by its epoch only
            return E.NONE if req.group_id not in self.groups or self.groups[req.group_id].state != DEAD \
                else E.COORDINATOR_NOT_AVAILABLE
        # The generation alone is enough to be checked: librdkafka's consumer, told its member is
        # unknown, clears its member id but keeps its old generation, and a copier that lost its
        # partitions meanwhile must not commit their offsets (exactly-once across a rebalance).
        return self.check_classic_commit(self.groups.get(req.group_id), req.group_id, req.generation_id,
                                         req.member_id or "", req.group_instance_id, transactional=True)

    def complete_txn(self, producer_id: int, committed: bool, now_ms: int = 0) -> None:
        """The producer's COMMIT/ABORT marker is durable on this shard's partition."""
        pending = self.pending_txn.pop(producer_id, None)
        if not pending or not committed:
            return
        for group_id, entries in pending.items():
            self.offsets.setdefault(group_id, {}).update(entries)

    def apply_txn_offset(self, producer_id: int, decoded) -> None:
        """Replay of a record of a transactional batch: pending until its marker is replayed."""
        k, v = decoded
        if not isinstance(k, OffsetCommitKey) or v is None:
            return
        self.pending_txn.setdefault(producer_id, {}).setdefault(k.group, {})[(k.topic, k.partition)] = \
            OffsetEntry(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)

    def has_pending_txn_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        return any((topic, partition) in groups.get(group_id, {}) for groups in self.pending_txn.values())


#: Refusals of the transactional batch by the partition's producer state, passed on to the
#: producer as Kafka's coordinator does (it must learn it is fenced or its transaction is gone).
PRODUCER_ERRORS = frozenset({E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED, E.INVALID_TXN_STATE,
                             E.INVALID_PRODUCER_ID_MAPPING, E.TRANSACTION_ABORTABLE})


def txn_commit_error(code: int) -> int:
    return int(code) if code in PRODUCER_ERRORS else commit_error(code)
