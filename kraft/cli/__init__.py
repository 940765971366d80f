"""The ``kraft`` command line: one argparse tree, each subcommand in its own module.

A subcommand module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (a callable taking the parsed args and returning an exit code). Add new modules
to ``_SUBCOMMANDS``; a missing optional module must not break the others. This module
must not do any work at import time beyond building the parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import kraft

# Modules under kraft.cli that provide subcommands, in help order.
_SUBCOMMANDS = ("demo", "dump_log", "storage", "server", "metadata_quorum", "produce")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraft", description="kraft: Kafka's KRaft metadata quorum, rebuilt for Python.")
    parser.add_argument("--version", action="version", version=f"kraft {kraft.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _SUBCOMMANDS:
        try:
            module = importlib.import_module(f"kraft.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"kraft.cli.{name}":
                raise
            continue  # subcommand not written yet
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `kraft dump-log ... | head`
        sys.stderr.close()
        return 0
