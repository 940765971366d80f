"""SASL re-authentication (KIP-368) at the network edge: with ``connections.max.reauth.ms`` a
login answered by SaslAuthenticate v1+ carries that session lifetime; a request after the
lifetime closes the connection unanswered; a SaslHandshake on the authenticated connection
starts a new login that extends it, as the same principal only; without a lifetime that
handshake is answered ILLEGAL_SASL_STATE, as before. Real processes and librdkafka's own
re-authentication: tests/integration/test_sasl_clients.py."""

from __future__ import annotations

import asyncio

import pytest

from kraft.errors import ConfigError, ErrorCode
from kraft.protocol import ApiVersionsRequest, ApiVersionsResponse
from kraft.protocol.messages.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                          SaslHandshakeResponse)
from kraft.server.network import KafkaServer
from kraft.server.sasl import sasl_settings

from server_helpers import RawConnection, run
from test_sasl import GIVEN, PrincipalHandler, _call, _login

LIFETIME_MS = 400


async def _serve(lifetime_ms=LIFETIME_MS):
    given = {**GIVEN, "listener.name.sasl.connections.max.reauth.ms": str(lifetime_ms)}
    handler = PrincipalHandler()
    server = KafkaServer(handler, "127.0.0.1", 0, listener_name="SASL", sasl=sasl_settings(given, "SASL"),
                         failed_authentication_delay_ms=0)
    await server.start()
    return server, handler


async def _api_versions(conn, cid):
    return await _call(conn, ApiVersionsRequest(client_software_name="c", client_software_version="1"), 3, cid,
                       ApiVersionsResponse)


async def _relogin(conn, user, password, cid):
    hs = await _call(conn, SaslHandshakeRequest(mechanism="PLAIN"), 1, cid, SaslHandshakeResponse)
    assert hs.error_code == 0
    return await _call(conn, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2, cid + 1,
                       SaslAuthenticateResponse)


def test_the_session_lifetime_is_announced_and_a_request_after_it_closes_the_connection():
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            auth = await _login(conn, "admin", "admin-secret")
            assert (auth.error_code, auth.session_lifetime_ms) == (0, LIFETIME_MS)
            assert (await _api_versions(conn, 3)).error_code == 0
            await asyncio.sleep(LIFETIME_MS / 1000 + 0.1)
            await conn.send(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x04\x00\x00")  # ApiVersions v0
            assert await conn.is_closed_by_peer()
            assert server.expired_sessions_total == 1
            assert handler.principals == ["User:admin"]  # the late request never reached the handler
        finally:
            await server.close()
    run(main())


def test_a_reauthentication_extends_the_session_as_the_same_principal():
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            assert (await _login(conn, "admin", "admin-secret")).error_code == 0
            for round_ in range(3):  # three lifetimes in all, each renewed before its end
                await asyncio.sleep(LIFETIME_MS / 1000 * 0.7)
                again = await _relogin(conn, "admin", "admin-secret", 10 + 3 * round_)
                assert (again.error_code, again.session_lifetime_ms) == (0, LIFETIME_MS)
                assert (await _api_versions(conn, 12 + 3 * round_)).error_code == 0
            assert server.reauthentications_total == 3
            assert handler.principals == ["User:admin"] * 3
        finally:
            await server.close()
    run(main())


def test_a_reauthentication_as_another_principal_is_refused_and_closes_the_connection():
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            assert (await _login(conn, "admin", "admin-secret")).error_code == 0
            refused = await _relogin(conn, "alice", 'al"ice', 5)
            assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert "Cannot change principals during re-authentication" in refused.error_message
            assert await conn.is_closed_by_peer()
        finally:
            await server.close()
    run(main())


def test_without_a_lifetime_a_second_handshake_is_an_illegal_state_and_sessions_do_not_expire():
    async def main():
        server, handler = await _serve(lifetime_ms=0)
        try:
            conn = await RawConnection.open(server.port)
            auth = await _login(conn, "admin", "admin-secret")
            assert (auth.error_code, auth.session_lifetime_ms) == (0, 0)
            hs = await _call(conn, SaslHandshakeRequest(mechanism="PLAIN"), 1, 5, SaslHandshakeResponse)
            assert hs.error_code == ErrorCode.ILLEGAL_SASL_STATE
            await asyncio.sleep(0.2)
            assert (await _api_versions(conn, 6)).error_code == 0
        finally:
            await server.close()
    run(main())


def test_a_bad_lifetime_setting_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="listener.name.sasl.connections.max.reauth.ms"):
        sasl_settings({**GIVEN, "listener.name.sasl.connections.max.reauth.ms": "soon"}, "SASL")
