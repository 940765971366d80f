"""Safety invariants the simulator checks after every event (TESTING.md, Kafka's
RaftEventSimulationTest), and the error raised when one breaks.

Checked here, across nodes: at most one leader per epoch; persisted epoch never decreases
and matches the core's; a node's high watermark never decreases and a leader's neither;
a majority of voters hold (durably) every offset below a leader's high watermark; the
earliest snapshot sits at the log start. Checked where the data flows: committed data is
identical everywhere and applied gap-free (``state_machine``), no truncation below the
high watermark (``InMemoryLog``), a leader never loads a snapshot (``node``).
"""

from __future__ import annotations


class InvariantViolation(AssertionError):
    """A safety property of the protocol failed: always a bug worth a replay."""


class InvariantChecker:
    def __init__(self):
        self.leader_of_epoch: dict[int, int] = {}
        self.max_persisted_epoch: dict[tuple, int] = {}
        self.node_hw: dict[tuple[int, int], int] = {}  # (node, incarnation) -> hw
        self.leader_hw: dict[tuple[int, int], int] = {}  # (node, epoch) -> hw
        self.leader_latest_voters: dict = {}  # (leader, epoch) -> its latest voter set at the last check
        # (node, epoch) -> the voter sets that may have been in force when that leader's HW last moved
        self.leader_hw_voters: dict[tuple[int, int], tuple] = {}
        self.checks = 0

    def check(self, cluster) -> None:
        self.checks += 1
        for node in cluster.nodes.values():
            if node.core is None:
                continue
            self._check_node(cluster, node)

    def _check_node(self, cluster, node) -> None:
        core = node.core
        nid = node.id
        # One leader per epoch (a resigned leader still "owns" its epoch).
        if core.role in ("leader", "resigned"):
            owner = self.leader_of_epoch.setdefault(core.epoch, nid)
            if owner != nid:
                raise InvariantViolation(f"two leaders in epoch {core.epoch}: {owner} and {nid}")
        # Only a voter (by its replica key: a wiped disk is a new replica) campaigns — one of
        # the latest voter set, or one whose removal may still be uncommitted. Catches a role
        # that outlived a voter-set change or a disk wipe.
        if core.role in ("prospective", "candidate") and not core.quorum.is_electable():
            raise InvariantViolation(f"node {nid} campaigns as {core.local} but the voters are {core.voters}")
        # Persisted election state: monotonic epoch, equal to the core's state.
        stored = node.store
        if stored is not None:
            disk = (nid, node.directory_id)  # a wiped disk starts a new history
            prev = self.max_persisted_epoch.get(disk, -1)
            if stored.epoch < prev:
                raise InvariantViolation(f"node {nid}: persisted epoch went back {prev} -> {stored.epoch}")
            self.max_persisted_epoch[disk] = stored.epoch
            if stored != core.election_state() or stored.epoch != core.epoch:
                raise InvariantViolation(f"node {nid}: persisted {stored} but the core is in "
                                         f"{core.state} / {core.election_state()}")
        hw = core.high_watermark
        key = (nid, node.incarnation)
        if hw < self.node_hw.get(key, -1):
            raise InvariantViolation(f"node {nid}: high watermark went back {self.node_hw[key]} -> {hw}")
        self.node_hw[key] = hw
        log = node.log
        # A leader may commit past its own flushed offset when a majority of followers hold
        # the data durably; a follower only exposes what it holds durably itself.
        if hw > log.end_offset() or (core.role == "follower" and core.state.high_watermark > core.flushed_offset):
            raise InvariantViolation(f"node {nid}: high watermark {hw} past its log "
                                     f"(flushed {core.flushed_offset}, end {log.end_offset()})")
        if core.role == "leader":
            lhw = core.state.high_watermark
            lkey = (nid, core.epoch)
            prev = self.leader_hw.get(lkey, -1)
            if lhw < prev:
                raise InvariantViolation(f"leader {nid} epoch {core.epoch}: HW went back")
            latest = core.voter_history.last()
            if lhw != prev or lkey not in self.leader_hw_voters:
                # One event may move the HW and then append a Voters record (a reassignment
                # step taken as the previous one commits): the HW was counted in the set seen
                # before the event or in the one after it.
                self.leader_hw_voters[lkey] = (self.leader_latest_voters.get(lkey, latest), latest)
            self.leader_latest_voters[lkey] = latest
            self.leader_hw[lkey] = lhw
            if lhw > 0:
                before, after = self.leader_hw_voters[lkey]
                try:
                    self._check_majority_holds(cluster, core, lhw, after)
                except InvariantViolation:
                    if before is after:
                        raise
                    self._check_majority_holds(cluster, core, lhw, before)
        start = log.start_offset()
        if start > 0:
            earliest = log.earliest_snapshot_id()
            if earliest is None or earliest.offset != start:
                raise InvariantViolation(f"node {nid}: log starts at {start} but the earliest "
                                         f"snapshot is {earliest}")

    def _check_majority_holds(self, cluster, core, hw: int, voters) -> None:
        # The majority is counted in ``voters``, the set in force at the leader when its HW
        # last moved: Raft's single-server changes act when appended, so that is the set the
        # HW was computed in (a Voters record appended later, still uncommitted, does not
        # change what was committed before it).
        holding = 0
        for key in voters.keys():
            durable = cluster.durable_end(key)
            if durable >= hw:
                holding += 1
        if holding < len(voters) // 2 + 1:
            raise InvariantViolation(f"leader {core.node_id} epoch {core.epoch}: HW {hw} but only "
                                     f"{holding} of {len(voters)} voters hold it durably")
