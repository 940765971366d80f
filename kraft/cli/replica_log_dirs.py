"""The log-directory half of ``kraft reassign-partitions`` (Kafka's ReassignPartitionsCommand
with ``log_dirs`` in its JSON, KIP-113): a replica whose entry names a directory instead of
``"any"`` is moved there with AlterReplicaLogDirs, sent to the broker holding it.

--execute sends the moves after the replica reassignment has started; a broker that does not
hold the replica yet (REPLICA_NOT_AVAILABLE: a new replica of the reassignment) is asked again
until it does or the timeout passes, as Kafka's tool retries. --verify reads DescribeLogDirs of
each broker and prints Kafka's wording per replica; --cancel asks each replica back to the
directory it is in now (its move's copy is dropped). Wording and parsing are pure functions.
"""

from __future__ import annotations

import asyncio
import json
import time

from kraft.client.node_client import NodeClient
from kraft.errors import ErrorCode, KraftError
from kraft.protocol import MetadataRequest
from kraft.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest as A
from kraft.protocol.messages.describe_log_dirs import DescribeLogDirsRequest

ANY_LOG_DIR = "any"
ALTER_VERSION = 2
DESCRIBE_VERSION = 4
METADATA_VERSION = 9


def parse_log_dir_moves(text: str) -> dict[tuple[str, int, int], str]:
    """(topic, partition, broker) -> directory for every ``log_dirs`` entry that is not "any"
    (the file was checked by ``parse_reassignment`` first)."""
    out = {}
    for entry in json.loads(text)["partitions"]:
        for broker, d in zip(entry["replicas"], entry.get("log_dirs") or ()):
            if d != ANY_LOG_DIR:
                out[(entry["topic"], entry["partition"], broker)] = d
    return out


def _replica(t: str, p: int, b: int) -> str:
    return f"{t}-{p}-{b}"  # Kafka's TopicPartitionReplica


async def _brokers(admin) -> dict[int, tuple[str, int]]:
    resp = await admin._call(MetadataRequest(topics=[], allow_auto_topic_creation=False), METADATA_VERSION)
    return {b.node_id: (b.host, b.port) for b in resp.brokers}


async def _ask(address, request, version: int, timeout_s: float):
    client = NodeClient(*address, client_id="kraft-admin", request_timeout_ms=int(timeout_s * 1000))
    try:
        return await client.request(request, version)
    finally:
        await client.close()


def _by_broker(moves: dict) -> dict[int, A]:
    out: dict[int, dict] = {}
    for (t, p, b), d in moves.items():
        out.setdefault(b, {}).setdefault(d, {}).setdefault(t, []).append(p)
    return {b: A(dirs=[A.Dir(path=d, topics=[A.Dir.Topic(name=t, partitions=ps) for t, ps in topics.items()])
                       for d, topics in dirs.items()]) for b, dirs in out.items()}


async def start_moves(admin, moves: dict, timeout_s: float) -> list[str]:
    """Send every move; retry those whose replica is not there yet until ``timeout_s``. Raises
    KraftError naming the replicas that could not be moved."""
    brokers = await _brokers(admin)
    todo, errors, started = dict(moves), {}, []
    deadline = time.monotonic() + timeout_s
    while todo:
        again = {}
        for b, req in _by_broker(todo).items():
            if b not in brokers:
                errors.update({k: "the broker is not alive" for k in todo if k[2] == b})
                continue
            resp = await _ask(brokers[b], req, ALTER_VERSION, timeout_s)
            for r in resp.results:
                for part in r.partitions:
                    key = (r.topic_name, part.partition_index, b)
                    if part.error_code == ErrorCode.NONE:
                        started.append(key)
                    elif part.error_code == ErrorCode.REPLICA_NOT_AVAILABLE and time.monotonic() < deadline:
                        again[key] = todo[key]
                    else:
                        errors[key] = ErrorCode(part.error_code).name
        todo = again
        if todo:
            await asyncio.sleep(0.5)
    lines = []
    if started:
        lines.append(f"Successfully started log directory move{'s' if len(started) > 1 else ''} for: "
                     + ",".join(_replica(*k) for k in sorted(started)))
    if errors:
        print("\n".join(lines))
        raise KraftError("Error moving replica(s) between log directories:\n"
                         + "\n".join(f"{_replica(*k)}: {m}" for k, m in sorted(errors.items())))
    return lines


async def _where(admin, moves: dict, timeout_s: float) -> dict:
    """(topic, partition, broker) -> (current dir or None, future dir or None)."""
    brokers = await _brokers(admin)
    out = {k: (None, None) for k in moves}
    for b in sorted({k[2] for k in moves}):
        if b not in brokers:
            continue
        topics = {}
        for t, p, bb in moves:
            if bb == b:
                topics.setdefault(t, []).append(p)
        req = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.Topic(topic=t, partitions=ps)
                                             for t, ps in topics.items()])
        resp = await _ask(brokers[b], req, DESCRIBE_VERSION, timeout_s)
        for r in resp.results:
            for t in r.topics:
                for part in t.partitions:
                    key = (t.name, part.partition_index, b)
                    if key in out:
                        cur, fut = out[key]
                        out[key] = (cur, r.log_dir) if part.is_future_key else (r.log_dir, fut)
    return out


def verify_lines(moves: dict, where: dict) -> list[str]:
    """Kafka's wording for replica log-dir moves (``ReassignPartitionsCommand`` move states)."""
    lines = ["Reassignment of replica log directories:"] if moves else []
    for key, target in sorted(moves.items()):
        t, p, b = key
        current, future = where.get(key, (None, None))
        if current is None:
            lines.append(f"Partition {t}-{p} is not found in any live log dir on broker {b}. "
                         "There is likely an offline log directory on the broker.")
        elif current == target:
            lines.append(f"Reassignment of replica {_replica(*key)} completed successfully.")
        elif future == target:
            lines.append(f"Reassignment of replica {_replica(*key)} is still in progress.")
        else:
            lines.append(f"Partition {t}-{p} on broker {b} is not being moved from log dir {current} to {target}.")
    return lines


async def verify(admin, moves: dict, timeout_s: float) -> list[str]:
    return verify_lines(moves, await _where(admin, moves, timeout_s))


async def cancel(admin, moves: dict, timeout_s: float) -> list[str]:
    """Ask every replica still being moved back to the directory it is in now."""
    where = await _where(admin, moves, timeout_s)
    back = {k: cur for k, (cur, fut) in where.items() if cur is not None and fut is not None}
    if not back:
        return []
    await start_moves(admin, back, timeout_s)
    return ["Successfully cancelled log directory moves for: " + ",".join(_replica(*k) for k in sorted(back))]
