"""A whole cluster secured, node to node: three real ``kraft server start`` processes whose
controller listener is SSL with ``ssl.client.auth=required`` and whose broker listener is
SASL_SSL with SCRAM-SHA-512 (``sasl.mechanism.inter.broker.protocol``, the broker's user
bootstrapped by ``kraft storage format --add-scram``), with the StandardAuthorizer on. The Raft
quorum, broker registration and heartbeats go over mutual TLS as the certificate's subject;
replication, transaction markers and the coordinators' requests over TLS as the SCRAM user
``broker``. Those two and the test's client are the only super users: a node that spoke
plaintext, skipped its login or presented no certificate would be refused, and nothing would
replicate. A plaintext client on any port gets no answer; a node killed and restarted rejoins
(logging in again) and catches up."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

from .restart_helpers import partition_dirs, segment_records
from secured_clients import SILENT, roundtrip
from tls_certs import CertAuthority, pkcs12_bytes, write

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

NODE_PRINCIPAL = "User:CN=localhost,O=kraft,C=US"
CLIENT_PRINCIPAL = "User:alice"
TOPIC = "tls-everywhere"


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("secured-nodes"))
    ca = CertAuthority()
    node = ca.issue("localhost", server=True)
    ca_file = write(folder, "ca.pem", ca.cert_pem())
    keystore = write(folder, "node.p12", pkcs12_bytes(node, ca, "ks-pass"))
    cluster = LocalCluster(folder, 3, combined=True, overrides={
        # LocalCluster's listener names stay; the map secures them.
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": keystore, "ssl.keystore.password": "ks-pass",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": ca_file,
        "listener.name.controller.ssl.client.auth": "required",
        "listener.name.plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"{NODE_PRINCIPAL};User:broker;{CLIENT_PRINCIPAL}",
        "controller.quorum.append.linger.ms": "0", "replica.lag.time.max.ms": "3000",
        # KIP-368 on the SASL listener: nodes and clients must log in again every few seconds
        "listener.name.plaintext.connections.max.reauth.ms": "4000"})
    cluster.write_configs()
    for i in cluster.ids:
        done = subprocess.run([sys.executable, "-m", "kraft", "storage", "format", "-t", cluster.cluster_id,
                               "-c", cluster.config_path(i), "-g",
                               "--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
                               "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"],
                              capture_output=True, text=True, timeout=60, env=cluster.environment())
        assert done.returncode == 0, done.stderr
    cluster.start()
    client = {"bootstrap.servers": cluster.broker_bootstrap, "security.protocol": "SASL_SSL",
              "ssl.ca.location": ca_file, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
              "sasl.password": "alice-secret", "logger": SILENT}
    cluster.ca, cluster.ca_file, cluster.node_cert = ca, ca_file, node  # for the keystore rotation
    try:
        admin = AdminClient(client)
        assert wait_for(lambda: _create(admin), 60, 0.5), {i: cluster.log_tail(i) for i in cluster.ids}
        yield cluster, client
    finally:
        cluster.close()


def _create(admin) -> bool:
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(10)
        return True
    except KafkaException as exc:
        return exc.args[0].name() == "TOPIC_ALREADY_EXISTS"


def _in_sync(client, partitions=3) -> bool:
    md = AdminClient(client).list_topics(TOPIC, timeout=10).topics[TOPIC]
    return len(md.partitions) == partitions and all(len(p.isrs) == 3 for p in md.partitions.values())


def _produce(client, values) -> None:
    p = Producer({**client, "acks": "all", "enable.idempotence": True, "compression.type": "lz4"})
    for v in values:
        p.produce(TOPIC, v, partition=int(v.split(b"-")[1]) % 3)
    assert p.flush(60) == 0


def _read_all(client, want: set) -> set:
    """What a consumer of the three partitions reads until it has seen ``want`` (or 30 s pass)."""
    c = Consumer({**client, "group.id": "reader", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
    got, errors = set(), []
    deadline = time.monotonic() + 30
    while not want <= got and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.add(m.value())
        elif m is not None:
            errors.append(str(m.error()))
    c.close()
    assert want <= got, (len(want - got), errors[:5])
    return got


def _on_every_replica(cluster, values: set, nodes=(1, 2, 3)) -> bool:
    """Every value is in the segment files of every node (each holds a replica of each partition)."""
    for node in nodes:
        dirs = partition_dirs(cluster, node)
        held = set()
        for p in range(3):
            held |= set(segment_records(dirs[(TOPIC, p)]).values()) if (TOPIC, p) in dirs else set()
        if not values <= held:
            return False
    return True


def test_replication_quorum_and_coordinators_run_over_tls_and_scram(secured_cluster):
    cluster, client = secured_cluster
    # Every partition's followers fetch over SASL_SSL as User:broker: the ISR fills up.
    assert wait_for(lambda: _in_sync(client), 30, 0.5), {i: cluster.log_tail(i) for i in cluster.ids}
    values = [b"v-%d" % i for i in range(300)]
    _produce(client, values)
    _read_all(client, set(values))
    # acks=all could also have been answered by an ISR shrunk to the leader: the followers'
    # copies on disk are what shows that they fetched, logged in as User:broker.
    assert wait_for(lambda: _on_every_replica(cluster, set(values)), 30, 0.5), \
        {i: cluster.log_tail(i, 8) for i in cluster.ids}
    roundtrip(client, TOPIC, b"through-a-group", timeout=60)  # group coordinator over TLS


def test_a_plaintext_client_gets_no_answer_on_any_port(secured_cluster):
    cluster, _ = secured_cluster
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"plain"
    for port in [*cluster.ports.values(), *cluster.broker_ports.values()]:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            try:
                answer = s.recv(4)
            except (ConnectionResetError, socket.timeout):
                answer = b""
            # A Kafka answer would start with the size of an ApiVersions response; TLS answers
            # a plaintext hello with an alert record (0x15) or closes.
            assert answer[:1] in (b"", b"\x15"), (port, answer)


def test_a_killed_node_rejoins_logging_in_again_and_catches_up(secured_cluster):
    cluster, client = secured_cluster
    victim = 3
    cluster.kill(victim)
    more = [b"w-%d" % i for i in range(90)]
    _produce(client, more)  # two in-sync replicas left: acks=all still succeeds
    cluster.start(victim)
    assert wait_for(lambda: _in_sync(client), 60, 0.5), cluster.log_tail(victim, 30)
    _read_all(client, set(more) | {b"v-0", b"v-299"})
    assert wait_for(lambda: _on_every_replica(cluster, set(more)), 30, 0.5), cluster.log_tail(victim, 30)


def _controller_serial(cluster, node: int) -> int | None:
    """The serial number of the certificate node ``node``'s controller listener presents (the
    listener wants a client certificate: the node's own)."""
    from cryptography import x509
    folder = os.path.dirname(cluster.ca_file)
    ctx = ssl.create_default_context(cafile=cluster.ca_file)
    ctx.load_cert_chain(write(folder, "client-cert.pem", cluster.node_cert.cert_pem()),
                        write(folder, "client-key.pem", cluster.node_cert.key_pem()))
    try:
        with socket.create_connection(cluster.address(node), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number
    except OSError:
        return None


def test_a_controller_listeners_keystore_is_rotated_at_run_time(secured_cluster):
    """Kafka's dynamic ``listener.name.controller.ssl.keystore.*`` on a controller: node 1's
    controller listener presents the new certificate from its next handshake, node 1 dials the
    other controllers with it too (they want it: ``ssl.client.auth=required``), and the quorum
    goes on (a topic created and written after the change)."""
    cluster, client = secured_cluster
    assert _controller_serial(cluster, 1) == cluster.node_cert.cert.serial_number
    rotated = cluster.ca.issue("localhost", server=True)  # same subject: Kafka requires it
    store = write(os.path.dirname(cluster.ca_file), "node-1-rotated.p12",
                  pkcs12_bytes(rotated, cluster.ca, "rotated-pass"))
    admin = AdminClient(client)
    set_ = AlterConfigOpType.SET
    resource = ConfigResource("BROKER", "1", incremental_configs=[
        ConfigEntry("listener.name.controller.ssl.keystore.location", store, incremental_operation=set_),
        ConfigEntry("listener.name.controller.ssl.keystore.password", "rotated-pass", incremental_operation=set_)])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    assert wait_for(lambda: _controller_serial(cluster, 1) == rotated.cert.serial_number, 20, 0.3), \
        cluster.log_tail(1)
    assert _controller_serial(cluster, 2) == cluster.node_cert.cert.serial_number  # only node 1's changed
    assert any("listener CONTROLLER reloaded its keystore" in line for line in cluster.log_tail(1, 400))
    name = "after-rotation"
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
    p = Producer({**client, "acks": "all"})
    p.produce(name, b"after-rotation-0")
    assert p.flush(30) == 0


def test_node_to_node_sasl_sessions_are_renewed_on_their_connections(secured_cluster):
    """With 4 s sessions on the SASL listener, the nodes' own connections (replication,
    coordinators' requests) log in again before each session ends instead of being closed by
    the listener: over 10 s of acks=all writes no node closes a connection for an expired
    session, and every write is on every replica."""
    cluster, client = secured_cluster
    values = []
    end = time.monotonic() + 10
    n = 0
    while time.monotonic() < end:
        batch = [b"reauth-%d" % i for i in range(n, n + 30)]
        _produce(client, batch)
        values += batch
        n += 30
        time.sleep(0.5)
    assert wait_for(lambda: _on_every_replica(cluster, set(values)), 30, 0.5)
    for i in cluster.ids:
        expired = [line for line in cluster.log_tail(i, 5000) if "SASL session expired" in line]
        assert not expired, (i, expired[:3])
