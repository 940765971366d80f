"""librdkafka's own test suite (its repository's ``tests/``) against a local kraft cluster: a
conformance run, as librdkafka's CI runs it against Kafka. Not part of CI (tens of minutes).

    python tools/librdkafka_suite.py --librdkafka DIR [--tests 0115,0081] [--parallel 2] [--full] [--sasl]

``DIR`` is a librdkafka checkout with ``./configure && make libs && (cd tests && make
test-runner)`` done (RapidJSON installed for the statistics tests). The cluster is 3 combined
nodes with the settings of librdkafka's "default" test scenario (``tests/scenarios/default.json``:
topic auto-creation, 4 partitions, replication factor 3) and StandardAuthorizer allowing
everyone without ACLs (0115 adds a DENY ACL). Tests that run ``kafka-*.sh`` find kraft's twins
through a ``KAFKA_PATH`` of wrapper scripts. ``--sasl`` adds a SASL_PLAINTEXT listener (PLAIN and
SCRAM-SHA-256/512 for alice, ``connections.max.reauth.ms`` 10 s) and points the tests at it, for
0135 and 0142. ``--ssl`` adds an SSL listener with ``ssl.client.auth=required`` and gives the
tests the client certificates (PEM, DER, PKCS12) and ``SSL_*`` variables trivup would, for 0097.
Quick mode (``-Q``) unless ``--full``; broker tests only (``-L``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kraft.cli.local_cluster import LocalCluster, free_ports, wait_for  # noqa: E402

SCENARIO = {"num.partitions": "4", "default.replication.factor": "3", "auto.create.topics.enable": "true",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            # as librdkafka's own test clusters: racks RACK<id> and KIP-392's selector (0101)
            "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
RACKS = {i: {"broker.rack": f"RACK{i}"} for i in (1, 2, 3)}
TOOLS = ("acls", "topics", "configs", "consumer-groups", "transactions", "get-offsets", "delete-records",
         "log-dirs", "features", "broker-api-versions", "console-producer", "console-consumer")


def kafka_path(folder: str) -> str:
    """A KAFKA_PATH whose bin/kafka-<tool>.sh run ``kraft <tool>`` (from a clean cwd)."""
    bin_dir = os.path.join(folder, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    for tool in TOOLS:
        path = os.path.join(bin_dir, f"kafka-{tool}.sh")
        with open(path, "w") as f:
            f.write(f'#!/bin/sh\ncd / && exec "{sys.executable}" -m kraft {tool} "$@"\n')
        os.chmod(path, 0o755)
    return folder


def add_listener(cluster: LocalCluster, name: str, settings: list) -> dict:
    """Add a listener ``name`` (also its security protocol) on a free port to every node's
    config, with ``settings``; node id -> its port."""
    ports = dict(zip(cluster.broker_ids, free_ports(len(cluster.broker_ids))))
    for i in cluster.ids:
        path = cluster.config_path(i)
        lines = [line + f",{name}://127.0.0.1:{ports[i]}" if line.startswith("listeners=") else line
                 for line in open(path).read().splitlines()]
        lines += [f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{name}:{name}", *settings]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
    return ports


def sasl_listeners(cluster: LocalCluster) -> str:
    """Add a SASL_PLAINTEXT listener to every node's config and format with alice's SCRAM
    credentials; the bootstrap list of those listeners."""
    ports = add_listener(cluster, "SASL_PLAINTEXT", [
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_alice="alice-secret";'])
    for i in cluster.ids:
        path = cluster.config_path(i)
        subprocess.run([sys.executable, "-m", "kraft", "storage", "format", "-t", cluster.cluster_id, "-c", path, "-g",
                        "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
                        "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"],
                       check=True, env=cluster.environment(), cwd="/", capture_output=True)
    return ",".join(f"127.0.0.1:{p}" for p in ports.values())


def ssl_listeners(cluster: LocalCluster, folder: str) -> tuple[str, dict, dict]:
    """Add an SSL listener (client certificates required) to every node's config, with a CA, a
    broker keystore and a client certificate made here; (bootstrap, test.conf settings, the
    ``SSL_*`` environment trivup gives librdkafka's tests)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from cryptography.hazmat.primitives import serialization
    from tls_certs import CertAuthority, pkcs12_bytes, write
    pem, der = serialization.Encoding.PEM, serialization.Encoding.DER
    password = "client-secret"
    ca = CertAuthority()
    broker, client = ca.issue("localhost", server=True), ca.issue("librdkafka-tests")
    files = {
        "ca.pem": ca.cert_pem(), "ca.der": ca.cert.public_bytes(der),
        "broker.p12": pkcs12_bytes(broker, ca, "broker-secret"),
        "client.pem": client.cert_pem(), "client.der": client.cert.public_bytes(der),
        "client.key": client.key_pem(password),
        "client.key.der": client.key.private_bytes(der, serialization.PrivateFormat.PKCS8,
                                                   serialization.BestAvailableEncryption(password.encode())),
        "client.p12": pkcs12_bytes(client, ca, password)}
    paths = {name: write(folder, name, data) for name, data in files.items()}
    ports = add_listener(cluster, "SSL", [
        "listener.name.ssl.ssl.client.auth=required", "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={paths['broker.p12']}", "ssl.keystore.password=broker-secret",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={paths['ca.pem']}"])
    conf = {"security.protocol": "ssl", "ssl.ca.location": paths["ca.pem"],
            "ssl.certificate.location": paths["client.pem"], "ssl.key.location": paths["client.key"],
            "ssl.key.password": password}
    env = {"SSL_pkcs": paths["client.p12"], "SSL_pub_der": paths["client.der"], "SSL_pub_pem": paths["client.pem"],
           "SSL_priv_der": paths["client.key.der"], "SSL_priv_pem": paths["client.key"],
           "SSL_ca_der": paths["ca.der"], "SSL_all_cas_pem": paths["ca.pem"], "SSL_ca_pem": paths["ca.pem"],
           "SSL_password": password, "SSL_client_auth": "required"}
    return ",".join(f"127.0.0.1:{p}" for p in ports.values()), conf, env


def all_registered(client: dict, brokers: int) -> bool:
    """Every broker is in the Metadata every broker answers with."""
    import logging

    from confluent_kafka.admin import AdminClient
    quiet = logging.getLogger("kraft-librdkafka-suite")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    for address in client["bootstrap.servers"].split(","):
        try:
            found = AdminClient({**client, "bootstrap.servers": address, "logger": quiet}).list_topics(timeout=5)
        except Exception:  # noqa: BLE001 (not answering yet)
            return False
        if len(found.brokers) < brokers:
            return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--librdkafka", required=True, help="a built librdkafka checkout")
    ap.add_argument("--tests", help="TESTS filter (comma-separated numbers); default: every broker test")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="not quick mode")
    ap.add_argument("--sasl", action="store_true", help="clients over SASL_PLAINTEXT (SCRAM-SHA-512, alice)")
    ap.add_argument("--ssl", action="store_true", help="clients over SSL with client certificates (for 0097)")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--log", help="write test-runner's whole output here")
    args = ap.parse_args()
    root = os.path.abspath(args.librdkafka)
    runner = os.path.join(root, "tests", "test-runner")
    if not os.path.exists(runner):
        raise SystemExit(f"{runner} not found: build it (./configure && make libs && cd tests && make test-runner)")
    with tempfile.TemporaryDirectory() as folder:
        overrides = dict(SCENARIO, **({"connections.max.reauth.ms": "10000"} if args.sasl else {}))
        cluster = LocalCluster(os.path.join(folder, "c"), 3, combined=True, overrides=overrides, node_overrides=RACKS)
        ssl_conf, ssl_env = {}, {}
        if args.sasl:
            cluster.write_configs()
            bootstrap = sasl_listeners(cluster)
        elif args.ssl:
            cluster.write_configs()
            bootstrap, ssl_conf, ssl_env = ssl_listeners(cluster, folder)
            cluster.format()
        else:
            cluster.create()
            bootstrap = cluster.broker_bootstrap
        cluster.start()
        try:
            client = {"bootstrap.servers": bootstrap}
            if args.sasl:
                client.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.username": "alice", "sasl.password": "alice-secret"})
            client.update(ssl_conf)
            # Every broker registered before the first test: librdkafka's tests read the broker
            # list once (0081 builds its replica sets from it) and expect a cluster at rest.
            if not wait_for(lambda: all_registered(client, len(cluster.broker_ids)), 60, 0.5):
                raise SystemExit(f"the cluster did not come up: {cluster.unexpected_exits()}")
            conf = os.path.join(folder, "test.conf")
            with open(conf, "w") as f:
                f.write(f"bootstrap.servers={bootstrap}\ntest.timeout.multiplier=2\n")
                if args.sasl:
                    f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                            "sasl.username=alice\nsasl.password=alice-secret\n")
                f.writelines(f"{k}={v}\n" for k, v in ssl_conf.items())
            env = dict(os.environ, RDKAFKA_TEST_CONF=conf, KAFKA_PATH=kafka_path(os.path.join(folder, "kafka")),
                       TEST_KAFKA_VERSION="4.0.0", BROKERS=bootstrap,
                       LD_LIBRARY_PATH=f"{root}/src:{root}/src-cpp", **ssl_env)
            if args.tests:
                env["TESTS"] = args.tests
            cmd = [runner, "-L", f"-p{args.parallel}"] + ([] if args.full else ["-Q"])
            done = subprocess.run(cmd, cwd=os.path.join(root, "tests"), env=env, timeout=args.timeout,
                                  capture_output=True, text=True, errors="replace")
        finally:
            cluster.close()
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    if args.log:
        with open(args.log, "w") as f:
            f.write(out)
    rows = [line for line in out.splitlines() if line.startswith("|") and ("PASSED" in line or "FAILED" in line)]
    for line in rows:
        print(line)
    if not rows:  # test-runner ended before its summary: show how
        print("\n".join(out.splitlines()[-15:]))
    failed = [r for r in rows if "FAILED" in r and "<MAIN>" not in r]
    print(f"{sum('PASSED' in r for r in rows)} passed, {len(failed)} failed (test-runner exit {done.returncode})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
