"""``kraft console-producer``: Kafka's ``kafka-console-producer.sh``: one record per stdin
line, with Kafka's line reader properties (``parse.key``/``key.separator``, ``parse.headers``
with ``headers.delimiter``/``headers.separator``/``headers.key.separator``,
``null.marker``), --producer-property / --producer.config / --command-config, acks and
compression flags. A record that fails is one error line and exit code 1."""

from __future__ import annotations

import sys

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, client_config, parse_key_values, read_properties

READER_DEFAULTS = {"parse.key": "false", "key.separator": "\t", "parse.headers": "false",
                   "headers.delimiter": "\t", "headers.separator": ",", "headers.key.separator": ":",
                   "ignore.error": "false", "null.marker": None}


def parse_line(line: str, props: dict):
    """(key, value, headers) of one input line, as Kafka's LineMessageReader splits it."""
    rest, headers, key = line, None, None
    null = props.get("null.marker")
    if props["parse.headers"] == "true":
        head, sep, rest = rest.partition(props["headers.delimiter"])
        if not sep:
            raise ToolError(f"No headers delimiter found on line: {line!r}")
        headers = []
        for h in head.split(props["headers.separator"]) if head else ():
            k, s, v = h.partition(props["headers.key.separator"])
            headers.append((k, None if (not s or v == null) else v.encode()))
    if props["parse.key"] == "true":
        key, sep, rest = rest.partition(props["key.separator"])
        if not sep:
            raise ToolError(f"No key separator found on line: {line!r}")
        key = None if key == null else key.encode()
    value = None if rest == null else rest.encode()
    return key, value, headers


def _run(args) -> int:
    from confluent_kafka import KafkaException, Producer
    props = {**READER_DEFAULTS, **parse_key_values(args.property, "--property")}
    extra = {**read_properties(args.producer_config), **parse_key_values(args.producer_property, "--producer-property")}
    extra.setdefault("acks", args.request_required_acks)
    extra.setdefault("compression.type", args.compression_codec)
    if args.sync:
        extra.setdefault("linger.ms", "0")
    try:
        producer = Producer(client_config(args, extra))
    except KafkaException as exc:
        raise ToolError(f"producer configuration: {exc.args[0].str() if exc.args else exc}") from None
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    for raw in sys.stdin:
        key, value, headers = parse_line(raw.rstrip("\n"), props)
        producer.produce(args.topic, value=value, key=key, headers=headers, on_delivery=delivered)
        producer.poll(0)
        if args.sync:
            producer.flush()
        if failures and props["ignore.error"] != "true":
            break
    left = producer.flush(args.timeout)
    if failures:
        raise ToolError(f"{len(failures)} record(s) not written: {failures[0].name()}: {failures[0].str()}")
    if left:
        raise ToolError(f"{left} record(s) not acknowledged within {args.timeout:.0f} s")
    return 0


def register(sub) -> None:
    p = sub.add_parser("console-producer", help="write stdin lines as records (kafka-console-producer.sh)")
    add_connection_args(p)
    p.add_argument("--topic", required=True, help="the topic to write to")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="line reader property: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error (repeatable)")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE", help="a producer property (repeatable)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer properties file")
    p.add_argument("--request-required-acks", default="-1", help="acks: 0, 1 or -1 (all)")
    p.add_argument("--compression-codec", default="none", help="none, gzip, snappy, lz4 or zstd")
    p.add_argument("--sync", action="store_true", help="wait for each record before reading the next line")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the last acknowledgements")
    p.set_defaults(func=_run)
