"""``kraft storage``: ``random-uuid`` and ``format``, as ``kafka-storage.sh`` has them.

The work is in ``kraft.log.formatting``; this module only parses arguments and prints.
"""

from __future__ import annotations

import sys

from kraft.config import NodeConfig
from kraft.errors import KraftError
from kraft.log.formatting import format_storage, random_uuid


def _random_uuid_cmd(args) -> int:
    print(random_uuid())
    return 0


def _format_cmd(args) -> int:
    try:
        overrides = dict(kv.split("=", 1) for kv in args.override or [])
        cfg = NodeConfig.from_file(args.config, overrides)
        written = format_storage(cfg, args.cluster_id, ignore_formatted=args.ignore_formatted)
    except (KraftError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for d in written:
        print(f"Formatting {d} with metadata.version for cluster {args.cluster_id}.")
    if not written:
        print("All of the log directories are already formatted.")
    return 0


def register(sub) -> None:
    p = sub.add_parser("storage", help="format log directories, make cluster ids")
    ss = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    r = ss.add_parser("random-uuid", help="print a new cluster id")
    r.set_defaults(func=_random_uuid_cmd)
    f = ss.add_parser("format", help="write meta.properties into the node's log directories")
    f.add_argument("-t", "--cluster-id", required=True)
    f.add_argument("-c", "--config", required=True, help="server.properties")
    f.add_argument("-g", "--ignore-formatted", action="store_true")
    f.add_argument("--override", action="append", metavar="KEY=VALUE")
    f.set_defaults(func=_format_cmd)
