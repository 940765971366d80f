"""AlterReplicaLogDirs (API 34): moving a replica to another log directory of this broker while
its partition keeps serving (Kafka's ReplicaAlterLogDirsManager / ``Partition.maybeReplaceCurrentWithFutureReplica``).

A move makes a *future* log ``<topic>-<N>.<uuid>-future`` in the target directory, starting at
the current log's start offset, and copies whole batches into it (offsets and leader epochs
kept, a follower's append) a chunk at a time on the owner thread, between other work: appends
to the partition go on meanwhile. Once the future log has caught up with the current one and
its flushed offset is at least the current one's (nothing acknowledged as durable becomes
less durable), one step on the owner thread copies the last batches, renames the future
directory to ``<topic>-<N>`` in the target directory, then the old one to ``-delete``, and
puts the new log under the same ``PartitionLog`` (every holder of the partition sees it at
once). Kafka's order of the two renames: a crash between them leaves the partition in two
directories, which the next start reports (``DuplicateLogError``) instead of guessing.

A ``-future`` directory found at start is the copy of a move a stop cut short: ``resume``
recovers it and goes on copying (as Kafka resumes it); a copy of a partition that is not here
is removed. A directory failing under a move abandons it. Moves are refused for a partition of a failed directory (KAFKA_STORAGE_ERROR), to
a directory that is not one of ``log.dirs`` (LOG_DIR_NOT_FOUND) or offline (KAFKA_STORAGE_ERROR),
and for a partition this broker does not hold (REPLICA_NOT_AVAILABLE), as Kafka answers.

No event loop here: ``schedule(delay_s, fn)`` runs ``fn`` later on the owner thread.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import shutil

from kraft.broker import partition_dir as names
from kraft.errors import ErrorCode, KraftError
from kraft.log import files
from kraft.log.log_reads import read_bytes

log = logging.getLogger("kraft.broker.logs")

#: bytes copied per step: small enough that appends and fetches wait at most a few ms
CHUNK_BYTES = 1 << 20
#: flush checks before the swap gives up waiting for the future log's flusher and flushes it
#: itself (the partition's appends then wait for that one fsync)
PATIENCE = 50


class ReplicaMove:
    __slots__ = ("plog", "target", "future", "path", "tries", "done")

    def __init__(self, plog, target: str, future, path: str):
        self.plog, self.target, self.future, self.path = plog, target, future, path
        self.tries = 0
        self.done = False

    @property
    def lag(self) -> int:
        """Kafka's offset lag of a future replica: the current log's end minus its end."""
        return max(0, self.plog.log.end_offset - self.future.end_offset)


class ReplicaMoves:
    def __init__(self, logs, schedule, on_moved=None):
        self.logs = logs  # PartitionLogs
        self.schedule = schedule
        self.on_moved = on_moved  # (PartitionLog) after a swap (the broker reports the directory)
        self.moves: dict[tuple[str, int], ReplicaMove] = {}

    # --- the request ----------------------------------------------------------------------
    def request(self, topic: str, partition: int, target: str) -> int:
        """Start moving ``topic-partition`` to log dir ``target``; the error code Kafka answers."""
        target = os.path.abspath(target)
        if target not in self.logs.log_dirs:
            return int(ErrorCode.LOG_DIR_NOT_FOUND)
        if not self.logs.dirs.is_online(target) or self.logs.is_offline(topic, partition):
            return int(ErrorCode.KAFKA_STORAGE_ERROR)
        plog = self.logs.get(topic, partition)
        if plog is None:
            return int(ErrorCode.REPLICA_NOT_AVAILABLE)
        current = self.moves.get((topic, partition))
        if current is not None:
            if current.target == target:
                return int(ErrorCode.NONE)
            self.abandon(current, "another target was asked for")
        if plog.log_dir == target:
            return int(ErrorCode.NONE)
        try:
            move = self._start(plog, target)
        except (OSError, KraftError) as exc:
            log.error("moving %s-%d to %s: %s", topic, partition, target, exc)
            self.logs.report_dir_error(target, exc)  # the target directory is suspect (KIP-858)
            return int(ErrorCode.KAFKA_STORAGE_ERROR)
        self.moves[(topic, partition)] = move
        log.info("moving %s-%d from %s to %s (a future log, then a swap)", topic, partition, plog.log_dir, target)
        self.schedule(0, lambda: self._step(move))
        return int(ErrorCode.NONE)

    def _start(self, plog, target: str) -> ReplicaMove:
        path = os.path.join(target, names.renamed_dir_name(plog.topic, plog.partition, names.FUTURE_SUFFIX))
        os.makedirs(path)
        names.write_partition_metadata(os.path.join(path, names.PARTITION_METADATA_FILE), plog.topic_id)
        # Offsets may have gaps (compaction): the copy keeps them, as a follower of such a log.
        config = dataclasses.replace(plog.log.config, strict_order=False)
        future = self.logs.open_new_log(target, path, config)
        if plog.log.start_offset > 0:
            future.truncate_fully_and_start_at(plog.log.start_offset)
        return ReplicaMove(plog, target, future, path)

    def resume(self) -> int:
        """Resume the moves a stop cut short (``PartitionLogs.unfinished_moves``): the copy is
        recovered like any log and copying goes on from its end; a copy whose partition is not
        here (or is already in that directory, or whose directory failed) is removed. Returns
        how many resumed."""
        resumed = 0
        for (topic, partition), target, path in self.logs.unfinished_moves:
            plog = self.logs.get(topic, partition)
            if plog is None or plog.log_dir == target or (topic, partition) in self.moves \
                    or not self.logs.dirs.is_online(target):
                log.warning("%s: an unfinished replica move of a partition not here to move: removed", path)
                self.logs.remove_later(path)
                continue
            try:
                config = dataclasses.replace(plog.log.config, strict_order=False)
                future = self.logs.open_existing_log(target, path, config)
            except (OSError, KraftError) as exc:
                log.warning("%s: an unfinished replica move that cannot be opened (%s): removed", path, exc)
                self.logs.remove_later(path)
                continue
            move = self.moves[(topic, partition)] = ReplicaMove(plog, target, future, path)
            log.info("resuming the move of %s-%d to %s from offset %d", topic, partition, target, future.end_offset)
            self.schedule(0, lambda m=move: self._step(m))
            resumed += 1
        self.logs.unfinished_moves = []
        return resumed

    # --- copying and the swap ---------------------------------------------------------------
    def _step(self, move: ReplicaMove) -> None:
        if move.done:
            return
        plog = move.plog
        if self.logs.get(plog.topic, plog.partition) is not plog or not self.logs.dirs.is_online(move.target):
            self.abandon(move, "the partition's log or the target directory is gone")
            return
        try:
            if self._diverged(move):  # the current log was truncated under the copy: start again
                self.abandon(move, "the current log was truncated; copying again")
                self.request(plog.topic, plog.partition, move.target)
                return
            self._copy(move, CHUNK_BYTES)
            current = move.plog.log
            if move.future.end_offset < current.end_offset:
                self.schedule(0, lambda: self._step(move))
                return
            if move.future.flushed_offset < current.flushed_offset:
                move.tries += 1
                if move.tries < PATIENCE:
                    move.future.request_flush()
                    self.schedule(0.05, lambda: self._step(move))
                    return
                move.future.flush()  # the partition's appends wait for this one fsync
            self._swap(move)
        except (OSError, KraftError) as exc:
            self.abandon(move, f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _diverged(move: ReplicaMove) -> bool:
        """The future log holds an offset the current log no longer has, or has with another
        leader epoch (a follower's truncation: its replaced records carry a newer epoch)."""
        current, future = move.plog.log, move.future
        last = future.end_offset - 1
        if last < future.start_offset:
            return False
        if future.end_offset > current.end_offset:
            return True
        return last >= current.start_offset and current.epoch_for_offset(last) != future.epoch_for_offset(last)

    def _copy(self, move: ReplicaMove, budget: int) -> None:
        """Copy batches from the current log into the future one, about ``budget`` bytes
        (everything left when ``budget`` is None)."""
        current, future = move.plog.log, move.future
        if future.end_offset < current.start_offset:  # retention went past the copy
            future.truncate_fully_and_start_at(current.start_offset)
        copied = 0
        while future.end_offset < current.end_offset and (budget is None or copied < budget):
            data = read_bytes(current, future.end_offset, CHUNK_BYTES)
            if not len(data):
                break
            future.append(bytes(data), assign_offsets=False)
            copied += len(data)

    def _swap(self, move: ReplicaMove) -> None:
        """One step: the last batches and the producer snapshots; rename future -> live (target
        dir), then old -> ``-delete``; the epoch a new leader began without a batch yet."""
        plog, future = move.plog, move.future
        old, old_dir = plog.log, plog.log_dir
        self._copy(move, None)
        for snap in glob.glob(os.path.join(old.directory, "*.snapshot")):
            shutil.copy2(snap, future.directory)
        future.close()
        live = os.path.join(move.target, names.partition_dir_name(plog.topic, plog.partition))
        os.replace(move.path, live)
        files.fsync_dir(move.target)
        latest = old.epoch_cache.latest_entry()
        self.logs.swap_in(plog, live, move.target, old)
        if latest is not None and plog.log.latest_epoch != latest[0]:
            # An epoch a new leader began with no batch yet: an open drops such an entry
            # (it starts at the log end), the leader still needs it.
            plog.log.assign_epoch_start(*latest)
        renamed = os.path.join(old_dir, names.renamed_dir_name(plog.topic, plog.partition, names.DELETE_SUFFIX))
        os.replace(old.directory, renamed)
        files.fsync_dir(old_dir)
        self.logs.remove_later(renamed)
        move.done = True
        self.moves.pop((plog.topic, plog.partition), None)
        log.info("moved %s-%d to %s at offset %d", plog.topic, plog.partition, move.target, plog.log.end_offset)
        if self.on_moved is not None:
            self.on_moved(plog)

    def abandon(self, move: ReplicaMove, reason: str) -> None:
        """Give a move up: its future log goes (Kafka removes a failed future replica too)."""
        move.done = True
        self.moves.pop((move.plog.topic, move.plog.partition), None)
        log.warning("moving %s-%d to %s abandoned: %s", move.plog.topic, move.plog.partition, move.target, reason)
        try:
            move.future.close()
        except KraftError:
            pass
        if os.path.isdir(move.path):
            self.logs.remove_later(move.path)

    def forget(self, topic: str, partition: int) -> None:
        """The partition's log goes (deleted, or its directory failed): so does its move."""
        move = self.moves.get((topic, partition))
        if move is not None:
            self.abandon(move, "the partition's log is gone")

    def close(self) -> None:
        for move in list(self.moves.values()):
            self.abandon(move, "the broker is shutting down")


def handle_alter_replica_log_dirs(state, request, version: int):
    """AlterReplicaLogDirs: per partition, start its move (``ReplicaMoves.request``) and answer
    at once, as Kafka does: DescribeLogDirs shows the future replica until the swap."""
    from kraft.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsResponse as R
    moves = state.logs.moves
    results: dict[str, list] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                _, reg = state.partition(t.name, p)
                if reg is None:
                    code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif moves is None:  # a broker assembled without a mover (unit tests)
                    code = int(ErrorCode.UNSUPPORTED_VERSION)
                else:
                    code = moves.request(t.name, p, d.path)
                results.setdefault(t.name, []).append(R.Result.Partition(partition_index=p, error_code=code))
    return R(throttle_time_ms=0, results=[R.Result(topic_name=n, partitions=ps) for n, ps in results.items()])
