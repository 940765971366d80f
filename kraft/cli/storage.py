"""``kraft storage``: ``random-uuid``, ``format`` and ``info``, as ``kafka-storage.sh`` has them.

``format`` validates the configuration exactly as ``server start`` does (so it never formats
a directory for a node that could not start), writes ``meta.properties`` everywhere and
``bootstrap.checkpoint`` (metadata.version) in the metadata log directory, and says which
metadata.version it wrote. The work is in ``kraft.log.formatting``; this module only parses
arguments and prints.
"""

from __future__ import annotations

import os
import sys

from kraft.cli.server import load_runnable_config, parse_overrides
from kraft.config import NodeConfig
from kraft.errors import KraftError
from kraft.log.bootstrap import (DEFAULT_RELEASE, METADATA_VERSION, metadata_version_name,
                                 read_bootstrap_checkpoint)
from kraft.cli.scram_args import add_scram_records
from kraft.controller.scram import SCRAM_METADATA_VERSION
from kraft.metadata.serde import encode_record
from kraft.log.formatting import finalized_features, format_storage, parse_features, random_uuid
from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties


def _random_uuid_cmd(args) -> int:
    print(random_uuid())
    return 0


def _warn_unknown(cfg) -> None:
    """The same words ``server start`` logs, so a misspelled key is seen before the first start."""
    for key in cfg.unknown:
        print(f"warning: unknown configuration {key} ignored", file=sys.stderr)


def _format_cmd(args) -> int:
    cfg = load_runnable_config(args.config, args.override)
    _warn_unknown(cfg)
    features = finalized_features(args.release_version, parse_features(args.feature))
    scram = add_scram_records(args.add_scram)
    if scram and features[METADATA_VERSION] < SCRAM_METADATA_VERSION:
        raise KraftError("--add-scram: SCRAM is only supported in metadata.version 3.5-IV2 or later")
    written = format_storage(cfg, args.cluster_id, ignore_formatted=args.ignore_formatted, features=features,
                             standalone=args.standalone, initial_controllers=args.initial_controllers,
                             no_initial_controllers=args.no_initial_controllers,
                             bootstrap_values=[encode_record(r, 0) for r in scram])
    mv = metadata_version_name(features[METADATA_VERSION])
    for d in written:
        kind = "metadata" if d == cfg.metadata_log_dir else "data"
        print(f"Formatting {kind} directory {d} with {METADATA_VERSION} {mv} for cluster {args.cluster_id}.")
    if not written:
        print("All of the log directories are already formatted.")
    return 0


def _info_cmd(args) -> int:
    """Kafka's ``kafka-storage.sh info``: what each directory holds, and any problems (exit 1)."""
    cfg = NodeConfig.from_file(args.config, parse_overrides(args.override))
    _warn_unknown(cfg)
    dirs = list(dict.fromkeys([cfg.metadata_log_dir, *cfg.log_dirs]))
    problems, found, metas = [], [], {}
    for d in dirs:
        if not os.path.isdir(d):
            problems.append(f"{d} does not exist")
            continue
        found.append(d)
        try:
            meta = MetaProperties.read(os.path.join(d, META_PROPERTIES_FILE))
        except KraftError as exc:
            problems.append(str(exc))
            continue
        if meta is None:
            problems.append(f"{d} is not formatted")
        else:
            metas[d] = meta
    print("Found log director" + ("y:" if len(found) == 1 else "ies:"))
    for d in found:
        print(f"  {d}")
    print()
    distinct = {(m.cluster_id, m.node_id, m.version) for m in metas.values()}
    # One line per directory with its directory.id (Kafka's key order), which a voter's replica
    # key and add-controller need; the directories' other fields must agree.
    shown = sorted({(m.cluster_id, m.directory_id, m.node_id, m.version) for m in metas.values()}, key=str)
    for cluster_id, directory_id, node_id, version in shown:
        dir_part = f"directory.id={directory_id}, " if directory_id else ""
        print(f"Found metadata: {{cluster.id={cluster_id}, {dir_part}node.id={node_id}, version={version}}}")
    if len(distinct) > 1:
        problems.append("the log directories disagree about cluster.id or node.id")
    for meta in metas.values():
        if meta.node_id != cfg.node_id:
            problems.append(f"meta.properties says node.id {meta.node_id} but the configuration says {cfg.node_id}")
            break
    if cfg.metadata_log_dir in metas:
        try:
            features = read_bootstrap_checkpoint(cfg.metadata_log_dir)
        except KraftError as exc:
            problems.append(str(exc))
            features = None
        if features:
            shown = ", ".join(f"{k}={v}" for k, v in features.items())
            print(f"Found bootstrap features: {shown} ({METADATA_VERSION} "
                  f"{metadata_version_name(features.get(METADATA_VERSION, -1))})")
    if problems:
        print()
        print("Found problem" + ("s:" if len(problems) > 1 else ":"))
        for p in problems:
            print(f"  {p}")
        return 1
    return 0


def register(sub) -> None:
    p = sub.add_parser("storage", help="format log directories, make cluster ids, inspect storage")
    ss = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    r = ss.add_parser("random-uuid", help="print a new cluster id")
    r.set_defaults(func=_random_uuid_cmd)
    f = ss.add_parser("format", help="write meta.properties and bootstrap.checkpoint into the node's log directories")
    f.add_argument("-t", "--cluster-id", required=True, help="the cluster id (from `kraft storage random-uuid`)")
    f.add_argument("-c", "--config", required=True, help="the node's server.properties")
    f.add_argument("-g", "--ignore-formatted", action="store_true",
                   help="skip directories already formatted for this cluster and node instead of failing")
    f.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="set a property, overriding the file (repeatable)")
    f.add_argument("-r", "--release-version", metavar="VERSION",
                   help=f"metadata.version to write, as a release (3.9), a level name (3.7-IV4) or a level "
                        f"number (default: {DEFAULT_RELEASE})")
    f.add_argument("-S", "--add-scram", action="append", metavar="MECH=[name=U,password=P]",
                   help="a SCRAM credential the cluster starts with, as Kafka's: "
                        "'SCRAM-SHA-512=[name=alice,password=alice-secret]' (also iterations=, salt=, "
                        "saltedpassword=; repeatable)")
    f.add_argument("-f", "--feature", action="append", metavar="NAME=LEVEL",
                   help="a feature level to write into bootstrap.checkpoint (repeatable)")
    q = f.add_mutually_exclusive_group()
    q.add_argument("-s", "--standalone", action="store_true",
                   help="dynamic quorum (controller.quorum.bootstrap.servers): this controller is the only "
                        "initial voter")
    q.add_argument("-I", "--initial-controllers", metavar="ID@HOST:PORT:DIRID,...",
                   help="dynamic quorum: the initial voters with their metadata directory ids "
                        "(this node's directory gets its own DIRID)")
    q.add_argument("-N", "--no-initial-controllers", action="store_true",
                   help="dynamic quorum: join an existing quorum as an observer (add it with "
                        "`kraft metadata-quorum add-controller`)")
    f.set_defaults(func=_format_cmd)
    i = ss.add_parser("info", help="show what the node's log directories hold; exit 1 if there is a problem")
    i.add_argument("-c", "--config", required=True, help="the node's server.properties")
    i.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="set a property, overriding the file (repeatable)")
    i.set_defaults(func=_info_cmd)
