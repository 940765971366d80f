"""``kraft produce``: append records to the quorum through its leader (Produce on the
controller listener), wait for each batch to commit, and print the committed offsets.
For demos and smoke tests; ``bench/`` has the measured load generator."""

from __future__ import annotations

import asyncio

from kraft.records import build_batch
from kraft.client.quorum import QuorumClient, QuorumWriter, parse_address


async def produce(bootstrap: str, values: list[bytes], batch_size: int, deadline_s: float = 30.0):
    """Each batch gets ``deadline_s`` to commit; nothing listening anywhere fails at once."""
    client = QuorumClient([parse_address(s) for s in bootstrap.split(",")], refused_is_final=True)
    writer = QuorumWriter(client)
    offsets = []
    try:
        for i in range(0, len(values), batch_size):
            chunk = values[i:i + batch_size]
            base = await writer.write_through_failures(build_batch(chunk), deadline_s=deadline_s)
            offsets.append((base, len(chunk)))
    finally:
        await client.close()
    return offsets


def _run(args) -> int:
    if args.value is not None:
        values = [v.encode() for v in args.value]
    else:
        values = [(f"record-{i}-".encode() + b"x" * args.size)[:args.size] for i in range(args.count)]
    offsets = asyncio.run(produce(args.bootstrap_controller, values, args.batch_size, args.timeout))
    for base, n in offsets:
        print(f"committed {n} record(s) at offsets {base}..{base + n - 1}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("produce", help="write records to the quorum through its leader")
    p.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT[,HOST:PORT]",
                   help="controller addresses to find the leader from")
    p.add_argument("--value", action="append", help="a record value (repeatable); default: generated values")
    p.add_argument("--count", type=int, default=10, help="how many values to generate (without --value)")
    p.add_argument("--size", type=int, default=64, help="bytes per generated value")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds each batch may take to commit, following leader changes")
    p.add_argument("--batch-size", type=int, default=100, help="records per batch")
    p.set_defaults(func=_run)
