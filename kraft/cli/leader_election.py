"""``kraft leader-election --bootstrap-server H:P --election-type preferred|unclean
(--all-topic-partitions | --topic T --partition N | --path-to-json-file F)``: Kafka's
``kafka-leader-election.sh`` (LeaderElectionCommand, KIP-460) over ElectLeaders, with its
JSON file (``{"partitions":[{"topic":"t","partition":0}]}``) and its output lines. Partitions
that could not be elected make the command fail (exit 1) after the others are reported.
Parsing and wording are pure functions; the request goes through ``PartitionAdmin``.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from kraft.client.partition_admin import PartitionAdmin
from kraft.errors import ErrorCode, KraftError
from kraft.protocol.messages.elect_leaders import ELECTION_PREFERRED, ELECTION_UNCLEAN

ELECTION_TYPES = {"PREFERRED": ELECTION_PREFERRED, "UNCLEAN": ELECTION_UNCLEAN}


class ElectionError(KraftError):
    """Bad input, or some partitions could not be elected."""


def parse_partitions(text: str) -> list[tuple[str, int]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ElectionError(f"the partitions file is not JSON: {exc}") from exc
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list):
        raise ElectionError('expected {"partitions": [{"topic": ..., "partition": ...}]}')
    out = []
    for e in parts:
        if (not isinstance(e, dict) or not isinstance(e.get("topic"), str) or not isinstance(e.get("partition"), int)
                or isinstance(e.get("partition"), bool)):
            raise ElectionError(f"not a topic partition: {e!r}")
        out.append((e["topic"], e["partition"]))
    if len(set(out)) != len(out):
        raise ElectionError("Replica election data contains duplicate partitions")
    return out


def result_lines(election: str, response) -> tuple[list[str], list[str]]:
    """(lines to print, failure lines) in Kafka's wording."""
    if response.error_code:
        raise ElectionError(f"{ErrorCode(response.error_code).name}")
    ok, noop, failed = [], [], []
    for t in response.replica_election_results:
        for p in t.partition_result:
            name = f"{t.topic}-{p.partition_id}"
            if p.error_code == 0:
                ok.append(name)
            elif p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(name)
            else:
                why = ErrorCode(p.error_code).name + (f": {p.error_message}" if p.error_message else "")
                failed.append(f"Error completing leader election ({election}) for partition: {name}: {why}")
    lines = []
    if ok:
        lines.append(f"Successfully completed leader election ({election}) for partitions {', '.join(ok)}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(noop)}")
    return lines, failed


def _election_type(text: str) -> str:
    kind = text.strip().upper()
    if kind not in ELECTION_TYPES:
        raise argparse.ArgumentTypeError(f"expected preferred or unclean, got {text!r}")
    return kind


def _run(args) -> int:
    if args.all_topic_partitions:
        if args.topic or args.partition is not None or args.path_to_json_file:
            raise ElectionError("--all-topic-partitions takes no --topic, --partition or --path-to-json-file")
        partitions = None
    elif args.path_to_json_file:
        if args.topic or args.partition is not None:
            raise ElectionError("--path-to-json-file takes no --topic or --partition")
        with open(args.path_to_json_file) as f:
            partitions = parse_partitions(f.read())
    elif args.topic and args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        raise ElectionError("one of --all-topic-partitions, --topic with --partition, or --path-to-json-file "
                            "is required")

    async def go():
        admin = PartitionAdmin(args.bootstrap_server, timeout_s=args.timeout)
        try:
            return await admin.elect(ELECTION_TYPES[args.election_type], partitions)
        finally:
            await admin.close()
    lines, failed = result_lines(args.election_type, asyncio.run(go()))
    for line in lines + failed:
        print(line)
    if failed:
        raise ElectionError(f"{len(failed)} replica(s) could not be elected")
    return 0


def register(sub) -> None:
    p = sub.add_parser("leader-election", help="elect partition leaders (Kafka's kafka-leader-election.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]",
                   help="brokers to send ElectLeaders to (they forward it to the active controller)")
    p.add_argument("--election-type", required=True, type=_election_type, metavar="preferred|unclean",
                   help="preferred: the first replica leads again if in sync; unclean: any live replica may "
                   "lead a leaderless partition (may lose data)")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition that needs an election")
    p.add_argument("--topic", help="the topic of one partition")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.add_argument("--path-to-json-file", metavar="FILE", help='{"partitions":[{"topic":"t","partition":0}]}')
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the request may take")
    p.set_defaults(func=_run)
