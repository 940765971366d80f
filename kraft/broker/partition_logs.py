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
import dataclasses
import json
import logging
import os
import shutil
import uuid
from typing import Callable

from kraft.broker import partition_dir as names
from kraft.broker.log_dir_states import DuplicateLogError, LogDirStates
from kraft.broker.log_retention import retention_start_offset
from kraft.errors import StorageError
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


def clean_shutdown_text(broker_epoch: int) -> bytes:
    """Kafka's ``.kafka_cleanshutdown`` content: the broker epoch the broker shut down in."""
    return b'{"version":0,"brokerEpoch":%d}\n' % broker_epoch


def read_clean_shutdown_epoch(path: str) -> int:
    """The broker epoch in a clean-shutdown file; -1 when it names none or cannot be read
    (a marker written before the epoch was kept, or damaged: the restart counts as unclean)."""
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read(4096)).get("brokerEpoch", -1)
    except (OSError, ValueError, AttributeError):
        return -1
    return value if type(value) is int and value >= 0 else -1


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
                 flusher_threads: int = 2, dir_states: LogDirStates | None = None):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        #: each log dir's directory.id and whether it is online (KIP-858)
        self.dirs = dir_states if dir_states is not None else LogDirStates.read(self.log_dirs)
        #: replica moves between log dirs in progress (``replica_moves.ReplicaMoves``), if any
        self.moves = None
        #: ``(log_dir, exc)`` on any thread when a log of that dir hits an I/O error (the broker
        #: hands it to the loop, which calls ``fail_dir``); None: the log alone is unusable
        self.on_dir_error: Callable[[str, BaseException], None] | None = None
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
        #: moves whenever a log is made, replaced or deleted, or retention moves a log's start
        #: (replica fetchers ask their local logs only about what their own answers touched)
        self.changes = 0
        #: KIP-966: the broker epoch every log dir's clean-shutdown file named at open (-1: some
        #: dir was not shut down cleanly, or named none); and the one ``close`` writes
        self.previous_broker_epoch = -1
        self.shutdown_broker_epoch = -1
        self._clean_epochs: dict = {}  # log dir -> the epoch its clean-shutdown file named (-1: none)
        self.flusher_threads = flusher_threads
        #: (dir name, threads) -> the flusher of a log dir; None: a ``SharedFlusher`` (Python
        #: threads). A server sets it to a ``SharedLoopFlusher`` on its event loop.
        self.flusher_factory: Callable | None = None
        self._flushers: dict = {}  # log dir -> its flusher, made on first use
        # Directory removal (possibly gigabytes) stays off the loop thread.
        self._deleter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-log-delete")
        self._deletions: list[concurrent.futures.Future] = []
        self._closed = False
        self._creating: set = set()  # (topic, partition) of logs being made in the background
        self._creator: concurrent.futures.ThreadPoolExecutor | None = None
        #: Log dirs whose every partition log ``open_all`` opened: only their checkpoints may
        #: be written whole, and only they are marked cleanly shut down at close.
        self._loaded: set[str] = set()
        #: ((topic, partition), log dir, path) of each ``-future`` directory ``open_all`` found
        #: (``ReplicaMoves.resume`` picks them up)
        self.unfinished_moves: list = []

    # --- opening --------------------------------------------------------------------------------
    def open_all(self, threads: int = 1) -> list[PartitionLog]:
        """Recover every partition directory in every log dir, ``threads`` logs at once per log
        dir (Kafka's ``num.recovery.threads.per.data.dir``: reads, scans and fsyncs release
        the GIL); remove leftover ``-delete`` directories in the background. After a clean
        shutdown (``.kafka_cleanshutdown``) nothing is scanned or fsynced. Returns the opened
        partitions."""
        opened = []
        for log_dir in self.log_dirs:
            try:
                opened += self._open_dir(log_dir, threads)
            except DuplicateLogError:
                raise  # Kafka refuses to start: the operator decides which copy is right
            except (OSError, StorageError) as exc:
                if len(self.log_dirs) == 1:
                    raise  # one directory: nothing left to serve from (Kafka stops too)
                # KIP-858: a directory that cannot be opened is offline from the start; the
                # node serves the others (its registration names only the healthy ones).
                self.dirs.mark_offline(log_dir, f"opening it failed: {exc}")
                for plog in [p for p in self._logs.values() if p.log_dir == log_dir]:
                    del self._logs[(plog.topic, plog.partition)]
                    self.changes += 1
                    self.dirs.offline_partitions[(plog.topic, plog.partition)] = log_dir
                    _close_quietly(plog)
        epochs = set(self._clean_epochs.get(d, -1) for d in self.log_dirs)
        self.previous_broker_epoch = epochs.pop() if len(epochs) == 1 else -1
        return opened

    def _open_dir(self, log_dir: str, threads: int) -> list[PartitionLog]:
        opened = []
        os.makedirs(log_dir, exist_ok=True)
        marker = os.path.join(log_dir, names.CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self._clean_epochs[log_dir] = read_clean_shutdown_epoch(marker) if clean else -1
        todo = self._partition_dirs(log_dir)
        recovery = self._read_checkpoint(log_dir, names.RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(log_dir, names.LOG_START_CHECKPOINT)
        hws = self._read_checkpoint(log_dir, names.REPLICATION_CHECKPOINT)

        # Read on this thread, not on the workers: each topic's settings, the dir's flusher.
        # Recovered without the contiguity check (as Kafka recovers every partition log): the
        # image that says which topics are compacted (their logs have offset gaps) is not
        # read yet; the first one gives each log its topic's settings (``reconfigure``).
        configs = {tp[0]: dataclasses.replace(self._config_of(tp[0]), strict_order=False) for tp, _, _ in todo}
        self._flusher_of(log_dir)

        def one(item, log_dir=log_dir, clean=clean):
            tp, path, topic_id = item
            seg_log = self._open_log(log_dir, path, recovery.get(tp), starts.get(tp), configs[tp[0]], clean,
                                     sync=False)
            return PartitionLog(tp[0], tp[1], topic_id, seg_log, log_dir, hws.get(tp, 0))

        if threads > 1 and len(todo) > 1:
            with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="kraft-log-recovery") as pool:
                plogs = list(pool.map(one, todo))  # the first failure is raised
        else:
            plogs = [one(item) for item in todo]
        if plogs and not clean:  # recovered tails may be in the page cache only: one syncfs for all
            files.sync_file_system(log_dir, [(p.log.segments[-1].fd, p.directory) for p in plogs])
        for plog in plogs:
            self._register(plog)
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
        with os.scandir(log_dir) as it:  # the entry types come with the listing: no stat each
            dirs = sorted((e.name, e.path) for e in it if e.is_dir())
        for entry, path in dirs:
            if names.is_deleted_dir(entry):
                self._remove_later(path)
                continue
            if entry.endswith(names.FUTURE_SUFFIX) and "." in entry:
                # A replica move cut short by a stop: resumed once every log is open (Kafka
                # resumes it too), or removed if its partition is not here.
                future_tp = names.parse_partition_dir(entry.rsplit(".", 1)[0])
                if future_tp is None:
                    self._remove_later(path)
                else:
                    self.unfinished_moves.append((future_tp, log_dir, path))
                continue
            tp = names.parse_partition_dir(entry)
            if tp is None or entry == METADATA_DIR:
                continue  # the node's metadata log, when it shares the dir
            topic_id = names.read_partition_metadata(os.path.join(path, names.PARTITION_METADATA_FILE))
            if topic_id is None:
                log.warning("%s has no %s; left alone until the metadata names it", path,
                            names.PARTITION_METADATA_FILE)
                continue
            if tp in self._logs:
                raise DuplicateLogError(f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both "
                                        f"{self._logs[tp].directory} and {path}: delete the one in the "
                                        f"directory that failed recently (a crash during a replica move)")
            out.append((tp, path, topic_id))
        return out

    def _read_checkpoint(self, log_dir: str, name: str) -> dict:
        return OffsetCheckpointFile(os.path.join(log_dir, name)).read()

    def _open_log(self, log_dir: str, path: str, recovery_point, start_offset, config: LogConfig,
                  clean: bool = False, sync: bool = True) -> SegmentedLog:
        kwargs = {} if self.clock_ms is None else {"clock_ms": self.clock_ms}
        return SegmentedLog.open(path, config, recovery_point=recovery_point, log_start_offset=start_offset,
                                 flusher=self._flusher_of(log_dir), clean=clean, sync=sync,
                                 on_fatal=lambda exc, d=log_dir: self.report_dir_error(d, exc), **kwargs)

    def report_dir_error(self, log_dir: str, exc: BaseException) -> None:
        """An I/O error in ``log_dir`` (any thread): the whole directory is suspect (Kafka's
        LogDirFailureChannel), so the broker takes it offline."""
        if self.on_dir_error is not None:
            self.on_dir_error(log_dir, exc)

    def fail_dir(self, log_dir: str, reason: str) -> list[tuple[str, int]]:
        """KIP-858: take ``log_dir`` offline (owner thread): its logs are closed and forgotten,
        their partitions are not served or re-created here until a restart. Returns them (empty
        if the directory was already offline)."""
        if not self.dirs.is_online(log_dir):
            return []
        gone = [p for p in self._logs.values() if p.log_dir == log_dir]
        self.dirs.mark_offline(log_dir, reason, [(p.topic, p.partition) for p in gone])
        self._loaded.discard(log_dir)  # its checkpoints and clean-shutdown marker are not written
        for plog in gone:
            del self._logs[(plog.topic, plog.partition)]
            _close_quietly(plog)
        self.changes += 1
        return [(p.topic, p.partition) for p in gone]

    def open_new_log(self, log_dir: str, path: str, config: LogConfig) -> SegmentedLog:
        """An empty log at ``path`` in ``log_dir`` (a replica move's future log), with that
        directory's flusher and failure reporting; not registered."""
        return self._open_log(log_dir, path, None, None, config)

    def open_existing_log(self, log_dir: str, path: str, config: LogConfig) -> SegmentedLog:
        """The log at ``path`` recovered with a full scan (an unfinished move's copy: no
        recovery point is kept for it); not registered."""
        return self._open_log(log_dir, path, None, None, config)

    def remove_later(self, path: str) -> None:
        """Remove a directory on the worker thread (``wait_for_deletions`` waits for it)."""
        self._remove_later(path)

    def swap_in(self, plog: PartitionLog, path: str, log_dir: str, old: SegmentedLog) -> None:
        """``plog`` takes the log at ``path`` in ``log_dir`` (a replica move's copy, closed
        cleanly just before) in place of ``old``, which is closed (owner thread)."""
        config = self._config_of(plog.topic)
        plog.log = self._open_log(log_dir, path, None, None, config, clean=True, sync=False)
        plog.log_dir = log_dir
        self._watch(plog)
        self.changes += 1
        old.close()

    def is_offline(self, topic: str, partition: int) -> bool:
        """The partition was in a directory that failed (clients get KAFKA_STORAGE_ERROR)."""
        return (topic, partition) in self.dirs.offline_partitions

    def _flusher_of(self, log_dir: str):
        flusher = self._flushers.get(log_dir)
        if flusher is None and self.config.background_flush:
            make = self.flusher_factory or SharedFlusher
            flusher = self._flushers[log_dir] = make(os.path.basename(log_dir), self.flusher_threads)
        return flusher

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
        """The partition's log, created empty in the online log dir holding the fewest
        partitions (Kafka's default placement) if it does not exist yet; None if its directory
        failed (KIP-858)."""
        return self.create_many([((topic, partition), topic_id)])[0]

    def create_many(self, wanted) -> list[PartitionLog]:
        """``create`` for every ``((topic, partition), topic_id)`` in ``wanted``; the files of
        new logs are made on up to ``CREATE_WORKERS`` threads at once. A new log costs about six
        fsyncs (partition.metadata, the epoch checkpoint, their directories): one after the
        other, a topic of 1,000 partitions held the event loop for 17 s on a loaded disk, longer
        than a broker session, so every broker was fenced. The fsyncs release the GIL and the
        file system commits concurrent ones together (1.1 s for the same 1,000 on 32 threads)."""
        out, todo, make = self._plan(wanted)
        for item, plog in zip(todo, self._make_all(todo, make)):
            if plog is not None:
                self._register(plog)
            out[item[0]] = plog
        return out

    def create_in_background(self, wanted, loop, on_created) -> int:
        """``create_many`` without waiting: the files are made on a background thread (a node's
        event loop also runs its Raft quorum, and even 32 threads took seconds for a topic of
        1,000 partitions on a loaded disk, enough for the quorum to elect another leader);
        the logs are registered on the loop, then ``on_created(list of PartitionLog)`` runs
        there. Until then ``get`` does not find them (their partitions answer
        NOT_LEADER_OR_FOLLOWER). Logs already being created are not asked for twice. Returns
        how many are being made. A storage error is raised on the loop (fatal for the node)."""
        _, todo, make = self._plan([w for w in wanted if w[0] not in self._creating])
        if not todo:
            return 0
        tps = [item[1] for item in todo]
        self._creating.update(tps)

        def work():
            try:
                made = self._make_all(todo, make)
            except BaseException as exc:  # noqa: BLE001 - handed to the loop as it is
                loop.call_soon_threadsafe(self._created_failed, tps, exc)
                return
            loop.call_soon_threadsafe(self._created, tps, made, on_created)

        if self._creator is None:
            self._creator = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-log-creator")
        self._creator.submit(work)
        return len(todo)

    def _created(self, tps, made, on_created) -> None:
        self._creating.difference_update(tps)
        made = [p for p in made if p is not None]  # None: its directory failed
        if self._closed:
            for plog in made:
                plog.log.close()
            return
        for plog in made:
            self._register(plog)
        on_created(made)

    def _created_failed(self, tps, exc) -> None:
        self._creating.difference_update(tps)
        raise exc

    @property
    def creating(self) -> int:
        """Logs being made in the background."""
        return len(self._creating)

    def _plan(self, wanted):
        """(out, todo, make): ``out`` holds the existing logs of ``wanted`` (None where one is
        to be made), ``todo`` the logs to make as (index in out, tp, topic id, log dir), ``make``
        makes one of them on any thread."""
        online = self.dirs.online()
        counts = {d: 0 for d in self.log_dirs}
        for plog in self._logs.values():
            counts[plog.log_dir] = counts.get(plog.log_dir, 0) + 1
        out, todo = [], []
        for item in wanted:
            tp, topic_id = item[0], item[1]
            existing = self._logs.get(tp)
            if existing is not None:
                out.append(existing)
                continue
            if self.dirs.is_offline_partition(tp):
                out.append(None)  # its directory failed: not re-created here (KIP-858)
                continue
            if not online:
                raise StorageError(f"no log directory is online to hold {tp[0]}-{tp[1]}")
            log_dir = place(online, counts, self.dirs.path_of(item[2]) if len(item) > 2 else None)
            counts[log_dir] += 1
            todo.append((len(out), tp, topic_id, log_dir))
            out.append(None)
        # Read here, on the owner thread, not on the workers: each topic's settings, and
        # whatever a log dir sets up lazily for its logs (its flusher).
        configs = {topic: self._config_of(topic) for _, (topic, _), _, _ in todo}
        for log_dir in {item[3] for item in todo}:
            self._flusher_of(log_dir)

        def make(item):
            _, (topic, partition), topic_id, log_dir = item
            path = os.path.join(log_dir, names.partition_dir_name(topic, partition))
            try:
                os.makedirs(path, exist_ok=True)
                names.write_partition_metadata(os.path.join(path, names.PARTITION_METADATA_FILE), topic_id)
                seg_log = self._open_log(log_dir, path, None, None, configs[topic])
            except (OSError, StorageError) as exc:
                if self.on_dir_error is None:
                    raise
                # KIP-858: the directory failed; the log is not made (None), and once the
                # directory is offline the next image places it in another one.
                self.on_dir_error(log_dir, exc)
                return None
            return PartitionLog(topic, partition, topic_id, seg_log, log_dir, 0)
        return out, todo, make

    def _make_all(self, todo, make) -> list[PartitionLog]:
        if len(todo) <= 1:
            return [make(item) for item in todo]
        with concurrent.futures.ThreadPoolExecutor(min(CREATE_WORKERS, len(todo)),
                                                   thread_name_prefix="kraft-log-create") as pool:
            return list(pool.map(make, todo))  # the first failure is raised

    def _register(self, plog: PartitionLog) -> None:
        self._watch(plog)
        self._logs[(plog.topic, plog.partition)] = plog
        self.changes += 1

    def delete(self, topic: str, partition: int, suffix: str = names.DELETE_SUFFIX) -> str | None:
        """Close the partition's log and rename its directory ``<topic>-<N>.<uuid>-delete``
        now (a restart will not bring it back); the files go on the worker thread. With
        ``suffix=-stray`` the directory is kept renamed for the operator (Kafka's stray
        logs). Returns the new path, None if the partition is not here."""
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return None
        self.changes += 1
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
            plog.log.unlink_retired()  # file.delete.delay.ms of segments removed earlier
            if self.retention_of is None:
                retention_ms, retention_bytes = self.retention_ms, self.retention_bytes
            else:
                retention_ms, retention_bytes, delete = self.retention_of(plog.topic)
                if not delete:
                    continue
            start = retention_start_offset(plog.log, plog.high_watermark, retention_ms, retention_bytes, now_ms)
            if start is not None:
                deleted += plog.log.delete_below(start)
                self.changes += 1
        return deleted

    def write_checkpoints(self) -> None:
        """The three offset checkpoints of every online log dir (temp, fsync, rename). A log dir
        not opened by ``open_all`` keeps the entries of logs this object does not hold. A
        directory whose write fails goes offline (Kafka's checkpoint IOException does too)."""
        for log_dir in self.dirs.online():
            try:
                self._write_dir_checkpoints(log_dir)
            except (OSError, StorageError) as exc:
                if self.on_dir_error is None:
                    raise
                self.on_dir_error(log_dir, exc)

    def _write_dir_checkpoints(self, log_dir: str) -> None:
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
        if self._creator is not None:  # logs still being made are finished, then closed
            self._creator.shutdown(wait=True)
        for plog in self._logs.values():
            plog.log.close()
        for flusher in self._flushers.values():
            flusher.stop()
        for log_dir in self.dirs.online():
            self._write_dir_checkpoints(log_dir)
        self._deleter.shutdown(wait=True)
        for log_dir in self._loaded:  # last: only a shutdown that got this far was clean
            files.atomic_write(os.path.join(log_dir, names.CLEAN_SHUTDOWN_FILE),
                               clean_shutdown_text(self.shutdown_broker_epoch))


def place(online: list, counts: dict, assigned: str | None) -> str:
    """The directory for a new log: the one the controller assigned (the image's directory id
    for this replica) when it is here and online, else the online one holding the fewest
    partitions, the first listed on a tie (Kafka's default placement)."""
    if assigned is not None and assigned in online:
        return assigned
    return min(online, key=lambda d: (counts.get(d, 0), online.index(d)))


def _close_quietly(plog: PartitionLog) -> None:
    """Close a log of a failed directory: its files may not even be reachable any more."""
    try:
        plog.log.close()
    except Exception as exc:  # noqa: BLE001 - the directory is already given up
        log.warning("closing %s-%d in a failed directory: %s", plog.topic, plog.partition, exc)
