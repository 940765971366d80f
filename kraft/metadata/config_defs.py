"""Config definitions shared by controller and broker: Kafka's topic-level configs (``LogConfig``)
and the broker-level configs a cluster can change at run time, with Kafka's types, defaults,
validators, synonyms and DescribeConfigs metadata (type, read-only, sensitive, documentation).

Values travel as strings, exactly as users set them and as ``ConfigRecord`` stores them;
:meth:`ConfigDef.check` parses a string the way Kafka's ``ConfigDef.parseType`` does and runs the
validator, raising :class:`ConfigError` (INVALID_CONFIG) with Kafka's wording. Kafka 4 removed
``message.format.version``, ``message.timestamp.difference.max.ms`` and
``message.downconversion.enable``, so they are unknown here too. This module is data plus pure
functions: it must not know about the image, records or requests.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Callable, NamedTuple

from kraft.errors import ConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigType(IntEnum):
    """DescribeConfigsResponse ConfigType (Kafka's ``ConfigType`` of the admin API)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigsResponse ConfigSource / synonym Source (Kafka's ``ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


# --- parsing and validators ------------------------------------------------------------------

_INT_RANGES = {ConfigType.INT: (-2**31, INT_MAX), ConfigType.SHORT: (-2**15, 2**15 - 1),
               ConfigType.LONG: (-2**63, LONG_MAX)}
_JAVA_INT = re.compile(r"[+-]?\d+")


def parse_value(config_type: ConfigType, text: str):
    """A config string as Kafka's ``ConfigDef.parseType`` reads it; ValueError with Kafka's reason."""
    trimmed = text.strip()
    if config_type == ConfigType.BOOLEAN:
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise ValueError("Expected value to be either true or false")
    if config_type in _INT_RANGES:
        lo, hi = _INT_RANGES[config_type]
        if not _JAVA_INT.fullmatch(trimmed) or not lo <= int(trimmed) <= hi:
            raise ValueError(f"Not a number of type {config_type.name}")
        return int(trimmed)
    if config_type == ConfigType.DOUBLE:
        try:
            value = float(trimmed)
        except ValueError:
            raise ValueError("Not a number of type DOUBLE") from None
        return value
    if config_type == ConfigType.LIST:
        return [] if not trimmed else re.split(r"\s*,\s*", trimmed)
    if config_type == ConfigType.STRING:
        return trimmed
    return text  # CLASS, PASSWORD: kept as given


def at_least(minimum) -> Callable:
    def check(value):
        if value is not None and value < minimum:
            return f"Value must be at least {minimum}"
        return None
    return check


def between(lo, hi) -> Callable:
    def check(value):
        if value is not None and value < lo:
            return f"Value must be at least {lo}"
        if value is not None and value > hi:
            return f"Value must be no more than {hi}"
        return None
    return check


def one_of(*valid: str) -> Callable:
    def check(value):
        values = value if isinstance(value, list) else [value]
        if any(v not in valid for v in values if v is not None):
            return f"String must be one of: {', '.join(valid)}"
        return None
    return check


def level_or_default(lo: int, hi: int, default: int | None = None) -> Callable:
    """Kafka's compression level validators: a level in [lo, hi], or the codec's own default."""
    def check(value):
        if value == default or lo <= value <= hi:
            return None
        return f"Value must be between {lo} and {hi}" + ("" if default is None else f" or {default}")
    return check


_THROTTLED = re.compile(r"(\s*\d+\s*:\s*\d+\s*)")


def throttled_replicas(value):
    """Kafka's ``ThrottledReplicaListValidator``: ``*`` or ``partition:broker`` pairs."""
    if value == ["*"] or all(_THROTTLED.fullmatch(v) for v in value):
        return None
    return "must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],..."


class ConfigDef(NamedTuple):
    name: str
    type: ConfigType
    default: str | None  # Kafka's string form of the default; None: no default
    validator: Callable | None = None
    doc: str | None = None
    #: broker configs only: True when the config cannot be changed at run time
    read_only: bool = False

    @property
    def sensitive(self) -> bool:
        return self.type == ConfigType.PASSWORD

    @property
    def splittable(self) -> bool:
        """APPEND and SUBTRACT apply only to LIST configs."""
        return self.type == ConfigType.LIST

    def check(self, text: str):
        """The parsed value of ``text``; ConfigError (INVALID_CONFIG) in Kafka's words if invalid."""
        try:
            value = parse_value(self.type, text)
        except ValueError as e:
            raise ConfigError(f"Invalid value {text} for configuration {self.name}: {e}") from None
        reason = self.validator(value) if self.validator is not None else None
        if reason:
            raise ConfigError(f"Invalid value {text} for configuration {self.name}: {reason}")
        return value


def _defs(*defs: ConfigDef) -> dict:
    return {d.name: d for d in defs}


T = ConfigType
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

#: Kafka 4's topic-level configs (``LogConfig``), by name.
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", T.LIST, "delete", one_of("compact", "delete"),
              "A string that is either \"delete\" or \"compact\" or both."),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES),
              "Final compression type for a given topic."),
    ConfigDef("compression.gzip.level", T.INT, "-1", level_or_default(1, 9, -1),
              "The compression level to use if compression.type is set to gzip."),
    ConfigDef("compression.lz4.level", T.INT, "9", level_or_default(1, 17),
              "The compression level to use if compression.type is set to lz4."),
    ConfigDef("compression.zstd.level", T.INT, "3", level_or_default(-131072, 22),
              "The compression level to use if compression.type is set to zstd."),
    ConfigDef("delete.retention.ms", T.LONG, "86400000", at_least(0),
              "How long to retain delete tombstone markers for log compacted topics."),
    ConfigDef("file.delete.delay.ms", T.LONG, "60000", at_least(0),
              "The time to wait before deleting a file from the filesystem."),
    ConfigDef("flush.messages", T.LONG, str(LONG_MAX), at_least(1),
              "The number of messages written to a log partition before an fsync is forced."),
    ConfigDef("flush.ms", T.LONG, str(LONG_MAX), at_least(0),
              "The time interval after which an fsync of the log is forced."),
    ConfigDef("follower.replication.throttled.replicas", T.LIST, "", throttled_replicas,
              "Replicas for which log replication should be throttled on the follower side."),
    ConfigDef("index.interval.bytes", T.INT, "4096", at_least(0),
              "How frequently Kafka adds an index entry to its offset index."),
    ConfigDef("leader.replication.throttled.replicas", T.LIST, "", throttled_replicas,
              "Replicas for which log replication should be throttled on the leader side."),
    ConfigDef("local.retention.bytes", T.LONG, "-2", at_least(-2),
              "The maximum size local log segments can grow to before they are deleted (tiered storage)."),
    ConfigDef("local.retention.ms", T.LONG, "-2", at_least(-2),
              "How long to keep a local log segment before deleting it (tiered storage)."),
    ConfigDef("max.compaction.lag.ms", T.LONG, str(LONG_MAX), at_least(1),
              "The maximum time a message will remain ineligible for compaction in the log."),
    ConfigDef("max.message.bytes", T.INT, "1048588", at_least(0),
              "The largest record batch size allowed by Kafka (after compression if enabled)."),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, "3600000", at_least(0),
              "How far in the future a message timestamp may be, relative to the broker's time."),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, str(LONG_MAX), at_least(0),
              "How far in the past a message timestamp may be, relative to the broker's time."),
    ConfigDef("message.timestamp.type", T.STRING, "CreateTime", one_of("CreateTime", "LogAppendTime"),
              "Whether the timestamp in the message is message create time or log append time."),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "0.5", between(0, 1),
              "How frequently the log compactor will attempt to clean the log."),
    ConfigDef("min.compaction.lag.ms", T.LONG, "0", at_least(0),
              "The minimum time a message will remain uncompacted in the log."),
    ConfigDef("min.insync.replicas", T.INT, "1", at_least(1),
              "The minimum number of replicas that must acknowledge a write for acks=all to succeed."),
    ConfigDef("preallocate", T.BOOLEAN, "false", None, "True if we should preallocate the file on disk."),
    ConfigDef("remote.log.copy.disable", T.BOOLEAN, "false", None,
              "Stop copying log segments to remote storage (tiered storage)."),
    ConfigDef("remote.log.delete.on.disable", T.BOOLEAN, "false", None,
              "Delete remote log segments when tiered storage is disabled for the topic."),
    ConfigDef("remote.storage.enable", T.BOOLEAN, "false", None, "Enable tiered storage for the topic."),
    ConfigDef("retention.bytes", T.LONG, "-1", None,
              "The maximum size a partition can grow to before old log segments are discarded."),
    ConfigDef("retention.ms", T.LONG, "604800000", at_least(-1),
              "The maximum time a log is retained before old log segments are discarded."),
    # Kafka 4 raised the minimum from 14 bytes to 1 MiB (KIP-1030).
    ConfigDef("segment.bytes", T.INT, "1073741824", at_least(1024 * 1024), "The segment file size for the log."),
    ConfigDef("segment.index.bytes", T.INT, "10485760", at_least(4),
              "The size of the index that maps offsets to file positions."),
    ConfigDef("segment.jitter.ms", T.LONG, "0", at_least(0),
              "The maximum random jitter subtracted from the scheduled segment roll time."),
    ConfigDef("segment.ms", T.LONG, "604800000", at_least(1),
              "The period of time after which Kafka will force the log to roll."),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", None,
              "Whether replicas not in the ISR may be elected as leader as a last resort."),
)

HOURS, MINUTES = 3_600_000, 60_000

#: topic config -> its broker synonyms in priority order, each (broker config name, factor to
#: convert the broker value into the topic's unit); Kafka's ``ServerTopicConfigSynonyms``.
TOPIC_SYNONYMS: dict[str, tuple] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOURS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOURS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", MINUTES), ("log.retention.hours", HOURS)),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}


def _broker_synonym(topic_name: str, broker_name: str, default: str | None, type_=None, validator=None) -> ConfigDef:
    topic = TOPIC_CONFIGS[topic_name]
    return ConfigDef(broker_name, type_ or topic.type, default, validator or topic.validator,
                     f"The broker default for {topic_name}: {topic.doc}")


#: Broker configs: the topic defaults a cluster may change at run time (cluster-wide, resource
#: name "", or per broker), a few other dynamic ones, and read-only ones DescribeConfigs shows.
BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    *(_broker_synonym(topic, names[0][0], TOPIC_CONFIGS[topic].default)
      for topic, names in TOPIC_SYNONYMS.items()
      if topic not in ("segment.ms", "segment.jitter.ms", "retention.ms", "flush.ms")),
    # Kafka gives the *.ms forms no default: the hours (or scheduler interval) form supplies it.
    _broker_synonym("segment.ms", "log.roll.ms", None),
    _broker_synonym("segment.ms", "log.roll.hours", "168", T.INT, at_least(1)),
    _broker_synonym("segment.jitter.ms", "log.roll.jitter.ms", None),
    _broker_synonym("segment.jitter.ms", "log.roll.jitter.hours", "0", T.INT, at_least(0)),
    _broker_synonym("retention.ms", "log.retention.ms", None),
    _broker_synonym("retention.ms", "log.retention.minutes", None, T.INT),
    _broker_synonym("retention.ms", "log.retention.hours", "168", T.INT),
    _broker_synonym("flush.ms", "log.flush.interval.ms", None),
    _broker_synonym("flush.ms", "log.flush.scheduler.interval.ms", str(LONG_MAX)),
    ConfigDef("background.threads", T.INT, "10", at_least(1), "Threads for background processing tasks."),
    ConfigDef("follower.replication.throttled.rate", T.LONG, str(LONG_MAX), at_least(0),
              "Upper bound on follower replication traffic in bytes/s for throttled replicas."),
    ConfigDef("leader.replication.throttled.rate", T.LONG, str(LONG_MAX), at_least(0),
              "Upper bound on leader replication traffic in bytes/s for throttled replicas."),
    ConfigDef("log.cleaner.threads", T.INT, "1", at_least(0), "Background threads for log cleaning."),
    ConfigDef("max.connections", T.INT, str(INT_MAX), at_least(0), "Maximum connections the broker allows."),
    ConfigDef("max.connections.per.ip", T.INT, str(INT_MAX), at_least(0), "Maximum connections from one address."),
    ConfigDef("num.io.threads", T.INT, "8", at_least(1), "Threads the server uses to process requests."),
    ConfigDef("num.network.threads", T.INT, "3", at_least(1), "Threads receiving and sending on the network."),
    ConfigDef("num.recovery.threads.per.data.dir", T.INT, "2", at_least(1),
              "Threads per data directory for log recovery at startup and flushing at shutdown."),
    ConfigDef("num.replica.fetchers", T.INT, "1", None, "Fetcher threads replicating from each source broker."),
    ConfigDef("ssl.key.password", T.PASSWORD, None, None, "The password of the private key in the key store."),
    # read-only: set in server.properties only
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, "true", None, "Enable auto creation of topics.", True),
    ConfigDef("broker.id", T.INT, "-1", None, "The broker id (node.id in KRaft).", True),
    ConfigDef("default.replication.factor", T.INT, "1", None, "Default replication factor of new topics.", True),
    ConfigDef("delete.topic.enable", T.BOOLEAN, "true", None, "Enables deleting topics.", True),
    ConfigDef("log.dirs", T.STRING, None, None, "The directories in which the log data is kept.", True),
    ConfigDef("node.id", T.INT, "-1", None, "The node id of this server.", True),
    ConfigDef("num.partitions", T.INT, "1", at_least(1), "Default number of partitions of new topics.", True),
    ConfigDef("process.roles", T.LIST, "", one_of("broker", "controller"), "The roles of this server.", True),
)
del T

#: broker config -> the names of its synonym group in priority order (Kafka's
#: ``DynamicBrokerConfig.brokerConfigSynonyms``); a config outside any group is its own group.
_BROKER_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
BROKER_SYNONYM_GROUPS: dict[str, tuple] = {name: group for group in _BROKER_GROUPS for name in group}


def broker_synonyms(name: str) -> tuple:
    return BROKER_SYNONYM_GROUPS.get(name, (name,))


def validate_topic_configs(configs: dict) -> None:
    """Kafka's ``LogConfig.validate`` for a topic's complete set of overrides (name -> string):
    ConfigError (INVALID_CONFIG) for an unknown name, a bad value or conflicting values."""
    parsed = {}
    for name, text in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if text is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}")
        parsed[name] = definition.check(text)
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if min_lag > max_lag:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                          f"max.compaction.lag.ms ({max_lag})")


def validate_broker_configs(configs: dict) -> None:
    """Values of known broker configs must parse and pass their validator; read-only ones may not
    be set at run time. Unknown names pass (plugins and listener-prefixed configs exist)."""
    for name, text in configs.items():
        definition = BROKER_CONFIGS.get(name)
        if definition is None or text is None:
            continue
        if definition.read_only:
            raise ConfigError(f"Cannot update these configs dynamically: {name}")
        definition.check(text)
