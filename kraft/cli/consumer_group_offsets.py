"""``kraft consumer-groups --reset-offsets`` and ``--delete-offsets``, as Kafka's
ConsumerGroupCommand does them: a reset is planned per group (only an inactive group, Empty or
Dead, may be reset), printed as ``GROUP TOPIC PARTITION NEW-OFFSET`` (or CSV with --export),
and committed only with ``--execute``; a requested offset outside [log start, log end] is moved
to the nearer end, with a warning. --delete-offsets sends OffsetDelete to the group's
coordinator (confluent-kafka's admin client has no call for it)."""

from __future__ import annotations

import asyncio
import datetime
import re
import sys
import time

from kraft.cli.consumer_groups import committed_offsets, describe, group_ids, log_offsets, state_name, timeout_s
from kraft.cli.kafka_tool_args import ToolError, cluster_metadata, wait

SCENARIOS = ("to_offset", "to_earliest", "to_latest", "to_current", "shift_by", "to_datetime", "by_duration",
             "from_file")
DRY_RUN_WARNING = ("WARN: No action will be performed as the --execute option is missing. In a future major "
                   "release, the default behavior of this command will be to prompt the user before executing "
                   "the reset rather than doing a dry run. You should add the --dry-run option explicitly if you "
                   "are scripting this command and want to keep the current default behavior without prompting.")
OFFSET_DELETE_VERSION = 0


def parse_datetime_ms(text: str) -> int:
    """Kafka's Utils.getDateTime: ``YYYY-MM-DDTHH:mm:SS[.sss]`` with an optional zone (``Z``,
    ``+01:00``); without one, the local zone."""
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(f"--to-datetime: expected YYYY-MM-DDTHH:mm:SS.sss, got {text!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # the local zone, as Java's default TimeZone
    return int(when.timestamp() * 1000)


_DURATION = re.compile(r"(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """Java's Duration.parse subset Kafka documents: ``PnDTnHnMn.nS`` (e.g. PT15M, P1DT2H)."""
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.group(i) for i in range(2, 6)) or text.strip().upper().endswith("T"):
        raise ToolError(f"--by-duration: expected an ISO-8601 duration such as PT15M or P1DT2H, got {text!r}")
    ms = ((int(m[2] or 0) * 24 + int(m[3] or 0)) * 60 + int(m[4] or 0)) * 60_000 + round(float(m[5] or 0) * 1000)
    return -ms if m[1] else ms


def read_plan(path: str, groups: list[str]) -> dict[str, dict]:
    """``topic,partition,offset`` lines for one group, ``group,topic,partition,offset`` for many."""
    plan: dict[str, dict] = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = [x.strip() for x in line.strip().split(",")]
            if fields == [""]:
                continue
            if len(fields) == 3 and len(groups) == 1:
                fields = [groups[0]] + fields
            if len(fields) != 4 or not fields[2].lstrip("-").isdigit() or not fields[3].lstrip("-").isdigit():
                raise ToolError(f"{path}:{n}: expected [group,]topic,partition,offset, got {line.strip()!r}")
            plan.setdefault(fields[0], {})[(fields[1], int(fields[2]))] = int(fields[3])
    return plan


def scope(adm, args, group: str) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed_offsets(adm, args, group))
    if not args.topic:
        raise ToolError("One of the reset scopes should be defined: --all-topics, --topic.")
    md = None
    out = []
    for arg in args.topic:
        topic, sep, parts = arg.partition(":")
        if sep:
            try:
                out += [(topic, int(p)) for p in parts.split(",")]
            except ValueError:
                raise ToolError(f"Invalid partition in topic arg '{arg}'") from None
            continue
        md = md or cluster_metadata(adm, timeout_s=timeout_s(args) + 5)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise ToolError(f"topic '{topic}' does not exist")
        out += [(topic, p) for p in sorted(t.partitions)]
    return sorted(set(out))


def clamp(requested: dict, starts: dict, ends: dict) -> dict:
    """Kafka's checkOffsetsRange: past the end -> the end, before the start -> the start."""
    out = {}
    for tp, offset in requested.items():
        end, start = ends.get(tp), starts.get(tp)
        if end is not None and offset > end:
            print(f"WARN: New offset ({offset}) is higher than latest offset for topic partition "
                  f"{tp[0]}-{tp[1]}. Value will be set to {end}", file=sys.stderr)
            offset = end
        elif start is not None and offset < start:
            print(f"WARN: New offset ({offset}) is lower than earliest offset for topic partition "
                  f"{tp[0]}-{tp[1]}. Value will be set to {start}", file=sys.stderr)
            offset = start
        out[tp] = offset
    return out


def plan_for(adm, args, group: str, partitions: list, from_file: dict | None) -> dict:
    from confluent_kafka.admin import OffsetSpec
    earliest = lambda tps: log_offsets(adm, args, tps, OffsetSpec.earliest())  # noqa: E731
    latest = lambda tps: log_offsets(adm, args, tps, OffsetSpec.latest())  # noqa: E731

    def must(found: dict, tps, what: str) -> dict:
        missing = [tp for tp in tps if tp not in found]
        if missing:
            raise ToolError(f"Error getting {what} of topic partition: {missing[0][0]}-{missing[0][1]}")
        return {tp: found[tp] for tp in tps}

    def in_range(requested: dict) -> dict:
        return clamp(requested, earliest(list(requested)), latest(list(requested)))

    if args.to_offset is not None:
        return in_range({tp: args.to_offset for tp in partitions})
    if args.to_earliest:
        return must(earliest(partitions), partitions, "starting offset")
    if args.to_latest:
        return must(latest(partitions), partitions, "ending offset")
    if args.shift_by is not None:
        current = committed_offsets(adm, args, group)
        for tp in partitions:
            if tp not in current:
                raise ToolError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                "committed offset")
        return in_range({tp: current[tp] + args.shift_by for tp in partitions})
    if args.to_datetime is not None or args.by_duration is not None:
        ts = parse_datetime_ms(args.to_datetime) if args.to_datetime is not None \
            else int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        found = log_offsets(adm, args, partitions, OffsetSpec.for_timestamp(ts))
        empty = [tp for tp in partitions if tp not in found]
        for t, p in empty:
            print(f"\nWarn: Partition {p} from topic {t} is empty. Falling back to latest known offset.")
        found.update(latest(empty))
        return must(found, partitions, "offset by timestamp")
    if from_file is not None:
        wanted = from_file.get(group)
        if wanted is None:
            print(f"\nError: No reset plan for group {group} found")
            return {}
        return in_range(dict(wanted))
    if args.to_current:
        current = committed_offsets(adm, args, group)
        plan = {tp: current[tp] for tp in partitions if tp in current}
        rest = [tp for tp in partitions if tp not in current]
        plan.update(must(latest(rest), rest, "ending offset"))
        return plan
    raise ToolError("Option '[reset-offsets]' requires one of the following scenarios: "
                    + ", ".join("--" + s.replace("_", "-") for s in SCENARIOS))


def reset(adm, args) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    chosen = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
    if len(chosen) > 1:
        raise ToolError("Option '[reset-offsets]' takes only one scenario, got "
                        + ", ".join("--" + s.replace("_", "-") for s in chosen))
    if args.dry_run and args.execute:
        raise ToolError("Option '[reset-offsets]' takes only one of these options: [dry-run], [execute]")
    groups = group_ids(adm, args)
    if not args.dry_run and not args.execute:
        print(DRY_RUN_WARNING)
    from_file = read_plan(args.from_file, groups) if args.from_file else None
    descs = describe(adm, args, groups)
    plans, refused = {}, False
    for group in groups:
        state = state_name(descs[group].state)
        if state not in ("Empty", "Dead"):
            print(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current "
                  f"state is {state}.")
            plans[group], refused = {}, True
            continue
        partitions = [] if from_file is not None else scope(adm, args, group)
        plan = plan_for(adm, args, group, partitions, from_file)
        if args.execute and plan:
            offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())]
            futures = adm.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)],
                                                       request_timeout=timeout_s(args))
            result = wait(futures[group], timeout_s(args) + 5)
            failed = [tp for tp in result.topic_partitions or () if tp.error is not None]
            if failed:
                raise ToolError(f"{group}: {failed[0].topic}-{failed[0].partition}: {failed[0].error.str()}")
        plans[group] = plan
    if args.export:
        for group, plan in plans.items():
            for (t, p), o in sorted(plan.items()):
                print(f"{t},{p},{o}" if len(groups) == 1 else f"{group},{t},{p},{o}")
    else:
        rows = [[g, t, str(p), str(o)] for g, plan in plans.items() for (t, p), o in sorted(plan.items())]
        if rows:
            print()
            for row in [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + rows:
                print(f"{row[0]:<30} {row[1]:<30} {row[2]:<10} {row[3]}")
        print()
    return 1 if refused else 0


# --- delete offsets ----------------------------------------------------------------------------
def delete_offsets(adm, args) -> int:
    from kraft.errors import ErrorCode
    if not args.group or len(args.group) != 1:
        raise ToolError("--delete-offsets takes one --group")
    if not args.topic:
        raise ToolError("--delete-offsets needs --topic (TOPIC or TOPIC:P1,P2)")
    group = args.group[0]
    md = cluster_metadata(adm, timeout_s=timeout_s(args) + 5)
    partitions, unknown = [], []
    for arg in args.topic:
        topic, sep, parts = arg.partition(":")
        if sep:
            try:
                partitions += [(topic, int(p)) for p in parts.split(",")]
            except ValueError:
                raise ToolError(f"Invalid partition '{parts}' specified in topic arg '{arg}'") from None
        elif topic in md.topics and md.topics[topic].error is None:
            partitions += [(topic, p) for p in sorted(md.topics[topic].partitions)]
        else:
            unknown.append(topic)
    desc = describe(adm, args, [group])[group]
    top, results = asyncio.run(_offset_delete(desc.coordinator, group, sorted(set(partitions)), timeout_s(args)))
    results.update({(t, -1): "UNKNOWN_TOPIC_OR_PARTITION" for t in unknown})
    name = ErrorCode(top).name if top else "NONE"
    messages = {"NONE": f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group}",
                "INVALID_GROUP_ID": f"\nError: '{group}' is not valid.",
                "GROUP_ID_NOT_FOUND": f"\nError: '{group}' does not exist.",
                "GROUP_AUTHORIZATION_FAILED": f"\nError: Access to '{group}' is not authorized.",
                "NON_EMPTY_GROUP": f"\nError: Deleting offsets of a consumer group '{group}' is forbidden if the "
                                   "group is not empty."}
    if unknown and name == "NONE":
        name = "UNKNOWN_TOPIC_OR_PARTITION"
    print(messages.get(name, "\nError: Encounter some partition level error, see the follow-up details:"
                       if name in ("GROUP_SUBSCRIBED_TO_TOPIC", "UNKNOWN_TOPIC_OR_PARTITION",
                                   "TOPIC_AUTHORIZATION_FAILED")
                       else f"\nError: Encounter some unknown error: {name}"))
    print()
    print(f"{'TOPIC':<30} {'PARTITION':<15} STATUS")
    for (t, p), err in sorted(results.items(), key=lambda kv: kv[0][0] + str(kv[0][1])):
        status = "Successful" if err is None else f"Error: :{err}"
        print(f"{t:<30} {str(p) if p >= 0 else 'Not Provided':<15} {status}".rstrip())
    return 0 if name == "NONE" else 1


async def _offset_delete(coordinator, group: str, partitions, timeout_s: float):
    """(top-level error code, {(topic, partition): None or an error name}) from the coordinator."""
    from kraft.client.node_client import NodeClient
    from kraft.errors import ErrorCode, KraftError
    from kraft.protocol.messages.group_offsets import OffsetDeleteRequest
    if coordinator is None or coordinator.id < 0:
        raise ToolError(f"no coordinator for group '{group}'")
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    T = OffsetDeleteRequest.Topic
    request = OffsetDeleteRequest(group_id=group, topics=[
        T(name=t, partitions=[T.Partition(partition_index=p) for p in ps]) for t, ps in sorted(by_topic.items())])
    client = NodeClient(coordinator.host, coordinator.port, client_id="kraft-tools",
                        request_timeout_ms=int(timeout_s * 1000))
    try:
        response = await client.request(request, OFFSET_DELETE_VERSION)
    except KraftError as exc:
        raise ToolError(f"{coordinator.host}:{coordinator.port}: {exc}") from None
    finally:
        await client.close()
    results = {(t.name, p.partition_index): None if p.error_code == 0 else ErrorCode(p.error_code).name
               for t in response.topics for p in t.partitions}
    if response.error_code == 0 and any(v is not None for v in results.values()):
        # Kafka's admin client turns a partition's error into the call's error
        first = next(v for v in results.values() if v is not None)
        return int(ErrorCode[first]), results
    return response.error_code, results

