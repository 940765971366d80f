"""``QuorumController``: the KIP-631 controller as a Raft listener (seed 004's "future state").

Every node replays committed records into ``image`` (standbys stay warm). The node that leads
the Raft epoch is the active controller once the listener has read everything before its epoch:
each request runs its handler against ``view`` (the committed image plus the records this
controller proposed and not yet saw committed), the records are appended as one unit (split into
proposals of at most ``MAX_RECORDS_PER_PROPOSAL`` records; an atomic unit larger than that is
wrapped in Begin/EndTransaction so replay applies all of it or none), and the answer is released
through ``respond`` only once the unit's last offset commits. A request that writes nothing is
answered once everything proposed before it committed, so no answer ever reflects uncommitted
state. The active controller does not replay its own committed records again: it adopts the image
it computed for them (Kafka does the same), and replays only records others appended (the
Produce writer), re-basing its uncommitted view on top. Losing leadership drops the uncommitted
view (back to ``image`` exactly); a waiting request is answered once its offset commits, with
its response if its own epoch's records are there and NOT_CONTROLLER if another's are
(``_settle_orphans``). A request of ``BOUNDED_APIS`` writing more than 10,000 records is refused
(POLICY_VIOLATION, as Kafka); a unit with ``steps`` (a fence) is proposed a step at a time
(``run_step``, driven by ``ControllerQueue``). Records that are not metadata records (raw bytes
from the Produce writer) or do not fit the image are counted in ``metadata_errors`` and skipped.

The active controller's ``tick`` fences one broker whose lease expired (a step at a time) and, with
``auto.leader.rebalance.enable`` (Kafka's default: true), every
``leader.imbalance.check.interval.seconds`` proposes preferred-leader elections for imbalanced
brokers (``elect_leaders.rebalance_records``).

Sans-I/O: time comes in as ``now_ms``; ``append(values) -> last offset`` (raises NotLeaderError)
and ``respond(token, response)`` are injected. For profiling, ``apply_observer(counts, append_ms,
commit_ms, applied_ms)`` and its ``clock() -> ms`` may be injected too: once per committed batch,
``counts`` maps record type names to how many records of that type the batch held (counted only
while an observer is set). This module must not import asyncio or sockets.
"""

from __future__ import annotations

import collections
import logging

from kraft.controller import proposal_values
from kraft.controller.broker_handlers import MoveOff
from kraft.controller.elect_leaders import rebalance_records
from kraft.controller.handlers import ERROR_RESPONSES, HANDLERS
from kraft.controller.leases import BrokerLeases
from kraft.controller.result import ControllerContext
from kraft.errors import ErrorCode, KraftError, NotLeaderError
from kraft.controller.record_cache import RecordCodecCache, record_count
from kraft.metadata import EMPTY_IMAGE, encode_record
from kraft.metadata.replay import image_from_snapshot, replay_values
from kraft.metadata.serde import FRAME_VERSION
from kraft.metadata.records import (AbortTransactionRecord, BeginTransactionRecord,
                                    EndTransactionRecord, FeatureLevelRecord, RegisterBrokerRecord)

log = logging.getLogger("kraft.controller")

#: The Raft core's limit for one atomic append (Kafka's controller uses the same 10,000).
MAX_RECORDS_PER_PROPOSAL = 10_000
#: Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: a request of ``BOUNDED_APIS`` that would
#: write more records is refused whole (POLICY_VIOLATION), as Kafka's BoundedList refuses it.
MAX_RECORDS_PER_USER_OP = 10_000
#: The operations Kafka builds in a BoundedList: CreateTopics, DeleteTopics, CreatePartitions,
#: ElectLeaders, AlterPartitionReassignments, UnregisterBroker, (Incremental)AlterConfigs,
#: CreateAcls, UpdateFeatures. Internal work (a fence moving a broker's leaders) is not bounded.
BOUNDED_APIS = frozenset({19, 20, 37, 43, 45, 64, 44, 33, 30, 57})
#: Requests a controller that lost its leadership keeps waiting for their fate (see
#: ``_drop_uncommitted``); past this many the oldest are answered NOT_CONTROLLER at once.
MAX_ORPHANS = 10_000
#: Kafka's message (EventHandlerExceptionInfo, for a BoundedListTooLongException).
TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."
#: First bytes a metadata record's value may start with: the frame version 1, or the first
#: byte of a longer varint (which the parser then refuses as an unknown version).
_METADATA_LEADS = bytes(1 if b == FRAME_VERSION or b >= 0x80 else 0 for b in range(256))


class _Proposal:
    """One append of ours: offsets ``first..last``, its record values, the view once it commits."""

    __slots__ = ("first", "last", "values", "image", "txn")

    def __init__(self, first, last, values, image, txn):
        self.first, self.last, self.values, self.image, self.txn = first, last, values, image, txn


class _Stepwise:
    """A unit being proposed a step at a time (``ControllerResult.steps``): what answers it once
    its last step commits (no token: the controller's own work, a fence by lease expiry)."""

    __slots__ = ("steps", "token", "response", "api_key", "request", "version", "hold_to")

    def __init__(self, steps, token=None, response=None, api_key=-1, request=None, version=0):
        self.steps, self.token, self.response = steps, token, response
        self.api_key, self.request, self.version = api_key, request, version
        #: the offset of the milestone's last record: no further step until it commits
        self.hold_to = None


class _Waiter:
    """A request answered once ``offset`` commits; ``epoch``: the controller's when it waited."""

    __slots__ = ("offset", "token", "response", "api_key", "request", "version", "epoch")

    def __init__(self, offset, token, response, api_key, request, version, epoch):
        self.offset, self.token, self.response = offset, token, response
        self.api_key, self.request, self.version, self.epoch = api_key, request, version, epoch


class QuorumController:
    """Invariants: ``view`` is ``image`` when not active; ``_pending`` proposals are in offset
    order and all at or above ``next_offset``; waiters are in offset order."""

    def __init__(self, node_id: int, *, cluster_id: str = "", settings: dict | None = None,
                 append=None, respond=None):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.settings = dict(settings or {})
        self.append = append
        self.respond = respond
        self.image = EMPTY_IMAGE  # committed
        self.next_offset = 0  # the next committed offset to apply
        self._txn = None  # records of a transaction open in the committed log
        self.active = False
        self.epoch = -1
        self.leader_id = -1
        self._pending: collections.deque[_Proposal] = collections.deque()
        self._waiters: collections.deque[_Waiter] = collections.deque()
        # Waiters of an epoch this controller no longer leads, in offset order: answered when
        # the offset they wait on commits, by whether the batch there is of their epoch.
        self._orphans: collections.deque[_Waiter] = collections.deque()
        self.leases = BrokerLeases(int(self.settings.get("broker.session.timeout.ms", 9000)))
        self._leases_started = False
        self._last_appended = -1
        self.metadata_errors = 0
        self.fenced_by_expiry = 0
        self.codec = RecordCodecCache()
        #: features of ``bootstrap.checkpoint`` (name -> level), written once by an active controller
        self.bootstrap_features: dict | None = None
        #: other records of bootstrap.checkpoint (``storage format --add-scram``), written with them
        self.bootstrap_records: list = []
        self._bootstrap_epoch = -1
        self.last_applied_timestamp = -1  # append time (ms) of the last committed batch applied
        self.apply_observer = None  # profiling hook, see the module docstring
        self.clock = None
        self._foreign_counts: list = []  # (append ms, counts) while an observer is set
        self._next_rebalance_ms = None
        self.rebalances = 0
        #: records per proposal; None: ``MAX_RECORDS_PER_PROPOSAL`` (the simulator sets a few, so
        #: that ordinary requests span several batches and transactions)
        self.max_records_per_proposal: int | None = None
        self._stepwise: _Stepwise | None = None  # a unit proposed a step at a time, not finished
        self._milestones: collections.deque = collections.deque()  # (offset, what) to log once committed

    # --- views ----------------------------------------------------------------------------
    @property
    def view(self):
        """What handlers see: committed image + our uncommitted proposals."""
        return self._pending[-1].image if self._pending else self.image

    @property
    def _view_txn(self):
        return self._pending[-1].txn if self._pending else self._txn

    @property
    def uncommitted_offsets(self) -> int:
        return self._pending[-1].last + 1 - self.next_offset if self._pending else 0

    def _next_write_hint(self) -> int:
        return max(self.next_offset, self._last_appended + 1)

    # --- RaftListener -----------------------------------------------------------------------
    def handle_commit(self, batches) -> None:
        pending = self._pending
        foreign = []
        observer = self.apply_observer
        if observer is not None:
            commit_ms = self.clock()
            own_counts = []
        orphans = self._orphans
        spans = [] if orphans else None  # (base, next offset, epoch) of each batch, for them
        for batch in batches:
            base = batch.base_offset
            if spans is not None:
                spans.append((base, batch.next_offset, batch.partition_leader_epoch))
            if batch.is_control:
                pass
            elif pending and pending[0].first <= base <= pending[0].last:
                if foreign:
                    self._apply_foreign(foreign)
                    foreign = []
                end = batch.next_offset
                while pending and pending[0].last < end:
                    p = pending.popleft()
                    self.image, self._txn = p.image, p.txn
                    if observer is not None:
                        own_counts.append((batch.max_timestamp, proposal_values.count_types(p.values)))
                self.last_applied_timestamp = batch.max_timestamp
            else:
                foreign.append(batch)
            self.next_offset = batch.next_offset
        if foreign:
            self._apply_foreign(foreign)
        if spans:
            for base, end, epoch in spans:
                self._settle_orphans(base, end, epoch)
        while self._milestones and self._milestones[0][0] < self.next_offset:
            offset, what = self._milestones.popleft()
            log.info("node %d: %s (committed up to offset %d)", self.node_id, what, offset)
        if observer is not None:
            applied_ms = self.clock()
            for append_ms, counts in own_counts + self._foreign_counts:
                observer(counts, append_ms, commit_ms, applied_ms)
            self._foreign_counts = []
        self._release()

    def _settle_orphans(self, base: int, end: int, epoch: int) -> None:
        """The fate of the orphaned waiters whose offset the committed batch ``base..end - 1`` of
        ``epoch`` holds: applied if it is of their epoch (the records they waited on are the ones
        their controller proposed), not applied otherwise (the next leader replaced them)."""
        orphans = self._orphans
        while orphans and orphans[0].offset < end:
            w = orphans.popleft()
            if w.offset >= base and epoch == w.epoch:
                self.respond(w.token, w.response)
            else:
                self.answer_error(w.token, w.api_key, w.request, w.version, ErrorCode.NOT_CONTROLLER)

    def _apply_foreign(self, batches) -> None:
        """Replay records another node (or the Produce writer) appended, a batch at a time
        through the batch codec (``replay_values``: no record object per PartitionRecord)."""
        observing = self.apply_observer is not None
        registered = {}
        applied = False
        for batch in batches:
            base = batch.base_offset
            self.last_applied_timestamp = batch.max_timestamp
            # Null or empty values, or a one-byte frame version other than 1, are not
            # metadata records (a demo writer's payload): counted in C, without an object
            # or a parse error per record (a busy log holds millions of them).
            candidates, others = batch.values_led_by(_METADATA_LEADS)
            self.metadata_errors += others
            if not candidates:
                continue
            index = [i for i, _ in candidates]
            counts = collections.Counter() if observing else None

            def on_record(k, rec, index=index, base=base, counts=counts):
                if type(rec) is RegisterBrokerRecord:
                    registered[rec.broker_id] = base + index[k]
                if counts is not None:
                    counts[type(rec).__name__] += 1
            self.image, self._txn, errors, direct = replay_values(self.image, self._txn, [v for _, v in candidates],
                                                                  self.codec.decode, on_record)
            self.metadata_errors += errors
            applied = True
            if observing:
                counts.update(direct)
                self._foreign_counts.append((batch.max_timestamp, dict(counts)))
        if not applied:
            return
        self.leases.registered_at.update(registered)
        if self._pending:
            self._rebase()

    def _rebase(self) -> None:
        """Records of another writer committed while ours wait: our view moves onto them."""
        image, txn = self.image, self._txn
        for p in self._pending:
            image, txn, _, _ = replay_values(image, txn, p.values, self.codec.decode)
            p.image, p.txn = image, txn

    def handle_load_snapshot(self, reader) -> None:
        self._drop_uncommitted()
        # Orphans the snapshot covers cannot be told apart any more (no batches to look at).
        while self._orphans and self._orphans[0].offset < reader.snapshot_id.offset:
            w = self._orphans.popleft()
            self.answer_error(w.token, w.api_key, w.request, w.version, ErrorCode.NOT_CONTROLLER)
        self.image, self._txn, errors = image_from_snapshot(reader, self.codec.decode)
        self.metadata_errors += errors
        if errors:
            log.error("node %d: snapshot %s: %d records are not metadata or do not fit the image: skipped",
                      self.node_id, reader.snapshot_id, errors)
        self.next_offset = reader.snapshot_id.offset

    @property
    def open_transaction(self) -> bool:
        """A metadata transaction is open in the committed log (a snapshot now would split it)."""
        return self._txn is not None

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader_id = leader_and_epoch.leader_id
        if leader_and_epoch.leader_id == self.node_id:
            if not self.active or self.epoch != leader_and_epoch.epoch:
                self._drop_uncommitted()
                self.active = True
                self.epoch = leader_and_epoch.epoch
                self._leases_started = False  # started at the first now_ms we see
                log.info("node %d: active controller in epoch %d at offset %d", self.node_id, self.epoch,
                         self.next_offset)
        else:
            if self.active:
                log.info("node %d: no longer the active controller (leader %d, epoch %d); %d uncommitted "
                         "offsets dropped", self.node_id, leader_and_epoch.leader_id, leader_and_epoch.epoch,
                         self.uncommitted_offsets)
            self._drop_uncommitted()
            self.active = False
            self.epoch = leader_and_epoch.epoch

    def _drop_uncommitted(self) -> None:
        """Back to the committed image exactly. A waiting request is not answered NOT_CONTROLLER
        now: its records may still commit under the next leader (they reached a follower), and a
        client told "not applied" retries and finds its own first attempt ("already exists").
        It waits, orphaned, until its offset commits and says which (``_settle_orphans``). A
        unit made a step at a time is answered NOT_CONTROLLER at once (it may be partly in)."""
        stepwise, self._stepwise = self._stepwise, None
        if stepwise is not None and stepwise.token is not None:
            self.answer_error(stepwise.token, stepwise.api_key, stepwise.request, stepwise.version,
                              ErrorCode.NOT_CONTROLLER)
        self._pending.clear()
        self._milestones.clear()
        self.leases.clear()
        self._leases_started = False
        waiters, self._waiters = self._waiters, collections.deque()
        self._orphans.extend(waiters)  # (both in offset order, the older epochs' first)
        while len(self._orphans) > MAX_ORPHANS:
            w = self._orphans.popleft()
            self.answer_error(w.token, w.api_key, w.request, w.version, ErrorCode.NOT_CONTROLLER)

    def _release(self) -> None:
        w = self._waiters
        committed = self.next_offset
        while w and w[0].offset < committed:
            x = w.popleft()
            self.respond(x.token, x.response)

    # --- the active controller --------------------------------------------------------------
    def context(self, version: int, now_ms: int) -> ControllerContext:
        return ControllerContext(image=self.view, version=version, now_ms=now_ms, settings=self.settings,
                                 node_id=self.node_id, cluster_id=self.cluster_id, leases=self.leases,
                                 next_offset=self._next_write_hint(), step_records=self._step_records())

    def _step_records(self) -> int:
        return self.max_records_per_proposal or MAX_RECORDS_PER_PROPOSAL

    def submit(self, api_key: int, request, version: int, now_ms: int, token) -> None:
        """Run the handler of ``api_key``; ``respond(token, response)`` is called once its records
        committed (at once for errors and when nothing is uncommitted)."""
        if not self.active:
            self.answer_error(token, api_key, request, version, ErrorCode.NOT_CONTROLLER)
            return
        self._start_leases(now_ms)
        try:
            result = HANDLERS[api_key](self.context(version, now_ms), request)
        except KraftError as e:  # ApiError above all: a request-level Kafka error
            self.answer_error(token, api_key, request, version, e.code, getattr(e, "message", None) or str(e))
            return
        if record_count(result.records) > MAX_RECORDS_PER_USER_OP and api_key in BOUNDED_APIS:
            self.answer_error(token, api_key, request, version, ErrorCode.POLICY_VIOLATION, TOO_LARGE_MESSAGE)
            return
        if result.records:
            try:
                first = self._propose(result.records, result.atomic)
            except NotLeaderError:
                self.answer_error(token, api_key, request, version, ErrorCode.NOT_CONTROLLER)
                return
            if api_key == 62:  # the registration record is the first of the unit
                self.leases.registered_at[request.broker_id] = first
        if result.response is not None and getattr(result.response, "error_code", 0) == 0:
            if api_key in (62, 63):
                offset = request.current_metadata_offset if api_key == 63 else -1
                self.leases.touch(request.broker_id, now_ms, offset)
            elif api_key == 64:
                self.leases.forget(request.broker_id)
        if result.steps is not None:  # the rest a step at a time (run_step); answered after the last
            self._stepwise = _Stepwise(result.steps, token, result.response, api_key, request, version)
            self.run_step()  # the first now: a small unit is done in one
            return
        self._answer_at_commit(token, result.response, api_key, request, version)

    def _answer_at_commit(self, token, response, api_key, request, version) -> None:
        """Answer once everything proposed so far committed (at once if it has)."""
        wait = self._pending[-1].last if self._pending else -1
        if wait < self.next_offset:
            self.respond(token, response)
        else:
            self._waiters.append(_Waiter(wait, token, response, api_key, request, version, self.epoch))

    @property
    def stepping(self) -> bool:
        """A unit is being proposed a step at a time: ``run_step`` goes on with it, and nothing
        else may run in between (each step is computed on the view the previous one left)."""
        return self._stepwise is not None

    @property
    def step_ready(self) -> bool:
        """The unit in progress may propose its next step now. Not while its milestone (a
        fence's new leaders) is uncommitted: on a small machine the leader computing the ISR
        bookkeeping takes the CPU the followers need to fetch, and so delays the very commit
        that ends the unavailability (the leaders of a fenced broker's partitions)."""
        s = self._stepwise
        return s is not None and (s.hold_to is None or s.hold_to < self.next_offset)

    def run_step(self) -> None:
        """Propose the next step of the unit in progress (see ``ControllerResult.steps``)."""
        s = self._stepwise
        if s is None:
            return
        before = self._next_write_hint()
        records, done = s.steps(self.view)
        if records:
            try:
                first = self._propose(records, atomic=False)
            except NotLeaderError:
                return  # leadership lost: _drop_uncommitted answered the unit's request
        else:
            first = before
        milestone = getattr(s.steps, "milestone", None)
        if milestone is not None:
            s.steps.milestone = None
            # Logged when it commits (an operator's "the new leaders are out"), see handle_commit.
            self._milestones.append((first + milestone[1] - 1, milestone[0]))
            s.hold_to = first + milestone[1] - 1
        if done and self._stepwise is s:
            self._stepwise = None
            if s.token is not None:
                self._answer_at_commit(s.token, s.response, s.api_key, s.request, s.version)

    def tick(self, now_ms: int) -> int:
        """Periodic work of the active controller: fence brokers whose lease expired, and the
        leader rebalance when due. Returns how many brokers it fenced."""
        if not self.active:
            return 0
        self._maybe_bootstrap()
        self._start_leases(now_ms)
        if self._stepwise is not None:
            return 0  # a unit in progress: fences and rebalances wait for it
        self._maybe_rebalance(now_ms)
        view = self.view
        live = [b.id for b in view.cluster.brokers.values() if not b.fenced]
        expired = self.leases.expired(live, now_ms)
        if not expired:
            return 0
        # One broker per tick, as Kafka's maybeFenceOneStaleBroker: each fence (every partition
        # the broker leads moves) is proposed and visible before the next, and no tick proposes
        # the leadership of the whole cluster at once; the fence itself goes a step at a time.
        victim = expired[:1]
        log.info("node %d: fencing broker %d: no heartbeat within %d ms%s", self.node_id, victim[0],
                 self.leases.session_timeout_ms, f" ({len(expired) - 1} more expired)" if len(expired) > 1 else "")
        self._stepwise = _Stepwise(MoveOff(victim, self.settings, self._step_records(), fence=True))
        self.run_step()
        self.fenced_by_expiry += 1
        return 1

    def heartbeat_arrived(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A BrokerHeartbeat was read (it may wait in the queue before it runs): the broker is
        alive now, so its lease must not expire while its heartbeat waits (Kafka's
        BrokerHeartbeatTracker.updateContactTime, done as the request arrives)."""
        if not self.active:
            return
        b = self.view.cluster.brokers.get(broker_id)
        if b is not None and b.epoch == broker_epoch:
            self.leases.touch(broker_id, now_ms)

    def broker_disconnected(self, broker_ids, now_ms: int) -> None:
        """The connection the brokers' last heartbeats came over closed. A live broker
        reconnects and heartbeats within its interval; a dead one (SIGKILL closes its sockets)
        never does, and waiting out the whole session would leave the partitions it leads
        (group coordinators among them) without a leader for ``broker.session.timeout.ms``.
        So its lease now ends ``kraft.broker.disconnected.session.timeout.ms`` after the close
        (negative: Kafka's behaviour, the whole session; at least one heartbeat interval plus a
        second). A broker lost without a close (power, network) still waits out its session."""
        within = int(self.settings.get("kraft.broker.disconnected.session.timeout.ms", -1))
        if not self.active or within < 0:
            return
        # Never shorter than a live broker needs to reconnect and send its next heartbeat.
        within = max(within, int(self.settings.get("broker.heartbeat.interval.ms", 2000)) + 1000)
        for b in broker_ids:
            self.leases.shorten(b, now_ms, within)

    def _maybe_bootstrap(self) -> None:
        """Kafka's first active controller writes the features of ``bootstrap.checkpoint``
        (``storage format``'s metadata.version) into the log: here, whenever the active
        controller finds no metadata.version in its view (a leader that lost the first try
        simply writes them again; replay makes it idempotent)."""
        features = self.bootstrap_features
        if not features or self.view.features.metadata_version or self._bootstrap_epoch == self.epoch:
            return
        names = sorted(features, key=lambda n: (n != "metadata.version", n))
        records = [FeatureLevelRecord(name=n, feature_level=int(features[n])) for n in names if int(features[n]) > 0]
        records += self.bootstrap_records
        try:
            self._propose(records, atomic=True)
        except NotLeaderError:
            return
        self._bootstrap_epoch = self.epoch
        log.info("node %d: wrote the bootstrap features %s", self.node_id, dict(zip(names, map(features.get, names))))

    def _maybe_rebalance(self, now_ms: int) -> None:
        if str(self.settings.get("auto.leader.rebalance.enable", "true")).strip().lower() != "true":
            return
        interval_ms = int(float(self.settings.get("leader.imbalance.check.interval.seconds", 300)) * 1000)
        if self._next_rebalance_ms is None:
            self._next_rebalance_ms = now_ms + interval_ms
        if now_ms < self._next_rebalance_ms:
            return
        self._next_rebalance_ms = now_ms + interval_ms
        records = rebalance_records(self.view, self.settings)
        if not records:
            return
        log.info("node %d: leader rebalance: %d preferred election(s)", self.node_id, len(records))
        try:
            self._propose(records, atomic=False)
        except NotLeaderError:
            return
        self.rebalances += 1

    def _start_leases(self, now_ms: int) -> None:
        if self._leases_started:
            return
        self._leases_started = True
        self._next_rebalance_ms = None  # a new active controller waits one interval first
        self.leases.reset(self.view.cluster.brokers, now_ms)
        if self._txn is not None:
            # The previous controller died inside a transaction: end it for everyone.
            try:
                self._propose([AbortTransactionRecord(reason="controller failover")], atomic=False)
            except NotLeaderError:
                pass

    def _propose(self, records: list, atomic: bool) -> int:
        """Append ``records``; returns the offset of the first one. NotLeaderError (and the
        uncommitted view dropped) if this node cannot append."""
        values = self.codec.encode_all(records)
        limit = self.max_records_per_proposal or MAX_RECORDS_PER_PROPOSAL
        chunks = proposal_values.chunks(values, limit)
        wrapped = atomic and len(chunks) > 1
        if wrapped:
            values = [encode_record(BeginTransactionRecord()), *values, encode_record(EndTransactionRecord())]
            chunks = proposal_values.chunks(values, limit)
        image, txn = self.view, self._view_txn
        first_offset = None
        try:
            for chunk in chunks:
                image, txn, errors, _ = replay_values(image, txn, chunk, self.codec.decode)
                if errors:
                    self.metadata_errors += errors
                    log.error("node %d: %d of our own records did not replay (a handler bug)", self.node_id, errors)
                last = self.append(chunk)
                self._last_appended = last
                first = last - len(chunk) + 1
                if first_offset is None:
                    first_offset = first
                if last >= self.next_offset:  # (an append that committed at once was replayed already)
                    self._pending.append(_Proposal(first, last, chunk, image, txn))
        except NotLeaderError:
            self.handle_leader_change(_NoLeader(self.epoch))
            raise
        # The caller's first record, not the BeginTransactionRecord before it (a broker is
        # unfenced once it has read its RegisterBrokerRecord, which comes after the Begin).
        return first_offset + 1 if wrapped else first_offset

    def answer_error(self, token, api_key, request, version, code, message=None) -> None:
        make = ERROR_RESPONSES.get(api_key)
        self.respond(token, make(request, version, code, message) if make is not None else None)


class _NoLeader:
    leader_id = -1

    def __init__(self, epoch):
        self.epoch = epoch
