"""``kraft console-consumer``: Kafka's ``kafka-console-consumer.sh``: records printed with
Kafka's DefaultMessageFormatter properties (``print.timestamp``, ``print.partition``,
``print.offset``, ``print.headers``, ``print.key``, ``print.value``, ``key.separator``,
``line.separator``, ``null.literal``), --from-beginning, --partition/--offset,
--max-messages, --timeout-ms, --isolation-level, and "Processed a total of N messages" on
stderr at the end. Without --group the partitions are assigned directly (no group
coordinator needed); with --group the consumer subscribes."""

from __future__ import annotations

import sys
import time
import uuid

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, client_config, parse_key_values, read_properties

FORMATTER_DEFAULTS = {"print.timestamp": "false", "print.partition": "false", "print.offset": "false",
                      "print.headers": "false", "print.key": "false", "print.value": "true",
                      "key.separator": "\t", "line.separator": "\n", "headers.separator": ",",
                      "null.literal": "null"}


def _text(b, null: str) -> str:
    return null if b is None else b.decode("utf-8", "replace")


def format_record(msg, props: dict) -> str:
    """One record as Kafka's DefaultMessageFormatter writes it (without the line separator)."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
    sep, null, out = props["key.separator"], props["null.literal"], []
    if props["print.timestamp"] == "true":
        kind, ts = msg.timestamp()
        name = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}.get(kind)
        out.append(f"{name}:{ts}" if name else "NO_TIMESTAMP")
    if props["print.partition"] == "true":
        out.append(f"Partition:{msg.partition()}")
    if props["print.offset"] == "true":
        out.append(f"Offset:{msg.offset()}")
    if props["print.headers"] == "true":
        hs = msg.headers() or []
        out.append(props["headers.separator"].join(f"{k}:{_text(v, null)}" for k, v in hs) if hs else "NO_HEADERS")
    if props["print.key"] == "true":
        out.append(_text(msg.key(), null))
    if props["print.value"] == "true":
        out.append(_text(msg.value(), null))
    return sep.join(out)


def _start_offset(args):
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END
    if args.offset is None:
        return OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    if args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    named = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}
    if args.offset in named:
        return named[args.offset]
    try:
        return int(args.offset)
    except ValueError:
        raise ToolError(f"--offset: expected earliest, latest or a non-negative number, got {args.offset!r}") from None


def _run(args) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    props = {**FORMATTER_DEFAULTS, **parse_key_values(args.property, "--property")}
    for k in ("key.separator", "line.separator", "headers.separator"):
        props[k] = props[k].encode().decode("unicode_escape")  # Kafka reads "\t" and "\n" as escapes
    start = _start_offset(args)
    extra = {"group.id": args.group or f"console-consumer-{uuid.uuid4().hex[:5]}",
             "enable.auto.commit": bool(args.group), "isolation.level": args.isolation_level,
             "auto.offset.reset": "earliest" if args.from_beginning else "latest",
             **read_properties(args.consumer_config), **parse_key_values(args.consumer_property, "--consumer-property")}
    try:
        consumer = Consumer(client_config(args, extra))
    except KafkaException as exc:
        raise ToolError(f"consumer configuration: {exc.args[0].str() if exc.args else exc}") from None
    count = 0
    try:
        if args.group and args.partition is None:
            consumer.subscribe([args.topic])
        else:
            md = consumer.list_topics(args.topic, timeout=args.metadata_timeout)
            topic = md.topics.get(args.topic)
            if topic is None or topic.error is not None or not topic.partitions:
                raise ToolError(f"Unknown topic or partition: {args.topic}")
            ids = sorted(topic.partitions) if args.partition is None else [args.partition]
            if args.partition is not None and args.partition not in topic.partitions:
                raise ToolError(f"Unknown topic or partition: {args.topic}-{args.partition}")
            consumer.assign([TopicPartition(args.topic, p, start) for p in ids])
        deadline = None if args.timeout_ms is None else time.monotonic() + args.timeout_ms / 1000
        while args.max_messages is None or count < args.max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if deadline is not None and time.monotonic() > deadline:
                    break
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF, when the user asked for it
                    continue
                raise ToolError(f"{msg.error().name()}: {msg.error().str()}")
            sys.stdout.write(format_record(msg, props) + props["line.separator"])
            sys.stdout.flush()
            count += 1
            if deadline is not None:
                deadline = time.monotonic() + args.timeout_ms / 1000
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("console-consumer", help="print records of a topic (kafka-console-consumer.sh)")
    add_connection_args(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--group", help="consumer group to join (default: partitions assigned directly, no group)")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset, not the latest")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", help="with --partition: earliest, latest or an offset")
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    p.add_argument("--isolation-level", default="read_uncommitted", choices=("read_uncommitted", "read_committed"),
                   help="whether records of open or aborted transactions are read")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="formatter property: print.timestamp, print.partition, print.offset, print.headers, "
                        "print.key, print.value, key.separator, line.separator, null.literal (repeatable)")
    p.add_argument("--consumer-property", action="append", metavar="KEY=VALUE", help="a consumer property (repeatable)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="consumer properties file")
    p.add_argument("--metadata-timeout", type=float, default=30.0, help="seconds to wait for the topic's metadata")
    p.set_defaults(func=_run)
