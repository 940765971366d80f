"""Fixtures for the log storage tests: batch builders and log factories.

The compiled hot loops must be the ones under test unless ``KRAFT_NO_EXTENSIONS`` is set
(a silent fallback to the pure twin would let CI pass without exercising them)."""

from __future__ import annotations

import pytest
from _log_helpers import NO_EXTENSIONS

from kraft.log import IMPLEMENTATION, LogConfig, SegmentedLog, hotloops


@pytest.fixture(scope="session", autouse=True)
def _native_log_loaded():
    if not NO_EXTENSIONS and IMPLEMENTATION != "native":
        pytest.fail(f"kraft._native._log did not load (build it): {hotloops.NATIVE_IMPORT_ERROR!r}")


@pytest.fixture
def open_log(tmp_path):
    """``open_log(**config)`` opens a log in a fresh directory (or ``directory=``) and
    closes every log it opened at teardown."""
    opened = []

    def factory(directory=None, *, recovery_point=None, log_start_offset=None, **config):
        config.setdefault("background_flush", True)
        log = SegmentedLog.open(str(directory or tmp_path / "log"), LogConfig(**config),
                                recovery_point=recovery_point, log_start_offset=log_start_offset)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        try:
            log.close()
        except Exception:
            pass
