"""``kraft dump-log PATH...``: print the batches and records of segment (``.log``) and
snapshot (``.checkpoint``) files, and the entries of ``.index`` / ``.timeindex`` files, in
the style of Kafka's ``kafka-dump-log``; ``--json`` prints one JSON document per file.

Read-only: it never opens a log for writing, never repairs anything, and reports invalid
data (bad CRC, torn tail) where it starts instead of failing. Control records are decoded;
metadata record values are labelled by their frame (api key, version), and with
``--cluster-metadata-decoder`` decoded into Kafka's JSON form (``payload: {"type": ...}``).
"""

from __future__ import annotations

import json
import os
import re
import sys

import numpy as np

from kraft import records
from kraft.errors import CorruptRecordError, MetadataParseError
from kraft.log import files
from kraft.cli.offsets_decoder import offsets_key_and_payload
from kraft.log.snapshot import parse_snapshot_name
from kraft.metadata.json_form import record_json, record_to_json
from kraft.metadata.records import METADATA_RECORDS
from kraft.metadata.serde import decode_record
from kraft.records import Compression, ControlType

# Metadata record api keys, to label record values: every record we know (records.py, from
# Kafka's JSON schemas) and the two Kafka retired.
_METADATA_RECORDS = {**{key: cls.__name__ for key, cls in METADATA_RECORDS.items()},
                     13: "FailedReplicasRecord", 16: "RemoveFeatureLevelRecord"}


def register(subparsers) -> None:
    p = subparsers.add_parser("dump-log", help="print the batches and records of log segments and snapshots",
                              description=__doc__.split("\n\n")[0] + " Kafka's kafka-dump-log options "
                              "(--files, --print-data-log, --deep-iteration) are accepted too.")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help=".log, .checkpoint, .index or .timeindex file")
    p.add_argument("--files", action="append", metavar="FILE[,FILE]",
                   help="Kafka's spelling: comma-separated files to dump (repeatable; adds to PATH)")
    p.add_argument("--json", action="store_true", help="one JSON document per file")
    p.add_argument("--batches-only", action="store_true", help="do not print records")
    p.add_argument("--print-values", "--print-data-log", dest="print_values", action="store_true",
                   help="print record keys and values (UTF-8 when printable, else hex)")
    p.add_argument("--deep-iteration", action="store_true",
                   help="accepted for Kafka compatibility: records are always listed unless --batches-only")
    p.add_argument("--cluster-metadata-decoder", action="store_true",
                   help="decode metadata record values (KIP-631 records) and print each as the JSON "
                        "kafka-dump-log prints (default: label them by type, api key and version)")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets records (offset commits, group metadata, KIP-848 records) "
                        "and print keys and values as kafka-dump-log --offsets-decoder does")
    p.add_argument("--max-batches", type=int, default=None, help="stop after this many batches (default: all)")
    p.set_defaults(func=run)


def run(args) -> int:
    status = 0
    paths = list(args.paths or [])
    for item in getattr(args, "files", None) or []:
        paths += [f.strip() for f in item.split(",") if f.strip()]
    if not paths:
        print("kraft dump-log: give the files to dump (PATH... or --files FILE[,FILE])", file=sys.stderr)
        return 2
    decode = bool(getattr(args, "cluster_metadata_decoder", False))
    offsets = bool(getattr(args, "offsets_decoder", False))
    for path in paths:
        try:
            doc = dump_file(path, records_too=not args.batches_only or offsets, values=args.print_values,
                            max_batches=args.max_batches, decode_metadata=decode, decode_offsets=offsets)
        except (OSError, ValueError) as exc:
            print(f"kraft dump-log: {path}: {exc}", file=sys.stderr)
            status = 1
            continue
        if args.json:
            print(json.dumps(doc))
        else:
            print_text(doc)
        if doc.get("error") and doc["error"] != "partial":
            status = 1
    return status


# --- building the document ------------------------------------------------------------------


def dump_file(path: str, *, records_too: bool = True, values: bool = False, max_batches=None,
              decode_metadata: bool = False, decode_offsets: bool = False) -> dict:
    name = os.path.basename(path)
    parsed = files.parse_segment_name(name)
    snap = parse_snapshot_name(name)
    with open(path, "rb") as f:
        data = f.read()
    if parsed and parsed[1] == "index":
        arr = np.frombuffer(data[: len(data) // 8 * 8], np.dtype([("rel", ">i4"), ("pos", ">i4")]))
        return {"file": path, "kind": "index", "baseOffset": parsed[0],
                "entries": [{"offset": parsed[0] + int(r), "position": int(p)} for r, p in arr.tolist()],
                "trailingBytes": len(data) % 8}
    if parsed and parsed[1] == "timeindex":
        arr = np.frombuffer(data[: len(data) // 12 * 12], np.dtype([("ts", ">i8"), ("rel", ">i4")]))
        return {"file": path, "kind": "timeindex", "baseOffset": parsed[0],
                "entries": [{"timestamp": int(t), "offset": parsed[0] + int(r)} for t, r in arr.tolist()],
                "trailingBytes": len(data) % 12}
    if parsed:
        doc = {"file": path, "kind": "segment", "baseOffset": parsed[0]}
    elif snap:
        doc = {"file": path, "kind": "snapshot", "snapshotId": {"endOffset": snap[0].offset,
                                                                "epoch": snap[0].epoch}}
    else:
        raise ValueError("not a segment, snapshot or index file name")
    scan = records.scan_batches(data)
    limit = len(scan) if max_batches is None else min(len(scan), max_batches)
    doc["batches"] = [_batch_doc(data, int(p), True, records_too, values, decode_metadata, decode_offsets)
                      for p in scan.positions[:limit].tolist()]
    doc["validBytes"] = scan.valid_end
    doc["sizeBytes"] = len(data)
    doc["error"] = scan.error
    if scan.error not in (None, "partial") and limit == len(scan):
        try:  # show the header of the invalid batch, as kafka-dump-log does
            doc["invalidBatch"] = _batch_doc(data, scan.valid_end, False, False, False)
        except CorruptRecordError:
            pass
    return doc


def _batch_doc(data, position: int, valid: bool, records_too: bool, values: bool,
               decode_metadata: bool = False, decode_offsets: bool = False) -> dict:
    b = records.RecordBatch(data, position)
    doc = {
        "baseOffset": b.base_offset, "lastOffset": b.last_offset, "count": b.records_count,
        "baseSequence": b.base_sequence, "producerId": b.producer_id,
        "producerEpoch": b.producer_epoch, "partitionLeaderEpoch": b.partition_leader_epoch,
        "isTransactional": b.is_transactional, "isControl": b.is_control, "position": position,
        "timestampType": "LogAppendTime" if b.timestamp_type else "CreateTime",
        "baseTimestamp": b.base_timestamp, "maxTimestamp": b.max_timestamp, "size": b.size,
        "magic": b.magic, "compression": Compression(b.compression).name.lower()
        if b.compression in Compression._value2member_map_ else str(b.compression),
        "crc": b.crc, "isValid": valid,
        # KIP-534: a compacted batch holding tombstones carries its delete horizon in BaseTimestamp
        "deleteHorizonMs": b.base_timestamp if b.attributes & 0x40 else None,
    }
    if records_too:
        doc["records"] = [_record_doc(r, b.is_control, values, decode_metadata, decode_offsets) for r in b]
    return doc


def _record_doc(r, is_control: bool, values: bool, decode_metadata: bool = False,
                decode_offsets: bool = False) -> dict:
    doc = {"offset": r.offset, "timestamp": r.timestamp,
           "keySize": -1 if r.key is None else len(r.key),
           "valueSize": -1 if r.value is None else len(r.value),
           "headerKeys": [k for k, _ in r.headers]}
    if decode_offsets and not is_control:
        doc["offsetsKey"], doc["offsetsPayload"] = offsets_key_and_payload(r.key, r.value, r.offset)
        return doc
    if is_control:
        try:
            ctype = records.decode_control_key(r.key)
            name = ControlType(ctype).name if ctype in ControlType._value2member_map_ else str(ctype)
            if ctype in (ControlType.ABORT, ControlType.COMMIT):
                # Kafka's EndTransactionMarker value: int16 version, int32 coordinator epoch.
                if r.value is None or len(r.value) < 6:
                    raise CorruptRecordError("end transaction marker value shorter than 6 bytes")
                epoch = int.from_bytes(bytes(r.value[2:6]), "big", signed=True)
                doc["endTxnMarker"] = {"type": name, "coordinatorEpoch": epoch}
            else:
                msg = records.decode_control_record(r.key, r.value)
                doc["control"] = {"type": name, "message": None if msg is None else _plain(msg)}
        except CorruptRecordError as exc:
            doc["control"] = {"error": str(exc)}
    elif r.value is not None and len(r.value) >= 3:
        frame = _metadata_frame(r.value)
        if frame is not None:
            doc["metadata"] = frame
        if decode_metadata:
            try:
                record, version = decode_record(r.value)
                doc["payload"] = record_to_json(record, version)
                doc["payloadText"] = record_json(record, version)  # byte for byte as kafka-dump-log
            except MetadataParseError as exc:
                doc["payload"] = {"error": str(exc)}
    if values:
        doc["key"] = _show(r.key)
        doc["value"] = _show(r.value)
    return doc


def _metadata_frame(value):
    """``{"apiKey", "version", "type"}`` if the value starts like a framed metadata record."""
    try:
        frame, pos = records.decode_unsigned_varint(value, 0)
        api_key, pos = records.decode_unsigned_varint(value, pos)
        version, _ = records.decode_unsigned_varint(value, pos)
    except (CorruptRecordError, IndexError, ValueError):
        return None
    if frame not in (0, 1) or api_key not in _METADATA_RECORDS:
        return None
    return {"apiKey": api_key, "version": version, "type": _METADATA_RECORDS[api_key]}


def _is_uuid(v) -> bool:
    return isinstance(v, (bytes, bytearray)) and len(v) == 16


def _uuid_text(v) -> str:
    """A directory id as Kafka prints every Uuid (and ``describe --status`` shows it): base64."""
    from kraft.types import uuid_text
    return uuid_text(v)


def _plain(obj):
    """Dataclass (control message) → JSON-friendly dict."""
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _uuid_text(v) if k.endswith("directory_id") and _is_uuid(v) else _plain(v)
                for k in obj.__dataclass_fields__ for v in (getattr(obj, k),)}
    if isinstance(obj, (tuple, list)):
        return [_plain(x) for x in obj]
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).hex()
    return obj


def _show(b):
    if b is None:
        return None
    raw = bytes(b)
    try:
        text = raw.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    return "0x" + raw.hex()


# --- text output ----------------------------------------------------------------------------


def _bool(v: bool) -> str:
    return "true" if v else "false"


def print_text(doc: dict, out=None) -> None:
    out = out or sys.stdout
    w = out.write
    w(f"Dumping {doc['file']}\n")
    if doc["kind"] in ("index", "timeindex"):
        for e in doc["entries"]:
            if doc["kind"] == "index":
                w(f"offset: {e['offset']} position: {e['position']}\n")
            else:
                w(f"timestamp: {e['timestamp']} offset: {e['offset']}\n")
        if doc["trailingBytes"]:
            w(f"Found {doc['trailingBytes']} trailing bytes (a torn entry)\n")
        return
    if doc["kind"] == "segment":
        w(f"Log starting offset: {doc['baseOffset']}\n")
    else:
        sid = doc["snapshotId"]
        w(f"Snapshot end offset: {sid['endOffset']} epoch: {sid['epoch']}\n")
    for b in doc["batches"] + ([doc["invalidBatch"]] if "invalidBatch" in doc else []):
        w(f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {b['count']} "
          f"baseSequence: {b['baseSequence']} producerId: {b['producerId']} "
          f"producerEpoch: {b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
          f"isTransactional: {_bool(b['isTransactional'])} isControl: {_bool(b['isControl'])} "
          + (f"deleteHorizonMs: {b['deleteHorizonMs']} " if b.get("deleteHorizonMs") is not None else "")
          + f"position: {b['position']} {b['timestampType']}: {b['maxTimestamp']} size: {b['size']} "
          f"magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} "
          f"isvalid: {_bool(b['isValid'])}\n")
        for r in b.get("records", ()):
            line = (f"| offset: {r['offset']} {b['timestampType']}: {r['timestamp']} "
                    f"keySize: {r['keySize']} valueSize: {r['valueSize']} headerKeys: {r['headerKeys']}")
            if "endTxnMarker" in r:  # as kafka-dump-log prints it
                m = r["endTxnMarker"]
                line += f" endTxnMarker: {m['type']} coordinatorEpoch: {m['coordinatorEpoch']}"
            if "control" in r:
                c = r["control"]
                line += (f" control: {c['type']} {json.dumps(c['message'])}" if "type" in c
                         else f" control: <{c['error']}>")
            if "metadata" in r:
                m = r["metadata"]
                line += f" metadata: {m['type']} (apiKey {m['apiKey']}, version {m['version']})"
            if "offsetsKey" in r:
                line += f" key: {r['offsetsKey']}"
                if r["offsetsPayload"] is not None:
                    line += f" payload: {r['offsetsPayload']}"
            elif "payload" in r:
                line += f" payload: {r.get('payloadText') or _json_line(r['payload'])}"
            elif "value" in r:
                line += f" key: {r['key']} payload: {r['value']}"
            w(line + "\n")
    if doc["error"] == "partial":
        w(f"Found a torn batch at position {doc['validBytes']}: "
          f"{doc['sizeBytes'] - doc['validBytes']} bytes after the last complete batch\n")
    elif doc["error"]:
        reason = re.sub(r"\s+at position \d+$", "", doc["error"])
        w(f"Found invalid data at position {doc['validBytes']}: {reason}\n")


def _json_line(doc: dict) -> str:
    return json.dumps(doc, separators=(",", ":"))
