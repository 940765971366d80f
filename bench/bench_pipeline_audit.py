"""``kraft pipeline audit`` at scale: three nodes' metadata logs holding the history of
100,000 partitions (created, their ISRs shrunk and expanded around a fenced broker, leaders
moved, topics deleted), audited end to end by the command itself.

    python bench/bench_pipeline_audit.py [--topics 1000] [--partitions 100] [--master local[*]] [--dir DIR]

Reports the records written, the time to write them, and the wall time of
``python -m kraft pipeline audit`` (its own process: JVM start, reading, nine tables, the
consistency check and the report), with the command's progress lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kraft.testing.metadata_history import cluster_history, write_history


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir, removed after)")
    args = ap.parse_args()

    base = tempfile.mkdtemp(prefix="bench-audit-", dir=args.dir)
    try:
        t0 = time.perf_counter()
        history = cluster_history(brokers=3, topics=args.topics, partitions=args.partitions,
                                  delete_topics=args.topics // 10)
        for n in range(1, args.nodes + 1):
            write_history(os.path.join(base, f"node{n}"), history, segment_bytes=64 << 20)
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(base) for f in fs)
        records = sum(history.counts.values())
        print(f"wrote {args.nodes} nodes x {records:,} records ({args.topics * args.partitions:,} partitions, "
              f"{size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s: {dict(history.counts)}", flush=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kraft", "pipeline", "audit", "--master", args.master,
                               "--conf", "spark.ui.showConsoleProgress=false", "--conf", "spark.driver.memory=4g",
                               os.path.join(base, "node*"), "--out", os.path.join(base, "audit")],
                              env=env, capture_output=True, text=True, check=False)
        secs = time.perf_counter() - t0
        print(done.stdout, end="")
        if done.returncode != 0:
            print(done.stderr[-4000:], file=sys.stderr)
            return done.returncode
        report = os.path.join(base, "audit", "report.html")
        print(f"kraft pipeline audit ({args.master}): {secs:.1f} s wall for {args.nodes} x {records:,} records "
              f"({args.nodes * records / secs:,.0f} records/s); report {os.path.getsize(report) / 1e3:.0f} kB")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
