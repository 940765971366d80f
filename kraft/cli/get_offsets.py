"""``kraft get-offsets``: Kafka's ``kafka-get-offsets.sh`` (GetOffsetShell): one
``topic:partition:offset`` line per partition for --time -1 (latest), -2 (earliest), -3 (max
timestamp) or a timestamp in ms; --topic-partitions ``t:0-2,u`` or --topic/--partitions."""

from __future__ import annotations

import re

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin, cluster_metadata, wait


def parse_partitions(text: str | None) -> set[int] | None:
    """``0,2,5-7`` -> {0, 2, 5, 6, 7}; None -> every partition."""
    if not text:
        return None
    out = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise ToolError(f"--partitions: expected N or N-M, got {part!r}")
        lo, hi = int(m[1]), int(m[2] or m[1])
        out.update(range(lo, hi + 1))
    return out


def _spec(args, value: str):
    topic, _, parts = value.partition(":")
    return re.compile(topic or ".*"), parse_partitions(parts or args.partitions)


def _run(args) -> int:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    time = {"latest": -1, "earliest": -2, "max-timestamp": -3}.get(str(args.time), None)
    if time is None:
        try:
            time = int(args.time)
        except ValueError:
            raise ToolError(f"--time: expected -1, -2, -3, latest, earliest, max-timestamp or ms, got {args.time!r}") \
                from None
    spec = {-1: OffsetSpec.latest(), -2: OffsetSpec.earliest(), -3: OffsetSpec.max_timestamp()}.get(time) \
        or OffsetSpec.for_timestamp(time)
    specs = [_spec(args, v) for v in (args.topic_partitions.split(",") if args.topic_partitions
                                      else [args.topic or ""])]
    adm = admin(args)
    md = cluster_metadata(adm)
    wanted = []
    for name in sorted(md.topics):
        if name.startswith("__") and args.exclude_internal_topics:
            continue
        for pattern, parts in specs:
            if pattern.fullmatch(name):
                wanted += [TopicPartition(name, p) for p in sorted(md.topics[name].partitions)
                           if parts is None or p in parts]
    if not wanted:
        if args.topic or args.topic_partitions:
            raise ToolError(f"Could not match any topic-partitions with the specified filters")
        return 0
    wanted = sorted(set((tp.topic, tp.partition) for tp in wanted))
    futures = adm.list_offsets({TopicPartition(t, p): spec for t, p in wanted})
    results = {(tp.topic, tp.partition): wait(f) for tp, f in futures.items()}
    for t, p in wanted:
        offset = results[(t, p)].offset
        if offset >= 0:  # Kafka prints nothing for a partition with no offset at that time
            print(f"{t}:{p}:{offset}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("get-offsets", help="offsets of partitions at a time (kafka-get-offsets.sh)")
    add_connection_args(p)
    p.add_argument("--topic", help="a topic name or regular expression (default: every topic)")
    p.add_argument("--partitions", help="partition ids: N,N-M (default: every partition)")
    p.add_argument("--topic-partitions", metavar="T:N-M,T", help="topics and partitions together")
    p.add_argument("--time", default="-1",
                   help="-1/latest, -2/earliest, -3/max-timestamp, or a timestamp in ms")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    p.set_defaults(func=_run)
