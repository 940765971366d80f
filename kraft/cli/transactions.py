"""``kraft transactions``: Kafka's ``kafka-transactions.sh`` (TransactionsCommand, KIP-664) with
its subcommands, options and table layout: ``list`` (ListTransactions of every broker: each
answers for the transactional ids it coordinates), ``describe --transactional-id``,
``describe-producers --topic --partition [--broker-id]``, ``find-hanging`` (open transactions
on partitions that their coordinator does not know of, as Kafka's FindHangingTransactions
decides) and ``abort`` (an ABORT marker written to the partition leader, for a hanging
transaction: by ``--start-offset``, or ``--producer-id/--producer-epoch/--coordinator-epoch``).

Kafka's table: every column as wide as its widest cell, each cell followed by a tab. Failures
are one line on stderr (``kraft.cli.main``), worded as Kafka words them. The requests are in
``kraft.cli.transactions_admin``; nothing here touches a socket.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from kraft.cli.kafka_tool_args import DEFAULT_TIMEOUT_S, ToolError, check_bootstrap, read_properties
from kraft.errors import ErrorCode

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]
NONE = "None"  # Kafka's cell for an absent optional value


def table_lines(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Kafka's ``prettyPrintTable``: cells padded to the column's widest, each followed by a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths)) for row in [headers] + rows]


def print_table(headers, rows) -> None:
    for line in table_lines(headers, rows):
        print(line)


def now_ms() -> int:
    return int(time.time() * 1000)


def _failed(what: str, code: int, message: str | None = None) -> ToolError:
    from kraft.cli.transactions_admin import error_text
    return ToolError(f"{what}: {error_text(code)}{': ' + message if message else ''}.")


# --- rows: pure functions of the answers --------------------------------------------------------
def list_rows(by_broker: dict[int, list]) -> list[list[str]]:
    return [[s.transactional_id, str(broker), str(s.producer_id), s.transaction_state]
            for broker, states in sorted(by_broker.items())
            for s in sorted(states, key=lambda s: s.transactional_id)]


def describe_row(coordinator: int, s, now: int) -> list[str]:
    started = s.transaction_start_time_ms >= 0
    partitions = sorted((t.topic, p) for t in s.topics for p in t.partitions)
    return [str(coordinator), s.transactional_id, str(s.producer_id), str(s.producer_epoch), s.transaction_state,
            str(s.transaction_timeout_ms), str(s.transaction_start_time_ms) if started else NONE,
            str(now - s.transaction_start_time_ms) if started else NONE,
            ",".join(f"{t}-{p}" for t, p in partitions)]


def producer_rows(producers) -> list[list[str]]:
    return [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch if p.coordinator_epoch >= 0 else -1),
             str(p.last_sequence), str(p.last_timestamp),
             str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else NONE] for p in producers]


def hanging(open_txns, listed: dict[int, str], described: dict[str, object]) -> list:
    """Kafka's filterHangingTransactions. ``open_txns``: ((topic, partition), producer state);
    ``listed``: producer id -> transactional id (ListTransactions); ``described``: transactional id
    -> DescribeTransactions state, None when the coordinator does not know it. An open
    transaction hangs unless its coordinator still lists its partition (then it will write the
    marker itself)."""
    out = []
    for tp, p in open_txns:
        tid = listed.get(p.producer_id)
        desc = described.get(tid) if tid is not None else None
        if desc is None or tp not in {(t.topic, n) for t in desc.topics for n in t.partitions}:
            out.append((tp, p))
    return out


def hanging_rows(found, now: int) -> list[list[str]]:
    return [[t, str(n), str(p.producer_id), str(p.producer_epoch),
             str(p.coordinator_epoch if p.coordinator_epoch >= 0 else -1), str(p.current_txn_start_offset),
             str(p.last_timestamp), str((now - p.last_timestamp) // 60_000)] for (t, n), p in found]


# --- commands ----------------------------------------------------------------------------------
async def _list(adm, args) -> None:
    cluster = await adm.cluster([])
    try:
        duration = -1 if args.duration_filter is None else args.duration_filter
        by_broker = await adm.list_transactions(cluster, duration_ms=duration,
                                                pattern=args.transactional_id_pattern or None)
    except ToolError as exc:
        raise ToolError(f"Failed to list transactions: {exc}.") from None
    print_table(LIST_HEADERS, list_rows(by_broker))


async def _describe(adm, args) -> None:
    cluster = await adm.cluster([])
    tid = args.transactional_id
    coordinator, code, state = await adm.describe_transaction(cluster, tid)
    if code:
        raise _failed(f"Failed to describe transaction state of transactional-id `{tid}`", code)
    print_table(DESCRIBE_HEADERS, [describe_row(coordinator, state, now_ms())])


async def _describe_producers(adm, args) -> None:
    tp = (args.topic, args.partition)
    cluster = await adm.cluster([args.topic])
    code, message, producers = (await adm.describe_producers(cluster, [tp], args.broker_id))[tp]
    if code:
        where = f"broker {args.broker_id}" if args.broker_id is not None else "leader"
        raise _failed(f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}", code, message)
    print_table(PRODUCERS_HEADERS, producer_rows(producers))


async def _find_hanging(adm, args) -> None:
    if args.topic is None and args.broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                        "of the search")
    if args.partition is not None and args.topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    cluster = await adm.cluster(None if args.topic is None else [args.topic])
    if args.topic in cluster.topic_errors:
        raise _failed("Failed to describe 1 topics", cluster.topic_errors[args.topic])
    if args.partition is not None:
        partitions = [(args.topic, args.partition)]
    else:
        # The partitions with a replica on --broker-id, as Kafka searches.
        partitions = sorted(tp for tp, (_, replicas) in cluster.partitions.items()
                            if args.broker_id is None or args.broker_id in replicas)
    states = await adm.describe_producers(cluster, partitions, args.broker_id)
    now, max_ms = now_ms(), args.max_transaction_timeout * 60_000
    candidates = []
    for tp in partitions:
        code, message, producers = states[tp]
        if code:
            where = f" on broker {args.broker_id}" if args.broker_id is not None else ""
            raise _failed(f"Failed to describe producers for {len(partitions)} partitions{where}", code, message)
        candidates += [(tp, p) for p in producers
                       if p.current_txn_start_offset >= 0 and now - p.last_timestamp > max_ms]
    found = []
    if candidates:
        pids = sorted({p.producer_id for _, p in candidates})
        try:
            by_broker = await adm.list_transactions(cluster, pids)
        except ToolError as exc:
            raise ToolError(f"Failed to list transactions for {len(pids)} producers: {exc}.") from None
        listed = {s.producer_id: s.transactional_id for states in by_broker.values() for s in states
                  if s.producer_id in pids}
        described = {}
        for tid in sorted(set(listed.values())):
            _, code, state = await adm.describe_transaction(cluster, tid)
            if code and code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise _failed(f"Failed to describe {len(set(listed.values()))} transactions", code)
            described[tid] = None if code else state
        found = hanging(candidates, listed, described)
    print_table(HANGING_HEADERS, hanging_rows(found, now_ms()))


async def _abort(adm, args) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise ToolError("The transaction to abort must be identified either with --start-offset (for brokers on "
                        "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older "
                        "brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise ToolError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise ToolError("Missing required argument --coordinator-epoch")
    cluster = await adm.cluster([args.topic])
    if args.start_offset is None:
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    else:
        code, message, producers = (await adm.describe_producers(cluster, [tp]))[tp]
        if code:
            raise _failed(f"Failed to validate producer state for partition {tp[0]}-{tp[1]}", code, message)
        match = [p for p in producers if p.current_txn_start_offset == args.start_offset]
        if not match:
            raise ToolError(f"Could not find any open transactions starting at offset {args.start_offset} on "
                            f"partition {tp[0]}-{tp[1]}")
        pid, epoch, coordinator_epoch = match[0].producer_id, match[0].producer_epoch, match[0].coordinator_epoch
    # A producer whose transaction hung before any marker has coordinator epoch -1: Kafka then
    # uses 0, which no partition's recorded coordinator epoch exceeds.
    coordinator_epoch = max(coordinator_epoch, 0)
    code = await adm.abort(cluster, tp, pid, epoch, coordinator_epoch)
    if code:
        raise _failed(f"Failed to abort transaction AbortTransactionSpec(topicPartition={tp[0]}-{tp[1]}, "
                      f"producerId={pid}, producerEpoch={epoch}, coordinatorEpoch={coordinator_epoch})", code)


COMMANDS = {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
            "find-hanging": _find_hanging, "abort": _abort}


def _run(args) -> int:
    from kraft.cli.transactions_admin import TxnAdmin
    bootstrap = getattr(args, "bootstrap_server", None) or \
        read_properties(getattr(args, "command_config", None)).get("bootstrap.servers")
    if not bootstrap:
        raise ToolError("no bootstrap.servers: give --bootstrap-server")
    check_bootstrap(bootstrap)
    if getattr(args, "txn_command", None) is None:
        raise ToolError("give a command: list, describe, describe-producers, abort or find-hanging")

    async def go():
        adm = TxnAdmin(bootstrap, timeout_s=args.timeout / 1000)
        try:
            await COMMANDS[args.txn_command](adm, args)
        finally:
            await adm.close()
    asyncio.run(go())
    return 0


def _connection(p, *, top: bool) -> None:
    """Kafka takes these before the command; kraft takes them after it too (SUPPRESS there, so
    a subcommand's absent option does not undo the one given before it)."""
    default = None if top else argparse.SUPPRESS
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", default=default,
                   help="the brokers to connect to")
    p.add_argument("--command-config", metavar="FILE", default=default,
                   help="client properties (Kafka's format); only bootstrap.servers is used")
    p.add_argument("--timeout", type=int, metavar="MS", default=int(DEFAULT_TIMEOUT_S * 1000) if top else
                   argparse.SUPPRESS, help="how long a request (and retries of a loading coordinator) may take")


def register(sub) -> None:
    p = sub.add_parser("transactions", help="list, describe, find and abort (hanging) transactions "
                                            "(kafka-transactions.sh)",
                       description="Analyze the transactional state of producers in the cluster; detect and "
                                   "recover from hanging transactions.")
    _connection(p, top=True)
    p.set_defaults(func=_run, txn_command=None)
    cmds = p.add_subparsers(dest="txn_command", metavar="COMMAND")

    c = cmds.add_parser("list", help="list transactions (every broker's coordinators)")
    _connection(c, top=False)
    c.add_argument("--duration-filter", type=int, metavar="MS",
                   help="only transactions running longer than this (< 0: all)")
    c.add_argument("--transactional-id-pattern", metavar="REGEX",
                   help="only transactional ids matching this regular expression (Java syntax)")

    c = cmds.add_parser("describe", help="describe the state of an active transactional-id")
    _connection(c, top=False)
    c.add_argument("--transactional-id", required=True, help="transactional id")

    c = cmds.add_parser("describe-producers", help="describe the states of active producers for a topic partition")
    _connection(c, top=False)
    c.add_argument("--broker-id", type=int, help="ask this broker rather than the partition leader")
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")

    c = cmds.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    _connection(c, top=False)
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partition", type=int, required=True, help="partition number")
    g = c.add_argument_group("Brokers on versions 3.0 and above",
                             "For newer brokers, only the start offset of the transaction to be aborted is required")
    g.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    g = c.add_argument_group("Brokers on versions older than 3.0",
                             "For older brokers, you must provide all of these arguments")
    g.add_argument("--producer-id", type=int, help="producer id")
    g.add_argument("--producer-epoch", type=int, help="producer epoch")
    g.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    c = cmds.add_parser("find-hanging", help="find hanging transactions")
    _connection(c, top=False)
    c.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    c.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="maximum transaction timeout in minutes to limit the scope of the search")
    c.add_argument("--topic", help="topic name to limit search to")
    c.add_argument("--partition", type=int, help="partition number")
