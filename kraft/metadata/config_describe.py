"""DescribeConfigs as a pure read of a metadata image: what Kafka's ``ConfigHelper`` answers for
topics and brokers, with each config's value, source, synonyms and type.

Layers, highest priority first: a topic's own override (DYNAMIC_TOPIC_CONFIG), this node's
dynamic broker config (resource BROKER "<node id>"), the cluster-wide dynamic default (BROKER
""), the node's static ``server.properties`` (``static_configs``), then Kafka's default. A topic
config takes its value from the first layer holding it or one of its broker synonyms, converted
to the topic's unit (``log.retention.hours`` -> ms). Synonym lists follow Kafka exactly,
including its quirk of listing a topic config's broker synonyms only from the group's first
name on (``configSynonyms``' dropWhile). Used by the controller and by brokers; it must not
write anything or know who asks.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.metadata.broker_config_defs import BROKER_CONFIGS, broker_synonyms
from kraft.metadata.config_defs import TOPIC_CONFIGS, TOPIC_SYNONYMS, ConfigSource, ConfigType, parse_value
from kraft.metadata.configs import BROKER, BROKER_LOGGER, GROUP, TOPIC
from kraft.metadata.group_config_defs import BROKER_DEFAULTS, GROUP_CONFIGS, effective
from kraft.metadata.topic_names import topic_name_error
from kraft.protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResponse

Result = DescribeConfigsResponse.Result
Config = Result.Config
Synonym = Config.Synonym


class BrokerConfigLayers:
    """The broker-level layers one node sees: dynamic per-broker, dynamic cluster default, static
    and default, each a dict name -> string."""

    __slots__ = ("node_id", "per_broker", "cluster_default", "static", "defaults")

    def __init__(self, image, node_id: int, static_configs: dict | None = None):
        self.node_id = node_id
        self.per_broker = image.configs.config(BROKER, str(node_id))
        self.cluster_default = image.configs.config(BROKER, "")
        self.static = {k: _as_config_string(v) for k, v in (static_configs or {}).items() if v is not None}
        self.defaults = {d.name: d.default for d in BROKER_CONFIGS.values() if d.default is not None}

    def sources(self):
        return [(self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, ConfigSource.STATIC_BROKER_CONFIG),
                (self.defaults, ConfigSource.DEFAULT_CONFIG)]

    def synonyms(self, name: str, group: tuple, sensitive: bool, per_broker: bool = True) -> list:
        """Kafka's ``configSynonyms``: source-major, then the group's order; from ``name`` on.
        For the cluster-default resource (``per_broker`` False) only that layer's entries count."""
        found = [Synonym(name=n, value=None if sensitive else layer[n], source=int(source))
                 for layer, source in self.sources() for n in group if n in layer]
        while found and found[0].name != name:
            found.pop(0)
        if not per_broker:
            found = [s for s in found if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        return found

    def effective(self, group: tuple):
        """(name, value) of the first synonym of ``group`` set in any layer, or None."""
        for layer, _ in self.sources():
            for n in group:
                if n in layer:
                    return n, layer[n]
        return None


def _as_config_string(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _config_type(definition) -> int:
    return int(definition.type) if definition is not None else int(ConfigType.UNKNOWN)


def topic_config_value(name: str, overrides: dict, layers: BrokerConfigLayers) -> str | None:
    """The string a topic config takes on ``layers``' node: the topic's override, else the first
    broker synonym set in any layer (converted to the topic's unit), else Kafka's default."""
    if name in overrides:
        return overrides[name]
    synonyms = TOPIC_SYNONYMS.get(name)
    if synonyms:
        factors = dict(synonyms)
        found = layers.effective(tuple(n for n, _ in synonyms))
        if found is not None and found[1] is not None:
            broker_name, text = found
            if factors[broker_name] == 1:
                return text
            try:
                return str(parse_value(ConfigType.LONG, text) * factors[broker_name])
            except ValueError:
                return text  # an unparsable stored value is shown as stored
    return TOPIC_CONFIGS[name].default


def describe_topic(image, topic: str, keys, layers: BrokerConfigLayers, include_synonyms: bool,
                   include_documentation: bool) -> Result:
    result = Result(resource_type=TOPIC, resource_name=topic)
    error = topic_name_error(topic)
    if error is not None:
        result.error_code, result.error_message = int(ErrorCode.INVALID_TOPIC_EXCEPTION), error
        return result
    if image.topics.get_topic_by_name(topic) is None:
        result.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        result.error_message = f"The topic '{topic}' does not exist."
        return result
    overrides = image.configs.config(TOPIC, topic)
    for name in sorted(TOPIC_CONFIGS):
        if keys is not None and name not in keys:
            continue
        definition = TOPIC_CONFIGS[name]
        synonyms = TOPIC_SYNONYMS.get(name)
        found = []
        if synonyms:
            primary = synonyms[0][0]
            found = layers.synonyms(primary, broker_synonyms(primary), definition.sensitive)
        if name in overrides:
            found.insert(0, Synonym(name=name, value=overrides[name], source=int(ConfigSource.DYNAMIC_TOPIC_CONFIG)))
        result.configs.append(Config(
            name=name, value=topic_config_value(name, overrides, layers), read_only=False,
            config_source=found[0].source if found else int(ConfigSource.DEFAULT_CONFIG),
            is_sensitive=definition.sensitive, synonyms=found if include_synonyms else [],
            config_type=_config_type(definition), documentation=definition.doc if include_documentation else None))
    return result


def describe_group(image, group: str, keys, layers: BrokerConfigLayers, include_synonyms: bool,
                   include_documentation: bool) -> Result:
    """A GROUP resource (Kafka 4): each group config, the group's own value (DYNAMIC_GROUP_CONFIG)
    or the broker setting it defaults to (STATIC_BROKER_CONFIG when set there, else
    DEFAULT_CONFIG). A group need not exist."""
    result = Result(resource_type=GROUP, resource_name=group)
    if group == "":
        result.error_code, result.error_message = int(ErrorCode.INVALID_REQUEST), "Default group resources are not allowed."
        return result
    overrides = image.configs.config(GROUP, group)
    values = effective(overrides, layers.static)
    for name in sorted(GROUP_CONFIGS):
        if keys is not None and name not in keys:
            continue
        definition = GROUP_CONFIGS[name]
        broker_name = BROKER_DEFAULTS[name]
        if name in overrides:
            source = ConfigSource.GROUP_CONFIG
        elif broker_name in layers.static:
            source = ConfigSource.STATIC_BROKER_CONFIG
        else:
            source = ConfigSource.DEFAULT_CONFIG
        synonyms = [Synonym(name=name, value=str(values[name]), source=int(source))]
        result.configs.append(Config(
            name=name, value=str(values[name]), read_only=False, config_source=int(source), is_sensitive=False,
            synonyms=synonyms if include_synonyms else [], config_type=_config_type(definition),
            documentation=definition.doc if include_documentation else None))
    return result


def _broker_entry(name: str, value, layers: BrokerConfigLayers, per_broker: bool, include_synonyms: bool,
                  include_documentation: bool) -> Config:
    definition = BROKER_CONFIGS.get(name)
    sensitive = definition is None or definition.sensitive  # Kafka: unknown type may be sensitive
    found = layers.synonyms(name, broker_synonyms(name), sensitive, per_broker)
    return Config(
        name=name, value=None if sensitive else value, read_only=definition is not None and definition.read_only,
        config_source=found[0].source if found else int(ConfigSource.DEFAULT_CONFIG), is_sensitive=sensitive,
        synonyms=found if include_synonyms else [], config_type=_config_type(definition),
        documentation=(definition.doc if definition is not None else None) if include_documentation else None)


def describe_broker(name: str, keys, layers: BrokerConfigLayers, include_synonyms: bool,
                    include_documentation: bool) -> Result:
    result = Result(resource_type=BROKER, resource_name=name)
    if name == "":
        # The cluster-wide default resource lists only what is set there.
        entries = sorted(layers.cluster_default.items())
        per_broker = False
    else:
        try:
            broker_id = int(name)
        except ValueError:
            result.error_code = int(ErrorCode.INVALID_REQUEST)
            result.error_message = f"Broker id must be an integer, but it is: {name}"
            return result
        if broker_id != layers.node_id:
            result.error_code = int(ErrorCode.INVALID_REQUEST)
            result.error_message = (f"Unexpected broker id, expected {layers.node_id} or empty string, "
                                    f"but received {name}")
            return result
        per_broker = True
        entries = []
        for config_name in sorted(BROKER_CONFIGS):
            found = layers.effective((config_name,))
            entries.append((config_name, None if found is None else found[1]))
    for config_name, value in entries:
        if keys is None or config_name in keys:
            result.configs.append(_broker_entry(config_name, value, layers, per_broker, include_synonyms,
                                                include_documentation))
    return result


def describe_configs(image, request: DescribeConfigsRequest, *, node_id: int,
                     static_configs: dict | None = None) -> DescribeConfigsResponse:
    """The DescribeConfigs answer of node ``node_id`` over ``image`` (any request version: fields a
    version lacks are simply not encoded)."""
    layers = BrokerConfigLayers(image, node_id, static_configs)
    response = DescribeConfigsResponse()
    for resource in request.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        kind, name = resource.resource_type, resource.resource_name
        if kind == TOPIC:
            result = describe_topic(image, name, keys, layers, request.include_synonyms,
                                    request.include_documentation)
        elif kind == BROKER:
            result = describe_broker(name, keys, layers, request.include_synonyms, request.include_documentation)
        elif kind == GROUP:
            result = describe_group(image, name, keys, layers, request.include_synonyms,
                                    request.include_documentation)
        elif kind == BROKER_LOGGER:
            # Log levels live in the node's process, not in the metadata image.
            result = Result(resource_type=kind, resource_name=name, error_code=int(ErrorCode.INVALID_REQUEST),
                            error_message="BROKER_LOGGER configs are described by the broker itself")
        else:
            result = Result(resource_type=kind, resource_name=name, error_code=int(ErrorCode.INVALID_REQUEST),
                            error_message=f"Unsupported resource type: {kind}")
        response.results.append(result)
    return response
