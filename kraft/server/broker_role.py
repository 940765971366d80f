"""The broker half of a node (``process.roles`` with ``broker``): a ``BrokerNode`` (client
listeners, partition logs, request handlers), the metadata follower that gives it images, and
the lifecycle that registers it with the active controller and keeps its lease.

Broker-only nodes follow ``__cluster_metadata`` as Raft observers (``MetadataFollower``
replays the committed records); combined nodes read the image their own quorum controller
replays (``SharedImageFollower``: no second replay). Each new image goes to
``BrokerNode.publish`` (partition logs created or deleted, parked fetches re-checked).
Clients get NOT_LEADER_OR_FOLLOWER for partitions while the broker is not serving
(not registered, fenced, or past its session without an answer from the controller), and
Metadata leaves it out. The node (``node.py``) owns the Raft driver and the directory locks;
this owns nothing else.
"""

from __future__ import annotations

import asyncio
import logging

from kraft.server.node_security import CONTROLLER, node_client_options
from kraft.broker.lifecycle import BrokerLifecycle
from kraft.broker.metadata_follower import InitialCatchUp, MetadataFollower, SharedImageFollower
from kraft.client.controller_client import ControllerClient
from kraft.config import NodeConfig
from kraft.errors import ErrorCode, KraftError
from kraft.protocol import AllocateProducerIdsRequest
from kraft.broker.quotas import ClientQuotas
from kraft.metadata.authorization import authorizer_configured
from kraft.server.authz_handler import authorizing
from kraft.server.quota_throttle import QuotaThrottledHandlers
from kraft.server.broker_admin import AutoCreate, BrokerAdminHandlers
from kraft.server.controller_requests import controller_settings
from kraft.server.broker_lifecycle import BrokerLifecycleDriver
from kraft.server.broker_node import BrokerNode, static_broker_configs
from kraft.server.directory_assigner import DirectoryAssigner
from kraft.server.raft_driver import wall_ms

log = logging.getLogger("kraft.broker")

FORWARD_TIMEOUT_MS = 10_000


def controller_addresses(cfg: NodeConfig) -> list:
    return [(v.host, v.port) for v in cfg.voters] or list(cfg.bootstrap_servers)


def controller_id_for_clients(image, broker_id: int, serving: bool) -> int:
    """What Metadata names as controller: KRaft brokers name an alive broker (clients send
    admin requests there and brokers forward them), this one while it serves."""
    if serving:
        return broker_id
    alive = image.cluster.unfenced_broker_ids()
    return alive[0] if alive else -1


#: How often a catching-up broker looks again when no commit arrives, and logs its progress.
CATCH_UP_POLL_S = 0.1
CATCH_UP_LOG_S = 5.0


class BrokerRole:
    def __init__(self, cfg: NodeConfig, cluster_id: str, *, image_source=None, high_watermark=None):
        """``high_watermark() -> int``: the metadata quorum's high watermark as this node knows
        it (``RaftCore.leader_high_watermark``), the target of the initial catch-up."""
        self.cfg = cfg
        self.cluster_id = cluster_id
        # A commit can take longer than one Raft request: a longer timeout than the lifecycle's.
        # How this broker dials the controllers (the controller listener's TLS and SASL).
        self.controller_options = node_client_options(cfg, cfg.controller_listener_names[0], CONTROLLER)
        self.forwarding_client = ControllerClient(controller_addresses(cfg), client_id=f"kraft-broker-{cfg.node_id}",
                                                  request_timeout_ms=FORWARD_TIMEOUT_MS,
                                                  client_options=self.controller_options)
        self.node = BrokerNode(cfg, cluster_id=cluster_id, lock=False,
                               serve=self._admin_handlers, fetch_producer_id_block=self._allocate_producer_ids,
                               create_topic=self._create_topic)
        #: the Raft listener the node's driver must feed (after the controller, if any)
        self.follower = (SharedImageFollower(image_source, self._on_image) if image_source is not None
                         else MetadataFollower(self._on_image))
        self.lifecycle: BrokerLifecycle | None = None
        self.driver: BrokerLifecycleDriver | None = None
        self.assigner: DirectoryAssigner | None = None
        self.catch_up = InitialCatchUp(high_watermark or (lambda: -1))
        self._started = False
        self._catch_up_timer = None
        self._serving_task = None
        self._catch_up_began = 0.0
        self._catch_up_logged = 0.0

    async def _create_topic(self, request):
        """CreateTopics on the active controller (the group coordinator's offsets topic)."""
        return await self.forwarding_client.call(request, deadline_s=request.timeout_ms / 1000)

    def _admin_handlers(self, handlers) -> BrokerAdminHandlers:
        cfg = self.cfg
        auto = AutoCreate(cfg.values["auto.create.topics.enable"].lower() == "true", cfg.int("num.partitions"),
                          cfg.int("default.replication.factor"))
        admin = BrokerAdminHandlers(handlers, self.forwarding_client,
                                    static_configs={**controller_settings(cfg), **static_broker_configs(cfg)},
                                    auto_create=auto)
        inner = admin
        if authorizer_configured(cfg.values):  # authorization first, then the quotas (Kafka's order)
            state = admin.state
            inner = authorizing(admin, cfg.values, acls=lambda: state.image.acls,
                                topic_names=lambda: {t: ti.name for t, ti in state.image.topics.by_id.items()},
                                topic_exists=lambda name: name in state.image.topics.by_name, auto_create=auto.enabled)
        quotas = ClientQuotas(cfg.int("quota.window.num"), 1000 * cfg.int("quota.window.size.seconds"))
        return QuotaThrottledHandlers(inner, handlers.state, quotas)

    async def start(self) -> None:
        cfg = self.cfg
        await self.node.start(serving=False)  # clients are let in once caught up
        self.node.create_in_background = True  # this loop also runs the node's Raft quorum
        eps = [(e.name, e.host, e.port, e.security_protocol) for e in self.node.registration_record().end_points]
        rack = cfg.values.get("broker.rack") or None
        self.lifecycle = lc = BrokerLifecycle(
            cfg.node_id, self.cluster_id, listeners=eps, rack=rack, log_dir_ids=self._online_dir_ids(),
            session_timeout_ms=cfg.int("broker.session.timeout.ms"),
            heartbeat_interval_ms=cfg.int("broker.heartbeat.interval.ms"),
            previous_broker_epoch=self.node.logs.previous_broker_epoch)
        self.node.state.is_serving = lambda: lc.serving(wall_ms())
        lc.offline_log_dirs = self.node.logs.dirs.offline_ids
        self.node.on_dir_offline = lambda d: self.driver.wake() if self.driver is not None else None
        self.node.replication.attach_controller(self.forwarding_client, lambda: lc.broker_epoch)
        self._started = True
        loop = asyncio.get_running_loop()
        self._catch_up_began = self._catch_up_logged = loop.time()
        self._poll_catch_up()
        addresses = controller_addresses(cfg)
        timeout_ms = cfg.int("controller.quorum.request.timeout.ms")
        client = ControllerClient(addresses, client_id=f"kraft-broker-{cfg.node_id}", request_timeout_ms=timeout_ms,
                                  client_options=self.controller_options,
                                  leader_hint=self._leader_hint)
        self.driver = BrokerLifecycleDriver(lc, client, lambda: self.follower.last_applied_offset,
                                            retry_backoff_ms=min(1000, cfg.int("broker.heartbeat.interval.ms")),
                                            request_deadline_s=max(1.0, cfg.int("broker.session.timeout.ms") / 2000),
                                            on_change=self._refresh_controller_id)
        self.driver.start()
        self.assigner = DirectoryAssigner(cfg.node_id, self.node.logs, lambda: self.node.state.image,
                                          lambda: lc.broker_epoch, self.forwarding_client)
        self.assigner.note(self.node.logs)  # every log opened at start, once
        self.assigner.start()
        self.node.on_logs_made = self.assigner.note
        log.info("broker %d: registering with the controller quorum at %s (incarnation %s, rack %s)", cfg.node_id,
                 ",".join(f"{h}:{p}" for h, p in addresses), lc.incarnation_id, rack)

    def _leader_hint(self):
        """The quorum leader's address as this node's Raft knows it (set by the node)."""
        hint = self.forwarding_client.leader_hint
        return hint() if hint is not None else None

    def _online_dir_ids(self) -> list:
        """The registration's LogDirs: the directory ids of the online log dirs (a directory
        that failed at start is left out, so the controller sees it gone, as Kafka's does)."""
        dirs = self.node.logs.dirs
        return [dirs.ids[p] for p in dirs.online() if p in dirs.ids]

    async def _allocate_producer_ids(self):
        """The next producer id block from the active controller (AllocateProducerIds)."""
        epoch = self.lifecycle.broker_epoch if self.lifecycle is not None else -1
        resp = await self.forwarding_client.call(
            AllocateProducerIdsRequest(broker_id=self.cfg.node_id, broker_epoch=epoch), version=0,
            deadline_s=FORWARD_TIMEOUT_MS / 1000)
        if resp.error_code != 0:
            raise KraftError(f"AllocateProducerIds answered {ErrorCode(resp.error_code).name}")
        return resp.producer_id_start, resp.producer_id_len

    def _poll_catch_up(self) -> None:
        """Publish once caught up even if no commit comes to say so (the target may be
        reached by what was applied before it was known); log the progress meanwhile."""
        self._catch_up_timer = None
        if self.catch_up.done:
            return
        self._on_image(self.follower.image, self.follower.last_applied_offset)
        if self.catch_up.done:
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._catch_up_logged >= CATCH_UP_LOG_S:
            self._catch_up_logged = loop.time()
            log.info("broker %d: catching up with the metadata log: applied to offset %d of %s", self.cfg.node_id,
                     self.follower.last_applied_offset,
                     "an unknown high watermark" if self.catch_up.target is None
                     else f"high watermark {self.catch_up.target}")
        self._catch_up_timer = loop.call_later(CATCH_UP_POLL_S, self._poll_catch_up)

    def _on_image(self, image, offset: int) -> None:
        if not self._started:
            return
        first = not self.catch_up.done
        if first:
            if not self.catch_up.reached(offset + 1):
                return  # a prefix of the metadata: acting on it would take live partitions for strays
            log.info("broker %d: caught up with the metadata log at offset %d (high watermark %d when first "
                     "known) in %.1f s: publishing the first image", self.cfg.node_id, offset, self.catch_up.target,
                     asyncio.get_running_loop().time() - self._catch_up_began)
        state = self.node.state
        state.metadata_offset = offset
        if image is not state.image:
            topics_changed = image.topics is not state.image.topics
            changes = self.node.publish(image)
            if topics_changed and self.assigner is not None and self.assigner.unconfirmed:
                self.assigner.poke()  # the image may now show (or still lack) what was sent
            if changes.created or changes.deleted or changes.strays:
                log.info("broker %d: metadata at offset %d: %s", self.cfg.node_id, offset, changes)
        if first:  # its logs follow a caught-up image: clients may come, the controller may unfence it
            self.lifecycle.ready_to_unfence = True
            self._serving_task = asyncio.get_running_loop().create_task(self.node.start_serving())
        self._refresh_controller_id()

    def _refresh_controller_id(self) -> None:
        state = self.node.state
        state.controller_id = controller_id_for_clients(state.image, self.cfg.node_id, state.is_serving())

    async def shutdown(self) -> None:
        """Controlled shutdown (bounded by ``broker.session.timeout.ms``), then close."""
        if self._catch_up_timer is not None:
            self._catch_up_timer.cancel()
        if self.driver is not None:
            if self.assigner is not None:
                await self.assigner.close()
            await self.driver.controlled_shutdown(self.cfg.int("broker.session.timeout.ms") / 1000)
            await self.driver.close()
        if self.lifecycle is not None and self.node.logs is not None:
            # Written into the clean-shutdown files: the next start names it (KIP-966).
            self.node.logs.shutdown_broker_epoch = self.lifecycle.broker_epoch
        await self.node.shutdown()
        await self.forwarding_client.close()
