"""The bytes of Kafka's bootstrap checkpoint for a dynamic quorum (KIP-853).

``kafka-storage format --standalone`` / ``--initial-controllers`` write
``00000000000000000000-0000000000.checkpoint`` into the metadata log directory: a snapshot
ending at offset 0, epoch 0, holding only control records — SnapshotHeader, KRaftVersion (1),
Voters (the initial voters with their directory ids and listeners), SnapshotFooter. The
first leader copies the KRaftVersion and Voters records into the log. Bytes only: writing
the file is the log layer's job.
"""

from __future__ import annotations

from kraft.records.control import (KRaftVersionRecord, SnapshotFooterRecord, SnapshotHeaderRecord, VotersRecord,
                                   encode_control_value)


def bootstrap_snapshot_bytes(voters: VotersRecord, kraft_version: int = 1, timestamp: int = 0) -> bytes:
    from kraft.records import build_control_batch  # the package picks the codec

    out = []
    for offset, msg in enumerate((SnapshotHeaderRecord(-1), KRaftVersionRecord(kraft_version), voters,
                                  SnapshotFooterRecord())):
        out.append(build_control_batch(msg.TYPE, encode_control_value(msg), base_offset=offset,
                                       partition_leader_epoch=0, timestamp=timestamp))
    return b"".join(out)
