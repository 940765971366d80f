"""Authorization on a real ``kraft server start`` process (one combined node, module-scoped) with
the StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``, SASL/PLAIN users alice and bob,
and ``User:ANONYMOUS`` as a super user (the PLAINTEXT listeners the node itself and the admin
use, as Kafka's operators configure it). ACLs are managed with ``kraft acls``; clients are
confluent-kafka, and a raw SASL connection sends every advertised API as an unauthorized user."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kraft.cli import main as kraft_main
from kraft.cli.local_cluster import LocalCluster, free_ports, wait_for
from kraft.protocol import (ApiVersionsRequest, DescribeAclsRequest, MetadataRequest, SaslAuthenticateRequest,
                            SaslHandshakeRequest, decode_response, encode_request)
from kraft.protocol.message import REQUESTS
from kraft.protocol.schema import Array, is_struct
from secured_clients import SILENT

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

_SILENT = SILENT  # refused logins and throttling kept out of the output
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
AUTHZ_ERRORS = {29, 30, 31, 53}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("authz"))
    c = LocalCluster(folder, 1, combined=True, overrides={"controller.quorum.append.linger.ms": "0"})
    (sasl_port,) = free_ports(1)
    plain = c.broker_ports[1]
    c.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{c.ports[1]},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "allow.everyone.if.no.acl.found": "false",
    })
    c.create()
    c.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}", "logger": _SILENT})
        for topic in ("t", "pre-1", "secret", "deny-read"):
            assert wait_for(lambda: _create(admin, topic), 60, 0.2), c.log_tail(1)
        yield c, admin, f"127.0.0.1:{plain}", sasl_port
    finally:
        c.close()


def _create(admin, topic) -> bool:
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
        return True
    except KafkaException as exc:
        return exc.args[0].name() == "TOPIC_ALREADY_EXISTS"


def _alice(port, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret", "logger": _SILENT, **extra}


def _produce(conf, topic, value=b"v"):
    reports = []
    p = Producer({**conf, "message.timeout.ms": 5000})
    p.produce(topic, value, on_delivery=lambda err, msg: reports.append(err))
    p.flush(15)
    return reports[0] if reports else "no report"


def _acls(bootstrap, *args) -> int:
    return kraft_main(["acls", "--bootstrap-server", bootstrap, *args])


def test_produce_needs_write_then_a_producer_acl_lets_alice_produce(cluster):
    _, _, bootstrap, port = cluster
    err = _produce(_alice(port), "t")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    assert _acls(bootstrap, "--add", "--allow-principal", "User:alice", "--producer", "--topic", "t") == 0
    assert wait_for(lambda: _produce(_alice(port), "t") is None, 30, 0.5)


def test_prefixed_acl_covers_topics_under_the_prefix(cluster):
    _, _, bootstrap, port = cluster
    assert _acls(bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "WRITE",
                 "--resource-pattern-type", "prefixed", "--topic", "pre-") == 0
    assert wait_for(lambda: _produce(_alice(port), "pre-1") is None, 30, 0.5)


def _consume_error(conf, topic, group):
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                return m.error().code()
            return "message"
    finally:
        c.close()
    return "nothing"


def test_a_deny_read_acl_stops_the_consumer(cluster):
    _, _, bootstrap, port = cluster
    assert _acls(bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--producer", "--topic", "deny-read") == 0
    assert _produce({"bootstrap.servers": bootstrap, "logger": _SILENT}, "deny-read") is None
    assert _acls(bootstrap, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "deny-read",
                 "--group", "g1") == 0
    assert wait_for(lambda: _consume_error(_alice(port), "deny-read", "g1") == "message", 40, 0.5)
    assert _acls(bootstrap, "--add", "--deny-principal", "User:alice", "--operation", "READ",
                 "--topic", "deny-read") == 0
    seen = []
    assert wait_for(lambda: seen.append(_consume_error(_alice(port), "deny-read", "g1")) or
                    seen[-1] == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, 30, 0.5), seen


def test_metadata_hides_topics_alice_may_not_describe(cluster):
    _, _, _, port = cluster
    admin = AdminClient(_alice(port))
    names = set(admin.list_topics(timeout=10).topics)
    assert "secret" not in names and "t" in names and "pre-1" in names, names


def test_create_topics_without_create_fails_and_creates_nothing(cluster):
    _, super_admin, _, port = cluster
    admin = AdminClient(_alice(port))
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("alice-new", 1, 1)])["alice-new"].result(10)
    assert info.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "alice-new" not in super_admin.list_topics(timeout=10).topics


def test_explain_names_the_deciding_acl(cluster, capsys):
    _, _, bootstrap, _ = cluster
    code = _acls(bootstrap, "--explain", "--principal", "User:alice", "--operation", "READ", "--topic", "deny-read")
    out = capsys.readouterr().out
    assert code == 2 and "DENIED" in out and "permissionType=DENY" in out, out
    assert _acls(bootstrap, "--explain", "--principal", "User:alice", "--operation", "WRITE", "--topic", "pre-9") == 0
    assert _acls(bootstrap, "--list", "--topic", "t") == 0
    assert "User:alice" in capsys.readouterr().out


def test_removing_an_acl_takes_effect(cluster, capsys):
    _, _, bootstrap, port = cluster
    assert _acls(bootstrap, "--remove", "--force", "--allow-principal", "User:alice", "--resource-pattern-type",
                 "prefixed", "--topic", "pre-") == 0
    assert "Removed ACLs for resource" in capsys.readouterr().out
    assert wait_for(lambda: getattr(_produce(_alice(port), "pre-1"), "code", lambda: None)()
                    == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, 30, 0.5)


# --- every advertised API, sent by bob (authenticated, no ACL) --------------------------------
class _Raw:
    def __init__(self, port, user, password):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.cid = 0
        self.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        auth = self.call(SaslAuthenticateRequest(auth_bytes=b"\0" + user.encode() + b"\0" + password.encode()), 2)
        assert auth.error_code == 0, auth

    def call(self, request, version):
        self.cid += 1
        self.sock.sendall(encode_request(request, version, self.cid, "authz-test"))
        size = struct.unpack(">i", self._read(4))[0]
        _, response = decode_response(self._read(size), request.API_KEY, version)
        return response

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf


def _sample(cls, version, topic_id):
    """A request naming one of everything: each array one entry, each string ``t``, each topic
    id that of ``t``."""
    values = {}
    for f in cls.FIELDS:
        if version not in f.versions:
            continue
        t = f.type
        if isinstance(t, Array):
            values[f.name] = [_sample(t.elem, version, topic_id)] if is_struct(t.elem) else (
                ["t"] if getattr(t.elem, "name", "") == "string" else [0])
        elif is_struct(t):
            values[f.name] = _sample(t, version, topic_id)
        elif getattr(t, "name", "") == "string":
            values[f.name] = "t"
        elif getattr(t, "name", "") == "uuid" and f.name == "topic_id":
            values[f.name] = topic_id
    if "acks" in values or any(f.name == "acks" for f in cls.FIELDS):
        values["acks"] = -1
    return cls(**values)


def _codes(obj, out):
    if isinstance(obj, list):
        for x in obj:
            _codes(x, out)
    elif hasattr(type(obj), "FIELDS"):
        for f in type(obj).FIELDS:
            v = getattr(obj, f.name, None)
            if f.name.endswith("error_code") and isinstance(v, int):
                out.add(v)
            elif isinstance(v, list) or hasattr(type(v), "FIELDS"):
                _codes(v, out)
    return out


def test_every_advertised_api_refuses_an_unauthorized_user_and_changes_nothing(cluster):
    _, super_admin, _, port = cluster
    admin = _Raw(port, "admin", "admin-secret")  # a super user
    topic_id = admin.call(MetadataRequest(topics=[MetadataRequest.Topic(name="t")]), 12).topics[0].topic_id
    before = (admin.call(MetadataRequest(topics=None), 12).topics,
              admin.call(DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, operation=1,
                                             permission_type=1), 3).resources)
    raw = _Raw(port, "bob", "bob-secret")
    advertised = raw.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3).api_keys
    open_apis = {17, 18, 36, 71, 72}  # ApiVersions, SASL, client telemetry: no authorization in Kafka
    listed = {16: "groups", 66: "transaction_states"}  # answers filtered to what bob may describe
    failures = []
    for api in advertised:
        key = api.api_key
        if key in open_apis or key not in REQUESTS:
            continue
        version = min(api.max_version, REQUESTS[key].MAX_VERSION)
        answer = raw.call(_sample(REQUESTS[key], version, topic_id), version)
        if key == 60:  # DescribeCluster is open in Kafka; the operations bits are 0 without DESCRIBE
            if answer.error_code != 0 or answer.cluster_authorized_operations not in (0, -(1 << 31)):
                failures.append((key, version, answer))
        elif key in listed:
            if getattr(answer, listed[key]):
                failures.append((key, "listed", answer))
        elif not (_codes(answer, set()) & AUTHZ_ERRORS):
            failures.append((key, version, answer))
    assert not failures, "\n".join(f"{k} v{v}: {a}" for k, v, a in failures)
    after = (admin.call(MetadataRequest(topics=None), 12).topics,
             admin.call(DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, operation=1,
                                            permission_type=1), 3).resources)
    names = lambda topics: sorted((t.name, len(t.partitions)) for t in topics)  # noqa: E731
    assert names(after[0]) == names(before[0]) and after[1] == before[1]  # nothing created, deleted, grown
    assert "t" in super_admin.list_topics(timeout=10).topics


def test_separate_controller_and_broker_work_with_anonymous_as_super_user(tmp_path):
    """The inter-node APIs (registration, heartbeats, the metadata log's Fetch) need
    CLUSTER_ACTION; over PLAINTEXT the nodes are User:ANONYMOUS, a super user here."""
    c = LocalCluster(str(tmp_path), 1, brokers=1, overrides={
        "controller.quorum.append.linger.ms": "0",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    c.create()
    c.start()
    try:
        bootstrap = f"127.0.0.1:{c.broker_ports[2]}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _SILENT})
        assert wait_for(lambda: _create(admin, "sep"), 60, 0.2), c.log_tail(2)
        assert _produce({"bootstrap.servers": bootstrap, "logger": _SILENT}, "sep") is None
    finally:
        c.close()


def test_a_regex_subscription_is_assigned_only_topics_the_member_may_describe(cluster, capsys):
    """KIP-848 with a regex (confluent-kafka, ``group.protocol=consumer``): both ``rx-open`` and
    ``rx-secret`` match, alice may DESCRIBE (and READ) only the first; the coordinator assigns
    her only that one (Kafka 4's filterTopicDescribeAuthorizedTopics), seen by an admin's
    describe of the group, and she reads its record."""
    _, admin, bootstrap, port = cluster
    for topic in ("rx-open", "rx-secret"):
        assert wait_for(lambda topic=topic: _create(admin, topic), 30, 0.2)
        assert _produce({"bootstrap.servers": bootstrap, "logger": _SILENT}, topic, topic.encode()) is None
    assert _acls(bootstrap, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "rx-open",
                 "--group", "rxg") == 0
    c = Consumer({**_alice(port), "group.id": "rxg", "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["^rx-.*"])
    got = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not got:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.topic(), m.value()))
        assert got == [("rx-open", b"rx-open")], got
        capsys.readouterr()
        assert kraft_main(["consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "rxg",
                           "--members", "--verbose"]) == 0
        out = capsys.readouterr().out
        assert "rx-open" in out and "rx-secret" not in out, out
    finally:
        c.close()
