"""How ``kraft server start`` writes its log: the level (``--log-level``, one of Python's
names, anything else is an error) and the format (``text`` for people, ``json`` for log
shippers: one object per line with ``ts``, ``level``, ``logger``, ``msg``, ``node`` and
``exc`` when there is a traceback). Only configures the root logger; emits nothing itself.
"""

from __future__ import annotations

import json
import logging
import sys
import time

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")


def log_level(text: str) -> str:
    """argparse ``type``: a level name in any case; an unknown name is an argparse error."""
    level = text.strip().upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LEVELS:
        import argparse

        raise argparse.ArgumentTypeError(f"unknown log level {text!r} (choose from {', '.join(LEVELS)})")
    return level


class JsonLineFormatter(logging.Formatter):
    def __init__(self, node_id: int | None):
        super().__init__()
        self.node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        out = {"ts": ts, "level": record.levelname, "logger": record.name, "msg": record.getMessage()}
        if self.node_id is not None:
            out["node"] = self.node_id
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(node_id: int | None, level: str = "INFO", fmt: str = "text", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLineFormatter(node_id))
    else:
        node = f" [node {node_id}]" if node_id is not None else ""
        handler.setFormatter(logging.Formatter(f"[%(asctime)s] %(levelname)s{node} %(name)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
