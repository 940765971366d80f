"""``kraft consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` (ConsumerGroupCommand), with
its options and output layout: ``--list`` (``--state``/``--type`` filters), ``--describe``
(offsets with LAG by default, ``--members`` [``--verbose``: the assignment], ``--state``),
``--delete``, ``--reset-offsets`` (``kraft.cli.consumer_group_offsets`` plans them) and
``--delete-offsets``. Exactly one action, as Kafka insists.

The group's state comes from librdkafka's admin client, which knows the classic states only:
a consumer (KIP-848) group that is assigning or reconciling shows as ``Unknown``.
"""

from __future__ import annotations

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin, wait

MISSING = "-"
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
# librdkafka's ConsumerGroupState names -> Kafka's display names
STATE_NAMES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
               "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead",
               "EMPTY": "Empty"}
TYPE_NAMES = {"UNKNOWN": "Unknown", "CONSUMER": "Consumer", "CLASSIC": "Classic"}


def state_name(state) -> str:
    return STATE_NAMES.get(getattr(state, "name", str(state)), "Unknown")


def type_name(kind) -> str:
    return TYPE_NAMES.get(getattr(kind, "name", str(kind)), "Unknown")


def timeout_s(args) -> float:
    return args.timeout / 1000.0


def parse_states(text: str):
    from confluent_kafka import ConsumerGroupState
    by_name = {v.lower(): k for k, v in STATE_NAMES.items() if k != "UNKNOWN"}
    out = set()
    for part in text.split(","):
        key = by_name.get(part.strip().lower())
        if key is None:
            raise ToolError(f"Invalid state list '{text}'. Valid states are: "
                            + ", ".join(v for k, v in STATE_NAMES.items() if k != "UNKNOWN"))
        out.add(ConsumerGroupState[key])
    return out


def parse_types(text: str):
    from confluent_kafka import ConsumerGroupType
    out = set()
    for part in text.lower().split(","):
        if part.strip() not in ("classic", "consumer"):
            raise ToolError(f"Invalid types list '{text}'. Valid types are: classic, consumer")
        out.add(ConsumerGroupType[part.strip().upper()])
    return out


# --- list --------------------------------------------------------------------------------------
def list_groups(adm, args, *, states=None, types=None) -> list:
    kwargs = {"request_timeout": timeout_s(args)}
    if states:
        kwargs["states"] = states
    if types:
        kwargs["types"] = types
    result = wait(adm.list_consumer_groups(**kwargs), timeout_s(args) + 5)
    return sorted(result.valid, key=lambda g: g.group_id)


def _list(adm, args) -> int:
    with_state, with_type = args.state is not None, args.type is not None
    groups = list_groups(adm, args, states=parse_states(args.state) if args.state else None,
                         types=parse_types(args.type) if args.type else None)
    if not (with_state or with_type):
        for g in groups:
            print(g.group_id)
        return 0
    width = max([15] + [len(g.group_id) for g in groups]) + 10
    header, rows = ["GROUP"], [[g.group_id] for g in groups]
    fmt = f"%-{width}s"
    if with_type:
        header.append("TYPE")
        fmt += " %-20s"
        for row, g in zip(rows, groups):
            row.append(type_name(g.type))
    if with_state:
        header.append("STATE")
        fmt += " %-20s"
        for row, g in zip(rows, groups):
            row.append(state_name(g.state))
    for row in [header] + rows:
        print((fmt % tuple(row)).rstrip())
    return 0


# --- describe ----------------------------------------------------------------------------------
def group_ids(adm, args) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in list_groups(adm, args)]
    if not args.group:
        raise ToolError("give --group GROUP (repeatable) or --all-groups")
    return list(args.group)


def describe(adm, args, groups: list[str]) -> dict:
    futures = adm.describe_consumer_groups(groups, request_timeout=timeout_s(args))
    return {g: wait(f, timeout_s(args) + 5) for g, f in futures.items()}


def committed_offsets(adm, args, group: str) -> dict:
    """(topic, partition) -> committed offset, for the partitions that have one."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    futures = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                              request_timeout=timeout_s(args))
    result = wait(futures[group], timeout_s(args) + 5)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or () if tp.offset >= 0}


def log_offsets(adm, args, partitions, spec) -> dict:
    """(topic, partition) -> offset at ``spec`` (confluent-kafka OffsetSpec); unknown ones left out."""
    from confluent_kafka import TopicPartition
    if not partitions:
        return {}
    futures = adm.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, request_timeout=timeout_s(args))
    out = {}
    for tp, f in futures.items():
        try:
            info = f.result(timeout=timeout_s(args) + 5)
        except Exception:  # a partition gone or leaderless: Kafka prints "-" for it
            continue
        if info.offset >= 0:
            out[(tp.topic, tp.partition)] = info.offset
    return out


def _member_state(group: str, state: str, rows: int | None) -> bool:
    """Kafka's shouldPrintMemberState: the notes on stderr, and whether a table follows."""
    import sys
    if rows is None or state == "Dead":
        print(f"\nError: Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return rows > 0


def offset_rows(adm, args, group: str, desc) -> list[list[str]]:
    from confluent_kafka.admin import OffsetSpec
    committed = committed_offsets(adm, args, group)
    rows, assigned = [], set()
    members = sorted(desc.members, key=lambda m: -len(m.assignment.topic_partitions or ()))
    owner = {}
    for m in members:
        for tp in m.assignment.topic_partitions or ():
            owner[(tp.topic, tp.partition)] = m
            assigned.add((tp.topic, tp.partition))
    partitions = sorted(assigned | set(committed), key=lambda k: (k[0], k[1]))
    ends = log_offsets(adm, args, partitions, OffsetSpec.latest())
    for m in members:  # rows by member, most partitions first, then the unassigned ones: Kafka's order
        for t, p in sorted(((tp.topic, tp.partition) for tp in m.assignment.topic_partitions or ()),
                           key=lambda k: k[1]):
            rows.append(_row(group, t, p, committed, ends, m.member_id, m.host, m.client_id))
    for t, p in sorted((k for k in committed if k not in assigned), key=lambda k: k[1]):
        rows.append(_row(group, t, p, committed, ends, MISSING, MISSING, MISSING))
    return rows


def _row(group, t, p, committed, ends, member, host, client) -> list[str]:
    offset, end = committed.get((t, p)), ends.get((t, p))
    lag = end - offset if offset is not None and end is not None else None
    show = lambda v: MISSING if v is None else str(v)  # noqa: E731
    return [group, t, str(p), show(offset), show(end), show(lag), member, host, client]


def table_lines(header: list[str], rows: list[list[str]], widths: list[int | None]) -> list[str]:
    """Kafka's ``%-Ns`` columns (a column at least N wide, wider for a longer value)."""
    cols = []
    for i, w in enumerate(widths):
        cols.append(None if w is None else max([w] + [len(r[i]) for r in rows]))
    return [" ".join(v if w is None else v.ljust(w) for v, w in zip(row, cols)).rstrip() for row in [header] + rows]


def print_table(header: list[str], rows: list[list[str]], widths: list[int | None]) -> None:
    """A blank line, then the table: Kafka's formats start with ``\\n``."""
    print()
    for line in table_lines(header, rows, widths):
        print(line)


OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"]
OFFSETS_WIDTHS = [15, 15, 10, 15, 15, 15, 15, 15, None]


def _describe(adm, args) -> int:
    groups = group_ids(adm, args)
    if sum(bool(x) for x in (args.members, args.offsets, args.state is not None)) > 1:
        raise ToolError("Option '[describe]' takes at most one of these options: [members], [offsets], [state]")
    descs = describe(adm, args, groups)
    for group in sorted(descs):
        desc = descs[group]
        state = state_name(desc.state)
        if args.members:
            members = sorted(desc.members, key=lambda m: m.member_id)
            if not _member_state(group, state, len(members)) and state != "Empty":
                continue
            _print_members(group, members, getattr(args, "verbose", False))
        elif args.state is not None:
            if not _member_state(group, state, 1):
                continue
            c = desc.coordinator
            coordinator = f"{c.host}:{c.port}  ({c.id})"
            print_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                        [[group, coordinator, desc.partition_assignor or "", state, str(len(desc.members))]],
                        [max(25, len(coordinator)), 25, 20, 15, None])
        else:
            rows = offset_rows(adm, args, group, desc)
            if not _member_state(group, state, len(rows)):
                continue
            print_table(OFFSETS_HEADER, rows, OFFSETS_WIDTHS)
    return 0


def _print_members(group: str, members, verbose: bool) -> None:
    with_instance = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if verbose else [])
    widths = [15, 15] + ([17] if with_instance else []) + [15, 15, 15] + ([None] if verbose else [])
    rows = []
    for m in members:
        tps = list(m.assignment.topic_partitions or ())
        row = [group, m.member_id] + ([m.group_instance_id or ""] if with_instance else []) + \
            [m.host, m.client_id, str(len(tps))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            row.append(", ".join(sorted(f"{t}({','.join(str(p) for p in sorted(ps))})"
                                        for t, ps in by_topic.items())) or MISSING)
        rows.append(row)
    print_table(header, rows, widths)


# --- delete ------------------------------------------------------------------------------------
def _delete(adm, args) -> int:
    groups = group_ids(adm, args)
    futures = adm.delete_consumer_groups(groups, request_timeout=timeout_s(args))
    done, failed = [], {}
    for g, f in futures.items():
        try:
            wait(f, timeout_s(args) + 5)
            done.append(g)
        except ToolError as exc:
            failed[g] = str(exc)
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return 0
    print("\nError: Deletion of some consumer groups failed:")
    for g, why in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {why}")
    if done:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(done)}'")
    return 1


def _run(args) -> int:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise ToolError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                        "--delete-offsets")
    adm = admin(args)
    action = chosen[0]
    if action == "list":
        return _list(adm, args)
    if action == "describe":
        return _describe(adm, args)
    if action == "delete":
        return _delete(adm, args)
    from kraft.cli import consumer_group_offsets
    if action == "reset_offsets":
        return consumer_group_offsets.reset(adm, args)
    return consumer_group_offsets.delete_offsets(adm, args)


def register(sub) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, delete groups and reset their offsets "
                                               "(kafka-consumer-groups.sh)")
    add_connection_args(p)
    a = p.add_argument_group("actions (exactly one)")
    a.add_argument("--list", action="store_true", help="list the groups")
    a.add_argument("--describe", action="store_true", help="describe groups: offsets and lag, --members or --state")
    a.add_argument("--delete", action="store_true", help="delete groups (they must be empty)")
    a.add_argument("--reset-offsets", action="store_true", help="reset a group's offsets (--dry-run unless --execute)")
    a.add_argument("--delete-offsets", action="store_true", help="delete a group's offsets of --topic")
    p.add_argument("--group", action="append", help="the group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--topic", action="append", help="a topic, or TOPIC:P1,P2 (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    p.add_argument("--members", action="store_true", help="with --describe: the members")
    p.add_argument("--offsets", action="store_true", help="with --describe: offsets and lag (the default)")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="with --describe: the group's state; with --list: show states, or only these (a,b)")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                   help="with --list: show types, or only these (classic,consumer)")
    p.add_argument("--timeout", type=int, default=5000, metavar="MS", help="how long to wait for an answer")
    r = p.add_argument_group("--reset-offsets scenarios (exactly one)")
    r.add_argument("--to-offset", type=int, metavar="N", help="to offset N (moved into the log's range)")
    r.add_argument("--to-earliest", action="store_true", help="to each partition's log start")
    r.add_argument("--to-latest", action="store_true", help="to each partition's end (skip what is there)")
    r.add_argument("--to-current", action="store_true", help="to the committed offsets (the end where none)")
    r.add_argument("--shift-by", type=int, metavar="N", help="add N (negative: go back)")
    r.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="local time unless a zone is given")
    r.add_argument("--by-duration", metavar="PnDTnHnMnS", help="to the offsets of that long ago (ISO-8601)")
    r.add_argument("--from-file", metavar="CSV", help="topic,partition,offset lines (group first for many)")
    r.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    r.add_argument("--execute", action="store_true", help="commit the new offsets")
    r.add_argument("--export", action="store_true", help="print the plan as CSV (for --from-file)")
    p.set_defaults(func=_run)
