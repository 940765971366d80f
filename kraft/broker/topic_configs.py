"""Each topic's effective configs on this broker, as Kafka's ``LogConfig`` of its logs: the
topic's override, else this broker's dynamic config, else the cluster-wide dynamic default,
else ``server.properties``, else Kafka's default (``config_describe.topic_config_value``, the
same resolution DescribeConfigs shows). Read from the current image on every use, so a config
change takes effect with the image that carries it: the next Produce, roll or retention run
sees it, with no restart.

Values were validated by the controller; one that still does not parse (written before that,
or by another implementation) falls back to Kafka's default with a warning, never an error on
the request path. Pure reads of the image: no I/O.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import NamedTuple

from kraft.log.config import LogConfig
from kraft.metadata.config_defs import TOPIC_CONFIGS, parse_value
from kraft.metadata.config_describe import BrokerConfigLayers, topic_config_value
from kraft.metadata.configs import BROKER, TOPIC
from kraft.records.format import Compression

log = logging.getLogger("kraft.broker.configs")

_LONG_MAX = (1 << 63) - 1
#: compression.type -> the codec the leader writes (None: as the producer sent it)
CODECS = {"producer": None, "uncompressed": Compression.NONE, "gzip": Compression.GZIP,
          "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
_LEVELS = {Compression.GZIP: "compression.gzip.level", Compression.LZ4: "compression.lz4.level",
           Compression.ZSTD: "compression.zstd.level"}


class TopicConfig(NamedTuple):
    """The parsed effective configs of one topic that the broker acts on."""

    max_message_bytes: int
    min_insync_replicas: int
    log_append_time: bool
    #: CreateTime records must be stamped within [now - before, now + after]
    timestamp_before_ms: int
    timestamp_after_ms: int
    delete: bool  # cleanup.policy has delete: retention trims the log
    compact: bool  # cleanup.policy has compact: records need a key
    retention_ms: int
    retention_bytes: int
    #: the codec batches are rewritten to (None: kept) and its level (None: the codec's default)
    codec: int | None
    level: int | None
    #: roll, index and flush settings (the log's ``LogConfig`` fields)
    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    flush_messages: int | None
    flush_ms: int
    file_delete_delay_ms: int = 60_000
    #: compaction (cleanup.policy compact): the cleaner's per-topic settings
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    delete_retention_ms: int = 86_400_000

    def log_config(self, base: LogConfig) -> LogConfig:
        """``base`` (the broker's log settings) with this topic's roll, index and flush settings;
        ``base`` itself when nothing differs."""
        linger = base.append_linger_ms if self.flush_ms >= _LONG_MAX else min(base.append_linger_ms, self.flush_ms)
        fields = dict(segment_bytes=self.segment_bytes, segment_ms=self.segment_ms,
                      segment_jitter_ms=self.segment_jitter_ms, segment_index_bytes=self.segment_index_bytes,
                      index_interval_bytes=self.index_interval_bytes, flush_interval_messages=self.flush_messages,
                      append_linger_ms=float(linger), file_delete_delay_ms=self.file_delete_delay_ms,
                      # Kafka never requires contiguous offsets in a partition log: a compacted
                      # log has gaps, and keeps them after the topic turns to cleanup.policy=delete
                      # (a follower refusing them would stall for good); offsets must still grow.
                      strict_order=False)
        if all(getattr(base, k) == v for k, v in fields.items()):
            return base
        return dataclasses.replace(base, **fields)


class TopicConfigs:
    """``get(image, topic)``: the topic's ``TopicConfig`` on broker ``node_id`` with the given
    static (server.properties) values, cached until the image's configs change."""

    def __init__(self, node_id: int, static_configs: dict | None = None):
        self.node_id = node_id
        self.static = {k: str(v) for k, v in (static_configs or {}).items() if v is not None}
        self._configs = None  # the ConfigurationsImage the cache was built from
        self._layers: BrokerConfigLayers | None = None
        self._cache: dict[str, TopicConfig] = {}

    def changed_topics(self, previous, image):
        """Topics whose effective configs may differ between two images: None for all (a broker
        resource changed), else a set of names (possibly empty)."""
        old, new = previous.configs.resources, image.configs.resources
        if old is new:
            return set()
        for resource in (BROKER, str(self.node_id)), (BROKER, ""):
            if old.get(resource) is not new.get(resource):
                return None
        return {name for (kind, name), value in new.items() if kind == TOPIC and old.get((kind, name)) is not value} | \
               {name for (kind, name) in old if kind == TOPIC and (kind, name) not in new}

    def get(self, image, topic: str) -> TopicConfig:
        if image.configs is not self._configs:
            self._configs = image.configs
            self._layers = BrokerConfigLayers(image, self.node_id, self.static)
            self._cache = {}
        cfg = self._cache.get(topic)
        if cfg is None:
            cfg = self._cache[topic] = self._resolve(image.configs.config(TOPIC, topic), topic)
        return cfg

    def _value(self, overrides: dict, topic: str, name: str):
        definition = TOPIC_CONFIGS[name]
        text = topic_config_value(name, overrides, self._layers)
        try:
            return parse_value(definition.type, text)
        except (TypeError, ValueError):
            log.warning("topic %s: %s=%r does not parse; Kafka's default %s applies", topic, name, text,
                        definition.default)
            return parse_value(definition.type, definition.default)

    def _resolve(self, overrides: dict, topic: str) -> TopicConfig:
        def v(name):
            return self._value(overrides, topic, name)
        policy = v("cleanup.policy")
        codec = CODECS.get(v("compression.type"))
        level_name = _LEVELS.get(codec)
        flush_messages = v("flush.messages")
        return TopicConfig(
            max_message_bytes=v("max.message.bytes"), min_insync_replicas=max(1, v("min.insync.replicas")),
            log_append_time=v("message.timestamp.type") == "LogAppendTime",
            timestamp_before_ms=v("message.timestamp.before.max.ms"),
            timestamp_after_ms=v("message.timestamp.after.max.ms"),
            delete="delete" in policy, compact="compact" in policy,
            retention_ms=v("retention.ms"), retention_bytes=v("retention.bytes"),
            codec=codec, level=v(level_name) if level_name else None,
            segment_bytes=v("segment.bytes"), segment_ms=v("segment.ms"), segment_jitter_ms=v("segment.jitter.ms"),
            segment_index_bytes=v("segment.index.bytes"), index_interval_bytes=v("index.interval.bytes"),
            flush_messages=None if flush_messages >= _LONG_MAX else flush_messages, flush_ms=v("flush.ms"),
            file_delete_delay_ms=v("file.delete.delay.ms"), min_cleanable_ratio=v("min.cleanable.dirty.ratio"), min_compaction_lag_ms=v("min.compaction.lag.ms"),
            max_compaction_lag_ms=v("max.compaction.lag.ms"), delete_retention_ms=v("delete.retention.ms"))


def follow_topic_configs(logs, state, base: LogConfig) -> None:
    """Make the partition logs ``logs`` (``PartitionLogs``) take their topic's effective configs
    from ``state`` (``BrokerState``): ``base`` with the topic's roll, index and flush settings
    for each log it opens or creates (``reconfigure`` after an image changes them), and the
    topic's retention and cleanup policy for each retention run."""
    def config_of(topic: str) -> LogConfig:
        return state.topic_config(topic).log_config(base)

    def retention_of(topic: str) -> tuple:
        config = state.topic_config(topic)
        return config.retention_ms, config.retention_bytes, config.delete
    logs.config_of, logs.retention_of = config_of, retention_of
