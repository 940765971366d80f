"""Apply-latency profiler for the quorum controller (issue 11's design card).

Starts 3 real ``kraft server start`` nodes (metrics on), registers 5 simulated brokers, creates
``--topics`` x ``--partitions`` partitions (RF 3) through CreateTopics, waits until every
controller's image holds them all, then reads each node's per-record-type histograms from its
metrics endpoint and reports, per node and record type:

  append -> commit   the batch's append (the leader's batch timestamp) to this node seeing it
                     committed (high watermark past it);
  commit -> applied  this node seeing it committed to its image holding it.

Both are weighted by records (every record of a batch waited as long as its batch). The
controller records them with two clock reads per commit callback and one per-type count per
batch; nothing is logged per record. Percentiles are bucket upper bounds (conservative).

    PYTHONPATH=$PWD python tools/apply_latency.py                        # 100k partitions
    PYTHONPATH=$PWD python tools/apply_latency.py --topics 100 --png /tmp/apply.png
    PYTHONPATH=$PWD python tools/apply_latency.py --from-metrics n1.txt n2.txt n3.txt   # offline

Text histograms and percentiles on stdout, a PNG with ``--png`` (needs matplotlib), JSON with
``--json``. It measures; it changes nothing in the nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PHASES = {"kraft_controller_apply_append_to_commit_ms": "append->commit",
          "kraft_controller_apply_commit_to_applied_ms": "commit->applied"}
_BUCKET = re.compile(r'^(\w+)_bucket\{([^}]*)\} (\S+)$', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def parse(text: str) -> dict:
    """{(phase, record_type): [(upper bound ms, cumulative count), ...]} from one exposition."""
    out: dict = {}
    for name, labels, value in _BUCKET.findall(text):
        phase = PHASES.get(name)
        if phase is None:
            continue
        lab = dict(_LABEL.findall(labels))
        le = math.inf if lab["le"] == "+Inf" else float(lab["le"])
        out.setdefault((phase, lab.get("record_type", "?")), []).append((le, float(value)))
    for k in out:
        out[k].sort()
    return out


def counts(cumulative) -> list[tuple[float, int]]:
    """Per-bucket counts from cumulative ones."""
    out, prev = [], 0.0
    for le, c in cumulative:
        out.append((le, int(c - prev)))
        prev = c
    return out


def percentile(cumulative, q: float) -> float:
    """Upper bound (ms) of the bucket holding quantile ``q``; nan when empty."""
    total = cumulative[-1][1] if cumulative else 0
    if not total:
        return math.nan
    rank = max(1.0, math.ceil(q * total - 1e-9))
    for le, c in cumulative:
        if c >= rank:
            return le
    return math.inf


def text_histogram(cumulative, width: int = 40) -> list[str]:
    rows = [(le, n) for le, n in counts(cumulative)]
    peak = max((n for _, n in rows), default=0) or 1
    lines = []
    for le, n in rows:
        if n:
            label = "+Inf" if le == math.inf else f"<= {le:g} ms"
            lines.append(f"      {label:>14} {n:>9,} {'#' * max(1, round(width * n / peak))}")
    return lines


def report(per_node: dict) -> dict:
    """Prints the tables; returns {node: {phase: {type: {count, p50, p90, p99, max}}}}."""
    summary: dict = {}
    for node, hists in sorted(per_node.items()):
        print(f"\n== controller {node}")
        for phase in PHASES.values():
            print(f"  {phase}")
            print(f"    {'record type':<28} {'records':>9} {'p50':>8} {'p90':>8} {'p99':>8} {'max<=':>8}  (ms)")
            for (ph, rtype), cum in sorted(hists.items()):
                if ph != phase or not cum[-1][1]:
                    continue
                row = {"count": int(cum[-1][1]), "p50": percentile(cum, 0.5), "p90": percentile(cum, 0.9),
                       "p99": percentile(cum, 0.99), "max": percentile(cum, 1.0)}
                summary.setdefault(node, {}).setdefault(phase, {})[rtype] = row
                print(f"    {rtype:<28} {row['count']:>9,} {row['p50']:>8g} {row['p90']:>8g} {row['p99']:>8g} "
                      f"{row['max']:>8g}")
            for (ph, rtype), cum in sorted(hists.items()):
                if ph == phase and cum[-1][1] and rtype in ("PartitionRecord", "TopicRecord"):
                    print(f"    {rtype}:")
                    print("\n".join(text_histogram(cum)))
    return summary


def plot(per_node: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nodes = sorted(per_node)
    fig, axes = plt.subplots(len(PHASES), len(nodes), figsize=(5 * len(nodes), 7), squeeze=False)
    for col, node in enumerate(nodes):
        for row, phase in enumerate(PHASES.values()):
            ax = axes[row][col]
            for (ph, rtype), cum in sorted(per_node[node].items()):
                if ph != phase or cum[-1][1] < 1:
                    continue
                finite = [(le, n) for le, n in counts(cum) if le != math.inf]
                ax.step([le for le, _ in finite], [n for _, n in finite], where="pre", label=rtype)  # n counts (prev, le]
            ax.set_xscale("log")
            ax.set_yscale("symlog")
            ax.set_ylim(bottom=0)
            ax.set_title(f"controller {node}: {phase}")
            ax.set_xlabel("ms (bucket upper bound)")
            ax.set_ylabel("records")
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


async def run_load(args) -> dict:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_controller as bc
    from kraft.cli.local_cluster import LocalCluster
    from kraft.client.controller_client import ControllerClient
    with tempfile.TemporaryDirectory() as d:
        cluster = LocalCluster(d, 3, overrides=bc.SETTINGS, metrics=True).create()
        cluster.start()
        client = ControllerClient([cluster.address(i) for i in cluster.ids])
        brokers = []
        try:
            brokers = await bc.start_brokers(cluster, client)
            total = args.topics * args.partitions
            took = await bc.create_all(client, args.topics, args.partitions, args.per_request)
            await bc.until_all(cluster, lambda g: g.get("global_partition_count") == total)
            print(f"created {total:,} partitions in {took:.2f} s (all committed); scraping every controller")
            out = {}
            for i in cluster.ids:
                url = f"http://127.0.0.1:{cluster.metrics_ports[i]}/metrics"
                with urllib.request.urlopen(url, timeout=60) as r:
                    out[i] = r.read().decode()
            return out
        finally:
            for b in brokers:
                await b.stop()
            await client.close()
            cluster.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--per-request", type=int, default=50)
    ap.add_argument("--from-metrics", nargs="+", metavar="FILE", help="analyse saved /metrics texts instead")
    ap.add_argument("--png", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.from_metrics:
        texts = {Path(p).stem: Path(p).read_text() for p in args.from_metrics}
    else:
        t0 = time.perf_counter()
        texts = asyncio.run(run_load(args))
        print(f"(load and scrape took {time.perf_counter() - t0:.1f} s)")
    per_node = {node: parse(text) for node, text in texts.items()}
    summary = report(per_node)
    if args.png:
        try:
            plot(per_node, args.png)
        except ImportError:
            print("matplotlib is not installed: no plot (pip install matplotlib)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "summary": {str(k): v for k, v in summary.items()}}, f, indent=1,
                      default=str)
    return summary


if __name__ == "__main__":
    main()
