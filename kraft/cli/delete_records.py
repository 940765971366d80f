"""``kraft delete-records``: Kafka's ``kafka-delete-records.sh``: move the log start offset of
the partitions in ``--offset-json-file`` (``{"partitions": [{"topic": "t", "partition": 0,
"offset": 5}], "version": 1}``; offset -1 means the high watermark) and print each partition's
new low watermark, as Kafka prints it."""

from __future__ import annotations

import json

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin


def read_offsets(path: str) -> list[tuple[str, int, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise ToolError(f"--offset-json-file: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ToolError('--offset-json-file: expected {"partitions": [{"topic": ..., "partition": ..., '
                        '"offset": ...}], "version": 1}')
    out, seen = [], set()
    for p in doc["partitions"]:
        try:
            t, n, o = p["topic"], p["partition"], p["offset"]
        except (KeyError, TypeError):
            raise ToolError(f"--offset-json-file: each partition needs topic, partition and offset: {p!r}") from None
        if not isinstance(t, str) or not isinstance(n, int) or not isinstance(o, int):
            raise ToolError(f"--offset-json-file: topic is a string, partition and offset integers: {p!r}")
        if (t, n) in seen:
            raise ToolError(f"Offset json file contains duplicate topic partitions: {t}-{n}")
        seen.add((t, n))
        out.append((t, n, o))
    return out


def _run(args) -> int:
    from confluent_kafka import KafkaException, TopicPartition
    wanted = read_offsets(args.offset_json_file)
    adm = admin(args)
    print("Executing records delete operation")
    futures = adm.delete_records([TopicPartition(t, n, o) for t, n, o in wanted],
                                 request_timeout=args.timeout / 1000, operation_timeout=args.timeout / 1000)
    print("Records delete operation completed:")
    failed = 0
    for tp, fut in sorted(futures.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        try:
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {fut.result().low_watermark}")
        except KafkaException as exc:
            failed += 1
            print(f"partition: {tp.topic}-{tp.partition}\terror: {exc.args[0].str()}")
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("delete-records", help="delete records below offsets (kafka-delete-records.sh)")
    add_connection_args(p)
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='JSON: {"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}')
    p.add_argument("--timeout", type=int, default=30000, help="ms to wait for the deletion")
    p.set_defaults(func=_run)
