"""A flooding producer under ``producer_byte_rate`` on a live one-node cluster: how close to
its quota is it held?

Sets ``producer_byte_rate`` for client id ``flood`` with ``kraft configs --alter --entity-type
clients``, then a confluent-kafka producer with that client id sends 10 kB messages as fast as
its queue allows for ``--warmup + --seconds``. Reports the acknowledged rate over the measured
``--seconds`` (after the warm-up: the quota's token bucket starts with 11 s of quota, so a
first burst passes and the steady state starts after it), over the same span from the first
send, per-second extremes, and the anchor: the same producer with another client id,
unthrottled, in the same run.

    python bench/bench_quotas.py [--quota 1048576] [--seconds 30] [--warmup 12]

Not a test: nothing here asserts a rate. Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402

_SILENT = logging.getLogger("kraft-bench-quotas")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
TOPIC = "quota-bench"
VALUE = b"q" * 10_000


def produce(bootstrap: str, client_id: str, seconds: float) -> list[tuple[float, int]]:
    from confluent_kafka import Producer
    acked: list = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.messages": 2000, "logger": _SILENT})
    start = time.monotonic()

    def done(err, msg):
        if err is None:
            acked.append((time.monotonic() - start, len(msg.value())))
    while time.monotonic() - start < seconds:
        try:
            p.produce(TOPIC, VALUE, on_delivery=done)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.purge()
    p.flush(2)
    return acked


def between(acked, a: float, b: float) -> float:
    return sum(n for t, n in acked if a <= t < b) / (b - a)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quota", type=int, default=1048576, help="producer_byte_rate, bytes/s")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=12.0)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic
    with tempfile.TemporaryDirectory() as folder:
        cluster = LocalCluster(os.path.join(folder, "c"), 1, combined=True,
                               overrides={"controller.quorum.append.linger.ms": "0"}).create()
        cluster.start()
        bootstrap = cluster.broker_bootstrap
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _SILENT})
            wait_for(lambda: admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10) is None, 30, 0.2)
            subprocess.run([sys.executable, "-m", "kraft", "configs", "--bootstrap-server", bootstrap, "--alter",
                            "--entity-type", "clients", "--entity-name", "flood", "--add-config",
                            f"producer_byte_rate={args.quota}"], check=True, env=cluster.environment())
            time.sleep(1.0)  # the broker applies the committed record
            anchor = between(produce(bootstrap, "anchor", 5.0), 0, 5.0)
            total = args.warmup + args.seconds
            acked = produce(bootstrap, "flood", total)
        finally:
            cluster.close()
    steady = between(acked, args.warmup, total)
    from_start = between(acked, 0, args.seconds)
    per_second = [between(acked, s, s + 1) for s in range(int(args.warmup), int(total))]
    result = {
        "quota_bytes_per_s": args.quota, "seconds": args.seconds, "warmup_s": args.warmup,
        "steady_bytes_per_s": steady, "steady_vs_quota": steady / args.quota,
        "first_window_bytes_per_s": from_start, "first_window_vs_quota": from_start / args.quota,
        "per_second_min": min(per_second), "per_second_max": max(per_second),
        "per_second_from_start": [between(acked, s, s + 1) for s in range(int(total))],
        "unthrottled_anchor_bytes_per_s": anchor,
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus",
        "loadavg": os.getloadavg(),
        "command": "python bench/bench_quotas.py " + " ".join(sys.argv[1:]),
    }
    print(f"quota {args.quota / 1048576:.2f} MiB/s: flood held at {steady / 1048576:.3f} MiB/s "
          f"({100 * (steady / args.quota - 1):+.1f}%) over {args.seconds:.0f} s after {args.warmup:.0f} s warm-up; "
          f"{from_start / 1048576:.3f} MiB/s over the first {args.seconds:.0f} s; per second "
          f"{min(per_second) / 1048576:.2f}..{max(per_second) / 1048576:.2f} MiB/s; "
          f"unthrottled anchor {anchor / 1048576:.1f} MiB/s; load average {os.getloadavg()[0]:.1f}")
    os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"), exist_ok=True)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       f"bench_quotas-{datetime.date.today().isoformat()}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
