"""PartitionLogs: the broker's partition logs under ``log.dirs``, in Kafka's layout.

Each partition is a ``SegmentedLog`` in ``<log.dir>/<topic>-<N>/`` (``.log``, ``.index``,
``.timeindex``, ``leader-epoch-checkpoint``) with ``partition.metadata`` holding its topic
id. Each log directory holds ``recovery-point-offset-checkpoint`` (the flushed offsets, so
a restart CRC-scans only what may be torn), ``replication-offset-checkpoint`` (high
watermarks) and ``log-start-offset-checkpoint``, in Kafka's checkpoint format. Open
recovers every partition; a removed partition's directory is renamed to
``<topic>-<N>.<uuid>-delete`` at once and removed on a worker thread (Kafka's async delete);
``-delete`` directories left by a crash are removed at open.

Which partitions exist is decided by the caller (``image_publisher``); this module only
creates, opens, deletes and checkpoints. One owner thread (the event loop) calls it. The
logs of one log dir share a ``SharedFlusher`` (``flusher_threads`` threads run every
partition's group-commit cycles: 2,000 partitions do not mean 2,000 threads); its threads
call ``on_flushed``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import shutil
import uuid
from typing import Callable

from kraft.broker import partition_dir as names
from kraft.broker.log_retention import retention_start_offset
from kraft.errors import StateFileError
from kraft.log import files
from kraft.log.checkpoint import OffsetCheckpointFile
from kraft.log.config import LogConfig
from kraft.log.replicated_log import METADATA_DIR
from kraft.log.segmented_log import SegmentedLog
from kraft.log.shared_flusher import SharedFlusher

log = logging.getLogger("kraft.broker.logs")

#: threads making the files of new partition logs at once (``create_many``)
CREATE_WORKERS = 32
#: Kafka's CleanShutdownFileHandler content (the broker epoch is not known here).
CLEAN_SHUTDOWN_TEXT = b'{"version":0,"brokerEpoch":-1}\n'


class PartitionLog:
    """One local partition: its log and what the broker keeps beside it.

    Invariant: ``log.start_offset <= high_watermark <= log.end_offset``."""

    __slots__ = ("topic", "partition", "topic_id", "log", "log_dir", "high_watermark")

    def __init__(self, topic: str, partition: int, topic_id: uuid.UUID, seg_log: SegmentedLog, log_dir: str,
                 high_watermark: int):
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = seg_log
        self.log_dir = log_dir
        self.high_watermark = max(seg_log.start_offset, min(high_watermark, seg_log.end_offset))

    @property
    def directory(self) -> str:
        return self.log.directory

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, hw={self.high_watermark}, {self.log!r})"


class PartitionLogs:
    def __init__(self, log_dirs, config: LogConfig, *, retention_ms: int = -1, retention_bytes: int = -1,
                 on_flushed: Callable[[PartitionLog, int], None] | None = None, clock_ms=None,
                 flusher_threads: int = 2):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.config = config
        self.retention_ms = retention_ms
        self.retention_bytes = retention_bytes
        self.on_flushed = on_flushed
        self.clock_ms = clock_ms
        #: topic -> its logs' ``LogConfig`` (None: ``config`` for all); the broker sets it to the
        #: topics' effective configs
        self.config_of: Callable[[str], LogConfig] | None = None
        #: topic -> (retention.ms, retention.bytes, whether cleanup.policy has delete); None:
        #: the broker-wide values above for every topic
        self.retention_of: Callable[[str], tuple] | None = None
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self.flusher_threads = flusher_threads
        self._flushers: dict[str, SharedFlusher] = {}  # log dir -> its flusher, made on first use
        # Directory removal (possibly gigabytes) stays off the loop thread.
        self._deleter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-log-delete")
        self._deletions: list[concurrent.futures.Future] = []
        self._closed = False
        #: Log dirs whose every partition log ``open_all`` opened: only their checkpoints may
        #: be written whole, and only they are marked cleanly shut down at close.
        self._loaded: set[str] = set()

    # --- opening --------------------------------------------------------------------------------
    def open_all(self, threads: int = 1) -> list[PartitionLog]:
        """Recover every partition directory in every log dir, ``threads`` logs at once per log
        dir (Kafka's ``num.recovery.threads.per.data.dir``: reads, scans and fsyncs release
        the GIL); remove leftover ``-delete`` directories in the background. After a clean
        shutdown (``.kafka_cleanshutdown``) nothing is scanned or fsynced. Returns the opened
        partitions."""
        opened = []
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            marker = os.path.join(log_dir, names.CLEAN_SHUTDOWN_FILE)
            clean = os.path.exists(marker)
            todo = self._partition_dirs(log_dir)
            recovery = self._read_checkpoint(log_dir, names.RECOVERY_POINT_CHECKPOINT)
            starts = self._read_checkpoint(log_dir, names.LOG_START_CHECKPOINT)
            hws = self._read_checkpoint(log_dir, names.REPLICATION_CHECKPOINT)

            def one(item, log_dir=log_dir, clean=clean):
                tp, path, topic_id = item
                seg_log = self._open_log(log_dir, path, recovery.get(tp), starts.get(tp), self._config_of(tp[0]),
                                         clean, sync=False)
                return PartitionLog(tp[0], tp[1], topic_id, seg_log, log_dir, hws.get(tp, 0))

            if todo:  # the first on this thread: what a log dir sets up lazily is then in place
                plogs = [one(todo[0])]
                if threads > 1 and len(todo) > 1:
                    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="kraft-log-recovery") as pool:
                        plogs += pool.map(one, todo[1:])  # the first failure is raised
                else:
                    plogs += map(one, todo[1:])
                if not clean:  # recovered tails may be in the page cache only: one syncfs for all
                    files.sync_file_system(log_dir, [(p.log.segments[-1].fd, p.directory) for p in plogs])
                for plog in plogs:
                    self._watch(plog)
                    self._logs[(plog.topic, plog.partition)] = plog
                opened += plogs
            self._loaded.add(log_dir)
            if clean:
                files.remove_durably(marker)
            log.info("%s: %d partition logs opened after %s", log_dir, len(todo),
                     "a clean shutdown" if clean else "an unclean shutdown (recovered from the recovery points)")
        return opened

    def _partition_dirs(self, log_dir: str) -> list:
        """(topic-partition, path, topic id) of each partition directory of ``log_dir``."""
        out = []
        for entry in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, entry)
            if names.is_deleted_dir(entry):
                if os.path.isdir(path):
                    self._remove_later(path)
                continue
            tp = names.parse_partition_dir(entry)
            if tp is None or entry == METADATA_DIR or not os.path.isdir(path):
                continue  # the node's metadata log, when it shares the dir; files
            topic_id = names.read_partition_metadata(os.path.join(path, names.PARTITION_METADATA_FILE))
            if topic_id is None:
                log.warning("%s has no %s; left alone until the metadata names it", path,
                            names.PARTITION_METADATA_FILE)
                continue
            if tp in self._logs:
                raise StateFileError(f"partition {tp[0]}-{tp[1]} is in two log directories: "
                                     f"{self._logs[tp].directory} and {path}")
            out.append((tp, path, topic_id))
        return out

    def _read_checkpoint(self, log_dir: str, name: str) -> dict:
        return OffsetCheckpointFile(os.path.join(log_dir, name)).read()

    def _open_log(self, log_dir: str, path: str, recovery_point, start_offset, config: LogConfig,
                  clean: bool = False, sync: bool = True) -> SegmentedLog:
        kwargs = {} if self.clock_ms is None else {"clock_ms": self.clock_ms}
        flusher = self._flushers.get(log_dir)
        if flusher is None and self.config.background_flush:
            flusher = self._flushers[log_dir] = SharedFlusher(os.path.basename(log_dir), self.flusher_threads)
        return SegmentedLog.open(path, config, recovery_point=recovery_point, log_start_offset=start_offset,
                                 flusher=flusher, clean=clean, sync=sync, **kwargs)

    def _config_of(self, topic: str) -> LogConfig:
        return self.config if self.config_of is None else self.config_of(topic)

    def reconfigure(self, topics=None) -> int:
        """Give the logs of ``topics`` (None: every log) their topic's current ``LogConfig``
        (after a config change); returns the logs whose settings changed."""
        changed = 0
        for plog in list(self._logs.values()):
            if topics is None or plog.topic in topics:
                config = self._config_of(plog.topic)
                if config != plog.log.config:
                    plog.log.reconfigure(config)
                    changed += 1
        return changed

    def _watch(self, plog: PartitionLog) -> None:
        if self.on_flushed is not None:
            plog.log.set_flush_listener(lambda offset, p=plog: self.on_flushed(p, offset))

    # --- lookups --------------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def __iter__(self):
        return iter(list(self._logs.values()))

    def __len__(self) -> int:
        return len(self._logs)

    # --- creating and deleting ------------------------------------------------------------------
    def create(self, topic: str, partition: int, topic_id: uuid.UUID) -> PartitionLog:
        """The partition's log, created empty in the log dir holding the fewest partitions
        (Kafka's default placement) if it does not exist yet."""
        return self.create_many([((topic, partition), topic_id)])[0]

    def create_many(self, wanted) -> list[PartitionLog]:
        """``create`` for every ``((topic, partition), topic_id)`` in ``wanted``; the files of
        new logs are made on up to ``CREATE_WORKERS`` threads at once. A new log costs about six
        fsyncs (partition.metadata, the epoch checkpoint, their directories): one after the
        other, a topic of 1,000 partitions held the event loop for 17 s on a loaded disk, longer
        than a broker session, so every broker was fenced. The fsyncs release the GIL and the
        file system commits concurrent ones together (1.1 s for the same 1,000 on 32 threads)."""
        counts = {d: 0 for d in self.log_dirs}
        for plog in self._logs.values():
            counts[plog.log_dir] = counts.get(plog.log_dir, 0) + 1
        out, todo = [], []
        for tp, topic_id in wanted:
            existing = self._logs.get(tp)
            if existing is not None:
                out.append(existing)
                continue
            log_dir = min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))
            counts[log_dir] += 1
            todo.append((len(out), tp, topic_id, log_dir))
            out.append(None)
        if not todo:
            return out

        # Each topic's settings are read here, on the owner thread, not on the workers.
        configs = {topic: self._config_of(topic) for _, (topic, _), _, _ in todo}

        def make(item):
            _, (topic, partition), topic_id, log_dir = item
            path = os.path.join(log_dir, names.partition_dir_name(topic, partition))
            os.makedirs(path, exist_ok=True)
            names.write_partition_metadata(os.path.join(path, names.PARTITION_METADATA_FILE), topic_id)
            return PartitionLog(topic, partition, topic_id, self._open_log(log_dir, path, None, None, configs[topic]),
                                log_dir, 0)

        # The first new log of each log dir is made here, on the owner thread: whatever a log
        # dir sets up lazily for its logs is then in place before the workers share it.
        first: dict = {}
        for item in todo:
            first.setdefault(item[3], item)
        made = {id(item): make(item) for item in first.values()}
        rest = [item for item in todo if id(item) not in made]
        if rest:
            with concurrent.futures.ThreadPoolExecutor(min(CREATE_WORKERS, len(rest)),
                                                       thread_name_prefix="kraft-log-create") as pool:
                for item, plog in zip(rest, pool.map(make, rest)):  # the first failure is raised
                    made[id(item)] = plog
        for item in todo:
            index, tp, plog = item[0], item[1], made[id(item)]
            self._watch(plog)
            self._logs[tp] = plog
            out[index] = plog
        return out

    def delete(self, topic: str, partition: int, suffix: str = names.DELETE_SUFFIX) -> str | None:
        """Close the partition's log and rename its directory ``<topic>-<N>.<uuid>-delete``
        now (a restart will not bring it back); the files go on the worker thread. With
        ``suffix=-stray`` the directory is kept renamed for the operator (Kafka's stray
        logs). Returns the new path, None if the partition is not here."""
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return None
        plog.log.close()
        renamed = os.path.join(plog.log_dir, names.renamed_dir_name(topic, partition, suffix))
        os.replace(plog.directory, renamed)
        files.fsync_dir(plog.log_dir)
        if suffix == names.DELETE_SUFFIX:
            self._remove_later(renamed)
        return renamed

    def _remove_later(self, path: str) -> None:
        self._deletions.append(self._deleter.submit(shutil.rmtree, path, True))

    def wait_for_deletions(self, timeout: float | None = None) -> None:
        """Block until every scheduled directory removal is done (tests, shutdown)."""
        concurrent.futures.wait(self._deletions, timeout)
        self._deletions = [f for f in self._deletions if not f.done()]

    # --- retention and checkpoints --------------------------------------------------------------
    def apply_retention(self, now_ms: int) -> int:
        """Delete segments beyond retention in every partition whose cleanup.policy has delete
        (Kafka trims a compact-only log by compaction alone); returns segments deleted."""
        deleted = 0
        for plog in list(self._logs.values()):
            if self.retention_of is None:
                retention_ms, retention_bytes = self.retention_ms, self.retention_bytes
            else:
                retention_ms, retention_bytes, delete = self.retention_of(plog.topic)
                if not delete:
                    continue
            start = retention_start_offset(plog.log, plog.high_watermark, retention_ms, retention_bytes, now_ms)
            if start is not None:
                deleted += plog.log.delete_below(start)
        return deleted

    def write_checkpoints(self) -> None:
        """The three offset checkpoints of every log dir (temp, fsync, rename). A log dir not
        opened by ``open_all`` keeps the entries of logs this object does not hold."""
        for log_dir in self.log_dirs:
            here = [p for p in self._logs.values() if p.log_dir == log_dir]
            tps = [(p.topic, p.partition) for p in here]
            for name, values in ((names.RECOVERY_POINT_CHECKPOINT, [p.log.flushed_offset for p in here]),
                                 (names.REPLICATION_CHECKPOINT, [p.high_watermark for p in here]),
                                 (names.LOG_START_CHECKPOINT, [p.log.start_offset for p in here])):
                entries = dict(zip(tps, values))
                if log_dir not in self._loaded:
                    entries = {**self._read_checkpoint(log_dir, name), **entries}
                OffsetCheckpointFile(os.path.join(log_dir, name)).write(entries)

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, then mark each log dir cleanly
        shut down (the next start opens every log without a scan or an fsync)."""
        if self._closed:
            return
        self._closed = True
        for plog in self._logs.values():
            plog.log.close()
        for flusher in self._flushers.values():
            flusher.stop()
        self.write_checkpoints()
        self._deleter.shutdown(wait=True)
        for log_dir in self._loaded:  # last: only a shutdown that got this far was clean
            files.atomic_write(os.path.join(log_dir, names.CLEAN_SHUTDOWN_FILE), CLEAN_SHUTDOWN_TEXT)
