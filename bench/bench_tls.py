"""TLS and SASL costs on a live one-node cluster, in one run: produce throughput over SSL
against PLAINTEXT, and the connection set-up time of SASL_SSL with SCRAM-SHA-512.

The node has three client listeners: PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512, a user
bootstrapped with ``kraft storage format --add-scram``). Phase 1: for each of PLAINTEXT and SSL
(interleaved, ``--rounds`` times), a confluent-kafka producer sends ``--records`` records of 100 B
with ``compression.type=lz4``, acks=all, to a 1-partition topic; records/s and MB/s from the
first send to the last acknowledgement. The codec is then read back from the log on disk (the
batches' attributes), since librdkafka stops compressing silently when it thinks a broker too
old. Phase 2: ``--connections`` times, a new producer over SASL_SSL/SCRAM-SHA-512 asks for
metadata; its set-up time is from creation to the answer (TCP, TLS handshake, SaslHandshake,
the two SCRAM round trips, Metadata), with the same over PLAINTEXT as the anchor.

    PYTHONPATH=$PWD python bench/bench_tls.py [--records 200000] [--rounds 3] [--connections 50]

Not a test: nothing here asserts a figure. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from bench_peers import write_results  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, free_ports, wait_for  # noqa: E402
from kraft.records import iter_batches  # noqa: E402
from kraft.records.format import Compression  # noqa: E402
from tls_certs import CertAuthority, pkcs12_bytes, write  # noqa: E402  (test certificates, made here)

_SILENT = logging.getLogger("kraft-bench-tls")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
VALUE = b"x" * 100


def _cluster(folder: str):
    ca = CertAuthority()
    server = ca.issue("localhost", server=True)
    ca_file = write(folder, "ca.pem", ca.cert_pem())
    keystore = write(folder, "server.p12", pkcs12_bytes(server, ca, "ks-pass"))
    cluster = LocalCluster(os.path.join(folder, "c"), 1, combined=True,
                           overrides={"controller.quorum.append.linger.ms": "0"})
    ssl_port, sasl_port = free_ports(2)
    plain = cluster.broker_ports[1]
    cluster.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{cluster.ports[1]},"
                     f"SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": keystore, "ssl.keystore.password": "ks-pass",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    cluster.write_configs()
    done = subprocess.run([sys.executable, "-m", "kraft", "storage", "format", "-t", cluster.cluster_id,
                           "-c", cluster.config_path(1), "-g",
                           "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"],
                          capture_output=True, text=True, env=cluster.environment(), timeout=60)
    if done.returncode:
        raise SystemExit(done.stderr)
    cluster.start()
    confs = {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
        "SSL": {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL", "ssl.ca.location": ca_file},
        "SASL_SSL": {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_SSL",
                     "ssl.ca.location": ca_file, "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "alice", "sasl.password": "alice-secret"},
    }
    return cluster, confs


def _produce(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Producer
    p = Producer({**conf, "acks": "all", "compression.type": "lz4", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "logger": _SILENT})
    acked = [0]

    def done(err, msg):
        if err is None:
            acked[0] += 1
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=done)
                break
            except BufferError:
                p.poll(0.005)
        p.poll(0)
    p.flush(120)
    took = time.perf_counter() - start
    if acked[0] != records:
        raise SystemExit(f"{topic}: {acked[0]} of {records} acknowledged")
    return took


def _codecs_on_disk(cluster, topic: str) -> dict:
    counts: dict = {}
    for path in glob.glob(os.path.join(cluster.partition_dir(1), f"{topic}-0", "*.log")):
        with open(path, "rb") as f:
            for b in iter_batches(f.read()):
                name = Compression(b.compression).name
                counts[name] = counts.get(name, 0) + 1
    return counts


def _setup_ms(conf: dict, topic: str) -> float:
    from confluent_kafka import Producer
    start = time.perf_counter()
    p = Producer({**conf, "logger": _SILENT})
    p.list_topics(topic, timeout=10)
    took = (time.perf_counter() - start) * 1000
    p.flush(0)
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=50)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic
    with tempfile.TemporaryDirectory() as folder:
        cluster, confs = _cluster(folder)
        try:
            admin = AdminClient({**confs["PLAINTEXT"], "logger": _SILENT})
            topics = [f"tls-{kind.lower()}-{r}" for r in range(args.rounds) for kind in ("PLAINTEXT", "SSL")]
            topics.append("setup")
            assert wait_for(lambda: all(f.result(10) is None for f in admin.create_topics(
                [NewTopic(t, 1, 1) for t in topics]).values()), 60, 0.5)
            rates: dict = {"PLAINTEXT": [], "SSL": []}
            codecs: dict = {}
            for r in range(args.rounds):  # interleaved, so a slow moment hits both
                for kind in ("PLAINTEXT", "SSL"):
                    topic = f"tls-{kind.lower()}-{r}"
                    took = _produce(confs[kind], topic, args.records)
                    rates[kind].append(args.records / took)
                    codecs[topic] = _codecs_on_disk(cluster, topic)
            setup = {kind: [_setup_ms(confs[kind], "setup") for _ in range(args.connections)]
                     for kind in ("PLAINTEXT", "SASL_SSL")}
        finally:
            cluster.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    result = {
        "records": args.records, "record_bytes": len(VALUE), "rounds": args.rounds,
        "records_per_s": rates, "median_records_per_s": med,
        "median_MB_per_s": {k: v * len(VALUE) / 1e6 for k, v in med.items()},
        "ssl_over_plaintext": med["SSL"] / med["PLAINTEXT"],
        "codecs_on_disk": codecs,
        "setup_ms": {k: {"p50": statistics.median(v), "p99": sorted(v)[max(0, int(len(v) * 0.99) - 1)]}
                     for k, v in setup.items()},
        "load_average": os.getloadavg(),
    }
    print(f"produce, 100 B lz4 acks=all: PLAINTEXT {med['PLAINTEXT']:,.0f} rec/s, SSL {med['SSL']:,.0f} rec/s "
          f"-> SSL/PLAINTEXT {result['ssl_over_plaintext']:.2f}")
    for k, v in result["setup_ms"].items():
        print(f"connection set-up {k}: p50 {v['p50']:.1f} ms, p99 {v['p99']:.1f} ms")
    print("codecs on disk:", sorted({c for t in codecs.values() for c in t}))
    print("load average:", result["load_average"])
    print("wrote", write_results("bench_tls", result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
