"""How a node dials another node: the NodeClient options (TLS context, SASL login) for the
controller listener (the Raft quorum, broker registration and heartbeats, forwarding) and for
the inter-broker listener (replication, transaction markers and checks, group lag), read as
Kafka's brokers read them: the target listener's own ``ssl.*`` settings
(:func:`kraft.server.tls.node_client_context`), ``sasl.mechanism.controller.protocol`` /
``sasl.mechanism.inter.broker.protocol`` for the mechanism, and the ``username`` and
``password`` options of that listener's JAAS config for that mechanism
(``listener.name.<l>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``)."""

from __future__ import annotations

from kraft.client.sasl_client import SaslLogin
from kraft.config import security_protocol
from kraft.errors import ConfigError
from kraft.server.sasl import parse_jaas
from kraft.server.tls import ListenerSettings, node_client_context

CONTROLLER, INTER_BROKER = "sasl.mechanism.controller.protocol", "sasl.mechanism.inter.broker.protocol"


def node_login(cfg, listener: str, mechanism_key: str) -> SaslLogin | None:
    """The login a node uses on ``listener`` when it is SASL_PLAINTEXT or SASL_SSL; None otherwise."""
    if not security_protocol(cfg.values, listener).startswith("SASL_"):
        return None
    mechanism = cfg.values[mechanism_key].strip().upper()  # checked when the config was read
    s = ListenerSettings(cfg.given, listener)
    key = f"{mechanism.lower()}.sasl.jaas.config"
    where = s.key(key) if s.get(key) else s.key("sasl.jaas.config")
    text = s.get(key) or s.get("sasl.jaas.config")
    if not text:
        raise ConfigError(f"{s.prefix}{key}: {mechanism_key}={mechanism} on the {security_protocol(cfg.values, listener)} "
                          f"listener {listener} needs a JAAS config with this node's username and password")
    _, options = parse_jaas(text, where)
    if not options.get("username") or "password" not in options:
        raise ConfigError(f"{where}: needs username=\"...\" password=\"...\": the login this node uses "
                          f"on {listener} ({mechanism_key}={mechanism})")
    return SaslLogin(mechanism, options["username"], options["password"])


def node_client_options(cfg, listener: str, mechanism_key: str) -> dict:
    """NodeClient keyword arguments for connections to other nodes' ``listener``."""
    options = {}
    ssl_context = node_client_context(cfg, listener)
    if ssl_context is not None:
        options["ssl_context"] = ssl_context
    login = node_login(cfg, listener, mechanism_key)
    if login is not None:
        options["sasl"] = login
    return options
