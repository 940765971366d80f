"""SASL PLAIN on a real ``kraft server start`` process with real clients: confluent-kafka
(librdkafka) producing and consuming over SASL_PLAINTEXT and SASL_SSL, kafka-python over
SASL_PLAINTEXT; a wrong password and an unknown user refused with Kafka's message as the client
reports it; the node keeps serving others meanwhile."""

from __future__ import annotations

import logging
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
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
BAD_CREDENTIALS = "Authentication failed: Invalid username or password"


REAUTH_MS = 2500  # the SASL_SSL listener's session lifetime (KIP-368)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("sasl"))
    ca = CertAuthority()
    ca_file = write(folder, "ca.pem", ca.cert_pem())
    keystore = write(folder, "server.p12", pkcs12_bytes(ca.issue("localhost", server=True), ca, "ks-pass"))
    cluster = LocalCluster(folder, 1, combined=True, overrides={"controller.quorum.append.linger.ms": "0"})
    sasl_port, sasl_ssl_port = free_ports(2)
    plain = cluster.broker_ports[1]
    cluster.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{cluster.ports[1]},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.connections.max.reauth.ms": str(REAUTH_MS),
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": keystore, "ssl.keystore.password": "ks-pass",
    })
    cluster.create()
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}", "logger": _SILENT})
        assert wait_for(lambda: _create(admin, "secured"), 60, 0.2), cluster.log_tail(1)
        yield cluster, sasl_port, sasl_ssl_port, ca_file
    finally:
        cluster.close()


def _create(admin, topic) -> bool:
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
        return True
    except KafkaException as exc:
        return exc.args[0].name() == "TOPIC_ALREADY_EXISTS"


def _sasl(port, user, password, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}


def _roundtrip(conf: dict, value: bytes) -> None:
    roundtrip(conf, "secured", value, timeout=60)


def _refusal(conf: dict) -> list:
    errors, reports = [], []
    p = Producer({**conf, "logger": _SILENT, "error_cb": errors.append, "message.timeout.ms": 3000})
    p.produce("secured", b"never", on_delivery=lambda err, msg: reports.append(err))
    p.flush(10)
    assert len(reports) == 1 and reports[0] is not None, reports  # refused, never written
    return errors


def test_confluent_kafka_over_sasl_plaintext_plain(secured):
    _, port, _, _ = secured
    _roundtrip(_sasl(port, "alice", "alice-secret"), b"sasl-plaintext")


def test_confluent_kafka_over_sasl_ssl_plain(secured):
    _, _, port, ca = secured
    _roundtrip(_sasl(port, "admin", "admin-secret", **{"security.protocol": "SASL_SSL", "ssl.ca.location": ca}),
               b"sasl-ssl")


def test_librdkafka_reauthenticates_before_its_session_ends_and_keeps_producing(secured):
    cluster, _, port, ca = secured
    p = ck.Producer({**_sasl(port, "admin", "admin-secret", **{"security.protocol": "SASL_SSL", "ssl.ca.location": ca}),
                     "logger": _SILENT, "linger.ms": 0})
    failed, delivered = [], []
    deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000  # three session lifetimes and a half
    while time.monotonic() < deadline:
        p.produce("secured", b"reauth", on_delivery=lambda err, msg: (failed if err else delivered).append(err))
        p.poll(0.2)
    assert p.flush(30) == 0 and not failed and len(delivered) > 10
    # Had the client not logged in again, its next request after a lifetime would have closed
    # the connection (and librdkafka would have reconnected without the test seeing it).
    with open(cluster.log_path(1)) as f:
        assert "SASL session expired" not in f.read()


def test_kcat_over_sasl_plaintext_and_sasl_ssl_plain(secured):
    _, port, ssl_port, ca = secured
    kcat_roundtrip(_sasl(port, "alice", "alice-secret"), "secured", b"kcat-sasl-plaintext")
    kcat_roundtrip(_sasl(ssl_port, "admin", "admin-secret", **{"security.protocol": "SASL_SSL", "ssl.ca.location": ca}),
                   "secured", b"kcat-sasl-ssl")


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "alice-secret")])
def test_wrong_password_and_unknown_user_are_refused_with_kafkas_error(secured, user, password):
    _, port, _, _ = secured
    errors = _refusal(_sasl(port, user, password))
    auth = [e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION]
    assert auth and BAD_CREDENTIALS in auth[0].str(), [e.str() for e in errors]


def test_kafka_python_over_sasl_plaintext_plain(secured, caplog):
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    _, port, _, _ = secured
    common = dict(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    producer = kafka.KafkaProducer(request_timeout_ms=20000, **common)
    producer.send("secured", b"kafka-python-sasl").get(timeout=30)
    producer.close()
    # Poll until the record arrives (iterating with consumer_timeout_ms waited out the whole
    # timeout after it had: 20 s of CI time for nothing).
    consumer = kafka.KafkaConsumer("secured", auto_offset_reset="earliest", **common)
    values, deadline = [], time.monotonic() + 30
    while b"kafka-python-sasl" not in values and time.monotonic() < deadline:
        values += [m.value for batch in consumer.poll(timeout_ms=500).values() for m in batch]
    consumer.close()
    assert b"kafka-python-sasl" in values
    # A wrong password: kafka-python logs the broker's error and retries until it gives up.
    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(kafka.errors.KafkaError):
        # api_version given: kafka-python's constructor otherwise probes the broker version,
        # retrying the failed login for 30 s before the send even starts.
        kafka.KafkaProducer(**{**common, "sasl_plain_password": "nope"}, api_version=(2, 5), request_timeout_ms=3000,
                            max_block_ms=3000, reconnect_backoff_max_ms=300).send("secured", b"x").get(timeout=10)
    assert any("SaslAuthenticationFailedError" in r.getMessage() and BAD_CREDENTIALS in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
