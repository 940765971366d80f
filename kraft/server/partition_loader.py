"""Reading a coordinator's internal partition (``__consumer_offsets``, ``__transaction_state``)
from its start to its end when this broker becomes its leader: the per-byte work of a load, run
on a worker thread; the coordinator applies the result on the event loop. Records of a
transactional batch come wrapped in ``TxnOffsets`` (pending until their producer's marker) and
COMMIT/ABORT markers as ``TxnMarker``, in log order."""

from __future__ import annotations

from kraft.coordinator.group_records import decode_record
from kraft.coordinator.shard_state import TxnMarker, TxnOffsets
from kraft.errors import KraftError
from kraft.records import ControlType, decode_control_key, iter_batches

LOAD_CHUNK = 1 << 20


def reconcile_shards(state, topic: str, shards: dict, load, log, what: str) -> None:
    """A coordinator's shards follow leadership of ``topic``: a shard whose partition this
    broker no longer leads, or leads in another epoch or with another log, is unloaded (and
    dropped from ``shards``); ``load(p, epoch, plog)`` is called for each led partition without
    one. One loop for the group and the transaction coordinators."""
    t = state.image.topics.by_name.get(topic)
    led = {}
    if t is not None:
        for p, reg in t.partitions.items():
            code, plog, _ = state.local_leader(topic, p)
            if code == 0:
                led[p] = (reg.leader_epoch, plog)
    for p, loaded in list(shards.items()):
        now = led.get(p)
        if now is None or now[0] != loaded.epoch or now[1] is not loaded.plog:
            log.info("%s: unloading %s-%d (leader epoch %d)", what, topic, p, loaded.epoch)
            loaded.shard.unload()
            del shards[p]
    for p, (epoch, plog) in led.items():
        if p not in shards:
            load(p, epoch, plog)


def read_partition_records(plog, decode=decode_record) -> tuple[list, int]:
    """Every record of a partition log from its start to its end, decoded (``decode(key,
    value)``, ``decode_record`` by default), and how many did not decode: the per-byte work of
    a load, on a worker thread."""
    out, bad = [], 0
    lg = plog.log
    offset, end = lg.start_offset, lg.end_offset
    while offset < end:
        data = lg.read(offset, LOAD_CHUNK)
        if not data:
            break
        last = offset
        for batch in iter_batches(data):
            if batch.last_offset < offset:
                continue
            last = batch.last_offset + 1
            if batch.is_control:
                if batch.is_transactional:
                    # A COMMIT/ABORT marker: pending transactional offsets of its producer settle.
                    for rec in batch:
                        try:
                            ctype = decode_control_key(rec.key)
                        except KraftError:
                            bad += 1
                            continue
                        if ctype in (ControlType.ABORT, ControlType.COMMIT):
                            out.append(TxnMarker(batch.producer_id, ctype == ControlType.COMMIT))
                continue
            pid = batch.producer_id if batch.is_transactional else -1
            for rec in batch:
                if rec.offset >= offset and rec.key is not None:
                    try:
                        decoded = decode(bytes(rec.key), None if rec.value is None else bytes(rec.value))
                    except KraftError:
                        bad += 1  # no version of ours decodes it: skipped, as Kafka's loader logs
                        continue
                    out.append(decoded if pid < 0 else TxnOffsets(pid, decoded))
        if last <= offset:
            break
        offset = last
    return out, bad
