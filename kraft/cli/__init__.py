"""The ``kraft`` command line: one argparse tree, each subcommand in its own module.

A subcommand module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (a callable taking the parsed args and returning an exit code). Add new modules
to ``_SUBCOMMANDS``; a missing optional module must not break the others. Every parser in
the tree shows each option's default in ``--help`` and accepts ``--verbose``. An expected
failure (bad configuration, storage, network, a file that is not there) is printed as one
``error:`` line on stderr with exit code 1; a traceback appears only with ``--verbose``.
This module must not do any work at import time beyond building the parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

import kraft
from kraft.errors import KraftError

# Modules under kraft.cli that provide subcommands, in help order.
_SUBCOMMANDS = ("demo", "dump_log", "storage", "server", "metadata_quorum", "produce", "metadata_shell", "pipeline",
               "features", "reassign_partitions", "leader_election",
               # Kafka's everyday tools (kafka-*.sh), issue 37
               "topics", "configs", "console_producer", "console_consumer", "get_offsets", "broker_tools",
               "perf_test", "consumer_groups", "delete_records", "transactions", "acls")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in help, but not the meaningless "(default: None)" / "(default: False)"."""

    def _get_help_string(self, action):
        if action.default in (None, False, argparse.SUPPRESS) or action.option_strings == ["-h", "--help"]:
            return action.help
        return super()._get_help_string(action)


class KraftArgumentParser(argparse.ArgumentParser):
    """Subparsers inherit the class (argparse uses ``type(parent)``), so every level gets
    the formatter and ``--verbose``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        # SUPPRESS: an inner parser's default must not undo an outer ``--verbose``.
        self.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="print a Python traceback with errors (and debug details)")


def build_parser() -> argparse.ArgumentParser:
    parser = KraftArgumentParser(prog="kraft", description="kraft: Kafka's KRaft metadata quorum, rebuilt for Python.")
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


def describe_failure(exc: BaseException) -> str:
    """One line for an expected failure: the message names the setting, path or address."""
    if isinstance(exc, OSError) and not isinstance(exc, KraftError):
        what = exc.strerror or str(exc)
        return f"{what}: {exc.filename}" if exc.filename else what
    # Kafka's multi-line messages start with a headline ending in ":" (or an empty line) and
    # put the reason on the next lines: keep them all, on one line.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines) if lines else type(exc).__name__


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
    except (KraftError, OSError, ValueError) as exc:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        print(f"error: {describe_failure(exc)}", file=sys.stderr)
        return 1
