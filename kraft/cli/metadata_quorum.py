"""``kraft metadata-quorum --bootstrap-controller HOST:PORT describe --status|--replication``,
``add-controller --command-config FILE`` and ``remove-controller --controller-id N
--controller-directory-id D`` (KIP-853 voter changes, sent to the leader), and kraft's own
``reassign --target-voters 4,5,6 | --cancel`` (seed 002: the leader moves the voters to the
target one at a time; ``describe --status`` shows TargetVoters until it is done),
with the output layout of Kafka's ``kafka-metadata-quorum.sh`` (MetadataQuorumCommand, 3.9+:
voters as ``{"id": N, "directoryId": "...", "endpoints": ["NAME://host:port"]}``, directoryId
left out when it is zero, and a DirectoryId column in ``--replication``); ``--json`` for machines."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time

from kraft.protocol.primitives import ZERO_UUID, uuid_to_base64
from kraft.client.quorum import QuorumClient, parse_address


def _directory_id(r) -> str:
    u = getattr(r, "replica_directory_id", None)
    return uuid_to_base64(u if u is not None else ZERO_UUID)


def _replica_node(d, r) -> dict:
    """Kafka's MetadataQuorumCommand.Node: id, directoryId unless zero, endpoints if known."""
    out = {"id": r.replica_id}
    u = getattr(r, "replica_directory_id", None)
    if u is not None and u != ZERO_UUID:
        out["directoryId"] = uuid_to_base64(u)
    endpoints = d.endpoints.get(r.replica_id) or []
    if endpoints:
        out["endpoints"] = list(endpoints)
    return out


def _replica_list_text(nodes: list[dict]) -> str:
    """Kafka's layout: ``[{"id": 1, "endpoints": ["CONTROLLER://h:p"]}, {...}]`` (also valid JSON)."""
    return "[" + ", ".join(json.dumps(n, separators=(", ", ": ")) for n in nodes) + "]"


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
                "CurrentVoters": [_replica_node(d, v) for v in d.voters],
                "CurrentObservers": [_replica_node(d, o) for o in d.observers]})
    if getattr(d, "target_voters", None) is not None:  # kraft's own line, only during a reassignment
        out["TargetVoters"] = [_target_node(t) for t in d.target_voters]
    return out


def _target_node(t) -> dict:
    out = {"id": t.voter_id}
    if t.voter_directory_id != ZERO_UUID:
        out["directoryId"] = uuid_to_base64(t.voter_directory_id)
    return out


def _ago(ts: int, now_ms: int) -> str:
    return "-1" if ts < 0 else f"{max(0, now_ms - ts)} ms ago"


def _replication(d, human_readable: bool = False) -> list[dict]:
    """Kafka's order: the leader, the other voters, then observers; Lag against the leader's LEO."""
    leader = next((v for v in d.voters if v.replica_id == d.leader_id), None)
    leader_end = leader.log_end_offset if leader is not None else d.high_watermark
    now_ms = int(time.time() * 1000)
    rows = []
    groups = (("Leader", [v for v in d.voters if v.replica_id == d.leader_id]),
              ("Follower", [v for v in d.voters if v.replica_id != d.leader_id]), ("Observer", d.observers))
    for status, group in groups:
        for r in group:
            fetch, caught_up = r.last_fetch_timestamp, r.last_caught_up_timestamp
            rows.append({"NodeId": r.replica_id, "DirectoryId": _directory_id(r), "LogEndOffset": r.log_end_offset,
                         "Lag": leader_end - r.log_end_offset if r.log_end_offset >= 0 else -1,
                         "LastFetchTimestamp": _ago(fetch, now_ms) if human_readable else fetch,
                         "LastCaughtUpTimestamp": _ago(caught_up, now_ms) if human_readable else caught_up,
                         "Status": status})
    return rows


async def describe(bootstrap: str, timeout_s: float, with_cluster_id: bool = False):
    client = QuorumClient([parse_address(s) for s in bootstrap.split(",")], refused_is_final=True)
    try:
        d = await client.describe(timeout_s)
        return d, (await client.cluster_id() if with_cluster_id else None)
    finally:
        await client.close()


COLUMNS = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]


def _run(args) -> int:
    d, cluster_id = asyncio.run(describe(args.bootstrap_controller, args.timeout, args.status))
    if args.replication:
        rows = _replication(d, args.human_readable)
        if args.json:
            print(json.dumps(rows))
        else:
            widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in COLUMNS]
            print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip())
            for r in rows:
                print("  ".join(str(r[c]).ljust(w) for c, w in zip(COLUMNS, widths)).rstrip())
        return 0
    status = _status(d, cluster_id)
    if args.json:
        print(json.dumps(status))
    else:
        for k, v in status.items():
            print(f"{k + ':':<24}{_replica_list_text(v) if isinstance(v, list) else v}")
    return 0


def _add_controller(args) -> int:
    """Kafka's ``add-controller``: the new controller's own server.properties says who it is
    (node.id, the metadata directory's directory.id, its advertised controller listeners)."""
    import os

    from kraft.client.voter_changes import add_voter
    from kraft.config import NodeConfig
    from kraft.errors import KraftError
    from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties, uuid_text_to_bytes

    cfg = NodeConfig.from_file(args.command_config)
    if not cfg.is_controller:
        raise KraftError(f"{args.command_config}: process.roles must contain controller")
    meta = MetaProperties.read(os.path.join(cfg.metadata_log_dir, META_PROPERTIES_FILE))
    if meta is None or not meta.directory_id:
        raise KraftError(f"{cfg.metadata_log_dir} is not formatted (no directory.id): run `kraft storage format "
                         "--no-initial-controllers` for this controller first")
    listeners = []
    for name in cfg.controller_listener_names:
        for e in (*cfg.advertised_listeners, *cfg.listeners):
            if e.name == name:
                listeners.append((name, e.host or "localhost", e.port))
                break
    client = QuorumClient([parse_address(s) for s in args.bootstrap_controller.split(",")])

    async def go():
        try:
            await add_voter(client, cfg.node_id, uuid_text_to_bytes(meta.directory_id), listeners,
                            deadline_s=args.timeout)
        finally:
            await client.close()
    asyncio.run(go())
    endpoints = ", ".join(f"{n}://{h}:{p}" for n, h, p in listeners)
    print(f"Added controller {cfg.node_id} with directory id {meta.directory_id} and endpoints: {endpoints}")
    return 0


def _remove_controller(args) -> int:
    from kraft.client.voter_changes import remove_voter
    from kraft.errors import KraftError
    from kraft.log.state_files import uuid_text_to_bytes

    try:
        directory = uuid_text_to_bytes(args.controller_directory_id)
    except Exception as exc:
        raise KraftError(f"--controller-directory-id: not a Kafka uuid: {args.controller_directory_id!r}") from exc
    client = QuorumClient([parse_address(s) for s in args.bootstrap_controller.split(",")])

    async def go():
        try:
            await remove_voter(client, args.controller_id, directory or bytes(16), deadline_s=args.timeout)
        finally:
            await client.close()
    asyncio.run(go())
    print(f"Removed KRaft controller {args.controller_id} with directory id {args.controller_directory_id}")
    return 0


_TARGET = re.compile(r"(\d+)(?:@(\[[^\]]+\]|[^:@\s]+):(\d+)(?::([A-Za-z0-9_-]{22}))?)?")


def parse_target_voters(text: str, listener_name: str = "CONTROLLER"):
    """``4,5,6`` or ``4@host:port:DIRID,...`` (``storage format --initial-controllers``'
    syntax; host:port and the directory id optional), entries separated by commas or
    newlines; as (id, directory id bytes or None, [(listener, host, port)])."""
    from kraft.errors import KraftError
    from kraft.log.state_files import uuid_text_to_bytes

    out = []
    for item in filter(None, (x.strip() for x in re.split(r"[,\n]", text or "") if not x.strip().startswith("#"))):
        m = _TARGET.fullmatch(item)
        if m is None:
            raise KraftError(f"--target-voters: expected ID or ID@HOST:PORT[:DIRECTORY_ID], got {item!r}")
        listeners = [] if m.group(2) is None else [(listener_name, m.group(2).strip("[]"), int(m.group(3)))]
        if listeners and not 0 < listeners[0][2] <= 65535:
            raise KraftError(f"--target-voters: bad port in {item!r}")
        out.append((int(m.group(1)), uuid_text_to_bytes(m.group(4)) if m.group(4) else None, listeners))
    if not out:
        raise KraftError("--target-voters: no voters given")
    if len({t[0] for t in out}) != len(out):
        raise KraftError("--target-voters: a node id appears twice")
    return out


def absent_targets(d, targets) -> list[int]:
    """Target ids that are neither voters nor observers of the quorum now: nothing with that id
    fetches from the leader, so the reassignment would wait for it without saying so."""
    present = {v.replica_id for v in d.voters} | {o.replica_id for o in d.observers}
    return [t[0] for t in targets if t[0] not in present]


def absent_targets_note(ids: list[int]) -> str:
    names = ", ".join(map(str, ids))
    return (f"note: no node with id {names} fetches from the leader yet; the reassignment waits until it "
            f"joins as an observer (format it with --no-initial-controllers and start it), or use --cancel")


def reassign_progress_line(d, elapsed_s: float) -> str:
    """One status line while ``reassign --wait`` waits: the voters now and the target."""
    voters = sorted(v.replica_id for v in d.voters)
    target = sorted(t.voter_id for t in d.target_voters or ())
    return f"voters {voters} -> target {target}, leader {d.leader_id} in epoch {d.leader_epoch}, {elapsed_s:.0f} s"


def _terminal_progress():
    """On a terminal, rewrite one stderr line per poll; elsewhere (logs, pipes) print nothing."""
    if not sys.stderr.isatty():
        return None
    started = time.monotonic()

    def show(d):
        sys.stderr.write("\r\033[K  " + reassign_progress_line(d, time.monotonic() - started))
        sys.stderr.flush()
    return show


def _reassign(args) -> int:
    import os

    from kraft.client.voter_changes import reassign_voters, wait_for_reassignment
    from kraft.errors import KraftError

    targets = []
    if not args.cancel:
        if args.target_voters is None:
            raise KraftError("reassign: give --target-voters or --cancel")
        text = args.target_voters
        if os.path.isfile(text):
            with open(text, encoding="utf-8") as f:
                text = f.read()
        targets = parse_target_voters(text, args.listener_name)
    client = QuorumClient([parse_address(s) for s in args.bootstrap_controller.split(",")])

    async def go():
        try:
            if targets:
                absent = absent_targets(await client.describe(args.timeout), targets)
                if absent:
                    print(absent_targets_note(absent), file=sys.stderr)
            await reassign_voters(client, targets, cancel=args.cancel, deadline_s=args.timeout)
            if args.wait:
                progress = _terminal_progress()
                try:
                    return await wait_for_reassignment(client, deadline_s=args.wait_timeout, progress=progress)
                finally:
                    if progress is not None:
                        sys.stderr.write("\r\033[K")
        finally:
            await client.close()
    d = asyncio.run(go())
    if args.cancel:
        print("Cancelled the voter reassignment (the step under way completes)")
    else:
        print(f"Reassigning the voters to {[t[0] for t in targets]} one voter at a time")
    if d is not None:
        print(f"Done: voters {sorted(v.replica_id for v in d.voters)}, leader {d.leader_id} in epoch {d.leader_epoch}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("metadata-quorum", help="describe the metadata quorum (DescribeQuorum)")
    p.add_argument("--bootstrap-controller", "--bootstrap-server", dest="bootstrap_controller", required=True,
                   metavar="HOST:PORT[,HOST:PORT]", help="controller addresses to ask")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to look for the leader (connection refused everywhere fails at once)")
    ss = p.add_subparsers(dest="mq_command", metavar="ACTION", required=True)
    d = ss.add_parser("describe", help="show the quorum")
    g = d.add_mutually_exclusive_group(required=True)
    g.add_argument("--status", action="store_true", help="leader, epoch, high watermark, lag, voters, observers")
    g.add_argument("--replication", action="store_true", help="one row per voter and observer")
    d.add_argument("--human-readable", action="store_true",
                   help="with --replication: timestamps as 'N ms ago'")
    d.add_argument("--json", action="store_true", help="print JSON instead of Kafka's text layout")
    d.set_defaults(func=_run)
    a = ss.add_parser("add-controller", help="add a caught-up observer controller as a voter (AddRaftVoter)")
    a.add_argument("--command-config", "-C", required=True, metavar="FILE",
                   help="the new controller's server.properties (node.id, listeners, metadata log dir)")
    a.set_defaults(func=_add_controller)
    r = ss.add_parser("remove-controller", help="remove a voter (RemoveRaftVoter)")
    r.add_argument("--controller-id", type=int, required=True, metavar="N", help="the voter's node id")
    r.add_argument("--controller-directory-id", required=True, metavar="DIRECTORY_ID",
                   help="the voter's metadata directory id (describe --status shows it)")
    r.set_defaults(func=_remove_controller)
    g = ss.add_parser("reassign", help="move the voters to a target set one voter at a time (kraft's own, "
                      "ReassignRaftVoters)")
    g.add_argument("--target-voters", metavar="IDS|FILE",
                   help="4,5,6 or 4@host:port:DIRECTORY_ID,...; or a file of such entries, one a line")
    g.add_argument("--cancel", action="store_true", help="stop after the step under way")
    g.add_argument("--listener-name", default="CONTROLLER",
                   help="listener name for entries given as ID@HOST:PORT (default CONTROLLER)")
    g.add_argument("--wait", action="store_true", help="return once the reassignment is done")
    g.add_argument("--wait-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="with --wait: give up after this many seconds")
    g.set_defaults(func=_reassign)
