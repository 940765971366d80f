"""A simulated broker for the replication simulator: the real sans-I/O cores wired the way
``kraft/server`` wires them (``replication_driver.py``, ``broker_node.py``), with the
simulator's clock and network instead of asyncio and sockets.

  * ``BrokerLifecycle`` registers and heartbeats; ``BrokerState.is_serving`` is its lease.
  * The metadata image is pulled from ``SimController`` and replayed with ``MetadataDelta``;
    each new image creates logs (``publish_image``'s rule), then ``ReplicaFetchers.on_image``
    and ``LeaderReplication.on_image`` follow it, as ``ReplicationDriver.on_image`` does.
  * Followers: ``ReplicaFetcher.poll`` -> Fetch to the leader -> ``on_response`` ->
    ``apply_fetch_effects`` on the logs; the next poll at once after data, after a short
    long-poll pause otherwise.
  * Leader: a follower's Fetch is answered by ``serve_replica_fetch``, which mirrors
    ``FetchHandler._read_for_replica`` (leader/epoch checks through ``BrokerState``,
    DivergingEpoch from the epoch cache, ``replication.on_follower_fetch``) without its
    asyncio parking, inside the real fetch sessions (``FetchSessions``: a process's sessions
    die with it, so followers meet FETCH_SESSION_ID_NOT_FOUND after a leader restarts, and
    their incremental requests carry only what changed), reading only what changed as the
    handler does (``QuietPartitions``, woken by appends and HW moves as ``FetchHandler.wake``); Produce mirrors ``ProduceHandler`` (``local_leader``, min ISR, append
    with the leader epoch, acks=-1 answered when the HW and the local flush cover it,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, timeouts). ISR shrink runs every lag/2; AlterPartition
    goes out one at a time, as ``poll_alter_partition`` hands it.
  * ``BrokerLifecycle.begin_controlled_shutdown`` (a fault) ends in ``stop_cleanly`` once
    the controller answers ``should_shut_down``.
  * ``crash`` drops the process state (the logs stay, less the unflushed tail on a power
    loss); ``restart`` starts a new incarnation. Every message carries the incarnation, so
    answers to a dead process are dropped.
"""

from __future__ import annotations

import random
import uuid

from kraft.broker import follower_log, produce_handler
from kraft.broker.broker_state import BrokerLimits, BrokerState
from kraft.broker.fetch_sessions import CachedPartition, FetchSessionCache, FetchSessions
from kraft.broker.quiet_partitions import QuietPartitions, idle_note, still_idle
from kraft.broker.follower_log import LocalReplicas
from kraft.broker.leader_replication import LeaderReplication
from kraft.broker.lifecycle import BrokerLifecycle
from kraft.broker.metadata_follower import InitialCatchUp
from kraft.broker.replica_fetcher import AppendAsFollower, ReplicaFetchers, Truncate
from kraft.errors import ErrorCode, KraftError
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import FetchResponse
from kraft.records import build_batch
from kraft.testing.replication_controller import CLUSTER_ID
from kraft.testing.replication_log import SimPartitionLogs

F = FetchResponse
NONE = int(ErrorCode.NONE)
FETCH_TIMEOUT_MS = 1_500
CONTROLLER_TIMEOUT_MS = 1_000
METADATA_INTERVAL_MS = 50
IDLE_FETCH_MS = 40  # the leader's long poll, as seen by an idle follower
CHECKPOINT_INTERVAL_MS = 500


class SimBroker:
    def __init__(self, sim, broker_id: int, *, lag_max_ms: int, session_timeout_ms: int, min_isr: int,
                 flush_interval_ms: int, fetch_max_bytes: int):
        self.sim = sim
        self.id = broker_id
        self.lag_max_ms = lag_max_ms
        self.session_timeout_ms = session_timeout_ms
        self.min_isr = min_isr
        self.flush_interval_ms = flush_interval_ms
        self.fetch_max_bytes = fetch_max_bytes  # replica.fetch.max.bytes: small ones make followers lag
        self.logs = SimPartitionLogs()  # the disk: survives crashes
        self.clean_epoch = -1  # the broker epoch of a clean shutdown, as its clean-shutdown files keep it
        self.incarnation = 0
        self.alive = False
        self.paused_until = 0
        self.crashes = 0

    # --- process lifetime ------------------------------------------------------------------------
    def start(self) -> None:
        sim = self.sim
        self.incarnation += 1
        self.alive = True
        self.token = (self.id, self.incarnation)
        self.lifecycle = BrokerLifecycle(self.id, CLUSTER_ID, listeners=[("PLAINTEXT", f"b{self.id}", 9092, 0)],
                                         incarnation_id=uuid.UUID(int=sim.rng.getrandbits(128)),
                                         session_timeout_ms=self.session_timeout_ms, heartbeat_interval_ms=500,
                                         previous_broker_epoch=self.clean_epoch)
        self.clean_epoch = -1  # read at start (PartitionLogs removes the files): a kill now is unclean
        self.state = BrokerState(self.id, self.logs, limits=BrokerLimits(min_insync_replicas=self.min_isr))
        self.state.is_serving = lambda: self.lifecycle.serving(sim.now)
        self.state.replication = LeaderReplication(self.id, lag_max_ms=self.lag_max_ms, clock_ms=lambda: sim.now,
                                                   min_isr_of=self.state.min_insync_replicas)
        self.fetchers = ReplicaFetchers(self.id, LocalReplicas(self.logs), backoff_ms=200, max_wait_ms=0,
                                        partition_max_bytes=self.fetch_max_bytes)
        # Session ids from the broker and incarnation: the simulator's own random stream (its
        # faults) stays what it was before sessions were simulated.
        self.fetch_sessions = FetchSessions(FetchSessionCache(rng=random.Random(self.id * 1_000_003 + self.incarnation)))
        self.quiet = QuietPartitions()
        self.metadata_offset = 0  # records applied
        self.metadata_hw = -1  # the controller's record count as last heard
        self.catch_up = InitialCatchUp(lambda: self.metadata_hw)
        self.pending = MetadataDelta(EMPTY_IMAGE)  # records applied, not yet published
        self.metadata_in_flight = None  # when the pull went out
        self.controller_in_flight = None  # (serial, kind) of the one lifecycle request out
        self.alter_in_flight = None  # serial of the AlterPartition out
        self.fetch_serial: dict = {}  # fetcher key -> serial of its request out
        self.fetch_timer: dict = {}  # fetcher key -> serial of its pending wake-up
        self.serial = 0
        self.waits: dict = {}  # PartitionLog -> [(target, produce request id, producer, base, last)]
        self.sim.checks.broker_started(self)
        for kind, delay in (("lifecycle", 0), ("metadata", 0), ("isr", self.lag_max_ms // 2),
                            ("flush", self.flush_interval_ms), ("checkpoint", CHECKPOINT_INTERVAL_MS)):
            self.timer(delay, kind)

    def crash(self, lose_unflushed: bool) -> None:
        self.alive = False
        self.crashes += 1
        self.logs = self.logs.crash(lose_unflushed)

    def stop_cleanly(self) -> None:
        """The end of a controlled shutdown: everything flushed and checkpointed, then gone."""
        for plog in self.logs:
            plog.log.flush()
        self.logs.checkpoint_high_watermarks()
        epoch = self.lifecycle.broker_epoch
        self.crash(False)
        self.clean_epoch = epoch  # broker_role.shutdown hands it to PartitionLogs.close
        self.sim.stopped(self)

    def timer(self, delay_ms: int, kind: str, *args) -> None:
        self.sim.queue.at(self.sim.now + delay_ms, ("timer", self.id, self.incarnation, kind, args))

    def send(self, dst: int, event: tuple) -> None:
        self.sim.network.send(self.id, dst, event)

    def _next_serial(self) -> int:
        self.serial += 1
        return self.serial

    # --- timers ----------------------------------------------------------------------------------
    def on_timer(self, kind: str, args) -> None:
        getattr(self, "_t_" + kind)(*args)

    def _t_lifecycle(self) -> None:
        lc = self.lifecycle
        if self.controller_in_flight is None:
            serial = self._next_serial()
            if lc.wants_registration():
                req, kind = lc.registration_request(), "register"
            elif lc.registered:
                req, kind = lc.heartbeat_request(self.metadata_offset - 1), "heartbeat"
            else:
                req = None
            if req is not None:
                self.controller_in_flight = (serial, kind, self.sim.now)
                self.send(0, ("creq", self.token, serial, req))
                self.timer(CONTROLLER_TIMEOUT_MS, "controller_timeout", serial)
        self.timer(lc.next_heartbeat_ms() if lc.registered else 200, "lifecycle")

    def _t_controller_timeout(self, serial: int) -> None:
        if self.controller_in_flight is not None and self.controller_in_flight[0] == serial:
            self.controller_in_flight = None
        if self.alter_in_flight == serial:
            self.alter_in_flight = None
            self.state.replication.on_alter_partition_failed()
            self._poke_alter()

    def _t_metadata(self) -> None:
        if self.metadata_in_flight is None or self.sim.now - self.metadata_in_flight > CONTROLLER_TIMEOUT_MS:
            self.metadata_in_flight = self.sim.now
            self.send(0, ("mfetch", self.token, self.metadata_offset))
        self.timer(METADATA_INTERVAL_MS, "metadata")

    def _t_isr(self) -> None:
        self.state.replication.tick(self.logs, self.sim.now)
        self._poke_alter()
        self.timer(self.lag_max_ms // 2, "isr")

    def _t_flush(self) -> None:
        for plog in self.logs:
            before = plog.log.flushed_offset
            plog.log.flush()
            if plog.log.flushed_offset != before:
                self._check_waits(plog)  # ProduceHandler.on_flushed
        self.timer(self.flush_interval_ms, "flush")

    def _t_checkpoint(self) -> None:
        self.logs.checkpoint_high_watermarks()
        self.timer(CHECKPOINT_INTERVAL_MS, "checkpoint")

    def _t_fetch(self, key, serial: int) -> None:
        if self.fetch_timer.get(key) == serial:
            del self.fetch_timer[key]
            self._poll_fetcher(key)

    def _t_fetch_timeout(self, key, serial: int) -> None:
        if self.fetch_serial.get(key) == serial:
            del self.fetch_serial[key]
            f = self.fetchers.fetchers.get(key)
            if f is not None:
                f.on_failure(self.sim.now)
                self._schedule_fetch(key, f)

    def _t_produce_timeout(self, request_id: int) -> None:
        for plog, waits in list(self.waits.items()):
            for w in waits:
                if w[1] == request_id:
                    waits.remove(w)
                    code = self._wait_outcome(plog, w)
                    code = int(ErrorCode.REQUEST_TIMED_OUT) if code is None else code
                    self.send(w[2], ("produce_resp", request_id, code, w[3]))
                    return

    # --- messages --------------------------------------------------------------------------------
    def on_message(self, src: int, msg: tuple) -> None:
        kind = msg[0]
        if kind in ("cresp", "mrecords", "fetch_resp"):
            if msg[1] != self.token:
                return  # an answer to an earlier incarnation
        getattr(self, "_m_" + kind)(src, *msg[1:])

    def _m_cresp(self, src, token, serial, resp) -> None:
        if self.alter_in_flight == serial:
            self.alter_in_flight = None
            self.state.replication.on_alter_partition_response(resp)
            self._poke_alter()
            return
        flight = self.controller_in_flight
        if flight is None or flight[0] != serial:
            return
        self.controller_in_flight = None
        if flight[1] == "register":
            self.lifecycle.on_registration(resp, flight[2])
        else:
            self.lifecycle.on_heartbeat(resp, flight[2])
            if self.lifecycle.done:  # the controller moved everything off: stop cleanly
                self.stop_cleanly()

    def _m_mrecords(self, src, token, offset, records, high_watermark) -> None:
        self.metadata_in_flight = None
        self.metadata_hw = max(self.metadata_hw, high_watermark)
        if offset != self.metadata_offset or not records:
            return
        self.pending.replay_all(records)
        self.metadata_offset += len(records)
        if self.catch_up.reached(self.metadata_offset):  # BrokerRole: nothing acts on a prefix
            self.lifecycle.ready_to_unfence = True
            image = self.pending.apply()
            self.pending = MetadataDelta(image)
            self._publish(image)

    def _publish(self, image) -> None:
        """``publish_image`` (log creation) then ``ReplicationDriver.on_image``."""
        previous, self.state.image = self.state.image, image
        if previous.topics is not image.topics or previous is EMPTY_IMAGE:
            for topic in image.topics.by_id.values():
                for pid, reg in topic.partitions.items():
                    if self.id in reg.replicas and self.logs.get(topic.name, pid) is None:
                        self.logs.create(topic.name, pid, topic.id)
        self.fetchers.on_image(image)
        for plog in self.state.replication.on_image(image, self.logs, self.sim.now):
            self._check_waits(plog)
            self._wake(plog)  # BrokerHandlers.on_high_watermark
        self.sim.checks.after_image(self)
        for key, f in self.fetchers.fetchers.items():
            if key not in self.fetch_serial:
                self._poll_fetcher(key)
        self._poke_alter()

    # --- follower side ---------------------------------------------------------------------------
    def _poll_fetcher(self, key) -> None:
        f = self.fetchers.fetchers.get(key)
        if f is None or key in self.fetch_serial:
            return
        req = f.poll(self.sim.now)
        if req is None:
            self._schedule_fetch(key, f)
            return
        serial = self._next_serial()
        self.fetch_serial[key] = serial
        self.send(f.leader_id, ("fetch", self.token, key, serial, req))
        self.timer(FETCH_TIMEOUT_MS, "fetch_timeout", key, serial)

    def _schedule_fetch(self, key, f) -> None:
        """One pending wake-up per fetcher (a later one replaces it)."""
        ready = f.next_ready_ms()
        delay = max(IDLE_FETCH_MS, 0 if ready is None else ready - self.sim.now)
        serial = self._next_serial()
        self.fetch_timer[key] = serial
        self.timer(delay, "fetch", key, serial)

    def _m_fetch_resp(self, src, token, key, serial, resp) -> None:
        if self.fetch_serial.get(key) != serial:
            return
        del self.fetch_serial[key]
        f = self.fetchers.fetchers.get(key)
        if f is None or f.in_flight is None:
            return
        effects = f.on_response(resp, self.sim.now, {self.sim.controller.topic_id: "t"})
        before = {}
        for eff in effects:
            plog = self.logs.get(*eff.tp)
            if plog is not None and plog not in before:
                before[plog] = plog.high_watermark
        follower_log.apply_fetch_effects(self.logs, effects, None)
        self.sim.checks.after_fetch_effects(self, effects, before)
        if any(isinstance(e, (AppendAsFollower, Truncate)) for e in effects):
            self._poll_fetcher(key)
        else:
            self._schedule_fetch(key, f)

    # --- leader side -----------------------------------------------------------------------------
    def _m_fetch(self, src, token, key, serial, req) -> None:
        resp = self.serve_replica_fetch(req)
        self.send(src, ("fetch_resp", token, key, serial, resp))

    def serve_replica_fetch(self, req):
        """Mirrors ``FetchHandler.handle`` for a follower (v13, one answer at once): the fetch
        session the request names (``FetchSessions``), its quiet partitions skipped
        (``QuietPartitions``), each read as ``_read_for_replica``."""
        state = self.state
        replica = req.replica_id
        ctx = self.fetch_sessions.context(req, 13, state.image.topics.by_id, follower=True, now_ms=self.sim.now,
                                          narrow=self._narrow)
        if ctx.error != NONE:
            return F(throttle_time_ms=0, error_code=ctx.error, session_id=0, responses=[])
        serving = state.is_serving()
        reads = []
        for name, topic_id, p in ctx.wanted:
            note = p.idle if type(p) is CachedPartition else None
            if note is not None and still_idle(state, note, name, p, serving, self.sim.now):
                r = _SimRead(name, topic_id, self._partition_out(p.partition))
                r.hw = r.out.high_watermark = r.out.last_stable_offset = note.plog.high_watermark
                r.log_start = r.out.log_start_offset = note.plog.log.start_offset
            else:
                r = self._read_for_replica(name, topic_id, p, replica)
                if type(p) is CachedPartition:
                    quiet = r.code == NONE and not r.records and r.diverging is None
                    self.quiet.note(p, idle_note(state, r.plog, p, replica, None) if quiet else None, r.plog)
            reads.append(r)
        if ctx.session is not None:
            ctx.session.read_ms = self.sim.now
        code, session_id, reads = ctx.respond(reads, self.sim.now)
        topics: dict = {}
        for r in reads:
            topics.setdefault((r.topic, r.topic_id), []).append(r.out)
        return F(throttle_time_ms=0, error_code=code, session_id=session_id,
                 responses=[F.Topic(topic=name or "", topic_id=tid, partitions=parts)
                            for (name, tid), parts in topics.items()])

    def _narrow(self, session, requested):
        """``FetchHandler._narrow``."""
        state = self.state
        generation = (state.image, state.is_serving(), state.leader_quota.bound is None, self.logs.changes)
        return self.quiet.narrow(session, requested, generation)

    def _wake(self, plog) -> None:
        """``FetchHandler.wake``: nothing parks here (every answer goes at once), so a woken
        quiet partition is read by its session's next request."""
        self.quiet.wake(plog, lambda cp: None)

    @staticmethod
    def _partition_out(partition: int):
        return F.Topic.Partition(partition_index=partition, error_code=NONE, high_watermark=-1,
                                 last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                                 preferred_read_replica=-1, records=b"")

    def _read_for_replica(self, name, topic_id, p, replica: int) -> "_SimRead":
        state = self.state
        out = self._partition_out(p.partition)
        r = _SimRead(name, topic_id, out)
        if name is None:
            out.error_code = r.code = int(ErrorCode.UNKNOWN_TOPIC_ID)
            return r
        code, plog, reg = state.local_leader(name, p.partition, p.current_leader_epoch)
        if code == NONE and replica not in reg.replicas:
            code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if code != NONE:
            out.error_code = r.code = code
            return r
        r.plog = plog
        log = plog.log
        out.log_start_offset = r.log_start = log.start_offset
        if p.last_fetched_epoch >= 0:
            end = log.end_offset_for_epoch(p.last_fetched_epoch)
            if end.epoch < p.last_fetched_epoch or end.offset < p.fetch_offset:
                out.diverging_epoch = r.diverging = F.EpochEndOffset(epoch=end.epoch, end_offset=end.offset)
                out.high_watermark = out.last_stable_offset = r.hw = plog.high_watermark
                return r
        if p.fetch_offset < log.start_offset or p.fetch_offset > log.end_offset:
            out.error_code = r.code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
            return r
        if state.replication.on_follower_fetch(plog, reg, replica, p.fetch_offset, p.log_start_offset,
                                               self.sim.now):
            self._check_waits(plog)  # BrokerHandlers.on_high_watermark
            self._wake(plog)
        self._poke_alter()
        out.high_watermark = out.last_stable_offset = r.hw = state.advance_high_watermark(plog, reg)
        self.sim.checks.leader_hw(self, plog)
        if p.fetch_offset < log.end_offset:
            out.records = r.records = log.read(p.fetch_offset, p.partition_max_bytes)
        return r

    def _m_produce(self, src, request_id, tp, values, acks, timeout_ms) -> None:
        """Mirrors ``ProduceHandler`` for one partition of one request."""
        state = self.state
        code, plog, reg = state.local_leader(*tp)
        if code == NONE and acks == -1 and len(reg.isr) < state.min_insync_replicas(tp[0]):
            code = int(ErrorCode.NOT_ENOUGH_REPLICAS)
        if code != NONE:
            self.send(src, ("produce_resp", request_id, code, -1))
            return
        data = bytearray(build_batch(values, timestamp=self.sim.now))
        try:
            info = plog.log.append(data, assign_offsets=True, leader_epoch=max(reg.leader_epoch, 0))
        except KraftError as exc:
            self.send(src, ("produce_resp", request_id, int(exc.code), -1))
            return
        self.sim.checks.leader_append(self, tp, reg.leader_epoch, info.first_offset, info.last_offset)
        state.advance_high_watermark(plog, reg)
        self._wake(plog)  # ProduceHandler's on_append
        self.sim.checks.leader_hw(self, plog)
        if acks != -1:
            self.send(src, ("produce_resp", request_id, NONE, info.first_offset))
            return
        self.waits.setdefault(plog, []).append((info.last_offset + 1, request_id, src, info.first_offset, tp,
                                                reg.leader_epoch))
        self.timer(timeout_ms, "produce_timeout", request_id)
        self._check_waits(plog)

    def _check_waits(self, plog) -> None:
        """``ProduceHandler.on_flushed`` / ``on_high_watermark``: complete the acks=-1 waits
        that the HW and the local flush cover, or that lost their leader epoch."""
        waits = self.waits.get(plog)
        if not waits:
            return
        keep = []
        for w in waits:
            code = self._wait_outcome(plog, w)
            if code is None:
                keep.append(w)
            else:
                self.send(w[2], ("produce_resp", w[1], code, w[3]))
        self.waits[plog] = keep

    def _wait_outcome(self, plog, w):
        """None while waiting, else the answer (``ProduceHandler``'s rules, ``still_leads``
        and the after-append min ISR check included)."""
        target, _, _, _, tp, epoch = w
        if not produce_handler.still_leads(self.state, tp[0], tp[1], epoch):
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if plog.log.flushed_offset < target or plog.high_watermark < target:
            return None
        st = self.state.replication.states.get(tp)
        if st is not None and len(st.maximal_isr) < self.state.min_insync_replicas(tp[0]):
            return int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return NONE

    # --- AlterPartition --------------------------------------------------------------------------
    def _poke_alter(self) -> None:
        if self.alter_in_flight is not None:
            return
        req = self.state.replication.poll_alter_partition(self.lifecycle.broker_epoch)
        if req is None:
            return
        serial = self._next_serial()
        self.alter_in_flight = serial
        self.send(0, ("creq", self.token, serial, req))
        self.timer(CONTROLLER_TIMEOUT_MS, "controller_timeout", serial)


class _SimRead:
    """One partition's read, as ``FetchContext.respond`` looks at it (``fetch_handler._Read``):
    ``out`` is the answer's partition."""

    __slots__ = ("topic", "topic_id", "out", "code", "hw", "log_start", "records", "diverging", "preferred", "plog")

    def __init__(self, topic, topic_id, out):
        self.topic, self.topic_id, self.out = topic, topic_id, out
        self.plog = None
        self.code, self.hw, self.log_start = NONE, -1, -1
        self.records = b""
        self.diverging = None
        self.preferred = -1
