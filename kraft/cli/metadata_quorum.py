"""``kraft metadata-quorum --bootstrap-controller HOST:PORT describe --status|--replication``,
with the output layout of ``kafka-metadata-quorum.sh`` (``--json`` for machines)."""

from __future__ import annotations

import asyncio
import json
import sys

from kraft.errors import KraftError
from kraft.server.admin_client import QuorumClient, parse_address


def _status(d, cluster_id: str | None = None) -> dict:
    """Kafka's MetadataQuorumCommand.handleDescribeStatus arithmetic: lag against the voter
    with the smallest log end offset, lag time as the leader's last caught-up time minus its."""
    leader = next((v for v in d.voters if v.replica_id == d.leader_id), None)
    lagging = min(d.voters, key=lambda v: v.log_end_offset, default=None)
    if leader is None or lagging is None:
        max_lag, max_lag_ms = 0, -1
    else:
        max_lag = leader.log_end_offset - lagging.log_end_offset
        if lagging is leader:
            max_lag_ms = 0
        elif leader.last_caught_up_timestamp >= 0 and lagging.last_caught_up_timestamp >= 0:
            max_lag_ms = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
        else:
            max_lag_ms = -1
    out = {} if cluster_id is None else {"ClusterId": cluster_id}
    out.update({"LeaderId": d.leader_id, "LeaderEpoch": d.leader_epoch, "HighWatermark": d.high_watermark,
                "MaxFollowerLag": max_lag, "MaxFollowerLagTimeMs": max_lag_ms,
                "CurrentVoters": sorted(v.replica_id for v in d.voters),
                "CurrentObservers": sorted(o.replica_id for o in d.observers)})
    return out


def _replication(d) -> list[dict]:
    rows = []
    for kind, group in (("Voter", d.voters), ("Observer", d.observers)):
        for r in group:
            status = "Leader" if r.replica_id == d.leader_id else "Follower" if kind == "Voter" else "Observer"
            rows.append({"NodeId": r.replica_id, "LogEndOffset": r.log_end_offset,
                         "Lag": max(0, d.high_watermark - r.log_end_offset) if r.log_end_offset >= 0 else -1,
                         "LastFetchTimestamp": r.last_fetch_timestamp,
                         "LastCaughtUpTimestamp": r.last_caught_up_timestamp, "Status": status})
    rows.sort(key=lambda r: (r["Status"] != "Leader", r["Status"] == "Observer", r["NodeId"]))
    return rows


async def describe(bootstrap: str, timeout_s: float, with_cluster_id: bool = False):
    client = QuorumClient([parse_address(s) for s in bootstrap.split(",")], refused_is_final=True)
    try:
        d = await client.describe(timeout_s)
        return d, (await client.cluster_id() if with_cluster_id else None)
    finally:
        await client.close()


def _run(args) -> int:
    try:
        d, cluster_id = asyncio.run(describe(args.bootstrap_controller, args.timeout, args.status))
    except (KraftError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.replication:
        rows = _replication(d)
        if args.json:
            print(json.dumps(rows))
        else:
            cols = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
            widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
            print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
            for r in rows:
                print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)))
        return 0
    status = _status(d, cluster_id)
    if args.json:
        print(json.dumps(status))
    else:
        for k, v in status.items():
            print(f"{k + ':':<24}{json.dumps(v) if isinstance(v, list) else v}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("metadata-quorum", help="describe the metadata quorum (DescribeQuorum)")
    p.add_argument("--bootstrap-controller", "--bootstrap-server", dest="bootstrap_controller", required=True,
                   metavar="HOST:PORT[,HOST:PORT]")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to look for the leader")
    ss = p.add_subparsers(dest="mq_command", metavar="ACTION", required=True)
    d = ss.add_parser("describe", help="show the quorum")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--status", action="store_true")
    g.add_argument("--replication", action="store_true")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=_run)
