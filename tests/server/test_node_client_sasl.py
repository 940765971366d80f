"""A node's own SASL login (kraft.client.sasl_client through NodeClient's ``sasl``) against
kraft's SASL listener: PLAIN and SCRAM-SHA-256/512 logins succeed and the requests that follow
carry the user's principal; the login goes first even when requests were waiting for the
connection; a wrong password fails the requests as a connection failure (retried with back-off,
never sent unauthenticated); a server that does not hold the user's credential is caught by the
SCRAM signature check. And how a node's config becomes those options
(kraft.server.node_security)."""

from __future__ import annotations

import asyncio

import pytest

from kraft.client.node_client import NodeClient
from kraft.client.sasl_client import SaslAuthenticationError, SaslLogin, ScramClient
from kraft.config import NodeConfig
from kraft.errors import ConfigError, NetworkError, RequestTimeoutError
from kraft.metadata.scram import SCRAM_SHA_256, SCRAM_SHA_512, credential_from_password
from kraft.protocol import ApiVersionsRequest
from kraft.server.network import KafkaServer
from kraft.server.node_security import INTER_BROKER, node_client_options, node_login
from kraft.server.sasl import sasl_settings

from server_helpers import run
from test_sasl import PrincipalHandler

STORE = {("broker", SCRAM_SHA_512): credential_from_password(SCRAM_SHA_512, "broker-secret", b"salt-512", 4096),
         ("broker", SCRAM_SHA_256): credential_from_password(SCRAM_SHA_256, "broker-secret", b"salt-256", 4096)}
GIVEN = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,SCRAM-SHA-256",
         "plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                   'user_controller="controller-secret";'}


async def _serve(store=STORE):
    handler = PrincipalHandler()
    server = KafkaServer(handler, "127.0.0.1", 0, listener_name="SASL",
                         sasl=sasl_settings(GIVEN, "SASL", lambda user, m: store.get((user, m))),
                         failed_authentication_delay_ms=0)
    await server.start()
    return server, handler


def _ask():
    return ApiVersionsRequest(client_software_name="kraft", client_software_version="1")


@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", "controller", "controller-secret"),
                                                     ("SCRAM-SHA-512", "broker", "broker-secret"),
                                                     ("SCRAM-SHA-256", "broker", "broker-secret")])
def test_a_login_comes_first_and_the_requests_carry_the_users_principal(mechanism, user, password):
    async def main():
        server, handler = await _serve()
        client = NodeClient("127.0.0.1", server.port, sasl=SaslLogin(mechanism, user, password))
        try:
            # Three requests waiting for the connection: none may overtake the login.
            answers = await asyncio.gather(*(client.request(_ask(), 3) for _ in range(3)))
            assert [a.error_code for a in answers] == [0, 0, 0]
            assert handler.principals == [f"User:{user}"] * 3
        finally:
            await client.close()
            await server.close()
    run(main())


def test_a_wrong_password_fails_the_requests_and_nothing_is_sent_unauthenticated():
    async def main():
        server, handler = await _serve()
        client = NodeClient("127.0.0.1", server.port, connect_timeout_ms=1000,
                            sasl=SaslLogin("SCRAM-SHA-512", "broker", "wrong"))
        try:
            with pytest.raises((NetworkError, RequestTimeoutError)):
                await client.request(_ask(), 3, timeout_ms=1500)
            assert isinstance(client._last_connect_error, SaslAuthenticationError)
            assert "invalid credentials" in str(client._last_connect_error)
            assert handler.principals == []
        finally:
            await client.close()
            await server.close()
    run(main())


def test_a_server_without_the_users_credential_fails_the_scram_signature_check():
    client = ScramClient("SCRAM-SHA-512", "broker", "broker-secret", nonce="n0nce")
    client.first()
    # An impostor answers with its own salt and iterations, then a signature it cannot compute.
    client.final(b"r=n0nceSERVER,s=c2FsdA==,i=4096")
    assert not client.verify(b"v=" + b"A" * 88)
    with pytest.raises(SaslAuthenticationError):
        ScramClient("SCRAM-SHA-512", "broker", "x", nonce="mine").final(b"r=other,s=c2FsdA==,i=4096")


def test_a_user_name_with_a_comma_or_equals_sign_is_escaped_as_rfc5802_says():
    assert ScramClient("SCRAM-SHA-256", "a,b=c", "p", nonce="n").first() == b"n,,n=a=2Cb=3Dc,r=n"


def _node(**extra) -> NodeConfig:
    return NodeConfig.from_properties({
        "node.id": "1", "process.roles": "broker,controller", "controller.quorum.voters": "1@localhost:9093",
        "listeners": "INTERNAL://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "INTERNAL", "log.dirs": "/tmp/x",
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT", **extra})


def test_the_login_comes_from_the_mechanism_setting_and_that_listeners_jaas_config():
    cfg = _node(**{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                   "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                   "listener.name.internal.scram-sha-512.sasl.jaas.config":
                       'org.apache.kafka.common.security.scram.ScramLoginModule required '
                       'username="broker" password="broker-secret";'})
    login = node_login(cfg, "INTERNAL", INTER_BROKER)
    assert (login.mechanism, login.username, login.password) == ("SCRAM-SHA-512", "broker", "broker-secret")
    assert node_client_options(cfg, "CONTROLLER", INTER_BROKER) == {}  # plaintext: nothing to add


def test_a_sasl_listener_between_nodes_without_a_login_is_refused_in_one_line():
    cfg = _node(**{"sasl.mechanism.inter.broker.protocol": "PLAIN",
                   "listener.name.internal.plain.sasl.jaas.config":
                       'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'})
    with pytest.raises(ConfigError, match="needs username"):
        node_login(cfg, "INTERNAL", INTER_BROKER)
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        _node()  # Kafka's default mechanism, GSSAPI


@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", "controller", "controller-secret"),
                                                     ("SCRAM-SHA-512", "broker", "broker-secret")])
def test_a_node_logs_in_again_on_the_same_connection_before_its_session_ends(mechanism, user, password):
    """KIP-368 from a node's side: the listener gives 600 ms sessions (connections.max.reauth.ms);
    under a steady stream of requests (four at a time) the client logs in again on its one
    connection before each session ends, so the server never closes it for an expired session
    and no request fails. (Before, the server closed the connection and the node reconnected.)"""
    async def main():
        handler = PrincipalHandler()
        server = KafkaServer(handler, "127.0.0.1", 0, listener_name="SASL",
                             sasl=sasl_settings({**GIVEN, "connections.max.reauth.ms": "600"}, "SASL",
                                                lambda u, m: STORE.get((u, m))),
                             failed_authentication_delay_ms=0)
        await server.start()
        client = NodeClient("127.0.0.1", server.port, sasl=SaslLogin(mechanism, user, password))
        connects = []
        real_connect = client._connect

        async def counted():
            connects.append(1)
            await real_connect()
        client._connect = counted
        try:
            end = asyncio.get_running_loop().time() + 2.5

            async def loop():
                n = 0
                while asyncio.get_running_loop().time() < end:
                    assert (await client.request(_ask(), 3)).error_code == 0
                    n += 1
                    await asyncio.sleep(0.005)
                return n
            done = await asyncio.gather(*(loop() for _ in range(4)))
            assert min(done) > 50, done
            assert client.reauthentications >= 3, client.reauthentications
            assert server.reauthentications_total == client.reauthentications
            assert server.expired_sessions_total == 0
            assert len(connects) == 1
            assert set(handler.principals) == {f"User:{user}"}
        finally:
            await client.close()
            await server.close()
    run(main())
