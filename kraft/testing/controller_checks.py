"""Safety invariants of the controller simulation (issue 11, item 6), checked while it runs and
at the end of each seed.

- Committed images agree: the (image, open transaction) a node's controller holds after each
  commit, keyed by offset, equals what every other node held at that offset (the active
  controller adopts the images it computed; standbys replay; a node that loaded a snapshot
  starts from it), and a snapshot read back equals the committed image at its offset; at the
  end, every node's latest snapshot plus its log suffix, replayed from scratch, equals the
  leader's image (``ControllerChecks.check_replay``).
- Leadership in every committed image: a leader is in its ISR, the ISR within the replicas,
  and the leader a registered, unfenced broker (``check_leadership``); and in the active
  controller's view after each request. A broker is unfenced only once the metadata offset it
  reported reached its registration record (``check_unfence``).
- Committed batches agree: each committed batch (base, end, epoch) is the same on every node,
  and every record of the log decodes and replays (``metadata_errors`` stays 0).
- Nothing uncommitted is answered: an answer that acknowledges anything (an error code 0
  somewhere in it) is released only once the records of its request (and everything proposed
  before) are committed in the epoch that proposed them; at once only when nothing is
  uncommitted (``check_answer``). Answers carrying only errors are exempt: a handler's raised
  error is answered at once, as Kafka does, and writes nothing.
- The admins' acknowledged history holds in the final image (``TopicLedger``).

This module only observes; it must not change what it checks.
"""

from __future__ import annotations

import bisect

from kraft.metadata import EMPTY_IMAGE, decode_record
from kraft.metadata.configs import TOPIC
from kraft.metadata.records import RegisterBrokerRecord
from kraft.metadata.snapshot_image import load_image
from kraft.raft.listener import read_snapshot
from kraft.records import iter_batches
from kraft.testing.invariants import InvariantViolation


def error_codes(response) -> set:
    """Every ``error_code`` in a response, nested lists of structs included."""
    out: set = set()
    _collect(response, out)
    return out


def _collect(obj, out: set) -> None:
    for f in type(obj).FIELDS:
        v = getattr(obj, f.name, None)
        if f.name == "error_code":
            out.add(v)
        elif isinstance(v, list):
            for x in v:
                if hasattr(type(x), "FIELDS"):
                    _collect(x, out)


def acknowledges(response) -> bool:
    return response is not None and 0 in error_codes(response)


def check_leadership(image, where: str) -> None:
    brokers = image.cluster.brokers
    for topic in image.topics.by_id.values():
        for pid, p in topic.partitions.items():
            if not set(p.isr) <= set(p.replicas):
                raise InvariantViolation(f"{where}: {topic.name}-{pid} ISR {p.isr} not within replicas {p.replicas}")
            if p.leader == -1:
                continue
            if p.leader not in p.isr:
                raise InvariantViolation(f"{where}: {topic.name}-{pid} led by {p.leader} outside its ISR {p.isr}")
            b = brokers.get(p.leader)
            if b is None or b.fenced:
                state = "unregistered" if b is None else "fenced"
                raise InvariantViolation(f"{where}: {topic.name}-{pid} led by {state} broker {p.leader}")


def image_difference(a, b) -> str:
    """Where two images differ first (for the failure message)."""
    for name in a._fields:
        pa, pb = getattr(a, name), getattr(b, name)
        if pa != pb:
            for field in getattr(pa, "_fields", ()):
                fa, fb = getattr(pa, field), getattr(pb, field)
                if fa != fb and isinstance(fa, dict):
                    keys = sorted((set(fa) ^ set(fb)) | {k for k in fa.keys() & fb.keys() if fa[k] != fb[k]}, key=repr)
                    k = keys[0]
                    return f"{name}.{field}[{k!r}]: {fa.get(k)!r} != {fb.get(k)!r}"
            return f"{name}: {pa!r} != {pb!r}"
    return "open transactions differ"


class ControllerChecks:
    """Cluster-wide record of what was committed and answered."""

    def __init__(self):
        # offset -> (image, open transaction, node) as first seen; before any record: the empty image
        self.images: dict[int, tuple] = {0: (EMPTY_IMAGE, False, None)}
        self._checked = None  # (topics, cluster) parts last checked for leadership
        self._checked_view = None
        self.batch_bases: list[int] = []
        self.batches: dict[int, tuple[int, int]] = {}  # base offset -> (next offset, epoch)
        self.registrations: dict[tuple[int, int], int] = {}  # (broker, epoch) -> offset of its RegisterBrokerRecord
        self.answers_checked = 0
        self.unfences_checked = 0
        self.snapshots_checked = 0
        self.replays_checked = 0
        # coverage: what the run went through
        self.activations = 0  # a controller became active (the first one, then each failover)
        self.snapshots_loaded = 0
        self.fenced_by_expiry = 0  # brokers fenced by an expired lease (proposed)
        self.inherited_transactions = 0  # a new active controller found a transaction open (it aborts it)
        self.dropped_uncommitted = 0  # offsets an active controller proposed and dropped with its leadership

    # --- during the run -------------------------------------------------------------------
    def committed_batch(self, node_id: int, batch) -> None:
        base, next_offset, epoch = batch.base_offset, batch.next_offset, batch.partition_leader_epoch
        seen = self.batches.get(base)
        if seen is None:
            self.batches[base] = (next_offset, epoch)
            bisect.insort(self.batch_bases, base)
            if not batch.is_control:
                for i, value in enumerate(batch.values()):
                    record = decode_record(value).record
                    if type(record) is RegisterBrokerRecord:
                        self.registrations[(record.broker_id, record.broker_epoch)] = base + i
        elif seen != (next_offset, epoch):
            raise InvariantViolation(f"node {node_id} committed batch {base}..{next_offset - 1} in epoch {epoch}; "
                                     f"another node committed {base}..{seen[0] - 1} in epoch {seen[1]}")

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the committed batch holding ``offset``, if any node committed it."""
        i = bisect.bisect_right(self.batch_bases, offset) - 1
        if i < 0:
            return None
        base = self.batch_bases[i]
        end, epoch = self.batches[base]
        return epoch if offset < end else None

    def committed_image(self, node_id: int, offset: int, image, open_txn) -> None:
        seen = self.images.get(offset)
        if seen is None:
            parts = (image.topics, image.cluster)
            if self._checked is None or self._checked[0] is not parts[0] or self._checked[1] is not parts[1]:
                check_leadership(image, f"node {node_id} committed image at offset {offset}")
                self._checked = parts
            self.images[offset] = (image, open_txn, node_id)
        elif seen[0] is not image and (seen[0] != image or seen[1] != open_txn):
            raise InvariantViolation(f"node {node_id}: committed image at offset {offset} differs from node "
                                     f"{seen[2]}'s: {image_difference(image, seen[0])}")

    def check_unfence(self, node_id: int, broker_id: int, epoch: int, reported_offset: int) -> None:
        """A broker is unfenced only once it reported having read its own registration record."""
        registered = self.registrations.get((broker_id, epoch))
        if registered is None:
            return  # (its registration was committed while no controller watched batch by batch)
        self.unfences_checked += 1
        if reported_offset < registered:
            raise InvariantViolation(f"node {node_id} unfenced broker {broker_id} (epoch {epoch}) at metadata offset "
                                     f"{reported_offset}, before its registration record at {registered}")

    @staticmethod
    def no_metadata_errors(node_id: int, controller) -> None:
        """Only controllers write the log here: every record must decode and fit the image."""
        if controller.metadata_errors:
            raise InvariantViolation(f"node {node_id}: {controller.metadata_errors} committed or proposed records "
                                     f"did not decode or replay")

    def check_answer(self, node_id: int, controller, response, wait_offset, epoch) -> None:
        """``wait_offset`` None: answered within the request's own handling."""
        if not acknowledges(response):
            return
        self.answers_checked += 1
        if wait_offset is None:
            if controller.uncommitted_offsets:
                raise InvariantViolation(f"node {node_id} answered {type(response).__name__} at once while "
                                         f"{controller.uncommitted_offsets} offsets were uncommitted")
            return
        if wait_offset >= controller.next_offset:
            raise InvariantViolation(f"node {node_id} answered {type(response).__name__} waiting on offset "
                                     f"{wait_offset} before it committed (applied up to {controller.next_offset})")
        committed_epoch = self.epoch_at(wait_offset)
        if committed_epoch != epoch:
            raise InvariantViolation(f"node {node_id} answered {type(response).__name__} for offset {wait_offset} "
                                     f"proposed in epoch {epoch}, but epoch {committed_epoch} committed there")

    def snapshot_written(self, node_id: int, log, snapshot_id) -> None:
        view = read_snapshot(log, snapshot_id)
        loaded = load_image(view.data_batches(), pause_gc=False)
        self._compare(f"node {node_id}'s snapshot {snapshot_id}", snapshot_id.offset, loaded.image)
        self.snapshots_checked += 1

    # --- at the end ---------------------------------------------------------------------------
    def check_replay(self, node, snapshot_id="all") -> None:
        """Replayed into a fresh image, a snapshot of the node (``snapshot_id``; "all": each one)
        plus its log suffix up to what its controller applied equals the committed image at that
        offset (the log alone when the node has no snapshot)."""
        log, end = node.log, node.controller.next_offset
        ids = [s for s in log.snapshot_ids() if s.offset <= end]
        if snapshot_id != "all":
            ids = [snapshot_id] if snapshot_id in ids else []
        if not ids and log.start_offset() == 0:
            ids = [None]
        for sid in ids:
            snap = [] if sid is None else read_snapshot(log, sid).data_batches()
            start = 0 if sid is None else sid.offset
            suffix = []
            if end > start:
                suffix = [b for b in iter_batches(log.read(start, 1 << 30)) if b.next_offset <= end]
            loaded = load_image(snap, suffix, start_offset=start, pause_gc=False)
            upto = suffix[-1].next_offset if suffix else start
            self._compare(f"node {node.id}: snapshot {sid} + log {start}..{upto}", upto, loaded.image)
            self.replays_checked += 1

    def check_view(self, node_id: int, controller) -> None:
        """The active controller's uncommitted view obeys the leadership rules too (each
        proposal ends where a committed batch will end)."""
        view = controller.view
        parts = (view.topics, view.cluster)
        if self._checked_view is None or self._checked_view[0] is not parts[0] or self._checked_view[1] is not parts[1]:
            check_leadership(view, f"node {node_id} uncommitted view")
            self._checked_view = parts

    def _compare(self, what: str, offset: int, image) -> None:
        seen = self.images.get(offset)
        if seen is None:  # replays end where a controller stopped, so one applied exactly this offset
            raise InvariantViolation(f"{what}: no controller's committed image at offset {offset} to compare")
        if seen[0] != image:
            raise InvariantViolation(f"{what} replays to an image that differs from node {seen[2]}'s committed "
                                     f"image at offset {offset}: {image_difference(image, seen[0])}")


UNKNOWN = object()
CONFIG_KEYS = ("retention.ms", "max.message.bytes")


class TopicLedger:
    """What admins were told, per topic, in order. Each topic has one owner that works on it
    one operation at a time (retrying until a definite answer or giving up), so the final
    state follows from the answers: ``ok`` (acknowledged), ``error`` (definite, nothing
    written: only when no earlier attempt of the operation was indeterminate), ``unknown``."""

    def __init__(self):
        self.events: dict[str, list] = {}
        self.acknowledged_creates = 0

    def begin(self, topic: str, kind: str, data=None) -> int:
        """An operation starts: ``unknown`` until settled (it may still take effect)."""
        events = self.events.setdefault(topic, [])
        events.append((kind, "unknown", data))
        return len(events) - 1

    def settle(self, topic: str, index: int, outcome: str) -> None:
        kind, _, data = self.events[topic][index]
        self.events[topic][index] = (kind, outcome, data)
        if kind == "create" and outcome == "ok":
            self.acknowledged_creates += 1

    def expected(self, topic: str):
        """(state, partitions at least, configs) with state 'present' / 'absent' / UNKNOWN."""
        state, parts, cfg = "absent", 0, {}
        for kind, outcome, data in self.events.get(topic, ()):
            if outcome == "error":
                continue
            if kind == "create":
                if outcome == "ok":
                    state, parts, cfg = "present", data, {k: None for k in CONFIG_KEYS}
                else:
                    state = UNKNOWN
            elif kind == "delete":
                state = "absent" if outcome == "ok" else UNKNOWN
            elif kind == "partitions" and state == "present" and outcome == "ok":
                parts = max(parts, data)
            elif kind == "config" and state == "present":
                key, value = data
                cfg[key] = value if outcome == "ok" else UNKNOWN
        return state, parts, cfg

    def check(self, image) -> None:
        by_name = image.topics.by_name
        for topic in sorted(self.events):
            state, parts, cfg = self.expected(topic)
            history = self.events[topic]
            if state == "present":
                t = by_name.get(topic)
                if t is None:
                    raise InvariantViolation(f"acknowledged topic {topic} lost: {history}")
                if len(t.partitions) < parts:
                    raise InvariantViolation(f"topic {topic} has {len(t.partitions)} partitions, "
                                             f"{parts} acknowledged: {history}")
                have = image.configs.resources.get((TOPIC, topic), {})
                for key, value in cfg.items():
                    if value is not UNKNOWN and have.get(key) != value:
                        raise InvariantViolation(f"topic {topic}: config {key}={have.get(key)!r}, "
                                                 f"acknowledged {value!r}: {history}")
            elif state == "absent" and topic in by_name:
                raise InvariantViolation(f"topic {topic} present, but never acknowledged or deleted since: {history}")
        for kind, name in image.configs.resources:
            if kind == TOPIC and name and name not in by_name:
                raise InvariantViolation(f"configs of deleted topic {name} left in the image")
