"""A crash at every step of the swap of a cleaned segment (Kafka's LogLoader handling of
``.cleaned``, ``.swap`` and ``.deleted`` files): reopening gives the same latest record per key,
every record at its original offset, and no leftover files. And a real process SIGKILLed while
it cleans, many times over."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from _compaction_helpers import append_keyed, clean_all, latest_per_key, open_compact_log, read_all

from kraft.log import segment_swap


class Crash(Exception):
    pass


def _data():
    return [(f"key-{k}".encode(), f"v{r}-{k}".encode()) for r in range(8) for k in range(25)]


def _crash_after_cleaned(*a, **k):
    raise Crash


def _crash_after_swap(*a, **k):
    raise Crash


def _crash_between_renames(old_segments, swap_path, final_path):
    os.replace(old_segments[0].path, old_segments[0].path + segment_swap.DELETED_SUFFIX)
    raise Crash


def _crash_after_rename(old_segments, swap_path, final_path, real=segment_swap.rename_into_place):
    real(old_segments, swap_path, final_path)
    raise Crash


STEPS = {
    "cleaned-written": ("kraft.log.cleaner.install_cleaned", _crash_after_cleaned),
    "renamed-to-swap": ("kraft.log.segment_swap._open_swapped", _crash_after_swap),
    "old-half-deleted": ("kraft.log.segment_swap.rename_into_place", _crash_between_renames),
    "swap-in-place-old-not-unlinked": ("kraft.log.segment_swap.rename_into_place", _crash_after_rename),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_crash_at_each_step_of_the_swap_loses_nothing(tmp_path, monkeypatch, step):
    path = tmp_path / "log"
    log = open_compact_log(path)
    append_keyed(log, _data())
    original = read_all(log)
    clean_all(log)  # one full clean first: the crash then hits a log that is partly clean already
    append_keyed(log, _data())
    original += [r for r in read_all(log) if r[0] >= 200]
    target, fake = STEPS[step]
    monkeypatch.setattr(target, fake)
    with pytest.raises(Crash):
        clean_all(log)
    monkeypatch.undo()
    log.close()  # what was flushed stays; the swap is left where the crash left it
    names = os.listdir(path)
    assert any(n.endswith((".cleaned", ".swap", ".deleted")) for n in names), names
    again = open_compact_log(path)
    rows = read_all(again)
    assert latest_per_key(rows) == latest_per_key(original)
    by_offset = {o: (k, v) for o, k, v in original}
    assert all(by_offset[o] == (k, v) for o, k, v in rows)  # nothing invented, nothing moved
    assert [o for o, _, _ in rows] == sorted(o for o, _, _ in rows)
    assert not [n for n in os.listdir(path) if n.endswith((".cleaned", ".swap", ".deleted"))]
    clean_all(again)  # and it cleans on from there
    assert latest_per_key(read_all(again)) == latest_per_key(original)
    again.close()


_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[2])
from _compaction_helpers import append_keyed, clean_all, open_compact_log
log = open_compact_log(sys.argv[1])
print("ready", flush=True)
for r in range(1000):
    clean_all(log, map_bytes=24 * 40, now_ms=10_000 + r)
"""


def test_sigkill_while_cleaning_loses_nothing(tmp_path):
    path = tmp_path / "log"
    log = open_compact_log(path)
    data = [(f"key-{k}".encode(), f"v{r}-{k}".encode() * 4) for r in range(10) for k in range(60)]
    append_keyed(log, data)
    original = read_all(log)
    log.close()
    here = os.path.dirname(__file__)
    rng = random.Random(33)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    for _ in range(8):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), here], stdout=subprocess.PIPE, env=env)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        child.wait()
        again = open_compact_log(path)
        rows = read_all(again)
        again.close()
        assert latest_per_key(rows) == latest_per_key(original)
        by_offset = {o: (k, v) for o, k, v in original}
        assert all(by_offset[o] == (k, v) for o, k, v in rows)
