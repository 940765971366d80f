"""SASL SCRAM on real ``kraft server start`` processes with real clients: one controller+broker
node and one broker-only node, each with a SASL_PLAINTEXT listener offering SCRAM-SHA-512 and
SCRAM-SHA-256. A user bootstrapped by ``kraft storage format --add-scram`` produces and
consumes with confluent-kafka, kafka-python and aiokafka; a user added with ``kraft configs
--alter --entity-type users`` logs in on both brokers once applied, and after ``--delete-config``
on neither; after a whole-cluster restart the credentials are as they were (the metadata log)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, free_ports, wait_for
from secured_clients import SILENT, kcat_librdkafka, kcat_roundtrip, roundtrip

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

_SILENT = SILENT  # refused logins and throttling kept out of the output
TOPIC = "scram"
INVALID = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


def _kraft(cluster, *args) -> str:
    done = subprocess.run([sys.executable, "-m", "kraft", *args], capture_output=True, text=True, timeout=60,
                          env=cluster.environment())
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _cluster(folder) -> tuple[LocalCluster, dict]:
    cluster = LocalCluster(folder, 1, combined=True, brokers=1,
                           overrides={"controller.quorum.append.linger.ms": "0"})
    cluster.write_configs()
    sasl_ports = dict(zip(cluster.broker_ids, free_ports(len(cluster.broker_ids))))
    for i in cluster.ids:  # one more listener per broker: SASL_PLAINTEXT with SCRAM
        path = cluster.config_path(i)
        lines = open(path).read().splitlines()
        out = []
        for line in lines:
            if line.startswith("listeners="):
                line += f",SASL_PLAINTEXT://127.0.0.1:{sasl_ports[i]}"
            out.append(line)
        out += ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256"]
        with open(path, "w") as f:
            f.write("\n".join(out) + "\n")
        _kraft(cluster, "storage", "format", "-t", cluster.cluster_id, "-c", path, "-g",
               "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
               "--add-scram", 'SCRAM-SHA-256=[name=alice,iterations=8192,salt="c2FsdHlzYWx0",password=alice-secret]')
    return cluster, sasl_ports


def _scram(port, user, password, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
            "logger": _SILENT, **extra}


def _login(port, user, password) -> str | None:
    """None when a produce over SCRAM succeeds; else the authentication error librdkafka saw."""
    errors, reports = [], []
    p = Producer({**_scram(port, user, password), "error_cb": errors.append, "message.timeout.ms": 5000})
    p.produce(TOPIC, b"login-" + user.encode(), on_delivery=lambda err, msg: reports.append(err))
    auth: list = []
    deadline = time.monotonic() + 10
    while not reports and not auth and time.monotonic() < deadline:  # the first answer decides
        p.poll(0.05)
        auth = [e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION]
    p.purge()
    p.flush(0)
    if reports and reports[0] is None:
        return None
    return auth[0] if auth else f"not delivered: {reports} {[e.str() for e in errors]}"


def _refused(port, user, password) -> bool:
    """Refused with Kafka's SCRAM message, as librdkafka reports it."""
    error = _login(port, user, password)
    return error is not None and INVALID in error


def _roundtrip(port, value: bytes) -> None:
    roundtrip(_scram(port, "alice", "alice-secret"), TOPIC, value)


def _create(admin) -> bool:
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 2)])[TOPIC].result(10)
        return True
    except KafkaException as exc:
        return exc.args[0].name() == "TOPIC_ALREADY_EXISTS"


def _kafka_python(port) -> None:
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    common = dict(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    producer = kafka.KafkaProducer(request_timeout_ms=20000, **common)
    producer.send(TOPIC, b"kafka-python-scram").get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer(TOPIC, auto_offset_reset="earliest", consumer_timeout_ms=20000, **common)
    found = any(m.value == b"kafka-python-scram" for m in consumer)  # stops at the first match
    consumer.close()
    assert found


def _aiokafka(port) -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def main():
        common = dict(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice", sasl_plain_password="alice-secret")
        producer = aiokafka.AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, b"aiokafka-scram")
        finally:
            await producer.stop()
    asyncio.run(asyncio.wait_for(main(), 30))


def _kcat_scram(b1, b2) -> None:
    """kcat over SCRAM-SHA-512 and -256. librdkafka before 2.6.1 sends the client nonce twice in
    its final message (librdkafka#4895); Kafka 4 refuses that since CVE-2024-56128, as RFC 5802
    says, and so does kraft: such a kcat (Debian's has 2.0.2) must be refused, a newer one served."""
    if kcat_librdkafka() >= (2, 6, 1):
        kcat_roundtrip(_scram(b2, "alice", "alice-secret"), TOPIC, b"kcat-scram-512")
        kcat_roundtrip(_scram(b1, "alice", "alice-secret", **{"sasl.mechanism": "SCRAM-SHA-256"}), TOPIC,
                       b"kcat-scram-256")
        return
    conf = _scram(b2, "alice", "alice-secret")
    done = subprocess.run(["kcat", *(f"-X{k}={v}" for k, v in conf.items() if k != "logger"), "-L"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and INVALID in done.stderr, done.stderr[-500:]


def test_scram_users_bootstrapped_added_deleted_and_kept_across_a_restart(tmp_path):
    started = time.monotonic()
    cluster, sasl = _cluster(str(tmp_path))
    plain = f"127.0.0.1:{cluster.broker_ports[1]}"
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": plain, "logger": _SILENT})
        assert wait_for(lambda: _create(admin), 60, 0.2), cluster.log_tail(1)
        b1, b2 = sasl[1], sasl[2]
        # bootstrapped by --add-scram: confluent-kafka on one broker, kafka-python on the other
        _roundtrip(b1, b"confluent-scram")
        _kafka_python(b2)
        _aiokafka(b1)
        _kcat_scram(b1, b2)
        assert _refused(b2, "alice", "wrong")
        assert _refused(b1, "mallory", "alice-secret")
        # added through AlterUserScramCredentials (kraft configs, forwarded to the controller)
        out = _kraft(cluster, "configs", "--bootstrap-server", plain, "--alter", "--entity-type", "users",
                     "--entity-name", "bob", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
        assert "Completed updating config for user bob." in out
        for port in (b1, b2):
            assert wait_for(lambda: _login(port, "bob", "bob-secret") is None, 15, 0.2), port
        described = _kraft(cluster, "configs", "--bootstrap-server", plain, "--describe", "--entity-type", "users")
        assert described.splitlines() == [
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192"]
        _kraft(cluster, "configs", "--bootstrap-server", plain, "--alter", "--entity-type", "users",
               "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512")
        for port in (b1, b2):
            assert wait_for(lambda: _refused(port, "bob", "bob-secret"), 15, 0.2), port
        # the whole cluster restarts: the credentials come back from the metadata log
        cluster.stop()
        cluster.start()
        for port in (b1, b2):
            assert wait_for(lambda: _login(port, "alice", "alice-secret") is None, 30, 0.2), cluster.log_tail(2)
            assert _refused(port, "bob", "bob-secret")
        assert "SCRAM-SHA-512=iterations=4096" in _kraft(cluster, "configs", "--bootstrap-server", plain, "--describe",
                                                         "--entity-type", "users", "--entity-name", "alice")
    finally:
        cluster.close()
    print(f"scram integration: {time.monotonic() - started:.1f} s")
