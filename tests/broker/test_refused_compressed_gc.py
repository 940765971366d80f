"""A compressed batch refused by the topic's rules (a record without a key on a compacted topic)
leaves nothing the cyclic GC cannot clear: the refusal kept its traceback, whose frames held
memoryviews of the request and native readers exporting them in a cycle; the next collection
failed to clear a memoryview with exports ("Exception ignored in tp_clear") and segfaulted the
process. Run in a child process, so that a crash fails this test rather than the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_refused_compressed_batches_leave_no_uncollectable_cycle(tmp_path):
    code = textwrap.dedent(f"""
        import gc, pathlib, sys
        sys.path[:0] = [{HERE!r}, {os.path.dirname(HERE)!r}, {ROOT!r}]
        from test_topic_configs_applied import Node, TOPIC
        from kraft.records import build_batch
        from kraft.records.format import Compression
        node = Node(pathlib.Path({str(tmp_path)!r}))
        node.set(TOPIC, "t", cleanup_policy="compact")
        for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD):
            for _ in range(3):
                answer = node.produce(build_batch([b"a", b"b"], keys=[b"k", None], compression=codec))
                assert answer.error_code == 87, answer  # INVALID_RECORD
                gc.collect()
        node.close()
        print("collected")
    """)
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path))
    assert done.returncode == 0 and "collected" in done.stdout, done.stderr[-2000:]
    assert "Exception ignored" not in done.stderr, done.stderr[-2000:]
