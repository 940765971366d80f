"""``kraft configs`` for what confluent-kafka cannot name, sent with kraft's own client:

* ``--entity-type broker-loggers --entity-name ID``: the BROKER_LOGGER resource (KIP-412),
  asked of broker ID itself as Kafka's admin client does; ``--describe`` lists every logger
  with its level, ``--alter --add-config kraft.broker=DEBUG --delete-config kraft.raft``
  sets or unsets levels (the broker checks them, see ``kraft.server.broker_loggers``);
* ``--entity-type brokers --entity-default``: the cluster-wide dynamic broker default, whose
  resource name is the empty string (librdkafka refuses an empty resource name).

Output as Kafka's ConfigCommand. ``--command-config`` gives the client's security settings in
Kafka's or librdkafka's names (``security.protocol``, ``ssl.ca.location`` or
``ssl.truststore.*``, ``sasl.mechanism``, ``sasl.username``/``sasl.password`` or a
``sasl.jaas.config`` with username and password).
"""

from __future__ import annotations

import asyncio

from kraft.cli.kafka_tool_args import ToolError, admin, client_config, cluster_metadata
from kraft.errors import ErrorCode, KraftError
from kraft.metadata.config_defs import ConfigSource

BROKER, BROKER_LOGGER = 4, 8
OP_SET, OP_DELETE = 0, 1


def client_security(conf: dict) -> dict:
    """NodeClient keyword arguments (``ssl_context``, ``sasl``) from client properties."""
    from kraft.client.sasl_client import SaslLogin
    from kraft.server.tls import client_context
    protocol = conf.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ToolError(f"security.protocol={conf['security.protocol']}: expected PLAINTEXT, SSL, "
                        "SASL_PLAINTEXT or SASL_SSL")
    out: dict = {}
    if protocol.endswith("SSL"):
        try:
            out["ssl_context"] = client_context(conf)
        except (OSError, ValueError) as exc:
            raise ToolError(f"the TLS settings of --command-config do not load: {exc}") from None
    if protocol.startswith("SASL"):
        from kraft.errors import ConfigError
        from kraft.server.sasl import parse_jaas
        user, password = conf.get("sasl.username"), conf.get("sasl.password")
        if user is None and conf.get("sasl.jaas.config"):
            try:
                options = parse_jaas(conf["sasl.jaas.config"], "sasl.jaas.config")[1]
            except ConfigError as exc:
                raise ToolError(str(exc)) from None
            user, password = options.get("username"), options.get("password")
        if user is None or password is None:
            raise ToolError("SASL needs sasl.username and sasl.password (or a sasl.jaas.config) in --command-config")
        try:
            out["sasl"] = SaslLogin(conf.get("sasl.mechanism", "GSSAPI").upper(), user, password)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
    return out


async def call(conf: dict, addresses: list[tuple[str, int]], request, version: int, timeout_s: float = 30.0):
    """``request`` answered by the first of ``addresses`` that answers."""
    from kraft.client.node_client import NodeClient
    security = client_security(conf)
    last = None
    for host, port in addresses:
        client = NodeClient(host, port, client_id="kraft-configs", request_timeout_ms=int(timeout_s * 1000),
                            connect_timeout_ms=int(timeout_s * 1000), **security)
        try:
            return await client.request(request, version)
        except KraftError as exc:
            last = exc
        finally:
            await client.close()
    raise ToolError(f"no broker at {', '.join(f'{h}:{p}' for h, p in addresses)} answered: {last}")


def _broker_address(args, conf: dict) -> list[tuple[str, int]]:
    name = args.entity_name
    try:
        node = int(name)
    except (TypeError, ValueError):
        raise ToolError(f"The entity name for broker-loggers must be a valid integer broker id, found: {name}") from None
    if getattr(args, "bootstrap_controller", None):  # that controller answers for itself (or refuses the id)
        return bootstrap_addresses(conf)
    brokers = cluster_metadata(admin(args)).brokers
    if node not in brokers:
        raise ToolError(f"broker {node} is not in the cluster (brokers: {', '.join(map(str, sorted(brokers)))})")
    return [(brokers[node].host, brokers[node].port)]


def bootstrap_addresses(conf: dict) -> list[tuple[str, int]]:
    from kraft.client.quorum import parse_address
    return [parse_address(a.strip()) for a in conf["bootstrap.servers"].split(",") if a.strip()]


def _source(value: int) -> str:
    try:
        return ConfigSource(value).name
    except ValueError:
        return str(value)


def _entry_line(c) -> str:
    syn = ", ".join(f"{_source(s.source)}:{s.name}={s.value}" for s in (c.synonyms or []))
    value = "null" if c.is_sensitive or c.value is None else c.value
    return f"  {c.name}={value} sensitive={str(c.is_sensitive).lower()} synonyms={{{syn}}}"


def _config(args) -> dict:
    controller = getattr(args, "bootstrap_controller", None)
    return client_config(args, {"bootstrap.servers": controller} if controller else None)


def describe(args) -> int:
    from kraft.protocol.messages.configs import DescribeConfigsRequest
    conf = _config(args)
    loggers = args.entity_type == "broker-loggers"
    if loggers and not args.entity_name:
        raise ToolError("An entity name must be specified with --describe of broker-loggers")
    kind, name = (BROKER_LOGGER, args.entity_name) if loggers else (BROKER, "")
    req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.Resource(
        resource_type=kind, resource_name=name, configuration_keys=None)], include_synonyms=True,
        include_documentation=False)
    where = _broker_address(args, conf) if loggers else bootstrap_addresses(conf)
    result = asyncio.run(call(conf, where, req, 4)).results[0]
    if result.error_code:
        raise ToolError(f"{ErrorCode(result.error_code).name}: {result.error_message or ''}".rstrip(": "))
    if loggers:
        print(f"{'All' if args.all else 'Dynamic'} configs for broker-logger {name} are:")
    else:
        print("Default configs for brokers in the cluster are:")
    for c in sorted(result.configs, key=lambda c: c.name):
        if loggers or args.all or c.config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG:
            print(_entry_line(c))
    return 0


def alter(args, adds: dict, deletes: list) -> int:
    from kraft.protocol.messages.configs import IncrementalAlterConfigsRequest as I
    conf = _config(args)
    loggers = args.entity_type == "broker-loggers"
    if loggers and not args.entity_name:
        raise ToolError("An entity name must be specified with --alter of broker-loggers")
    kind, name = (BROKER_LOGGER, args.entity_name) if loggers else (BROKER, "")
    where = _broker_address(args, conf) if loggers else bootstrap_addresses(conf)
    if loggers:  # as Kafka's ConfigCommand: every logger named must exist on that broker first
        from kraft.protocol.messages.configs import DescribeConfigsRequest as D
        known = asyncio.run(call(conf, where, D(resources=[D.Resource(resource_type=kind, resource_name=name,
                                                                       configuration_keys=None)],
                                                include_synonyms=False, include_documentation=False), 4))
        names = {c.name for c in known.results[0].configs}
        invalid = [k for k in list(deletes) + list(adds) if k not in names]
        if invalid:
            raise ToolError(f"Invalid broker logger(s): {','.join(invalid)}")
    ops = ([I.Resource.Config(name=k, config_operation=OP_SET, value=v) for k, v in adds.items()]
           + [I.Resource.Config(name=k, config_operation=OP_DELETE, value=None) for k in deletes])
    req = I(resources=[I.Resource(resource_type=kind, resource_name=name, configs=ops)], validate_only=False)
    answer = asyncio.run(call(conf, where, req, 1)).responses[0]
    if answer.error_code:
        raise ToolError(f"{ErrorCode(answer.error_code).name}: {answer.error_message or ''}".rstrip(": "))
    print(f"Completed updating config for broker-logger {name}." if loggers
          else "Completed updating default config for brokers in the cluster.")
    return 0
