"""BrokerNode: a broker's client listeners, partition logs and request handlers assembled from
a NodeConfig, serving real Kafka clients.

startup: lock every ``log.dirs`` entry (``.lock``), recover every partition log, start one
KafkaServer per non-controller listener; serve; shutdown: close the listeners, flush and
close the logs, write the offset checkpoints. Periodic work on the loop: retention every
``log.retention.check.interval.ms``, checkpoints every
``log.flush.offset.checkpoint.interval.ms``.

The metadata image is injected (``publish(image)``): by ``broker_role.py`` in a real node
(images replayed from the metadata log; registration and heartbeats there too), or by a test
or this module's ``main`` with a static image (``registration_record()`` gives what such an
image holds for this broker). Each new image creates or deletes local partition logs
(``image_publisher``), re-checks parked fetches and is handed to the ``ReplicationDriver``
(replica fetchers, ISR shrink, AlterPartition once ``broker_role`` attaches a controller).

``python -m kraft.server.broker_node`` runs one broker with a static image (benchmarks and
process-level tests): ``--topic NAME:PARTITIONS`` as often as needed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import time
import uuid

from kraft.broker.broker_state import BrokerLimits, BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.broker.image_publisher import hosted_partitions, publish_image
from kraft.broker.log_compaction import start_cleaner
from kraft.broker.partition_logs import PartitionLogs
from kraft.broker.replica_moves import ReplicaMoves
from kraft.broker.topic_configs import follow_topic_configs
from kraft.server.txn_verifier import TxnVerifier
from kraft.log.log_cleaner import LogCleaner
from kraft.config import REPLICA_SELECTORS, NodeConfig, log_flush_linger_ms, log_flush_messages, log_retention_ms
from kraft.errors import ConfigError, FatalLogError, StorageError
from kraft.log import LogConfig
from kraft.log.dir_lock import lock_directories
from kraft.metadata import MetadataDelta, PartitionRecord, RegisterBrokerRecord, TopicRecord
from kraft.metadata.broker_config_defs import BROKER_CONFIGS
from kraft.metadata.config_defs import parse_value
from kraft.metadata.configs import BROKER
from kraft.metadata.image import EMPTY_IMAGE, MetadataImage
from kraft.server.group_driver import GroupDriver
from kraft.server.txn_driver import TxnDriver, producer_ids_from
from kraft.server.client_telemetry import ClientTelemetry
from kraft.server.group_lag import GroupLag
from kraft.server.sasl import listener_sasl
from kraft.server.tls import listener_context
from kraft.server.connection_limits import connection_limits
from kraft.server.keystore_reload import KeystoreReload
from kraft.broker.replication_quotas import FOLLOWER, LEADER, ReplicationQuota
from kraft.server.network import KafkaServer
from kraft.server.replication_driver import ReplicationDriver
from kraft.server.eventloop import LoopThread
from kraft.server.shared_loop_flusher import SharedLoopFlusher
from kraft.server.allocator import keep_freed_pages

log = logging.getLogger("kraft.broker")


def _wall_ms() -> int:
    return int(time.time() * 1000)


class BrokerNode:
    def __init__(self, cfg: NodeConfig, *, cluster_id: str | None = None, lock: bool = True, serve=None,
                 fetch_producer_id_block=None, create_topic=None):
        #: CreateTopicsRequest -> awaitable answer from the controller (the offsets topic)
        self.create_topic = create_topic
        self.cfg = cfg
        #: () -> (start, length) or an awaitable of it: producer id blocks (None: a local source)
        self.fetch_producer_id_block = fetch_producer_id_block
        #: handlers -> what the listeners call (e.g. forwarding admin writes to the controller)
        self.serve = serve
        self.lock = lock  # False when the node assembling this broker already holds the locks
        self.cluster_id = cluster_id
        self.logs: PartitionLogs | None = None
        self.state: BrokerState | None = None
        self.handlers: BrokerHandlers | None = None
        self.replication: ReplicationDriver | None = None
        #: compacts the logs of cleanup.policy=compact topics on its own threads
        self.cleaner: LogCleaner | None = None
        #: consumer lag of the groups this broker coordinates, for /metrics
        self.group_lag: GroupLag | None = None
        self.servers: dict[str, KafkaServer] = {}
        self.keystores: KeystoreReload | None = None  # set once the listeners exist
        self._locks = None
        self._timers: list[asyncio.TimerHandle] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._published = False  # the first image judges strays (it must be a caught-up one)
        #: New partition logs are made off the loop (a node whose loop also runs the Raft
        #: quorum); a static-image broker and unit tests make them before ``publish`` returns.
        self.create_in_background = False
        self._configs_applied = False  # the first image gives every log its topic's configs
        #: (log dir) on the loop once a log directory went offline (the broker role heartbeats)
        self.on_dir_offline = None
        #: (list of PartitionLog) on the loop once logs made in the background, or moved to
        #: another directory, are in place (their directories are reported to the controller)
        self.on_logs_made = None

    # --- startup ------------------------------------------------------------------------------
    async def start(self, serving: bool = True) -> None:
        """``serving=False``: the client listeners are bound (their ports known for the
        registration) but refuse connections until ``start_serving`` (Kafka enables request
        processing only once the broker has caught up with the metadata)."""
        cfg = self.cfg
        self._loop = loop = asyncio.get_running_loop()
        for d in cfg.log_dirs:
            os.makedirs(d, exist_ok=True)
        if self.lock:
            self._locks = lock_directories(list(cfg.log_dirs))
        v = cfg.values
        log_cfg = LogConfig(segment_bytes=v["log.segment.bytes"], max_batch_bytes=None,
                            append_linger_ms=log_flush_linger_ms(v), flush_interval_messages=log_flush_messages(v))

        here = LoopThread(loop)

        def on_flushed(plog, offset):  # the loop (a flush cycle's end), or a thread's own flush
            if self.handlers is not None:
                if here.on_loop():
                    loop.call_soon(self.handlers.on_flushed, plog, offset)
                else:
                    loop.call_soon_threadsafe(self.handlers.on_flushed, plog, offset)

        self.logs = PartitionLogs(cfg.log_dirs, log_cfg, retention_ms=log_retention_ms(v),
                                  retention_bytes=v["log.retention.bytes"], on_flushed=on_flushed)
        # Flush cycles on this loop, fdatasyncs on native threads (no GIL hand-offs per fsync).
        self.logs.flusher_factory = lambda name, threads: SharedLoopFlusher(loop, threads)
        self.logs.on_dir_error = lambda d, exc: loop.call_soon_threadsafe(self._dir_failed, d, exc)
        self.logs.moves = ReplicaMoves(self.logs, lambda delay, fn: loop.call_later(delay, fn),
                                       on_moved=lambda plog: self.on_logs_made and self.on_logs_made([plog]))
        # Tens of thousands of long-lived objects per thousand logs: the cyclic collector ran
        # over all of them again and again (40% of opening 10,000 logs). It is paused while
        # they are made, and what was made is frozen out of later full collections.
        gc.disable()
        try:
            opened = self.logs.open_all(threads=v["num.recovery.threads.per.data.dir"])
        finally:
            gc.freeze()
            gc.enable()
        log.info("broker %d: %d partition logs recovered in %s", cfg.node_id, len(opened), ", ".join(cfg.log_dirs))
        self.logs.moves.resume()  # replica moves a stop cut short go on
        limits = BrokerLimits(message_max_bytes=v["message.max.bytes"],
                              timestamp_type=v["log.message.timestamp.type"])
        self.state = state = BrokerState(cfg.node_id, self.logs, cluster_id=self.cluster_id, limits=limits,
                                         static_configs=static_broker_configs(cfg))
        windows = dict(samples=v["replication.quota.window.num"], window_ms=1000 * v["replication.quota.window.size.seconds"])
        state.leader_quota = ReplicationQuota(LEADER, cfg.node_id, **windows)
        state.follower_quota = ReplicationQuota(FOLLOWER, cfg.node_id, **windows)
        state.replica_selector = REPLICA_SELECTORS[v["replica.selector.class"]]
        # From here on each log takes its topic's effective configs (rolls, flush, retention).
        follow_topic_configs(self.logs, state, log_cfg)
        self.handlers = BrokerHandlers(self.state, fetch_producer_id_block=self.fetch_producer_id_block,
                                       fetch_session_cache_slots=v["max.incremental.fetch.session.cache.slots"])
        self.replication = ReplicationDriver(cfg, self.state, self.handlers)
        self.replication.start()
        self.handlers.groups = GroupDriver(self.state, self.handlers.produce, v, create_topic=self.create_topic)
        self.handlers.groups.start()
        self.handlers.transactions = TxnDriver(
            self.state, self.handlers.produce, v, listener=self.replication.listener,
            new_producer_id=producer_ids_from(self.handlers.init_producer_id), create_topic=self.create_topic,
            client_options=self.replication.client_options,
            local_markers=self.handlers.write_txn_markers.handle)
        self.handlers.groups.transactions = self.handlers.transactions
        # A COMMIT/ABORT marker durable on __consumer_offsets settles transactional offsets.
        self.handlers.write_txn_markers.txn_marker_written = self.handlers.groups.txn_marker_written
        self.handlers.transactions.start()
        if str(v["transaction.partition.verification.enable"]).strip().lower() == "true":
            self.handlers.produce.verifier = TxnVerifier(state, self.replication.listener,
                                                         client_options=self.replication.client_options,
                                                         local=self.handlers.transactions.verify)
        self.group_lag = GroupLag(state, self.handlers.groups, self.replication.listener,
                                  v["kraft.group.lag.interval.ms"], max_series=v["kraft.group.lag.max.series"],
                                  client_options=self.replication.client_options)
        self.group_lag.start()
        if v["kraft.client.telemetry.push.interval.ms"] > 0:
            self.handlers.telemetry = ClientTelemetry(v["kraft.client.telemetry.push.interval.ms"])
        controller_names = set(cfg.controller_listener_names)
        for ep in cfg.listeners:
            if ep.name in controller_names:
                continue
            handlers = self.serve(self.handlers) if self.serve is not None else self.handlers
            server = KafkaServer(handlers, ep.host, ep.port, listener_name=ep.name,
                                 max_frame_bytes=v["socket.request.max.bytes"], ssl_context=listener_context(cfg, ep.name),
                                 sasl=listener_sasl(cfg, ep.name, self._scram_credential),
                                 **connection_limits(cfg))
            await server.start(serving)
            self.servers[ep.name] = server
            log.info("broker %d: serving %s on %s:%d", cfg.node_id, ep.name, ep.host or "0.0.0.0", server.port)
        self.keystores = KeystoreReload(cfg, {name: s.ssl_context for name, s in self.servers.items()},
                                        {self.replication.listener: self.replication.client_options.get("ssl_context")})
        self._every(v["log.retention.check.interval.ms"], self._retention)
        self.cleaner = start_cleaner(loop, self.logs, state, v)
        if v["log.flush.offset.checkpoint.interval.ms"] > 0:
            self._every(v["log.flush.offset.checkpoint.interval.ms"], self.logs.write_checkpoints)

    def _scram_credential(self, user: str, mechanism: int):
        """SCRAM logins read the current image: a credential applied here works at once."""
        return self.state.image.scram.lookup(user, mechanism) if self.state is not None else None

    async def start_serving(self) -> None:
        for server in self.servers.values():
            await server.start_serving()

    def _every(self, interval_ms: int, fn) -> None:
        def run():
            try:
                fn()
            except StorageError as exc:
                log.error("broker %d: %s failed: %s", self.cfg.node_id, getattr(fn, "__name__", fn), exc)
            self._timers.append(self._loop.call_later(interval_ms / 1000, run))
        self._timers.append(self._loop.call_later(interval_ms / 1000, run))

    def _dir_failed(self, log_dir: str, exc: BaseException) -> None:
        """KIP-858 (on the loop): a log directory hit an I/O error. Its partitions stop being
        served here and the controller is told (``on_dir_offline``: the next heartbeat names it);
        the node keeps serving the other directories. The metadata log's directory, or the last
        online one, failing stops the node, as Kafka's."""
        d = os.path.abspath(log_dir)
        if d == os.path.abspath(self.cfg.metadata_log_dir):
            raise FatalLogError(f"log directory {d} holds the metadata log and failed: {exc}")
        gone = self.logs.fail_dir(d, f"{type(exc).__name__}: {exc}")
        if not self.logs.dirs.online():
            raise FatalLogError(f"every log directory has failed (the last, {d}: {exc})")
        if not gone and self.logs.dirs.offline.get(d) is None:
            return
        log.error("broker %d: log directory %s failed (%s): %d partitions offline, serving the others",
                  self.cfg.node_id, d, exc, len(gone))
        image = self.state.image
        # Logs that were being made there when it failed are made in the healthy directories now.
        publish_image(self.logs, EMPTY_IMAGE, image, self.cfg.node_id,
                      create=self._create_in_background if self.create_in_background else None)
        self.replication.on_image(image)  # leader states and fetchers of those partitions go
        self.handlers.produce.release_unled()
        self.handlers.fetch.wake_all()
        if self.on_dir_offline is not None:
            self.on_dir_offline(d)

    def _retention(self) -> None:
        deleted = self.logs.apply_retention(_wall_ms())
        if deleted:
            log.info("broker %d: retention deleted %d segments", self.cfg.node_id, deleted)

    # --- the image ----------------------------------------------------------------------------
    def publish(self, image: MetadataImage):
        """Make ``image`` the broker's view: local logs follow it, parked fetches look again."""
        previous = self.state.image
        create = self._create_in_background if self.create_in_background else None
        changes = publish_image(self.logs, previous, image, self.cfg.node_id, first=not self._published,
                                create=create)
        self._published = True
        self.state.image = image
        self._apply_configs(previous, image)
        self.replication.on_image(image)
        self.handlers.produce.release_unled()
        self.handlers.fetch.wake_all()
        return changes

    def _create_in_background(self, missing) -> None:
        self.logs.create_in_background(missing, self._loop, self._logs_created)

    def _logs_created(self, made) -> None:
        """New logs made off the loop are in place: the image may have moved on meanwhile (a
        topic deleted again, its configs changed); then fetchers and leader states take them."""
        image = self.state.image
        wanted = hosted_partitions(image, self.cfg.node_id)
        for plog in made:
            if wanted.get((plog.topic, plog.partition)) != plog.topic_id:
                self.logs.delete(plog.topic, plog.partition)
        self.logs.reconfigure({plog.topic for plog in made})
        self.replication.on_image(image)
        self.handlers.produce.release_unled()
        self.handlers.fetch.wake_all()
        if self.on_logs_made is not None:
            self.on_logs_made(made)

    def _apply_configs(self, previous: MetadataImage, image: MetadataImage) -> None:
        """A config change in ``image`` reaches what reads configs outside a request: each log's
        roll, index and flush settings, and the listeners' per-address connection cap."""
        topics = None if not self._configs_applied else self.state.topic_configs.changed_topics(previous, image)
        self._configs_applied = True
        if topics is None or topics:
            changed = self.logs.reconfigure(topics)
            if changed:
                log.info("broker %d: %d partition logs took new topic configs", self.cfg.node_id, changed)
        cap = effective_broker_config(image, self.cfg, "max.connections.per.ip")
        for server in self.servers.values():
            server.caps.per_ip = cap
            server.caps.set_quotas(image.client_quotas.entities)
        if self.keystores is not None:
            self.keystores.on_image(image)
        self.state.leader_quota.update(image)
        self.state.follower_quota.update(image)

    def port(self, listener: str | None = None) -> int:
        if listener is None:
            listener = next(iter(self.servers))
        return self.servers[listener].port

    def registration_record(self, *, fenced: bool = False, epoch: int = 1) -> RegisterBrokerRecord:
        """What the controller would record for this broker: its advertised listeners, with
        the bound port where the configuration said 0."""
        eps = []
        for ep in self.cfg.advertised_listeners:
            if ep.name in self.cfg.controller_listener_names:
                continue
            port = ep.port or (self.servers[ep.name].port if ep.name in self.servers else 0)
            eps.append(RegisterBrokerRecord.BrokerEndpoint(name=ep.name, host=ep.host or "localhost", port=port,
                                                           security_protocol=0))
            if self.state is not None:  # what Metadata names before the image holds this registration
                self.state.own_endpoints[ep.name] = (ep.host or "localhost", port)
        return RegisterBrokerRecord(broker_id=self.cfg.node_id, incarnation_id=uuid.uuid4(), broker_epoch=epoch,
                                    end_points=eps, features=[], rack=None, fenced=fenced)

    # --- shutdown -----------------------------------------------------------------------------
    async def shutdown(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        for server in self.servers.values():
            await server.close()
        self.servers.clear()
        if self.cleaner is not None:  # before the logs close; the loop serves its swaps meanwhile
            self.cleaner.request_stop()
            await asyncio.get_running_loop().run_in_executor(None, self.cleaner.stop)
            self.cleaner = None
        if self.group_lag is not None:
            await self.group_lag.close()
        if self.replication is not None:
            await self.replication.close()
        if self.handlers is not None and self.handlers.produce.verifier is not None:
            await self.handlers.produce.verifier.close()
        if self.handlers is not None:
            self.handlers.close()
        if self.logs is not None:
            if self.logs.moves is not None:
                self.logs.moves.close()
            try:
                self.logs.close()
            except StorageError as exc:
                log.error("broker %d: closing the partition logs: %s", self.cfg.node_id, exc)
        if self._locks is not None:
            self._locks.release()
            self._locks = None


def static_broker_configs(cfg: NodeConfig) -> dict:
    """The broker configs server.properties sets (as written), by Kafka name; a value that does
    not parse stops the start (ConfigError), as it stops Kafka's. Ranges are ``NodeConfig``'s
    (it lets tests use segments smaller than Kafka 4's 1 MiB minimum)."""
    out = {k: v for k, v in cfg.given.items() if k in BROKER_CONFIGS}
    for name, text in out.items():
        try:
            parse_value(BROKER_CONFIGS[name].type, text)
        except ValueError as e:
            raise ConfigError(f"Invalid value {text} for configuration {name}: {e}") from None
    return out


def effective_broker_config(image: MetadataImage, cfg: NodeConfig, name: str) -> int:
    """An INT broker config of this node: its dynamic value, else the cluster default, else the
    static setting (controller-validated, so it parses)."""
    for resource in (str(cfg.node_id), ""):
        value = image.configs.config(BROKER, resource).get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                log.warning("broker %d: %s=%r does not parse; ignored", cfg.node_id, name, value)
    return cfg.int(name)


def static_image(registration: RegisterBrokerRecord, topics: dict, *, topic_ids: dict | None = None,
                 previous: MetadataImage = EMPTY_IMAGE) -> MetadataImage:
    """An image with one registered broker leading every partition of ``topics`` (name ->
    partition count) at leader epoch 0, ISR = itself (what the controller would write for
    RF 1). ``topic_ids`` fixes ids across restarts."""
    delta = MetadataDelta(previous)
    delta.replay(registration)
    broker = registration.broker_id
    for name, count in topics.items():
        tid = (topic_ids or {}).get(name) or uuid.uuid5(uuid.NAMESPACE_OID, f"kraft-topic:{name}")
        if previous.topics.by_name.get(name) is None:
            delta.replay(TopicRecord(name=name, topic_id=tid))
            for p in range(count):
                delta.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=[broker], isr=[broker],
                                             removing_replicas=[], adding_replicas=[], leader=broker,
                                             leader_epoch=0, partition_epoch=0))
    return delta.apply()


def broker_config(node_id: int, log_dir: str, *, listener: str = "PLAINTEXT://127.0.0.1:0",
                  props: dict | None = None) -> NodeConfig:
    """A broker-only NodeConfig (the controller quorum named but not contacted yet)."""
    base = {"node.id": str(node_id), "process.roles": "broker", "controller.quorum.voters": "3000@127.0.0.1:1",
             "controller.listener.names": "CONTROLLER", "listeners": listener, "log.dirs": log_dir,
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
    base.update({k: str(v) for k, v in (props or {}).items()})
    return NodeConfig.from_properties(base)


async def _main(args) -> None:
    extra = dict(kv.split("=", 1) for kv in args.set)
    cfg = broker_config(args.node_id, args.log_dir, listener=args.listener, props=extra)
    node = BrokerNode(cfg, cluster_id=args.cluster_id)
    await node.start()
    topics = {t.split(":")[0]: int(t.split(":")[1]) for t in args.topic}
    node.publish(static_image(node.registration_record(), topics))
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(node.port()))
        os.replace(tmp, args.port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await node.shutdown()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="one kraft broker with a static metadata image")
    ap.add_argument("--node-id", type=int, default=1)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--listener", default="PLAINTEXT://127.0.0.1:0")
    ap.add_argument("--topic", action="append", default=[], help="NAME:PARTITIONS")
    ap.add_argument("--cluster-id", default="kraft-broker-test")
    ap.add_argument("--port-file")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE server property")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    keep_freed_pages()  # as `kraft server start` does: consumers' fetch answers reuse warm pages
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
