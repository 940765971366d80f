"""``kraft server start server.properties``: run one node in the foreground.

Logs go to stderr with the node id; SIGTERM or SIGINT shut down cleanly (a leader resigns
first, the log is flushed); a second signal exits at once. ``--override key=value`` works
like Kafka's. Exit codes: 0 after a clean stop, 1 for configuration or storage errors
(printed in one line), 2 if the node failed while running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from kraft.config import NodeConfig
from kraft.errors import KraftError
from kraft.server import eventloop


def _configure_logging(node_id: int, level: str) -> None:
    fmt = f"[%(asctime)s] %(levelname)s [node {node_id}] %(name)s: %(message)s"
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), format=fmt, stream=sys.stderr)


async def _serve(cfg: NodeConfig) -> int:
    from kraft.server.node import KraftNode

    node = KraftNode(cfg)
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal():
        nonlocal signals
        signals += 1
        if signals > 1:
            logging.getLogger("kraft").warning("second signal: exiting now")
            raise SystemExit(1)
        node.stopped.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        await node.start()
        await node.stopped.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await node.shutdown()
    return 0


def _start(args) -> int:
    try:
        overrides = dict(kv.split("=", 1) for kv in args.override or [])
        cfg = NodeConfig.from_file(args.config, overrides)
    except (KraftError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _configure_logging(cfg.node_id, args.log_level)
    for key in cfg.unknown:
        logging.getLogger("kraft.config").warning("unknown configuration %s ignored", key)
    profiler = None
    profile_path = args.profile or os.environ.get("KRAFT_PROFILE", "").replace("{node}", str(cfg.node_id))
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        return eventloop.run(_serve(cfg))
    except KraftError as exc:
        logging.getLogger("kraft").error("%s", exc)
        return 1
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile_path)


def register(sub) -> None:
    p = sub.add_parser("server", help="run a node")
    ss = p.add_subparsers(dest="server_command", metavar="ACTION", required=True)
    s = ss.add_parser("start", help="run a node in the foreground")
    s.add_argument("config", help="server.properties")
    s.add_argument("--override", action="append", metavar="KEY=VALUE")
    s.add_argument("--log-level", default="INFO")
    s.add_argument("--profile", metavar="FILE", help="write cProfile stats of the event loop thread at shutdown "
                   "(or set KRAFT_PROFILE=path-{node}.prof)")
    s.set_defaults(func=_start)
