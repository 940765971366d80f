"""``kraft reassign-partitions --bootstrap-server H:P --reassignment-json-file F --execute |
--verify | --cancel``: Kafka's ``kafka-reassign-partitions.sh`` (ReassignPartitionsCommand,
KIP-455) over AlterPartitionReassignments and ListPartitionReassignments, with its JSON file
(``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}``; ``log_dirs``
entries other than ``"any"`` move replicas between a broker's log directories with
AlterReplicaLogDirs, ``replica_log_dirs.py``) and its output lines.

--execute prints the current assignment of the file's partitions (the rollback file) and starts
the moves (refused while other moves run, unless --additional); --verify says per partition
whether the move is done, still running, or the replica set is something else; --cancel
cancels the file's moves that are still running (their partitions go back to the replicas they
had). ``--throttle N`` limits the moves' replication to N bytes/s until a ``--verify`` finds
them done (``reassign_throttle.py``). Not here: --generate, ``--replica-alter-log-dirs-throttle``.
Parsing and wording are pure functions; the requests go through ``PartitionAdmin``.
"""

from __future__ import annotations

import asyncio
import json

from kraft.cli import reassign_throttle, replica_log_dirs
from kraft.client.partition_admin import PartitionAdmin
from kraft.errors import ErrorCode, KraftError

ANY_LOG_DIR = "any"


class ReassignmentError(KraftError):
    """The file is not a reassignment, or the cluster refused some of it."""


def parse_reassignment(text: str) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) -> target replicas, in file order; ReassignmentError with Kafka's
    wording for what Kafka's parser refuses."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReassignmentError(f"the reassignment file is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ReassignmentError("Not supported version field value " + repr(doc.get("version") if isinstance(doc, dict)
                                                                           else None))
    parts = doc.get("partitions")
    if not isinstance(parts, list) or not parts:
        raise ReassignmentError("Partition reassignment list cannot be empty")
    out: dict[tuple[str, int], list[int]] = {}
    duplicates = []
    for entry in parts:
        if not isinstance(entry, dict):
            raise ReassignmentError(f"a partition entry is not an object: {entry!r}")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise ReassignmentError(f"a partition entry has no topic: {entry!r}")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise ReassignmentError(f"a partition entry has no valid partition: {entry!r}")
        if (not isinstance(replicas, list) or not replicas
                or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in replicas)):
            raise ReassignmentError(f"Partition reassignment of {topic}-{partition} has no valid replica list")
        if len(set(replicas)) != len(replicas):
            raise ReassignmentError(f"Partition replica lists may not contain duplicate entries: {topic}-{partition}")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise ReassignmentError(f"Size of replicas list {replicas} is different from size of log dirs list "
                                        f"{dirs} for partition {topic}-{partition}")
            if not all(isinstance(d, str) and d for d in dirs):
                raise ReassignmentError(f"log_dirs of {topic}-{partition} must be paths or \"any\": {dirs}")
        if (topic, partition) in out:
            duplicates.append(f"{topic}-{partition}")
        out[(topic, partition)] = list(replicas)
    if duplicates:
        raise ReassignmentError(f"Reassignment JSON file contains duplicate partitions: {', '.join(duplicates)}")
    return out


def reassignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    """Kafka's form of an assignment (the rollback file --execute prints)."""
    parts = [{"topic": t, "partition": p, "replicas": list(r), "log_dirs": [ANY_LOG_DIR] * len(r)}
             for (t, p), r in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def _names(tps) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps))


def verify_lines(targets: dict, current: dict, ongoing: set) -> list[str]:
    """Kafka's ``verifyPartitionAssignments`` wording, one line per partition of the file."""
    lines = ["Status of partition reassignment:"]
    for (t, p), target in sorted(targets.items()):
        if (t, p) in ongoing:
            lines.append(f"Reassignment of partition {t}-{p} is still in progress.")
        elif current.get((t, p)) == target:
            lines.append(f"Reassignment of partition {t}-{p} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                         f"{current.get((t, p))} rather than {target}.")
    return lines


def _errors(response) -> dict[tuple[str, int], str]:
    out = {}
    if response.error_code:
        raise ReassignmentError(f"{ErrorCode(response.error_code).name}: {response.error_message or ''}".rstrip(": "))
    for t in response.responses:
        for p in t.partitions:
            if p.error_code:
                out[(t.name, p.partition_index)] = (f"{ErrorCode(p.error_code).name}: "
                                                    f"{p.error_message or ErrorCode(p.error_code).name}")
    return out


def _ongoing(response) -> set:
    if response.error_code:
        raise ReassignmentError(f"listing reassignments: {ErrorCode(response.error_code).name}")
    return {(t.name, p.partition_index) for t in response.topics for p in t.partitions}


async def execute(admin: PartitionAdmin, targets: dict, additional: bool = False,
                  throttle: int | None = None) -> list[str]:
    if not additional and _ongoing(await admin.ongoing()):
        raise ReassignmentError("Cannot execute because there is an existing partition assignment. Use --additional "
                                "to override this and create a new partition assignment in addition to the existing "
                                "one.")
    current = await admin.assignment(sorted({t for t, _ in targets}))
    missing = sorted({t for t, p in targets if (t, p) not in current})
    if missing:
        raise ReassignmentError(f"Topic or partition not found: {', '.join(missing)}")
    lines = ["Current partition replica assignment", "",
             reassignment_json({tp: current[tp] for tp in targets}), "",
             "Save this to use as the --reassignment-json-file option during rollback"]
    if throttle is not None and throttle >= 0:  # before the moves start, as Kafka sets it
        lines += await reassign_throttle.set_throttle(admin, current, targets, throttle)
    errors = _errors(await admin.alter(targets))
    started = [tp for tp in targets if tp not in errors]
    if started:
        lines.append(f"Successfully started partition reassignment{'s' if len(started) > 1 else ''} for "
                     f"{_names(started)}")
    if errors:
        print("\n".join(lines))
        raise ReassignmentError("Error reassigning partition(s):\n" +
                                "\n".join(f"{t}-{p}: {m}" for (t, p), m in sorted(errors.items())))
    return lines


async def verify(admin: PartitionAdmin, targets: dict, preserve_throttles: bool = False) -> list[str]:
    ongoing = _ongoing(await admin.ongoing(list(targets)))
    current = await admin.assignment(sorted({t for t, _ in targets}))
    lines = verify_lines(targets, current, ongoing)
    done = not ongoing & set(targets) and all(current.get(tp) == r for tp, r in targets.items())
    if done and not preserve_throttles:  # Kafka's verify clears the throttles once all is done
        lines += await reassign_throttle.clear_throttle(admin, {t for t, _ in targets}, await admin.broker_ids())
    return lines


async def cancel(admin: PartitionAdmin, targets: dict) -> list[str]:
    running = sorted(_ongoing(await admin.ongoing(list(targets))) & set(targets))
    if not running:
        return ["No partition reassignment of the file is in progress: nothing to cancel."]
    errors = _errors(await admin.alter({tp: None for tp in running}))
    done = [tp for tp in running if tp not in errors]
    lines = [f"Successfully cancelled partition reassignment(s) for: {_names(done)}"] if done else []
    if errors:
        print("\n".join(lines))
        raise ReassignmentError("Error cancelling partition reassignment(s):\n" +
                                "\n".join(f"{t}-{p}: {m}" for (t, p), m in sorted(errors.items())))
    return lines


def _run(args) -> int:
    with open(args.reassignment_json_file) as f:
        text = f.read()
    targets = parse_reassignment(text)
    dir_moves = replica_log_dirs.parse_log_dir_moves(text)

    async def go():
        admin = PartitionAdmin(args.bootstrap_server, timeout_s=args.timeout)
        try:
            if args.execute:
                lines = await execute(admin, targets, args.additional, args.throttle)
                if dir_moves:  # after the replicas are placed: new ones are retried until they exist
                    lines += await replica_log_dirs.start_moves(admin, dir_moves, args.timeout)
                return lines
            if args.verify:
                lines = await verify(admin, targets, args.preserve_throttles)
            else:
                lines = await cancel(admin, targets)
            if dir_moves:
                step = replica_log_dirs.verify if args.verify else replica_log_dirs.cancel
                lines += await step(admin, dir_moves, args.timeout)
            return lines
        finally:
            await admin.close()
    print("\n".join(asyncio.run(go())))
    return 0


def register(sub) -> None:
    p = sub.add_parser("reassign-partitions", help="move partition replicas between brokers (Kafka's "
                       "kafka-reassign-partitions.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]",
                   help="brokers to send the requests to (they forward them to the active controller)")
    p.add_argument("--reassignment-json-file", required=True, metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--execute", action="store_true", help="start the reassignment in the file")
    g.add_argument("--verify", action="store_true", help="report whether each move of the file is done")
    g.add_argument("--cancel", action="store_true", help="cancel the file's moves still in progress")
    p.add_argument("--additional", action="store_true",
                   help="with --execute: start these moves although others are in progress")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="with --execute: limit the moves' replication to this many bytes/s between brokers until "
                        "--verify finds them done (in-sync replicas are never held back)")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify: keep the throttles although the moves are done")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds each request may take")
    p.set_defaults(func=_run)
