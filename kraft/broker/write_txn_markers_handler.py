"""WriteTxnMarkers (API key 27, v0-1) on a partition leader: the transaction coordinator asks
this broker to end a producer's transaction on the partitions it leads by appending a COMMIT
or ABORT control batch (Kafka's ``ReplicaManager.appendRecords`` with
``AppendOrigin.COORDINATOR`` and acks=-1).

The marker batch is Kafka's exact format: attributes transactional|control, the producer's id
and epoch, base sequence -1, one record whose key is int16 version 0 + int16 type (0 ABORT,
1 COMMIT) and whose value is int16 version 0 + int32 coordinator epoch. The producer state
checks it first (``ProducerStateTable.check_marker``: INVALID_PRODUCER_EPOCH for an older
producer epoch, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch) and records it
after the append, which ends the producer's ongoing transaction there (and indexes an abort).
Each partition is answered once its marker is fsynced and covered by the high watermark, as
produce with acks=-1 (``ProduceHandler.await_replicated``); then ``txn_marker_written`` is
called for it, so the group coordinator can complete transactional offset commits on
``__consumer_offsets``. Markers to internal topics are allowed: only coordinators send them.
No sockets.
"""

from __future__ import annotations

import logging
import time

from kraft.broker.broker_state import NONE, BrokerState
from kraft.broker.producer_state import ABORT, COMMIT
from kraft.errors import ErrorCode, FatalLogError, KraftError
from kraft.protocol import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kraft.records import build_batch

log = logging.getLogger("kraft.broker.write_txn_markers")

R = WriteTxnMarkersResponse
#: Kafka appends markers with the broker's request.timeout.ms as the acks=-1 timeout.
MARKER_TIMEOUT_MS = 30_000
_MARKER_VALUE_VERSION = 0


def end_txn_marker_batch(producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                         timestamp_ms: int) -> bytes:
    """One end-transaction control batch as Kafka writes it (``EndTransactionMarker``)."""
    key = (0).to_bytes(2, "big") + (COMMIT if committed else ABORT).to_bytes(2, "big")
    value = _MARKER_VALUE_VERSION.to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big", signed=True)
    return build_batch([value], [key], producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                       transactional=True, control=True, timestamp=timestamp_ms)


class WriteTxnMarkersHandler:
    def __init__(self, state: BrokerState, produce, *, on_append=None, clock_ms=None):
        """``produce``: the ``ProduceHandler`` whose acks=-1 waits the markers share;
        ``on_append(plog)`` wakes parked fetches."""
        self.state, self.produce, self.on_append = state, produce, on_append
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        #: ``txn_marker_written(topic, partition, producer_id, producer_epoch, committed)``, set by
        #: the group coordinator's owner: called once a marker is durable on a partition.
        self.txn_marker_written = None

    def handle(self, request: WriteTxnMarkersRequest, version: int):
        markers = []
        waits = []  # (appended part, marker, response partition)
        for m in request.markers:
            topics = []
            for t in m.topics:
                parts = []
                for index in t.partition_indexes:
                    out = R.Marker.Topic.Partition(partition_index=index, error_code=NONE)
                    parts.append(out)
                    out.error_code, part = self._append(t.name, index, m)
                    if part is not None:
                        waits.append((part, m, out))
                topics.append(R.Marker.Topic(name=t.name, partitions=parts))
            markers.append(R.Marker(producer_id=m.producer_id, topics=topics))
        resp = R(markers=markers)
        if not waits:
            return resp

        def answer():
            for part, m, out in waits:
                out.error_code = part.code
                if part.code == NONE:
                    self._notify(part.topic, part.index, m)
            return resp
        return self.produce.await_replicated([w[0] for w in waits], MARKER_TIMEOUT_MS, answer)

    def _append(self, topic: str, index: int, m):
        """(error code, the appended part to wait for or None)."""
        if m.producer_id < 0 or m.producer_epoch < 0:
            return int(ErrorCode.INVALID_REQUEST), None  # a marker must name a producer
        code, plog, reg = self.state.local_leader(topic, index)
        if code != NONE:
            return code, None
        if len(reg.isr) < self.state.min_insync_replicas(topic):
            return int(ErrorCode.NOT_ENOUGH_REPLICAS), None
        table = self.state.producer_states.table(plog)
        verdict = table.check_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch)
        if verdict.code != NONE:
            log.info("marker for producer %d on %s-%d refused: %s", m.producer_id, topic, index, verdict.message)
            return verdict.code, None
        data = bytearray(end_txn_marker_batch(m.producer_id, m.producer_epoch, m.transaction_result,
                                              m.coordinator_epoch, self.clock_ms()))
        try:
            info = plog.log.append(data, assign_offsets=True, leader_epoch=max(reg.leader_epoch, 0))
        except FatalLogError as exc:
            log.error("marker append to %s-%d: %s", topic, index, exc)
            return int(ErrorCode.KAFKA_STORAGE_ERROR), None
        except KraftError as exc:
            return int(exc.code), None
        self.state.producer_states.on_appended(plog, data)
        self.state.advance_high_watermark(plog, reg)
        if self.on_append is not None:
            self.on_append(plog)
        return NONE, self.produce.appended(topic, index, plog, reg, info.first_offset, info.last_offset)

    def _notify(self, topic: str, index: int, m) -> None:
        hook = self.txn_marker_written
        if hook is None:
            return
        try:
            hook(topic, index, m.producer_id, m.producer_epoch, bool(m.transaction_result))
        except Exception:  # the group side's bug must not lose the other partitions' answers
            log.exception("txn_marker_written hook failed for %s-%d", topic, index)

