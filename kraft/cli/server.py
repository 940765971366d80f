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

from kraft.cli import describe_failure
from kraft.cli.log_output import FORMATS, configure_logging, log_level
from kraft.config import NodeConfig
from kraft.errors import ConfigError, FatalLogError, KraftError
from kraft.server import eventloop
from kraft.server.allocator import keep_freed_pages


def parse_overrides(items) -> dict[str, str]:
    """``--override KEY=VALUE`` items (Kafka's kafka-server-start.sh syntax)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def load_runnable_config(path: str, override_items) -> NodeConfig:
    """The configuration ``start`` and ``format`` both accept: valid and runnable by this build."""
    from kraft.server.node import check_supported

    cfg = NodeConfig.from_file(path, parse_overrides(override_items))
    check_supported(cfg)
    return cfg


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
    return 2 if node.fatal is not None else 0


def _start(args) -> int:
    cfg = load_runnable_config(args.config, args.override)  # errors: one line from kraft.cli.main
    configure_logging(cfg.node_id, args.log_level, args.log_format)
    for key in cfg.unknown:
        logging.getLogger("kraft.config").warning("unknown configuration %s ignored", key)
    profiler = None
    profile_path = args.profile or os.environ.get("KRAFT_PROFILE", "").replace("{node}", str(cfg.node_id))
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    keep_freed_pages()  # large fetch and produce buffers are not faulted in page by page again
    try:
        return eventloop.run(_serve(cfg))
    except (KraftError, OSError) as exc:  # at startup: storage, ports, permissions
        from kraft.server.node import fatal_advice

        message = describe_failure(exc)
        if isinstance(exc, FatalLogError):
            message += f". To recover: {fatal_advice(exc, cfg.metadata_log_dir)}"
        logging.getLogger("kraft").error("%s", message, exc_info=exc if getattr(args, "verbose", False) else None)
        return 1
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile_path)


def register(sub) -> None:
    p = sub.add_parser("server", help="run a node")
    ss = p.add_subparsers(dest="server_command", metavar="ACTION", required=True)
    s = ss.add_parser("start", help="run a node in the foreground",
                      description="Run one node in the foreground until SIGTERM/SIGINT. Exit codes: 0 after a "
                                  "clean stop, 1 for configuration or storage errors at startup, 2 if the node "
                                  "stopped on a fatal storage error while running.")
    s.add_argument("config", help="the node's server.properties (Kafka's names and defaults)")
    s.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="set a property, overriding the file (repeatable)")
    s.add_argument("--log-level", type=log_level, default="INFO", help="DEBUG, INFO, WARNING, ERROR or CRITICAL")
    s.add_argument("--log-format", choices=FORMATS, default="text",
                   help="text for people; json: one object per line with ts, level, logger, msg")
    s.add_argument("--profile", metavar="FILE", help="write cProfile stats of the event loop thread at shutdown "
                   "(or set KRAFT_PROFILE=path-{node}.prof)")
    s.set_defaults(func=_start)
