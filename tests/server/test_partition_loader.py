"""Loading a coordinator partition: plain records decoded in order, records of a transactional
batch wrapped as pending for their producer, COMMIT/ABORT markers reported with their producer
(what lets a reloaded group shard settle transactional offsets as the live one did)."""

from kraft.coordinator.group_records import OffsetCommitKey, offset_commit_record
from kraft.coordinator.shard_state import TxnMarker, TxnOffsets
from kraft.coordinator.txn_records import EMPTY, decode_txn_record, txn_record
from kraft.records import ControlType, build_batch, control_key
from kraft.server.partition_loader import read_partition_records


class FakeLog:
    def __init__(self, batches):
        self.data = b"".join(batches)
        self.start_offset, self.end_offset = 0, 100

    def read(self, offset, n):
        return self.data if offset == 0 else b""


class FakePartition:
    def __init__(self, batches):
        self.log = FakeLog(batches)


def _marker(pid, committed, base):
    ctype = ControlType.COMMIT if committed else ControlType.ABORT
    return build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[control_key(ctype)], control=True, transactional=True,
                       producer_id=pid, producer_epoch=0, base_offset=base)


def test_transactional_records_and_markers_in_log_order():
    plain = offset_commit_record("g", "t", 0, 5, -1, "", 1)
    txn = offset_commit_record("g", "t", 1, 9, -1, "", 1)
    batches = [build_batch([plain.value], keys=[plain.key], base_offset=0),
               build_batch([txn.value], keys=[txn.key], base_offset=1, producer_id=7, producer_epoch=0,
                           transactional=True, base_sequence=0),
               _marker(7, True, 2), _marker(8, False, 3)]
    out, bad = read_partition_records(FakePartition(batches))
    assert bad == 0 and len(out) == 4
    assert isinstance(out[0][0], OffsetCommitKey) and out[0][1].offset == 5
    assert isinstance(out[1], TxnOffsets) and out[1].producer_id == 7 and out[1].decoded[1].offset == 9
    assert out[2:] == [TxnMarker(7, True), TxnMarker(8, False)]


def test_transaction_state_partition_with_its_decoder():
    rec = txn_record("x", 1, 0, 100, EMPTY, [], 5, -1)
    out, bad = read_partition_records(FakePartition([build_batch([rec.value], keys=[rec.key])]), decode_txn_record)
    assert bad == 0 and out[0][0] == "x" and out[0][1].producer_id == 1


def test_undecodable_records_are_counted_not_raised():
    out, bad = read_partition_records(FakePartition([build_batch([b"zz"], keys=[b"\x00\x00\xff"])]),
                                      decode_txn_record)
    assert (out, bad) == ([], 1)
