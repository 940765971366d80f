"""KraftNode: one node process (controller, broker, or both) assembled from a NodeConfig.

startup: check the formatted storage (meta.properties: cluster id, node id), open the
metadata log (recovery scan), read quorum-state, build the Raft core, start the listener and
the metrics endpoint; serve; shutdown: a leader resigns (EndQuorumEpoch names its
successors), connections close, the log is flushed and closed. Everything blocking that
must precede an answer (quorum-state writes) happens on the loop thread, which is the
contract the core relies on. Every log directory is locked (``.lock``, as Kafka does) before
anything in it is read. A fatal storage error stops the node with ``fatal`` set (the process
then exits non-zero) and a log line saying which file failed and what to do.

Roles: a controller is a voter running the quorum controller behind the controller listener;
a broker (``server/broker_role.py``) serves clients on the other listeners and registers with
the active controller. A broker-only node is a Raft observer of the metadata log (same log,
core and driver, no controller listener); a combined node's broker reads the image its
controller replays. Shutdown stops the broker first (controlled shutdown needs the quorum).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import random

from kraft.config import NodeConfig
from kraft.types import Endpoint
from kraft.errors import ConfigError, CorruptRecordError, FatalLogError, MetadataParseError, StorageError
from kraft.log import LogConfig
from kraft.log.bootstrap import read_bootstrap_checkpoint, read_bootstrap_values
from kraft.metadata.serde import decode_record
from kraft.log.dir_lock import lock_directories
from kraft.server.shared_loop_flusher import SharedLoopFlusher
from kraft.log.retention import CLEAN_INTERVAL_MS, MetadataRetention
from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties, QuorumStateFile, uuid_text_to_bytes
from kraft.raft import RaftConfig, RaftCore, ReplicaKey, VoterSet
from kraft.controller.quorum_controller import QuorumController
from kraft.server.broker_role import BrokerRole
from kraft.metadata.acls import EMPTY_ACLS
from kraft.metadata.authorization import authorizer_configured
from kraft.server.authz_handler import authorizing
from kraft.server.controller_handlers import ControllerHandlers
from kraft.server.controller_gauges import controller_gauges, image_stats
from kraft.server.controller_requests import ControllerRequests, ListenerFanOut, controller_settings
from kraft.log.replicated_log import MetadataLog
from kraft.server.metrics import MetricsServer, NodeMetrics, fetch_session_gauges
from kraft.server.loop_watchdog import LoopWatchdog
from kraft.server.node_security import CONTROLLER, node_client_options
from kraft.server.sasl import listener_sasl
from kraft.server.keystore_reload import ControllerKeystores
from kraft.server.tls import listener_context
from kraft.server.connection_limits import connection_limits
from kraft.server.network import KafkaServer
from kraft.server.raft_driver import RaftDriver, election_from_file, wall_ms
from kraft.metadata.snapshot_schedule import ScheduleConfig
from kraft.server.metadata_snapshots import MetadataSnapshots
from kraft.server.state_machine import CommittedRecordsListener

log = logging.getLogger("kraft.node")

#: gc.set_threshold for a node: generation 0 every 10,000 allocations (CPython's default 700),
#: generation 1 every 20 of those, a full collection every 100 of those (default 10, 10).
GC_THRESHOLDS = (10_000, 20, 100)


def raft_config(cfg: NodeConfig, cluster_id: str) -> RaftConfig:
    return RaftConfig(
        election_timeout_ms=cfg.int("controller.quorum.election.timeout.ms"),
        fetch_timeout_ms=cfg.int("controller.quorum.fetch.timeout.ms"),
        election_backoff_max_ms=cfg.int("controller.quorum.election.backoff.max.ms"),
        request_timeout_ms=cfg.int("controller.quorum.request.timeout.ms"),
        retry_backoff_ms=cfg.int("controller.quorum.retry.backoff.ms"),
        append_linger_ms=cfg.int("controller.quorum.append.linger.ms"),
        fetch_max_wait_ms=min(500, cfg.int("controller.quorum.request.timeout.ms") // 2),
        cluster_id=cluster_id,
        controller_listener_name=cfg.controller_listener_names[0],
    )


def read_meta(cfg: NodeConfig) -> MetaProperties:
    """The formatted identity of the metadata log directory; clear errors if missing/wrong."""
    path = os.path.join(cfg.metadata_log_dir, META_PROPERTIES_FILE)
    meta = MetaProperties.read(path)
    if meta is None:
        raise StorageError(f"{cfg.metadata_log_dir} is not formatted: run "
                           f"`kraft storage format -t <cluster-id> -c <server.properties>` first")
    if meta.node_id != cfg.node_id:
        raise StorageError(f"{path} has node.id {meta.node_id} but the configuration says {cfg.node_id}")
    return meta


def fatal_advice(exc: BaseException, directory: str) -> str:
    """What the operator should do about a fatal storage error (appended to its message)."""
    cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
    code = getattr(cause, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return (f"free space on the file system holding {directory} (or give it a larger one) and "
                "restart the node; it recovers to its last durable batch and catches up from the leader")
    if code == errno.EROFS:
        return f"the file system holding {directory} became read-only: check the disk (dmesg), then restart"
    if code == errno.EIO:
        return f"the disk holding {directory} reported an I/O error: check it (dmesg), replace it if needed, restart"
    return f"check the disk holding {directory} and restart the node"


def check_supported(cfg: NodeConfig) -> None:
    """Refuse a valid configuration this build cannot run (``start`` and ``format`` both call
    this, so a directory is never formatted for a node that could not start on it)."""
    if cfg.is_broker and not [e for e in cfg.listeners if e.name not in cfg.controller_listener_names]:
        raise ConfigError(f"listeners: process.roles={','.join(sorted(cfg.roles))} needs a listener for clients "
                          f"besides {','.join(cfg.controller_listener_names)} (e.g. PLAINTEXT://:9092)")
    if not cfg.voters and not cfg.bootstrap_servers:
        raise ConfigError("controller.quorum.voters or controller.quorum.bootstrap.servers: one is required")


def advertised_controller_endpoints(cfg: NodeConfig) -> tuple:
    """This node's controller listeners as the Voters record holds them (KIP-853)."""
    out = []
    for name in cfg.controller_listener_names:
        for e in (*cfg.advertised_listeners, *cfg.listeners):
            if e.name == name:
                out.append(Endpoint(name, e.host or "localhost", e.port))
                break
    return tuple(out)


def voter_endpoints(voters, driver) -> list:
    """(node id, host, port) of each voter's controller listener, as a dynamic quorum's
    Voters record gives them."""
    return [(k.id, *driver.address_of(k.id)) for k in voters.keys() if driver.address_of(k.id)]


async def _listen(what: str, setting: str, host: str, port: int, start) -> None:
    """Start a listening server; a bind failure names the setting to change."""
    try:
        await start()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason = "address already in use"
        raise ConfigError(f"{setting}: cannot listen on {host or '0.0.0.0'}:{port} for {what}: {reason}") from exc


class KraftNode:
    def __init__(self, cfg: NodeConfig):
        check_supported(cfg)
        self.cfg = cfg
        self.metrics = NodeMetrics(cfg.node_id)
        self.log: MetadataLog | None = None
        self._log_flusher: SharedLoopFlusher | None = None
        self.driver: RaftDriver | None = None
        self.server: KafkaServer | None = None
        self.metrics_server: MetricsServer | None = None
        self.stopped = asyncio.Event()
        self.controller: QuorumController | None = None
        self.broker: BrokerRole | None = None
        #: The storage error that stopped the node (the process must then exit non-zero).
        self.fatal: BaseException | None = None
        self._locks = None
        self._cleaner: asyncio.TimerHandle | None = None
        self.controller_keystores: ControllerKeystores | None = None

    @property
    def port(self) -> int:
        return self.server.port if self.server else -1

    async def start(self) -> None:
        cfg = self.cfg
        # A node holds a large, long-lived, acyclic metadata image: full collections walk all of
        # it and find nothing (0.2-0.6 s each, every second or two while a fence rewrote a
        # million partitions). Young cycles are still collected as often; full passes are rarer.
        gc.set_threshold(*GC_THRESHOLDS)
        if not os.path.isdir(cfg.metadata_log_dir):
            raise StorageError(f"metadata log directory {cfg.metadata_log_dir} does not exist: run "
                               f"`kraft storage format -t <cluster-id> -c <server.properties>` first")
        # Kafka's LogManager locks every log directory before reading anything in it.
        self._locks = lock_directories([cfg.metadata_log_dir, *cfg.log_dirs])
        meta = read_meta(cfg)
        loop = asyncio.get_running_loop()
        flush_cb = {"fn": None}

        def on_flushed(offset):  # the loop (or a checkpointing thread); the driver comes after the log
            fn = flush_cb["fn"]
            if fn is not None:
                fn(offset)

        def on_fatal(exc):  # any thread
            if self.fatal is not None:
                return
            self.fatal = exc
            log.critical("node %d: metadata log failed, stopping: %s. To recover: %s", cfg.node_id, exc,
                         fatal_advice(exc, cfg.metadata_log_dir))
            loop.call_soon_threadsafe(self.stopped.set)

        def on_loop_error(loop_, context):
            # A storage failure raised on the loop thread (a quorum-state write, an append) is
            # as fatal as one the flusher reports: stop, exit non-zero, say what to do.
            exc = context.get("exception")
            if isinstance(exc, FatalLogError):
                on_fatal(exc)
            else:
                loop_.default_exception_handler(context)

        loop.set_exception_handler(on_loop_error)

        def on_flush_stats(stats):
            self.metrics.fsync_latency.observe(stats.fsync_seconds)

        log_cfg = LogConfig.metadata(segment_bytes=cfg.int("metadata.log.segment.bytes"),
                                     segment_ms=cfg.int("metadata.log.segment.ms"))
        retention = MetadataRetention(max_bytes=cfg.int("metadata.max.retention.bytes"),
                                      max_ms=cfg.int("metadata.max.retention.ms"))
        # Flush cycles run on this loop, the fdatasync on a native thread (no GIL hand-offs).
        self._log_flusher = flusher = SharedLoopFlusher(loop, 1)
        try:
            self.log = MetadataLog(cfg.metadata_log_dir, log_cfg, on_flushed=on_flushed, on_fatal=on_fatal,
                                   on_flush_stats=on_flush_stats, retention=retention, flusher=flusher)
        except BaseException:
            flusher.stop()
            raise
        rep = self.log.log.recovery
        log.info("node %d: metadata log %s..%s recovered (%s)", cfg.node_id, self.log.start_offset(),
                 self.log.end_offset(), rep)
        state_file = QuorumStateFile.in_directory(self.log.directory)
        election = election_from_file(state_file.read())
        if election is not None:
            dropped = self.log.drop_epochs_above(election.epoch)
            if dropped:
                log.error("node %d: the metadata log held %d offsets of a leader epoch above %d, the highest "
                          "this node ever knew (damage to a batch header): truncated them; they are fetched "
                          "again from the leader", cfg.node_id, dropped, election.epoch)
        # Empty for a dynamic quorum (voters in the log). A static set carries its listeners so
        # that upgrading kraft.version to 1 can write them into the Voters record (KIP-853).
        voters = [v.node_id for v in cfg.voters]
        voter_set = VoterSet([ReplicaKey(v.node_id) for v in cfg.voters],
                             {v.node_id: (Endpoint(cfg.controller_listener_names[0], v.host, v.port),)
                              for v in cfg.voters} if cfg.controller_listener_names else None)
        # KIP-853: bootstrap servers get Kafka's ids -2, -3, ... (observers find the leader there).
        bootstrap = {-2 - i: hp for i, hp in enumerate(cfg.bootstrap_servers)}
        core = RaftCore(cfg.node_id, self.log, raft_config(cfg, meta.cluster_id), voter_set, random.Random(),
                        election_state=election, now_ms=wall_ms(),
                        directory_id=uuid_text_to_bytes(meta.directory_id), bootstrap_ids=tuple(bootstrap),
                        local_endpoints=advertised_controller_endpoints(cfg))
        peers = {v.node_id: (v.host, v.port) for v in cfg.voters} | bootstrap
        self.listener = CommittedRecordsListener()
        listeners = [self.listener]
        if cfg.is_controller:
            self.controller = QuorumController(cfg.node_id, cluster_id=meta.cluster_id,
                                               settings=controller_settings(cfg))
            try:
                self.controller.bootstrap_features = read_bootstrap_checkpoint(cfg.metadata_log_dir)
                self.controller.bootstrap_records = [decode_record(v).record
                                                     for v in read_bootstrap_values(cfg.metadata_log_dir)]
            except (StorageError, CorruptRecordError, MetadataParseError) as exc:  # the log may hold them
                log.error("node %d: %s: not used", cfg.node_id, exc)
            listeners.append(self.controller)
        if cfg.is_broker:
            self.broker = BrokerRole(cfg, meta.cluster_id, image_source=self.controller,
                                     high_watermark=lambda: core.leader_high_watermark)
            listeners.append(self.broker.follower)  # after the controller: it reads its image
        raft_options = node_client_options(cfg, cfg.controller_listener_names[0], CONTROLLER)
        self._dial_contexts = [raft_options.get("ssl_context")]  # those that present our keystore
        if self.broker is not None:
            self._dial_contexts.append(self.broker.controller_options.get("ssl_context"))
        self.driver = RaftDriver(core, self.log, state_file, ListenerFanOut(*listeners),
                                 peers=peers,
                                 cluster_id=meta.cluster_id, voters=voters, metrics=self.metrics,
                                 request_timeout_ms=cfg.int("controller.quorum.request.timeout.ms"),
                                 retry_backoff_ms=cfg.int("controller.quorum.retry.backoff.ms"),
                                 listener_name=cfg.controller_listener_names[0],
                                 client_options=raft_options)
        flush_cb["fn"] = self.driver.on_flushed_threadsafe
        if self.broker is not None:  # forwarded requests go to the leader this node's Raft knows
            driver = self.driver
            self.broker.forwarding_client.leader_hint = \
                lambda: driver.address_of(core.leader_id) if core.leader_id >= 0 else None
        # Snapshots of the committed image: a controller's, else (broker-only) the follower's.
        image_source = self.controller if self.controller is not None else getattr(self.broker, "follower", None)
        if image_source is not None and hasattr(image_source, "open_transaction"):
            self.snapshots = MetadataSnapshots(core, self.listener, image_source,
                                               config=ScheduleConfig.from_config(cfg), node_id=cfg.node_id,
                                               voters=voters)
            self.driver.snapshot_policy = self.snapshots
        if cfg.is_controller:
            await self._start_controller_listener()
        if self.broker is not None:
            await self.broker.start()
        self.log.on_append = self.metrics.append_latency.observe
        server = self.server
        if server is not None:
            self.metrics.on_render(lambda: server.export_counters(self.metrics))
            controller_gauges(self.metrics, self.controller)
        if self.broker is not None:
            fetch_session_gauges(self.metrics, self.broker.node.handlers.fetch.sessions.cache)
            if self.broker.node.group_lag is not None:
                self.broker.node.group_lag.export(self.metrics)
            if self.broker.node.handlers.telemetry is not None:
                self.broker.node.handlers.telemetry.export(self.metrics)
        self.driver.start()
        if self.controller is not None:
            self.controller_requests.start()
        self._cleaner = loop.call_later(CLEAN_INTERVAL_MS / 1000, self._clean_periodically)
        self.watchdog = LoopWatchdog(cfg.node_id, self.metrics)
        self.watchdog.start()
        if self.log.flushed_offset() < self.log.end_offset():
            self.log.request_flush()
        port = cfg.int("kraft.metrics.port")
        if port >= 0:
            self.metrics_server = MetricsServer(self.metrics, cfg.values["kraft.metrics.host"], port)
            await _listen("metrics", "kraft.metrics.port", cfg.values["kraft.metrics.host"], port,
                          self.metrics_server.start)
            log.info("node %d: metrics on http://%s:%d/metrics", cfg.node_id, self.metrics_server.host,
                     self.metrics_server.port)
        if self.server is not None:
            ctl = cfg.controller_listener
            log.info("node %d: serving %s on %s:%d (cluster %s, voters %s)", cfg.node_id, ctl.name, ctl.host,
                     self.server.port, meta.cluster_id, voters)
        else:
            log.info("node %d: observing the metadata quorum (cluster %s, voters %s)", cfg.node_id,
                     meta.cluster_id, voters)

    async def _start_controller_listener(self) -> None:
        cfg = self.cfg
        endpoints = [(v.node_id, v.host, v.port) for v in cfg.voters] or voter_endpoints(self.driver.core.voters,
                                                                                         self.driver)
        ctl = cfg.controller_listener
        self.controller_requests = ControllerRequests(self.driver, self.controller, endpoints)
        handlers = ControllerHandlers(self.driver, endpoints, listener_name=ctl.name, metrics=self.metrics,
                                      controller_requests=self.controller_requests)
        if not cfg.voters:  # a dynamic quorum: voters' endpoints come from the Voters record
            self.driver.on_voters_changed = lambda vs: handlers.set_endpoints(voter_endpoints(vs, self.driver))
        served = handlers
        if authorizer_configured(cfg.values):
            ctl_ = self.controller
            served = authorizing(handlers, cfg.values,
                                 acls=lambda: ctl_.image.acls if ctl_ is not None else EMPTY_ACLS)
        self.server = KafkaServer(served, ctl.host, ctl.port, listener_name=ctl.name,
                                  max_frame_bytes=cfg.int("socket.request.max.bytes"),
                                  admission=self.controller_requests,
                                  on_disconnect=self.controller_requests.disconnected,
                                  ssl_context=listener_context(cfg, ctl.name), sasl=listener_sasl(cfg, ctl.name),
                                  **connection_limits(cfg))
        await _listen(f"the {ctl.name} listener", "listeners", ctl.host, ctl.port, self.server.start)
        if self.server.ssl_context is not None:
            self.controller_keystores = ControllerKeystores(
                cfg, ctl.name, self.server.ssl_context, [c for c in self._dial_contexts if c is not None],
                lambda: self.controller.image if self.controller is not None else None)
            self.controller_keystores.start()

    def _clean_periodically(self) -> None:
        """Time-based retention needs no new snapshot to act (Kafka runs its cleaner every minute)."""
        try:
            if self.log is not None and self.fatal is None:
                self.log.maybe_clean()
        except StorageError as exc:
            log.error("node %d: metadata log retention: %s", self.cfg.node_id, exc)
        self._cleaner = asyncio.get_running_loop().call_later(CLEAN_INTERVAL_MS / 1000, self._clean_periodically)

    async def shutdown(self, resign_wait_s: float = 0.5) -> None:
        """Graceful: the broker's controlled shutdown first (it needs the quorum), then resign
        leadership so followers elect at once, then close everything."""
        if self._cleaner is not None:
            self._cleaner.cancel()
        if self.controller_keystores is not None:
            self.controller_keystores.stop()
        if getattr(self, "watchdog", None) is not None:
            self.watchdog.close()
        if self.broker is not None:
            broker, self.broker = self.broker, None
            await broker.shutdown()
        if self.driver is not None and self.driver.core.is_leader():
            self.driver.resign()
            await asyncio.sleep(resign_wait_s)  # let EndQuorumEpoch reach the voters
        if getattr(self, "controller_requests", None) is not None:
            self.controller_requests.close()
        if self.server is not None:
            await self.server.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self.driver is not None:
            await self.driver.close()
        if getattr(self, "snapshots", None) is not None:
            self.snapshots.close()  # waits for a snapshot being written (bounded: one image)
        if self.log is not None:
            try:
                self.log.close()
            except StorageError as exc:  # closing a failed log may fail again; the cause is logged
                log.debug("closing the metadata log: %s", exc)
        if self._log_flusher is not None:
            self._log_flusher.stop()
            self._log_flusher = None
        if self._locks is not None:
            self._locks.release()
            self._locks = None
        lst = getattr(self, "listener", None)
        if lst is not None:
            log.info("node %d: stopped; applied up to offset %d, %d records, digest %s", self.cfg.node_id,
                     lst.next_offset, lst.records, lst.digest)
        ctl = getattr(self, "controller", None)
        if ctl is not None:
            stats = image_stats(ctl.image)
            log.info("node %d: metadata image at offset %d: %d topics, %d partitions, %d brokers, digest %012x, "
                     "%d records skipped (not metadata or not fitting)", self.cfg.node_id, ctl.next_offset,
                     stats["topics"], stats["partitions"], stats["active_brokers"] + stats["fenced_brokers"],
                     stats["digest"], ctl.metadata_errors)
