"""Settings of one log, named after Kafka's topic configs (``segment.bytes``, ``segment.ms``,
``segment.jitter.ms``, ``segment.index.bytes``, ``index.interval.bytes``, ``max.message.bytes``,
``flush.messages``) and KRaft's ``append.linger.ms``.

Plain keyword arguments; the server maps properties onto them (a partition's from its topic's
effective configs, ``kraft.broker.topic_configs``). Validation only: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.errors import ConfigError

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class LogConfig:
    #: ``segment.bytes``: roll to a new segment before one would grow past this.
    segment_bytes: int = GIB
    #: ``segment.ms``: roll a non-empty segment whose first batch is older than this.
    segment_ms: int = 7 * 24 * 3600 * 1000
    #: ``segment.jitter.ms``: each new segment's ``segment.ms`` is shortened by a random amount
    #: below this (and below ``segment.ms``), so many logs made together do not roll together.
    segment_jitter_ms: int = 0
    #: ``segment.index.bytes``: roll once the offset index (8-byte entries) or the time index
    #: (12-byte entries) of the active segment would need more than this.
    segment_index_bytes: int = 10 * MIB
    #: ``index.interval.bytes``: bytes of batches between two offset-index entries.
    index_interval_bytes: int = 4096
    #: ``max.message.bytes``: largest batch accepted (None: only the segment size limits it).
    max_batch_bytes: int | None = None
    #: ``append.linger.ms``: how long appends may accumulate after the first unflushed one
    #: before they are durable. The flusher waits this long less the recent fsync time,
    #: then calls fdatasync (0: flush as soon as anything is appended; appends made during
    #: a flush always share the next one).
    append_linger_ms: float = 0.0
    #: ``flush.messages`` (Kafka's ``log.flush.interval.messages``): request a flush once this
    #: many offsets are unflushed, without waiting out the linger (None: no such limit).
    flush_interval_messages: int | None = None
    #: ``file.delete.delay.ms``: a segment removed by retention or DeleteRecords is renamed
    #: ``*.deleted`` at once (no reader sees it) and its files unlinked this much later (0: at once).
    file_delete_delay_ms: int = 0
    #: Run the group-commit flusher thread. Without it, ``request_flush`` flushes inline.
    background_flush: bool = True
    #: Require contiguous offsets and never-decreasing leader epochs, on append and in
    #: recovery (Raft logs and uncompacted partitions). BaseOffset and PartitionLeaderEpoch
    #: are outside the batch CRC, so this is the only check that catches damage to them.
    strict_order: bool = True

    def __post_init__(self):
        if not 14 <= self.segment_bytes <= (1 << 31) - 1:
            raise ConfigError(f"segment.bytes must be in [14, 2147483647], got {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ConfigError(f"segment.ms must be positive, got {self.segment_ms}")
        if self.segment_jitter_ms < 0:
            raise ConfigError(f"segment.jitter.ms must be >= 0, got {self.segment_jitter_ms}")
        if self.segment_index_bytes < 4:
            raise ConfigError(f"segment.index.bytes must be >= 4, got {self.segment_index_bytes}")
        if self.file_delete_delay_ms < 0:
            raise ConfigError(f"file.delete.delay.ms must be >= 0, got {self.file_delete_delay_ms}")
        if self.index_interval_bytes < 0:
            raise ConfigError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.max_batch_bytes is not None and self.max_batch_bytes <= 0:
            raise ConfigError(f"max.message.bytes must be positive, got {self.max_batch_bytes}")
        if self.flush_interval_messages is not None and self.flush_interval_messages < 1:
            raise ConfigError(f"flush.messages must be >= 1, got {self.flush_interval_messages}")
        if self.append_linger_ms < 0:
            raise ConfigError(f"append.linger.ms must be >= 0, got {self.append_linger_ms}")

    @classmethod
    def metadata(cls, **overrides) -> "LogConfig":
        """The ``__cluster_metadata`` log: ``metadata.log.segment.bytes`` 1 GiB, batches up to
        8 MiB (KafkaRaftClient). No linger here: the Raft core holds proposals for
        ``controller.quorum.append.linger.ms`` before it appends, and asks for a flush right
        after every append (as KafkaRaftClient flushes the log it appended to); a second
        linger in the log only armed a timer per append that the request then cancelled."""
        values = dict(segment_bytes=GIB, append_linger_ms=0.0, max_batch_bytes=8 * MIB)
        values.update(overrides)
        return cls(**values)
