"""SASL PLAIN at the network edge (kraft.server.sasl, kraft.server.network): Kafka's JAAS
config, the handshake/authenticate exchange at every advertised version, the principal carried
with each request, and what an unauthenticated or hostile client gets: Kafka's error, a closed
connection, and a node that keeps answering others."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from kraft.errors import ConfigError, ErrorCode
from kraft.protocol import decode_response, encode_request
from kraft.protocol.messages.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                          SaslHandshakeResponse)
from kraft.server.network import KafkaServer
from kraft.server.sasl import parse_jaas, sasl_settings

from server_helpers import RawConnection, ToyHandler, api_versions_frame, decode_api_versions, produce_frame, run

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="al\\"ice";')
GIVEN = {"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl.plain.sasl.jaas.config": JAAS}


class PrincipalHandler(ToyHandler):
    def __init__(self):
        super().__init__()
        self.principals = []

    def handle(self, ctx, request):
        self.principals.append(ctx.principal)
        return super().handle(ctx, request)


async def _serve(given=GIVEN, delay_ms=100):
    handler = PrincipalHandler()
    server = KafkaServer(handler, "127.0.0.1", 0, listener_name="SASL", sasl=sasl_settings(given, "SASL"),
                         failed_authentication_delay_ms=delay_ms)
    await server.start()
    return server, handler


async def _call(conn, request, version, cid, cls):
    await conn.send(encode_request(request, version, cid, "c"))
    frame = await conn.read_frame()
    assert frame is not None, "closed instead of answering"
    header, body = decode_response(frame, cls.API_KEY, version)
    assert header.correlation_id == cid
    return body


async def _login(conn, user, password, hv=1, av=2):
    hs = await _call(conn, SaslHandshakeRequest(mechanism="PLAIN"), hv, 1, SaslHandshakeResponse)
    assert (hs.error_code, hs.mechanisms) == (0, ["PLAIN"])
    return await _call(conn, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), av, 2,
                       SaslAuthenticateResponse)


def test_jaas_config_is_parsed_as_kafka_does():
    module, options = parse_jaas(JAAS, "k")
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                       "user_alice": 'al"ice'}
    with pytest.raises(ConfigError, match="^k: expected"):
        parse_jaas("PlainLoginModule username=x", "k")  # no flag, no ';'


@pytest.mark.parametrize("hv,av", [(1, 0), (1, 1), (1, 2)])
def test_plain_login_at_every_advertised_version_and_the_principal_reaches_the_handler(hv, av):
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            await conn.send(api_versions_frame(5))  # allowed before authentication
            assert decode_api_versions(await conn.read_frame())[0] == 5
            auth = await _login(conn, "alice", 'al"ice', hv, av)
            assert (auth.error_code, auth.error_message) == (0, None)
            await conn.send(produce_frame(9))
            assert await conn.read_frame() is not None
            assert handler.principals == ["User:ANONYMOUS", "User:alice"]
            # After authentication Kafka answers both SASL requests ILLEGAL_SASL_STATE.
            again = await _call(conn, SaslHandshakeRequest(mechanism="PLAIN"), 1, 10, SaslHandshakeResponse)
            assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
            again = await _call(conn, SaslAuthenticateRequest(auth_bytes=b"x"), av, 11, SaslAuthenticateResponse)
            assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        finally:
            await server.close()
    run(main())


def test_handshake_v0_then_a_bare_token_authenticates():
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            hs = await _call(conn, SaslHandshakeRequest(mechanism="PLAIN"), 0, 1, SaslHandshakeResponse)
            assert hs.error_code == 0
            token = b"\0admin\0admin-secret"
            await conn.send(struct.pack(">i", len(token)) + token)
            assert await conn.read_frame() == b""  # PLAIN's empty server token
            await conn.send(produce_frame(3))
            assert await conn.read_frame() is not None
            assert handler.principals == ["User:admin"]
        finally:
            await server.close()
    run(main())


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("mallory", "x")])
def test_wrong_password_or_unknown_user_gets_kafkas_error_then_a_delayed_close(user, password):
    async def main():
        server, handler = await _serve(delay_ms=300)
        try:
            conn = await RawConnection.open(server.port)
            started = time.monotonic()
            auth = await _login(conn, user, password)
            assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert auth.error_message == "Authentication failed: Invalid username or password"
            await conn.send(produce_frame(4))  # never handled
            assert await conn.is_closed_by_peer()
            assert time.monotonic() - started >= 0.25  # connection.failed.authentication.delay.ms
            assert handler.principals == [] and server.auth_failed_total == 1
        finally:
            await server.close()
    run(main())


def test_unsupported_mechanism_is_answered_with_the_enabled_ones_then_closed():
    async def main():
        server, _ = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            hs = await _call(conn, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1, 1, SaslHandshakeResponse)
            assert (hs.error_code, hs.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
            assert await conn.is_closed_by_peer()
        finally:
            await server.close()
    run(main())


@pytest.mark.parametrize("payload", [
    "produce", "authenticate-first", "oversized", "truncated-token"])
def test_hostile_unauthenticated_input_closes_that_connection_and_others_are_served(payload):
    async def main():
        server, handler = await _serve()
        try:
            bad = await RawConnection.open(server.port)
            if payload == "produce":
                await bad.send(produce_frame(1))
            elif payload == "authenticate-first":
                await bad.send(encode_request(SaslAuthenticateRequest(auth_bytes=b"\0a\0b"), 2, 1, "c"))
            elif payload == "oversized":  # above sasl.server.max.receive.size, before any byte of it
                await bad.send(struct.pack(">i", 524289) + b"\0" * 64)
            else:  # a SaslAuthenticate whose frame ends inside its token
                hs = await _call(bad, SaslHandshakeRequest(mechanism="PLAIN"), 1, 1, SaslHandshakeResponse)
                assert hs.error_code == 0
                frame = encode_request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0secret"), 1, 2, "c")
                cut = frame[:-5]
                await bad.send(struct.pack(">i", len(cut) - 4) + cut[4:])
            assert await bad.is_closed_by_peer()
            good = await RawConnection.open(server.port)
            started = time.monotonic()
            assert (await _login(good, "admin", "admin-secret")).error_code == 0
            assert time.monotonic() - started < 1.0  # the issue asks 100 ms; margin for a busy CI box
            assert handler.principals == []
        finally:
            await server.close()
    run(main())


@pytest.mark.parametrize("given,message", [
    ({"listener.name.sasl.plain.sasl.jaas.config": JAAS}, "kraft supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 only .*Kafka's default is GSSAPI"),
    ({"sasl.enabled.mechanisms": "PLAIN,GSSAPI", "sasl.jaas.config": JAAS}, "kraft supports PLAIN, SCRAM"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "listener.name.sasl.scram-sha-512.sasl.jaas.config": JAAS},
     "needs org.apache.kafka.common.security.scram.ScramLoginModule"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "needs a JAAS config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "com.example.Other required;"},
     "needs org.apache.kafka.common.security.plain.PlainLoginModule"),
])
def test_bad_sasl_settings_are_refused_in_one_line(given, message):
    with pytest.raises(ConfigError, match=message) as err:
        sasl_settings(given, "SASL")
    assert "\n" not in str(err.value)


def test_plaintext_listener_answers_sasl_requests_illegal_sasl_state():
    async def main():
        server = KafkaServer(ToyHandler(), "127.0.0.1", 0, listener_name="PLAINTEXT")
        await server.start()
        try:
            conn = await RawConnection.open(server.port)
            hs = await _call(conn, SaslHandshakeRequest(mechanism="PLAIN"), 1, 1, SaslHandshakeResponse)
            assert hs.error_code == ErrorCode.ILLEGAL_SASL_STATE
        finally:
            await server.close()
    run(main())


def test_a_flood_of_failed_authentications_does_not_delay_a_good_client():
    async def main():
        server, handler = await _serve(delay_ms=500)
        try:
            async def attacker(i):
                conn = await RawConnection.open(server.port)
                auth = await _login(conn, "alice", f"guess-{i}")
                assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                return conn
            conns = await asyncio.gather(*(attacker(i) for i in range(50)))
            good = await RawConnection.open(server.port)
            started = time.monotonic()
            assert (await _login(good, "alice", 'al"ice')).error_code == 0
            assert time.monotonic() - started < 1.0  # the issue asks 100 ms; margin for a busy CI box
            # Every failed connection is closed once its delay has passed, none before it is answered.
            assert all([await c.is_closed_by_peer() for c in conns])
            assert server.auth_failed_total == 50 and handler.principals == []
        finally:
            await server.close()
    run(main())
