"""Runs partition replication on the asyncio loop: the sans-I/O cores in ``kraft.broker``
(``ReplicaFetchers`` for the follower side, ``LeaderReplication`` for ISR and HW) get their
sockets, timers and controller requests here.

  * one task per replica fetcher (source broker, fetcher id): connect to the leader's
    inter-broker listener (``inter.broker.listener.name``, else the first broker listener; the
    endpoint from the image's registration), then poll -> Fetch -> on_response ->
    ``apply_fetch_effects``, waiting for ``next_ready_ms`` while every partition backs off;
  * after each image: fetchers and leader states follow it, HW moves wake the handlers;
  * every ``replica.lag.time.max.ms / 2``: the ISR shrink check (``LeaderReplication.tick``);
  * one task sends what ``poll_alter_partition`` returns to the active controller (one
    request in flight) once a controller connection is attached (``attach_controller``);
    a static-image broker has none, and its proposals simply wait.

Decisions stay in the cores: this module only moves bytes and time, and logs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging

from kraft.server.node_security import INTER_BROKER, node_client_options
from kraft.broker.follower_log import LocalReplicas, apply_fetch_effects
from kraft.broker.replica_fetcher import ReplicaFetchers
from kraft.client.node_client import NodeClient
from kraft.errors import ErrorCode, KraftError
from kraft.server.raft_driver import wall_ms

log = logging.getLogger("kraft.broker.replication")

#: v2: topic ids and ``new_isr``; v3 (broker epochs of ISR members) needs the followers' epochs,
#: which the fetchers do not send yet (``replica_epoch=-1``).
ALTER_PARTITION_VERSION = 2
#: Kafka's ``replica.socket.timeout.ms`` default: a Fetch or AlterPartition not answered by then
#: is failed (a Fetch may also wait ``replica.fetch.wait.max.ms`` at the leader first).
REQUEST_TIMEOUT_MS = 30_000
#: threads writing the epoch checkpoints of partitions this broker just became leader of
EPOCH_CHECKPOINT_WORKERS = 16
#: how long an idle fetcher task sleeps at most before looking at its partitions again
IDLE_WAIT_S = 1.0


def inter_broker_listener(cfg) -> str:
    """``inter.broker.listener.name`` if a listener has that name, else the first broker listener."""
    controller_names = set(cfg.controller_listener_names)
    names = [ep.name for ep in cfg.listeners if ep.name not in controller_names]
    wanted = cfg.values.get("inter.broker.listener.name")
    if wanted in names or not names:
        return wanted
    return names[0]


class _FetcherTask:
    """The loop of one ``ReplicaFetcher`` (looked up by key each round: the image may replace it)."""

    def __init__(self, driver: "ReplicationDriver", key: tuple[int, int]):
        self.driver, self.key = driver, key
        self.wake = asyncio.Event()
        self.client: NodeClient | None = None
        self.address = None
        self.last_error = None
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{key[0]}-{key[1]}")
        self.task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.critical("broker %d: replica fetcher %s stopped: %r", self.driver.broker_id, self.key,
                         task.exception(), exc_info=task.exception())

    async def _client(self):
        leader = self.key[0]
        address = self.driver.endpoint(leader)
        if address != self.address and self.client is not None:
            await self.client.close()
            self.client = None
        self.address = address
        if address is None:
            return None
        if self.client is None:
            d = self.driver
            self.client = NodeClient(address[0], address[1], client_id=f"kraft-replica-fetcher-{d.broker_id}",
                                     request_timeout_ms=d.request_timeout_ms + d.fetch_options["max_wait_ms"],
                                     max_in_flight=1, **d.client_options)
        return self.client

    async def _run(self) -> None:
        d = self.driver
        while not d.closed:
            f = d.fetchers.fetchers.get(self.key)
            if f is None or f.idle:
                break
            now = wall_ms()
            req = f.poll(now)
            if req is None:
                ready = f.next_ready_ms()
                wait = IDLE_WAIT_S if ready is None else min(IDLE_WAIT_S, max(0.0, (ready - now) / 1000))
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), max(wait, 0.001))
                except asyncio.TimeoutError:
                    pass
                continue
            client = await self._client()
            if client is None:
                f.on_failure(wall_ms())  # the leader is not registered on our listener (yet)
                continue
            try:
                resp = await client.request(req, f.version)
            except KraftError as exc:
                if type(exc) is not type(self.last_error):  # once per kind: a dead leader is retried often
                    log.info("broker %d: fetch from broker %d failed: %s", d.broker_id, self.key[0], exc)
                # Kept without its traceback: its frames (this coroutine's among them, hence a
                # cycle) may hold views of the answer that native decoders export, which the
                # cyclic GC cannot clear safely (see produce_handler._validate_all).
                self.last_error = exc.with_traceback(None)
                f.on_failure(wall_ms())
                continue
            self.last_error = None
            if d.fetchers.fetchers.get(self.key) is not f:
                f.on_failure(wall_ms())  # replaced meanwhile: the new fetcher asks again
                continue
            effects = f.on_response(resp, wall_ms())
            if effects:
                d.apply(effects)

    async def close(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass
        if self.client is not None:
            await self.client.close()


class ReplicationDriver:
    def __init__(self, cfg, state, handlers):
        self.cfg = cfg
        self.broker_id = cfg.node_id
        self.state = state
        self.logs = state.logs
        self.handlers = handlers
        self.listener = inter_broker_listener(cfg)
        # How this broker dials the others' inter-broker listener (TLS, SASL, as that listener has them).
        self.client_options = node_client_options(cfg, self.listener, INTER_BROKER)
        v = cfg.values
        self.request_timeout_ms = REQUEST_TIMEOUT_MS
        self.fetch_options = dict(backoff_ms=v["replica.fetch.backoff.ms"], max_wait_ms=v["replica.fetch.wait.max.ms"],
                                  min_bytes=v["replica.fetch.min.bytes"],
                                  max_bytes=v["replica.fetch.response.max.bytes"],
                                  partition_max_bytes=v["replica.fetch.max.bytes"], quota=state.follower_quota)
        self.fetchers = ReplicaFetchers(self.broker_id, LocalReplicas(self.logs),
                                        num_fetchers=v["num.replica.fetchers"], **self.fetch_options)
        self.lag_max_ms = cfg.int("replica.lag.time.max.ms")
        state.replication.lag_max_ms = self.lag_max_ms
        self.tasks: dict[tuple[int, int], _FetcherTask] = {}
        self.closed = False
        self._controller = None  # ControllerClient, once attached
        self._broker_epoch = lambda: -1
        self._alter_wake: asyncio.Event | None = None
        self._alter_task: asyncio.Task | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._checkpoint_pool: concurrent.futures.ThreadPoolExecutor | None = None

    # --- wiring ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._alter_wake = asyncio.Event()
        self._schedule_tick()

    def attach_controller(self, client, broker_epoch) -> None:
        """Send AlterPartition through ``client`` (a ControllerClient) with ``broker_epoch()``."""
        self._controller, self._broker_epoch = client, broker_epoch
        if self._alter_task is None:
            self._alter_task = asyncio.get_running_loop().create_task(self._alter_loop(), name="alter-partition")
            self._alter_task.add_done_callback(self._alter_ended)

    def endpoint(self, broker_id: int):
        ep = self.state.leader_endpoint(broker_id, self.listener)
        return None if ep is None else (ep[0] or "localhost", ep[1])

    # --- the image ------------------------------------------------------------------------------
    def on_image(self, image) -> None:
        """After ``publish_image``: fetchers and leader states follow ``image``."""
        if self.closed:
            return
        self.fetchers.on_image(image)
        replication = self.state.replication
        led_before = set(replication.states)
        for plog in replication.on_image(image, self.logs):
            self.handlers.on_high_watermark(plog)
        self._write_new_epochs([k for k in replication.states if k not in led_before])
        for key, f in self.fetchers.fetchers.items():
            t = self.tasks.get(key)
            if t is None or t.task.done():
                if f.partitions:
                    if t is not None:  # it ran out of partitions earlier: its connection goes too
                        asyncio.get_running_loop().create_task(t.close())
                    self.tasks[key] = _FetcherTask(self, key)
            else:
                t.wake.set()
        for key in [k for k, t in self.tasks.items() if k not in self.fetchers.fetchers]:
            asyncio.get_running_loop().create_task(self.tasks.pop(key).close())
        self._poke_alter()

    def _write_new_epochs(self, keys) -> None:
        """Partitions this broker just became leader of start a leader epoch (in their epoch
        caches at once): their checkpoints are written on worker threads side by side. Left
        to the log flusher, each would cost a flusher cycle of three fsyncs (the checkpoint, its
        directory, the data) before the first acks=all answer; after a failover of 1,000
        partitions that queue held acks for seconds."""
        logs = [p for p in (self.logs.get(*k) for k in keys) if p is not None and p.log.epoch_cache.dirty]
        if not logs:
            return
        if self._checkpoint_pool is None:
            self._checkpoint_pool = concurrent.futures.ThreadPoolExecutor(
                EPOCH_CHECKPOINT_WORKERS, thread_name_prefix="kraft-epoch-checkpoint")
        for plog in logs:
            self._checkpoint_pool.submit(self._write_epoch, plog)

    def _write_epoch(self, plog) -> None:
        try:
            plog.log.write_epoch_checkpoint()
        except KraftError as exc:  # a fatal log error is the log's own to report; the flush retries
            log.warning("broker %d: epoch checkpoint of %s-%d: %s", self.broker_id, plog.topic, plog.partition, exc)

    def apply(self, effects) -> None:
        """A fetcher's effects on the local logs; consumers parked on a follower look again."""
        for plog in apply_fetch_effects(self.logs, effects, self.state.producer_states):
            self.handlers.fetch.wake(plog)

    # --- ISR shrink -----------------------------------------------------------------------------
    def _schedule_tick(self) -> None:
        if not self.closed:
            self._tick_handle = asyncio.get_running_loop().call_later(max(self.lag_max_ms / 2000, 0.01), self._tick)

    def _tick(self) -> None:
        try:
            if self.state.replication.tick(self.logs):
                self._poke_alter()
        finally:
            self._schedule_tick()

    # --- AlterPartition -------------------------------------------------------------------------
    def _poke_alter(self) -> None:
        if self._alter_wake is not None:
            self._alter_wake.set()

    def _alter_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.critical("broker %d: AlterPartition sender stopped: %r", self.broker_id, task.exception(),
                         exc_info=task.exception())

    async def _alter_loop(self) -> None:
        replication = self.state.replication
        while not self.closed:
            req = replication.poll_alter_partition(self._broker_epoch())
            if req is None:
                self._alter_wake.clear()
                try:
                    # Follower fetches queue expansions without telling anyone: look now and then.
                    await asyncio.wait_for(self._alter_wake.wait(), 0.2)
                except asyncio.TimeoutError:
                    pass
                continue
            for t in req.topics:
                for p in t.partitions:  # the core fills both forms; the codec takes one per version
                    p.new_isr_with_epochs = []
            try:
                resp = await self._controller.call(req, version=ALTER_PARTITION_VERSION,
                                                   deadline_s=self.request_timeout_ms / 1000)
            except KraftError as exc:
                log.warning("broker %d: AlterPartition not answered: %s", self.broker_id, exc)
                replication.on_alter_partition_failed()
                await asyncio.sleep(0.1)
                continue
            codes = [p.error_code for t in resp.topics for p in t.partitions if p.error_code]
            if resp.error_code or codes:
                log.info("broker %d: AlterPartition answered %s", self.broker_id,
                         _name(resp.error_code) if resp.error_code else sorted({_name(c) for c in codes}))
            replication.on_alter_partition_response(resp)

    # --- shutdown -------------------------------------------------------------------------------
    async def close(self) -> None:
        self.closed = True
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._alter_task is not None:
            self._alter_task.cancel()
            try:
                await self._alter_task
            except (asyncio.CancelledError, Exception):
                pass
        tasks, self.tasks = self.tasks, {}
        await asyncio.gather(*(t.close() for t in tasks.values()), return_exceptions=True)
        if self._checkpoint_pool is not None:  # before the logs close: the flush would write them anyway
            await asyncio.get_running_loop().run_in_executor(None, self._checkpoint_pool.shutdown, True)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
