"""The replication simulator's invariants, checked after every event (a violation raises
``ReplicationViolation`` naming the broker, partition and offsets):

  * one leader per leader epoch: two brokers never append as leader in the same epoch;
  * HW never goes back: a partition leader's HW within its leadership, and (when crashes
    keep the page cache) every replica's HW within one process incarnation — a follower
    may lower it only by truncating, which would mean a committed record went away;
  * committed records are never lost or changed: the value at an offset below any
    replica's HW, and every acks=all record a producer was told was written, is fixed
    forever; every replica must hold exactly that value at that offset whenever its HW
    covers it (with power losses, only acknowledged records count as committed: Kafka's HW
    may run ahead of ``min.insync.replicas``);
  * a replica's HW never exceeds its LEO; the controller's ISR always holds its leader and
    is empty only when ELR is on and nobody leads;
  * after healing, every replica of a partition holds identical logs (values and leader
    epochs) up to the leader's HW, which covers everything acknowledged (``converged``).

Reads simulator state only; changes nothing.
"""

from __future__ import annotations


class ReplicationViolation(AssertionError):
    pass


class ReplicationChecks:
    def __init__(self, *, power_loss: bool, elr: bool):
        self.power_loss = power_loss
        self.elr = elr
        self.epoch_leader: dict = {}  # (tp, leader epoch) -> broker that appended as leader
        self.committed: dict = {}  # tp -> {offset: value}
        self.hw_seen: dict = {}  # (broker, incarnation, tp) -> HW
        self.leader_hw_seen: dict = {}  # (broker, incarnation, tp, leader epoch) -> HW
        self.checked: dict = {}  # (broker, incarnation, tp) -> offsets below this were compared
        self.acked_count = 0
        self.appends = 0
        self.max_hw = 0

    def fail(self, msg: str) -> None:
        raise ReplicationViolation(msg)

    # --- hooks called by the brokers -------------------------------------------------------------
    def broker_started(self, broker) -> None:
        for plog in broker.logs:
            plog.log.low_mark = 0  # a restart re-reads everything

    def leader_append(self, broker, tp, epoch: int, first: int, last: int) -> None:
        self.appends += 1
        owner = self.epoch_leader.setdefault((tp, epoch), broker.id)
        if owner != broker.id:
            self.fail(f"two leaders in leader epoch {epoch} of {tp}: broker {owner} and broker {broker.id} "
                      f"(offsets {first}-{last}) both appended as leader")

    def leader_hw(self, broker, plog) -> None:
        tp = (plog.topic, plog.partition)
        st = broker.state.replication.states.get(tp)
        if st is None:
            return
        key = (broker.id, broker.incarnation, tp, st.leader_epoch)
        prev = self.leader_hw_seen.get(key, -1)
        if st.high_watermark < prev:
            self.fail(f"leader HW went back on broker {broker.id} {tp} epoch {st.leader_epoch}: {prev} -> "
                      f"{st.high_watermark}")
        self.leader_hw_seen[key] = st.high_watermark

    def after_image(self, broker) -> None:
        for key, st in broker.state.replication.states.items():
            plog = broker.logs.get(*key)
            if plog is not None:
                self.leader_hw(broker, plog)

    def after_fetch_effects(self, broker, effects, before: dict) -> None:
        if self.power_loss:
            return
        for plog, hw in before.items():
            if plog.high_watermark < hw:
                self.fail(f"broker {broker.id} {plog.topic}-{plog.partition}: a fetch answer took the HW back "
                          f"from {hw} to {plog.high_watermark} ({[type(e).__name__ for e in effects]}): a "
                          f"committed record was truncated")

    # --- hooks called by producers ---------------------------------------------------------------
    def acked(self, tp, base: int, values, brokers) -> None:
        self.acked_count += len(values)
        fixed = self.committed.setdefault(tp, {})
        for i, v in enumerate(values):
            o = base + i
            prev = fixed.setdefault(o, v)
            if prev != v:
                self.fail(f"{tp} offset {o}: acknowledged {v!r} but {prev!r} was committed there")
        for b in brokers:
            if not b.alive:
                continue
            plog = b.logs.get(*tp)
            if plog is None:
                continue
            for i, v in enumerate(values):
                o = base + i
                if o < plog.high_watermark and plog.log.value_at(o) != v:
                    self.fail(f"{tp} offset {o}: acknowledged {v!r}, but broker {b.id} holds "
                              f"{plog.log.value_at(o)!r} below its HW {plog.high_watermark}")

    # --- after every event -----------------------------------------------------------------------
    def after_event(self, sim) -> None:
        for b in sim.brokers.values():
            if b.alive:
                self._broker(b)
        self._controller(sim)

    def _broker(self, b) -> None:
        for plog in b.logs:
            log = plog.log
            tp = (plog.topic, plog.partition)
            hw, end = plog.high_watermark, log.end_offset
            if not log.start_offset <= hw <= end:
                self.fail(f"broker {b.id} {tp}: HW {hw} outside [{log.start_offset}, {end}]")
            key = (b.id, b.incarnation, tp)
            if not self.power_loss:
                prev = self.hw_seen.get(key, -1)
                if hw < prev:
                    self.fail(f"broker {b.id} {tp}: HW went back from {prev} to {hw}")
                self.hw_seen[key] = hw
            self.max_hw = max(self.max_hw, hw)
            start = min(self.checked.get(key, 0), getattr(log, "low_mark", 0))
            log.low_mark = end
            if start >= hw:
                self.checked[key] = hw
                continue
            fixed = self.committed.setdefault(tp, {})
            for o in range(start, hw):
                v = log.value_at(o)
                if self.power_loss:
                    want = fixed.get(o)
                    if want is not None and want != v:
                        self.fail(f"broker {b.id} {tp} offset {o}: {v!r} below HW {hw}, but {want!r} was "
                                  f"acknowledged there")
                    continue
                want = fixed.setdefault(o, v)
                if want != v:
                    self.fail(f"broker {b.id} {tp} offset {o}: {v!r} below HW {hw}, but {want!r} was committed "
                              f"there")
            self.checked[key] = hw

    def _controller(self, sim) -> None:
        topic = sim.controller.image.topics.by_name.get("t")
        if topic is None:
            return
        for pid, reg in topic.partitions.items():
            if reg.leader >= 0 and reg.leader not in reg.isr:
                self.fail(f"partition {pid}: leader {reg.leader} not in ISR {list(reg.isr)}")
            if not reg.isr and not (self.elr and reg.leader < 0):
                self.fail(f"partition {pid}: empty ISR with leader {reg.leader} (ELR {'on' if self.elr else 'off'})")

    # --- at the end ------------------------------------------------------------------------------
    def converged(self, sim) -> None:
        """Every replica of every partition holds the same records and epochs up to the
        leader's HW, and that HW covers every committed offset."""
        topic = sim.controller.image.topics.by_name["t"]
        for pid, reg in topic.partitions.items():
            if pid in sim.offline:
                continue
            tp = ("t", pid)
            leader = sim.brokers[reg.leader].logs.get(*tp)
            hw = leader.high_watermark
            fixed = self.committed.get(tp, {})
            top = max(fixed, default=-1)
            if top >= hw:
                self.fail(f"{tp}: committed offset {top} is not below the final HW {hw} of leader {reg.leader}")
            for r in reg.replicas:
                plog = sim.brokers[r].logs.get(*tp)
                if plog.log.end_offset < hw:
                    self.fail(f"{tp}: replica {r} ends at {plog.log.end_offset}, below the HW {hw}")
                for o in range(hw):
                    if plog.log.value_at(o) != leader.log.value_at(o):
                        self.fail(f"{tp} offset {o}: replica {r} holds {plog.log.value_at(o)!r}, leader "
                                  f"{reg.leader} {leader.log.value_at(o)!r}")
                    if plog.log.epoch_for_offset(o) != leader.log.epoch_for_offset(o):
                        self.fail(f"{tp} offset {o}: replica {r} has epoch {plog.log.epoch_for_offset(o)}, leader "
                                  f"{leader.log.epoch_for_offset(o)}")
            for o, v in fixed.items():
                if leader.log.value_at(o) != v:
                    self.fail(f"{tp} offset {o}: committed {v!r} lost: the final leader {reg.leader} holds "
                              f"{leader.log.value_at(o)!r}")
