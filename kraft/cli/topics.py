"""``kraft topics``: Kafka's ``kafka-topics.sh`` (TopicCommand) over a confluent-kafka admin
client: --create, --list, --describe (with --under-replicated-partitions,
--unavailable-partitions, --topics-with-overrides), --alter (--partitions) and --delete, with
Kafka's output lines ("Created topic t.", the tab-separated describe layout)."""

from __future__ import annotations

import re

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin, cluster_metadata, parse_key_values, wait


def _topics(args, md) -> list[str]:
    """The topics --topic names (a Java regex in Kafka; Python's is close enough for names)."""
    names = sorted(t for t in md.topics if not (args.exclude_internal and t.startswith("__")))
    if args.topic is None:
        return names
    pattern = re.compile(args.topic)
    chosen = [t for t in names if pattern.fullmatch(t)]
    if not chosen and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return chosen


def _ids(nodes) -> str:
    return ",".join(str(getattr(n, "id", n)) for n in nodes)


def describe_lines(name, topic_id, partitions, overrides: dict, args=None, live=None) -> list[str]:
    """Kafka's layout: a topic line, then one tab-indented line per partition."""
    rf = len(partitions[0]["replicas"]) if partitions else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    head = f"Topic: {name}\tTopicId: {topic_id}\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}"
    lines = []
    for p in partitions:
        if args is not None and args.under_replicated_partitions and len(p["isr"]) >= len(p["replicas"]):
            continue
        if args is not None and args.unavailable_partitions and p["leader"] >= 0 and (live is None or p["leader"] in live):
            continue
        leader = p["leader"] if p["leader"] >= 0 else "none"
        lines.append(f"\tTopic: {name}\tPartition: {p['id']}\tLeader: {leader}\tReplicas: {_ids(p['replicas'])}"
                     f"\tIsr: {_ids(p['isr'])}\tElr: \tLastKnownElr: ")
    filtering = args is not None and (args.under_replicated_partitions or args.unavailable_partitions)
    return lines if filtering else [head, *lines]


def _overrides(adm, names) -> dict[str, dict]:
    from confluent_kafka.admin import ConfigResource, ConfigSource
    if not names:
        return {}
    futures = adm.describe_configs([ConfigResource("topic", n) for n in names])
    out = {}
    for res, fut in futures.items():
        entries = wait(fut)
        out[res.name] = {k: e.value for k, e in entries.items()
                         if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not e.is_sensitive}
    return out


def _describe(args, adm, md) -> int:
    names = _topics(args, md)
    overrides = _overrides(adm, names)
    ids = {}
    try:
        from confluent_kafka import TopicCollection
        for n, fut in adm.describe_topics(TopicCollection(names)).items():
            ids[n] = str(wait(fut).topic_id)
    except ToolError:
        pass  # an older broker without topic ids: Kafka prints the line without them too
    live = set(md.brokers)
    for name in names:
        if args.topics_with_overrides and not overrides.get(name):
            continue
        t = md.topics[name]
        parts = [{"id": p.id, "leader": p.leader, "replicas": p.replicas, "isr": p.isrs}
                 for p in sorted(t.partitions.values(), key=lambda p: p.id)]
        for line in describe_lines(name, ids.get(name, ""), parts, overrides.get(name, {}), args, live):
            print(line)
    return 0


def _create(args, adm) -> int:
    from confluent_kafka.admin import NewTopic
    if not args.topic:
        raise ToolError("--create needs --topic")
    assignment = None
    if args.replica_assignment:
        assignment = [[int(b) for b in part.split(":")] for part in args.replica_assignment.split(",")]
    config = parse_key_values(args.config, "--config")
    if assignment is None:
        partitions = -1 if args.partitions is None else args.partitions  # -1: the broker's num.partitions
        topic = NewTopic(args.topic, num_partitions=partitions, replication_factor=args.replication_factor,
                         config=config)
    else:
        topic = NewTopic(args.topic, replica_assignment=assignment, config=config)
    try:
        wait(adm.create_topics([topic])[args.topic])
    except ToolError as exc:
        if args.if_not_exists and "TOPIC_ALREADY_EXISTS" in str(exc):
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _alter(args, adm, md) -> int:
    from confluent_kafka.admin import NewPartitions
    if args.partitions is None:
        raise ToolError("--alter needs --partitions (topic configs: kraft configs --alter)")
    names = _topics(args, md)
    for name, fut in adm.create_partitions([NewPartitions(n, args.partitions) for n in names]).items():
        wait(fut)
    return 0


def _delete(args, adm, md) -> int:
    names = _topics(args, md)
    for name, fut in (adm.delete_topics(names).items() if names else ()):
        wait(fut)
    return 0


def _run(args) -> int:
    actions = [a for a in ("create", "list", "describe", "alter", "delete") if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    adm = admin(args)
    if args.create:
        return _create(args, adm)
    md = cluster_metadata(adm)
    if args.list:
        for name in _topics(args, md):
            print(name)
        return 0
    return {"describe": _describe, "alter": _alter, "delete": _delete}[actions[0]](args, adm, md)


def register(sub) -> None:
    p = sub.add_parser("topics", help="create, list, describe, alter and delete topics (kafka-topics.sh)")
    add_connection_args(p)
    for action, text in (("create", "create a topic"), ("list", "list topic names"),
                         ("describe", "describe topics and their partitions"),
                         ("alter", "add partitions to topics"), ("delete", "delete topics")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", help="a topic name, or a regular expression (not for --create)")
    p.add_argument("--partitions", type=int, help="partitions of the topic (create: broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas per partition (-1: the broker's default.replication.factor)")
    p.add_argument("--replica-assignment", metavar="B:B,B:B", help="brokers per partition, partitions comma-separated")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config for --create (repeatable)")
    p.add_argument("--if-exists", action="store_true", help="no error when --topic matches nothing")
    p.add_argument("--if-not-exists", action="store_true", help="no error when the topic already exists")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__*)")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="describe only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="describe only partitions whose leader is not available")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="describe only topics with configs that override the defaults")
    p.set_defaults(func=_run, partitions=None)
