"""TLS listeners of a real ``kraft server start`` process, with real clients: confluent-kafka
(librdkafka) producing and consuming over SSL and mTLS, kcat and aiokafka over mTLS,
kafka-python over SSL, kraft's own
tool through ``--command-config``; a client trusting another CA and an mTLS client without a
certificate are refused as the client reports it; a PLAINTEXT client on the TLS port and a
stalled handshake leave the node answering others."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, free_ports, wait_for

from secured_clients import SILENT, kcat_roundtrip, roundtrip
from tls_certs import CertAuthority, pkcs12_bytes, write

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

_SILENT = SILENT  # refused logins and throttling kept out of the output


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("tls"))
    ca = CertAuthority()
    server, alice = ca.issue("localhost", server=True), ca.issue("alice", org="kraft")
    files = {
        "ca": write(folder, "ca.pem", ca.cert_pem()),
        "other_ca": write(folder, "other-ca.pem", CertAuthority("other").cert_pem()),
        "cert": write(folder, "alice.pem", alice.cert_pem()),
        "key": write(folder, "alice.key", alice.key_pem()),
    }
    keystore = write(folder, "server.p12", pkcs12_bytes(server, ca, "ks-pass"))
    cluster = LocalCluster(folder, 1, combined=True, overrides={"controller.quorum.append.linger.ms": "0"})
    ssl_port, mtls_port = free_ports(2)
    plain = cluster.broker_ports[1]
    cluster.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{cluster.ports[1]},"
                     f"SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": keystore, "ssl.keystore.password": "ks-pass",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": files["ca"],
        "listener.name.mtls.ssl.client.auth": "required",
    })
    cluster.create()
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}", "logger": _SILENT})
        assert wait_for(lambda: _create(admin, "secured"), 60, 0.2), cluster.log_tail(1)
        yield cluster, ssl_port, mtls_port, files
    finally:
        cluster.close()


def _create(admin, topic) -> bool:
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
        return True
    except KafkaException as exc:
        return exc.args[0].name() == "TOPIC_ALREADY_EXISTS"


def _roundtrip(conf: dict, value: bytes) -> None:
    roundtrip(conf, "secured", value, timeout=60)


def _errors(conf: dict) -> list:
    """The errors a producer reports; its one message must not be delivered."""
    errors, reports = [], []
    p = Producer({**conf, "logger": _SILENT, "error_cb": errors.append, "message.timeout.ms": 3000})
    p.produce("secured", b"never", on_delivery=lambda err, msg: reports.append(err))
    p.flush(10)
    assert len(reports) == 1 and reports[0] is not None, reports  # refused, never written
    return [e.str() for e in errors]


def test_confluent_kafka_produces_and_consumes_over_ssl(secured):
    _, ssl_port, _, files = secured
    _roundtrip({"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                "ssl.ca.location": files["ca"]}, b"ssl")


def test_confluent_kafka_produces_and_consumes_over_mtls(secured):
    _, _, mtls_port, files = secured
    _roundtrip({"bootstrap.servers": f"127.0.0.1:{mtls_port}", "security.protocol": "SSL",
                "ssl.ca.location": files["ca"], "ssl.certificate.location": files["cert"],
                "ssl.key.location": files["key"]}, b"mtls")


def test_kcat_produces_and_consumes_over_mtls(secured):
    _, _, mtls_port, files = secured
    kcat_roundtrip({"bootstrap.servers": f"127.0.0.1:{mtls_port}", "security.protocol": "ssl",
                    "ssl.ca.location": files["ca"], "ssl.certificate.location": files["cert"],
                    "ssl.key.location": files["key"]}, "secured", b"kcat-mtls")


def test_a_client_trusting_another_ca_is_refused_with_a_certificate_verify_error(secured):
    _, ssl_port, _, files = secured
    errors = _errors({"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                      "ssl.ca.location": files["other_ca"]})
    assert any("certificate verify failed" in e for e in errors), errors


def test_an_mtls_client_without_a_certificate_is_refused(secured):
    _, _, mtls_port, files = secured
    errors = _errors({"bootstrap.servers": f"127.0.0.1:{mtls_port}", "security.protocol": "SSL",
                      "ssl.ca.location": files["ca"]})
    # librdkafka reports the broker's TLS alert in its log; its error callback says the broker is down.
    assert errors and all("SSL" in e or "brokers are down" in e for e in errors), errors


def test_kafka_python_over_ssl(secured):
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    _, ssl_port, _, files = secured
    producer = kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL",
                                   ssl_cafile=files["ca"], request_timeout_ms=20000)
    producer.send("secured", b"kafka-python").get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer("secured", bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL",
                                   ssl_cafile=files["ca"], auto_offset_reset="earliest")
    values, deadline = [], time.monotonic() + 30  # polled: iterating waits out a whole idle timeout
    while b"kafka-python" not in values and time.monotonic() < deadline:
        values += [m.value for batch in consumer.poll(timeout_ms=500).values() for m in batch]
    consumer.close()
    assert b"kafka-python" in values


def test_aiokafka_over_mtls(secured):
    aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra")
    from aiokafka.helpers import create_ssl_context
    _, _, mtls_port, files = secured

    async def main():
        ctx = create_ssl_context(cafile=files["ca"], certfile=files["cert"], keyfile=files["key"])
        common = dict(bootstrap_servers=f"127.0.0.1:{mtls_port}", security_protocol="SSL", ssl_context=ctx)
        producer = aiokafka.AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait("secured", b"aiokafka-mtls")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("secured", auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            seen = []
            while b"aiokafka-mtls" not in seen:
                batch = await consumer.getmany(timeout_ms=500)
                seen += [m.value for ms in batch.values() for m in ms]
        finally:
            await consumer.stop()
    asyncio.run(asyncio.wait_for(main(), 60))


def test_kraft_tool_reaches_the_ssl_listener_with_command_config(secured, tmp_path):
    _, ssl_port, _, files = secured
    conf = write(str(tmp_path), "client.properties", f"security.protocol=SSL\nssl.ca.location={files['ca']}\n")
    out = subprocess.run([sys.executable, "-m", "kraft", "topics", "--bootstrap-server", f"127.0.0.1:{ssl_port}",
                          "--command-config", conf, "--list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "secured" in out.stdout.split()


def test_plaintext_and_stalled_tls_clients_do_not_stop_the_node_answering(secured):
    _, ssl_port, _, files = secured
    plain = socket.create_connection(("127.0.0.1", ssl_port))
    plain.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")  # ApiVersions in clear
    plain.settimeout(10)
    assert plain.recv(100) == b""  # closed, not answered
    stalled = [socket.create_connection(("127.0.0.1", ssl_port)) for _ in range(20)]
    stalled[0].sendall(bytes.fromhex("160301020001"))  # half a ClientHello
    try:
        _roundtrip({"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                    "ssl.ca.location": files["ca"]}, b"meanwhile")
    finally:
        for s in stalled + [plain]:
            s.close()
