"""Config definitions shared by controller and broker: Kafka's topic-level configs (``LogConfig``)
with Kafka's types, defaults, validators, broker synonyms and DescribeConfigs metadata, and what
kraft does with each (``Status``); the broker-level ones are in ``broker_config_defs``.

Values travel as strings, exactly as users set them and as ``ConfigRecord`` stores them;
:meth:`ConfigDef.check` parses a string the way Kafka's ``ConfigDef.parseType`` does and runs the
validator, raising :class:`ConfigError` (INVALID_CONFIG) with Kafka's wording. A config kraft
cannot honour is refused (``Status.REFUSED``, or some values of a ``Status.LIMITED`` one) by
:meth:`ConfigDef.refusal`, so nothing is stored that does not take effect; ``docs/configs.md``
is generated from these tables (``tools/gen_config_docs.py``). Kafka 4 removed
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


class Status:
    """What kraft does with a config that passes Kafka's validation (the docs table's column)."""

    #: validated and in effect at run time (the note says where)
    APPLIED = "applied"
    #: validated and stored, and no effect in kraft: what Kafka does too without the feature the
    #: note names (tiered storage), or a part of Kafka kraft does not have yet (compaction)
    ACCEPTED = "accepted, no effect"
    #: some values are refused with INVALID_CONFIG (the note says which); the others apply
    LIMITED = "limited"
    #: every value is refused with INVALID_CONFIG and the note
    REFUSED = "refused"
    #: broker configs: cannot change at run time; refused as Kafka refuses them (INVALID_REQUEST)
    READ_ONLY = "read-only"


class Mode:
    """Kafka's dynamic update mode of a broker config (its documentation's "Update Mode")."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class ConfigDef(NamedTuple):
    name: str
    type: ConfigType
    default: str | None  # Kafka's string form of the default; None: no default
    validator: Callable | None = None
    doc: str | None = None
    #: what kraft does with it (a ``Status`` value) and, in one line, how or why not
    status: str = Status.APPLIED
    note: str = ""
    #: ``Status.LIMITED``: (name, text, parsed value) -> the INVALID_CONFIG message, or None
    refuse: Callable | None = None
    #: broker configs: Kafka's dynamic update mode (a ``Mode`` value); None for topic configs
    mode: str | None = None
    #: a human-readable form of the validator for the docs (Kafka's "Valid Values")
    valid: str = ""

    @property
    def read_only(self) -> bool:
        return self.mode == Mode.READ_ONLY

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

    def refusal(self, text: str, value) -> str | None:
        """kraft's one-line INVALID_CONFIG message for a valid ``value``, or None if it applies."""
        if self.status == Status.REFUSED:
            return f"Configuration {self.name} is not supported by kraft: {self.note}"
        return None if self.refuse is None else self.refuse(self.name, text, value)


def _defs(*defs: ConfigDef) -> dict:
    return {d.name: d for d in defs}


def only(allowed, reason: str) -> Callable:
    """A ``refuse`` hook: every value but ``allowed`` is refused for ``reason``."""
    return lambda name, text, value: (None if value == allowed
                                      else f"Invalid value {text} for configuration {name}: {reason}")


def only_as_kafka(allowed, message: str) -> Callable:
    """A ``refuse`` hook for what Kafka itself refuses in a broker like ours: its message verbatim."""
    return lambda name, text, value: None if value == allowed else message


T = ConfigType
S = Status
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_COMPACTION = "applied by the log cleaner to topics with cleanup.policy compact (docs/compaction.md)"
_TIERED = ("tiered storage only: stored with no effect, as in Kafka while remote.storage.enable is false "
           "(kraft has no remote log manager)")
NO_TIERED_STORAGE = ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
                     "remote log storage.")

#: Kafka 4's topic-level configs (``LogConfig``), by name.
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", T.LIST, "delete", one_of("compact", "delete"),
              "A string that is either \"delete\" or \"compact\" or both.", S.APPLIED,
              "delete: retention deletes old segments; compact: the log cleaner keeps the latest record per key "
              "and keyless records are refused (INVALID_RECORD); a compact-only topic is not trimmed by retention "
              "(as in Kafka)",
              valid="[compact, delete]"),
    ConfigDef("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES),
              "Final compression type for a given topic.", S.APPLIED,
              "the leader recompresses batches whose codec differs (producer: kept as sent)",
              valid="[" + ", ".join(COMPRESSION_TYPES) + "]"),
    ConfigDef("compression.gzip.level", T.INT, "-1", level_or_default(1, 9, -1),
              "The compression level to use if compression.type is set to gzip.", S.APPLIED,
              "the level the leader recompresses with when compression.type is gzip", valid="[1,...,9] or -1"),
    ConfigDef("compression.lz4.level", T.INT, "9", level_or_default(1, 17),
              "The compression level to use if compression.type is set to lz4.", S.APPLIED,
              "the level the leader recompresses with when compression.type is lz4", valid="[1,...,17]"),
    ConfigDef("compression.zstd.level", T.INT, "3", level_or_default(-131072, 22),
              "The compression level to use if compression.type is set to zstd.", S.APPLIED,
              "the level the leader recompresses with when compression.type is zstd", valid="[-131072,...,22]"),
    ConfigDef("delete.retention.ms", T.LONG, "86400000", at_least(0),
              "How long to retain delete tombstone markers for log compacted topics.", S.APPLIED, _COMPACTION,
              valid="[0,...]"),
    ConfigDef("file.delete.delay.ms", T.LONG, "60000", at_least(0),
              "The time to wait before deleting a file from the filesystem.", S.APPLIED,
              "a segment removed by retention or DeleteRecords is renamed *.deleted at once and unlinked "
              "this much later (leftovers go at the next start)", valid="[0,...]"),
    ConfigDef("flush.messages", T.LONG, str(LONG_MAX), at_least(1),
              "The number of messages written to a log partition before an fsync is forced.", S.APPLIED,
              "a flush starts once this many offsets are unflushed (kraft flushes every append within its "
              "linger anyway)", valid="[1,...]"),
    ConfigDef("flush.ms", T.LONG, str(LONG_MAX), at_least(0),
              "The time interval after which an fsync of the log is forced.", S.APPLIED,
              "appends are flushed within min(kraft.log.flush.linger.ms, flush.ms)", valid="[0,...]"),
    ConfigDef("follower.replication.throttled.replicas", T.LIST, "", throttled_replicas,
              "Replicas for which log replication should be throttled on the follower side.", S.APPLIED,
              "the broker named fetches these partitions within its follower.replication.throttled.rate while "
              "its replica is not caught up",
              valid="[partitionId]:[brokerId],... or *"),
    ConfigDef("index.interval.bytes", T.INT, "4096", at_least(0),
              "How frequently Kafka adds an index entry to its offset index.", S.APPLIED,
              "bytes between two offset-index entries, for segments created after the change", valid="[0,...]"),
    ConfigDef("leader.replication.throttled.replicas", T.LIST, "", throttled_replicas,
              "Replicas for which log replication should be throttled on the leader side.", S.APPLIED,
              "the leader named serves these partitions to out-of-sync followers within its "
              "leader.replication.throttled.rate",
              valid="[partitionId]:[brokerId],... or *"),
    ConfigDef("local.retention.bytes", T.LONG, "-2", at_least(-2),
              "The maximum size local log segments can grow to before they are deleted (tiered storage).",
              S.ACCEPTED, _TIERED, valid="[-2,...]"),
    ConfigDef("local.retention.ms", T.LONG, "-2", at_least(-2),
              "How long to keep a local log segment before deleting it (tiered storage).", S.ACCEPTED, _TIERED,
              valid="[-2,...]"),
    ConfigDef("max.compaction.lag.ms", T.LONG, str(LONG_MAX), at_least(1),
              "The maximum time a message will remain ineligible for compaction in the log.", S.APPLIED,
              _COMPACTION, valid="[1,...]"),
    ConfigDef("max.message.bytes", T.INT, "1048588", at_least(0),
              "The largest record batch size allowed by Kafka (after compression if enabled).", S.APPLIED,
              "the largest batch the leader accepts (MESSAGE_TOO_LARGE), from the next Produce on",
              valid="[0,...]"),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, "3600000", at_least(0),
              "How far in the future a message timestamp may be, relative to the broker's time.", S.APPLIED,
              "CreateTime records stamped later than now + this are refused (INVALID_TIMESTAMP)", valid="[0,...]"),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, str(LONG_MAX), at_least(0),
              "How far in the past a message timestamp may be, relative to the broker's time.", S.APPLIED,
              "CreateTime records stamped earlier than now - this are refused (INVALID_TIMESTAMP)",
              valid="[0,...]"),
    ConfigDef("message.timestamp.type", T.STRING, "CreateTime", one_of("CreateTime", "LogAppendTime"),
              "Whether the timestamp in the message is message create time or log append time.", S.APPLIED,
              "LogAppendTime: the leader stamps each batch with its own clock", valid="[CreateTime, LogAppendTime]"),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "0.5", between(0, 1),
              "How frequently the log compactor will attempt to clean the log.", S.APPLIED, _COMPACTION,
              valid="[0,...,1]"),
    ConfigDef("min.compaction.lag.ms", T.LONG, "0", at_least(0),
              "The minimum time a message will remain uncompacted in the log.", S.APPLIED, _COMPACTION,
              valid="[0,...]"),
    ConfigDef("min.insync.replicas", T.INT, "1", at_least(1),
              "The minimum number of replicas that must acknowledge a write for acks=all to succeed.", S.APPLIED,
              "acks=all needs this many in-sync replicas (NOT_ENOUGH_REPLICAS); ELR uses it when enabled",
              valid="[1,...]"),
    ConfigDef("preallocate", T.BOOLEAN, "false", None, "True if we should preallocate the file on disk.",
              S.LIMITED, "false only: kraft does not preallocate segment files",
              only(False, "kraft does not preallocate segment files")),
    ConfigDef("remote.log.copy.disable", T.BOOLEAN, "false", None,
              "Stop copying log segments to remote storage (tiered storage).", S.ACCEPTED, _TIERED),
    ConfigDef("remote.log.delete.on.disable", T.BOOLEAN, "false", None,
              "Delete remote log segments when tiered storage is disabled for the topic.", S.ACCEPTED, _TIERED),
    ConfigDef("remote.storage.enable", T.BOOLEAN, "false", None, "Enable tiered storage for the topic.",
              S.LIMITED, "false only: true gets Kafka's answer for a broker without tiered storage",
              only_as_kafka(False, NO_TIERED_STORAGE)),
    ConfigDef("retention.bytes", T.LONG, "-1", None,
              "The maximum size a partition can grow to before old log segments are discarded.", S.APPLIED,
              "whole segments below the high watermark are deleted every log.retention.check.interval.ms"),
    ConfigDef("retention.ms", T.LONG, "604800000", at_least(-1),
              "The maximum time a log is retained before old log segments are discarded.", S.APPLIED,
              "segments whose newest record is older are deleted every log.retention.check.interval.ms",
              valid="[-1,...]"),
    # Kafka 4 raised the minimum from 14 bytes to 1 MiB (KIP-1030).
    ConfigDef("segment.bytes", T.INT, "1073741824", at_least(1024 * 1024), "The segment file size for the log.",
              S.APPLIED, "the active segment rolls before an append would grow it past this", valid="[1048576,...]"),
    ConfigDef("segment.index.bytes", T.INT, "10485760", at_least(4),
              "The size of the index that maps offsets to file positions.", S.APPLIED,
              "the active segment rolls once its offset index (8 bytes an entry) or time index (12) is full",
              valid="[4,...]"),
    ConfigDef("segment.jitter.ms", T.LONG, "0", at_least(0),
              "The maximum random jitter subtracted from the scheduled segment roll time.", S.APPLIED,
              "each new segment's segment.ms is shortened by a random amount below this", valid="[0,...]"),
    ConfigDef("segment.ms", T.LONG, "604800000", at_least(1),
              "The period of time after which Kafka will force the log to roll.", S.APPLIED,
              "a non-empty segment older than this rolls at the next append (Kafka's rule)", valid="[1,...]"),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false", None,
              "Whether replicas not in the ISR may be elected as leader as a last resort.", S.APPLIED,
              "the controller may elect outside the ISR when brokers fence or unfence, and on ElectLeaders "
              "UNCLEAN (no periodic re-check of leaderless partitions)"),
)
del S, T

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



def validate_topic_configs(configs: dict) -> dict:
    """Kafka's ``LogConfig.validate`` for a topic's complete set of overrides (name -> string),
    then kraft's refusals: ConfigError (INVALID_CONFIG) for an unknown name, a bad value,
    conflicting values, tiered storage, or a value kraft cannot honour. Returns name -> parsed."""
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
    for name, value in parsed.items():
        reason = TOPIC_CONFIGS[name].refusal(configs[name], value)
        if reason:
            raise ConfigError(reason)
    return parsed
