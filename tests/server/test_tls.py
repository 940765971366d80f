"""TLS listeners (kraft.server.tls, kraft.server.network): stores as Kafka configures them,
mTLS principals, and hostile handshakes that must not stop the node answering others."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import struct
import time

import pytest
import uvloop

from kraft.config import NodeConfig
from kraft.errors import ConfigError
from kraft.server.network import KafkaServer
from kraft.server.tls import openssl_cipher, server_context

from server_helpers import ToyHandler, api_versions_frame, decode_api_versions
from tls_certs import CertAuthority, pkcs12_bytes, trust_pkcs12_bytes, write

CA = CertAuthority()
SERVER = CA.issue("localhost", server=True)
CLIENT = CA.issue("alice", org="kraft")
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _pem_listener(**extra) -> dict:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": SERVER.cert_pem(),
            "ssl.keystore.key": SERVER.key_pem(), "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": CA.cert_pem(), **extra}


def _client_ctx(cert=None, ca=CA, max_version=None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca.cert_pem())
    if max_version is not None:
        ctx.maximum_version = max_version
    if cert is not None:
        ctx.load_cert_chain(*_files(cert))
    return ctx


def _files(issued) -> tuple[str, str]:
    import tempfile
    folder = tempfile.mkdtemp()
    return write(folder, "c.pem", issued.cert_pem()), write(folder, "k.pem", issued.key_pem())


class PrincipalHandler(ToyHandler):
    def __init__(self):
        super().__init__()
        self.principals = []

    def handle(self, ctx, request):
        self.principals.append(ctx.principal)
        return super().handle(ctx, request)


def _run(loop_name, coro_fn):
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        return runner.run(asyncio.wait_for(coro_fn(), 30))


async def _serve(given: dict, handler=None):
    handler = handler or PrincipalHandler()
    server = KafkaServer(handler, "127.0.0.1", 0, listener_name="SSL", ssl_context=server_context(given, "SSL"))
    await server.start()
    return server, handler


async def _ask(port, ctx, cid=7) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    try:
        writer.write(api_versions_frame(cid))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        got, body = decode_api_versions(await reader.readexactly(size))
        assert body.error_code == 0
        return got
    finally:
        writer.close()


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_pem_inline_keystore_serves_tls_and_the_principal_without_a_certificate_is_anonymous(loop):
    async def main():
        server, handler = await _serve(_pem_listener())
        try:
            assert await _ask(server.port, _client_ctx()) == 7
            assert handler.principals == ["User:ANONYMOUS"]
        finally:
            await server.close()
    _run(loop, main)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_mtls_principal_is_the_certificate_subject_in_rfc2253_order(loop):
    async def main():
        server, handler = await _serve(_pem_listener(**{"ssl.client.auth": "required"}))
        try:
            assert await _ask(server.port, _client_ctx(CLIENT)) == 7
            assert handler.principals == ["User:CN=alice,O=kraft,C=US"]
        finally:
            await server.close()
    _run(loop, main)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_required_client_auth_refuses_a_client_without_a_certificate_and_keeps_serving(loop):
    async def main():
        server, handler = await _serve(_pem_listener(**{"ssl.client.auth": "required"}))
        try:
            # TLS 1.3 reports the missing certificate after the client's handshake: the
            # first read then fails, or the connection ends.
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                await _ask(server.port, _client_ctx())
            assert handler.principals == []
            assert await _ask(server.port, _client_ctx(CLIENT), cid=8) == 8
        finally:
            await server.close()
    _run(loop, main)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_an_expired_client_certificate_is_refused_and_an_expired_server_certificate_fails_the_client(loop):
    expired = CA.issue("old", expired=True)

    async def main():
        server, handler = await _serve(_pem_listener(**{"ssl.client.auth": "required"}))
        try:
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                await _ask(server.port, _client_ctx(expired))
            assert handler.principals == []
        finally:
            await server.close()
        old_server = CA.issue("localhost", server=True, expired=True)
        server, _ = await _serve(_pem_listener(**{"ssl.keystore.certificate.chain": old_server.cert_pem(),
                                                  "ssl.keystore.key": old_server.key_pem()}))
        try:
            with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
                await _ask(server.port, _client_ctx())
        finally:
            await server.close()
    _run(loop, main)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_client_trusting_another_ca_fails_the_handshake(loop):
    async def main():
        server, _ = await _serve(_pem_listener())
        try:
            with pytest.raises(ssl.SSLCertVerificationError):
                await _ask(server.port, _client_ctx(ca=CertAuthority("other-ca")))
            await asyncio.sleep(0.05)
            assert not server._connections
        finally:
            await server.close()
    _run(loop, main)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_plaintext_silent_and_half_hello_clients_do_not_delay_a_tls_client(loop):
    async def main():
        server, _ = await _serve(_pem_listener())
        try:
            plain_r, plain_w = await asyncio.open_connection("127.0.0.1", server.port)
            plain_w.write(api_versions_frame(1))  # a PLAINTEXT client on a TLS port
            silent = socket.create_connection(("127.0.0.1", server.port))
            half = socket.create_connection(("127.0.0.1", server.port))
            half.sendall(bytes.fromhex("160301020001") + b"\x00" * 40)  # a ClientHello cut short
            started = time.monotonic()
            assert await _ask(server.port, _client_ctx(), cid=9) == 9
            elapsed = time.monotonic() - started
            # Never a timing assertion on throughput: the bound is the issue's 100 ms,
            # with a margin for a loaded 2-core test machine.
            assert elapsed < 1.0, elapsed
            assert await asyncio.wait_for(plain_r.read(), 5) == b""  # closed, not answered
            await asyncio.sleep(0.05)
            assert server.tls_failed_total >= 1
            silent.close()
            half.close()
            plain_w.close()
        finally:
            await server.close()
    _run(loop, main)


def test_a_handshake_that_never_finishes_is_closed_after_the_timeout(monkeypatch):
    import kraft.server.network as network
    monkeypatch.setattr(network, "TLS_HANDSHAKE_TIMEOUT_S", 0.2)

    async def main():
        server, _ = await _serve(_pem_listener())
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            assert await asyncio.wait_for(reader.read(), 5) == b""
            await asyncio.sleep(0.05)
            assert not server._connections
            writer.close()
        finally:
            await server.close()
    _run("asyncio", main)


def test_pkcs12_keystore_and_truststore_with_passwords(tmp_path):
    ks = write(str(tmp_path), "server.p12", pkcs12_bytes(SERVER, CA, "ks-secret"))
    ts = write(str(tmp_path), "trust.p12", trust_pkcs12_bytes(CA, "ts-secret"))
    given = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": ks, "ssl.keystore.password": "ks-secret",
             "ssl.truststore.type": "PKCS12", "ssl.truststore.location": ts,
             "ssl.truststore.password": "ts-secret", "ssl.client.auth": "required"}

    async def main():
        server, handler = await _serve(given)
        try:
            assert await _ask(server.port, _client_ctx(CLIENT)) == 7
            assert handler.principals == ["User:CN=alice,O=kraft,C=US"]
        finally:
            await server.close()
    _run("uvloop", main)
    # A PKCS12 file under Kafka's default type (JKS) is read as Java reads it.
    del given["ssl.keystore.type"]
    server_context(given, "SSL")
    with pytest.raises(ConfigError, match="ssl.keystore.location: cannot open the PKCS12 store"):
        server_context({**given, "ssl.keystore.password": "wrong"}, "SSL")


def test_pem_keystore_file_with_an_encrypted_key(tmp_path):
    path = write(str(tmp_path), "server.pem", SERVER.key_pem("kp") + SERVER.cert_pem())
    server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": path, "ssl.key.password": "kp"}, "SSL")
    with pytest.raises(ConfigError, match="ssl.keystore.location: cannot load"):
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": path, "ssl.key.password": "no"}, "SSL")


def test_a_jks_store_is_refused_in_one_line_saying_how_to_convert(tmp_path):
    path = write(str(tmp_path), "server.jks", b"\xfe\xed\xfe\xed" + os.urandom(64))
    with pytest.raises(ConfigError) as err:
        server_context({"ssl.keystore.location": path, "ssl.keystore.password": "x"}, "SSL")
    assert "keytool -importkeystore" in str(err.value) and "-deststoretype PKCS12" in str(err.value)
    assert "\n" not in str(err.value)


def test_per_listener_settings_override_the_global_ones(tmp_path):
    given = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/ks.pem",
             "listener.name.ssl.ssl.keystore.location": write(str(tmp_path), "s.pem",
                                                              SERVER.key_pem() + SERVER.cert_pem())}
    server_context(given, "SSL")
    with pytest.raises(ConfigError, match=r"^ssl.keystore.location: cannot read /nonexistent"):
        server_context(given, "OTHER")


@pytest.mark.parametrize("settings,message", [
    ({"ssl.client.auth": "maybe"}, "ssl.client.auth: expected none, requested or required"),
    ({"ssl.enabled.protocols": "TLSv9"}, "ssl.enabled.protocols: unknown protocol TLSv9"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}, "consecutive"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "cannot restrict TLS 1.3 suites"),
    ({"ssl.cipher.suites": "NOT_A_CIPHER"}, "no cipher suite"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"}, "only DEFAULT"),
    ({"ssl.keystore.type": "BKS"}, "unsupported store type"),
    ({"ssl.keystore.certificate.chain": ""}, "needs ssl.keystore.certificate.chain and ssl.keystore.key"),
])
def test_bad_settings_are_refused_with_one_line_naming_the_key(settings, message):
    with pytest.raises(ConfigError, match=message) as err:
        server_context(_pem_listener(**settings), "SSL")
    assert "\n" not in str(err.value)


def test_tls13_only_listener_refuses_a_tls12_client():
    async def main():
        server, _ = await _serve(_pem_listener(**{"ssl.enabled.protocols": "TLSv1.3"}))
        try:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await _ask(server.port, _client_ctx(max_version=ssl.TLSVersion.TLSv1_2))
            await asyncio.sleep(0.05)
            assert server.tls_failed_total == 1  # the server refused it: UNSUPPORTED_PROTOCOL
            assert await _ask(server.port, _client_ctx()) == 7
        finally:
            await server.close()
    _run("asyncio", main)


def test_iana_cipher_names_translate_to_openssl_and_take_effect():
    assert openssl_cipher("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384") == "ECDHE-ECDSA-AES256-GCM-SHA384"
    assert openssl_cipher("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-RSA-CHACHA20-POLY1305"
    assert openssl_cipher("TLS_RSA_WITH_AES_128_GCM_SHA256") == "AES128-GCM-SHA256"
    ctx = server_context(_pem_listener(**{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}), "SSL")
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES256-GCM-SHA384"]


def _node_props(**extra) -> dict:
    return {"node.id": "1", "process.roles": "broker,controller", "controller.quorum.voters": "1@localhost:9093",
            "listeners": "SSL://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL", "log.dirs": "/tmp/x", **extra}


def test_node_config_accepts_ssl_listeners_and_knows_the_ssl_settings():
    cfg = NodeConfig.from_properties(_node_props(**{
        "listeners": "SSL://:9092,INTERNAL://:9094,CONTROLLER://:9093",
        "listener.security.protocol.map": "SSL:SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "listener.name.ssl.ssl.keystore.location": "/k.p12", "ssl.client.auth": "required"}))
    assert cfg.unknown == ()


@pytest.mark.parametrize("props,message", [
    ({"listener.security.protocol.map": "CONTROLLER:SASL_SSL,SSL:SSL"},
     "sasl.mechanism.controller.protocol: the controller listener CONTROLLER is SASL_SSL: set PLAIN"),
    ({"listener.security.protocol.map": "CONTROLLER:SASL_SSL,SSL:SSL",
      "sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}, "SCRAM cannot be used on the controller listener"),
    ({"listener.security.protocol.map": "CONTROLLER:GSSAPI"}, "bad entry"),
    ({"listeners": "SASL_PLAINTEXT://:9092,CONTROLLER://:9093", "inter.broker.listener.name": "SASL_PLAINTEXT"},
     "sasl.mechanism.inter.broker.protocol: the inter-broker listener SASL_PLAINTEXT is SASL_PLAINTEXT"),
])
def test_node_config_refuses_what_kraft_cannot_serve_in_one_line(props, message):
    with pytest.raises(ConfigError, match=message):
        NodeConfig.from_properties(_node_props(**props))
