"""Simulated clients of the controller quorum: brokers that register and heartbeat, admins
that create, delete, grow and configure topics, and the links that carry their requests.

Links behave like TCP connections: per-link order, a random delay, messages lost to partitions
or drops (the request then times out), never duplicated (a duplicated CreateTopics would be a
different request, which TCP does not make). A client has one request in flight; it sends it to
the node it believes is the active controller, follows the leader hint of a NOT_CONTROLLER
answer, and picks another voter after a timeout. Deterministic per seed; no real time.
"""

from __future__ import annotations

import random
import uuid

from kraft.errors import ErrorCode
from kraft.metadata.configs import TOPIC
from kraft.protocol.messages.broker_lifecycle import (BrokerHeartbeatRequest, BrokerRegistrationRequest,
                                                      UnregisterBrokerRequest)
from kraft.protocol.messages.configs import OP_DELETE, OP_SET, IncrementalAlterConfigsRequest
from kraft.protocol.messages.create_partitions import CreatePartitionsRequest
from kraft.protocol.messages.create_topics import CreateTopicsRequest
from kraft.protocol.messages.delete_topics import DeleteTopicsRequest
from kraft.testing.controller_checks import CONFIG_KEYS, error_codes
from kraft.testing.controller_node import CLUSTER_ID

NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)
BROKER_ID_BASE = 1000
ADMIN_ID_BASE = 2000


class ClientLinks:
    def __init__(self, cluster, rng: random.Random):
        self.cluster = cluster
        self.rng = rng
        self._last: dict[tuple[int, int], int] = {}

    def send(self, src: int, dst: int, payload) -> None:
        c = self.cluster
        f = c.network.faults
        if not c.network.can_reach(src, dst) or (f.drop_rate and self.rng.random() < f.drop_rate):
            return
        t = max(c.now + self.rng.randint(f.min_delay_ms, f.max_delay_ms), self._last.get((src, dst), 0))
        self._last[(src, dst)] = t
        c.queue.at(t, ("deliver", src, dst, payload))


class SimClient:
    """One request at a time; ``on_answer(response, leader hint)`` (response None: timed out)."""

    def __init__(self, client_id: int, cluster, rng: random.Random, timeout_ms: int):
        self.id = client_id
        self.cluster = cluster
        self.rng = rng
        self.timeout_ms = timeout_ms
        self.alive = True  # the endpoint always listens; a stopped broker just sends nothing
        self.incarnation = 1
        self.target = rng.choice(cluster.voter_ids)
        self._cid = 0
        self._inflight = None  # (cid, callback)

    @property
    def busy(self) -> bool:
        return self._inflight is not None

    def call(self, request, on_answer) -> None:
        self._cid += 1
        cid = self._cid
        self._inflight = (cid, on_answer)
        c = self.cluster
        c.links.send(self.id, self.target, ("creq", self.incarnation, cid, request, type(request).MAX_VERSION))
        c.schedule(c.now + self.timeout_ms, self._timed_out, self.incarnation, cid)

    def deliver(self, src: int, payload, now: int) -> None:
        _, incarnation, cid, response, hint = payload
        if incarnation != self.incarnation or self._inflight is None or self._inflight[0] != cid:
            return  # the answer to a request given up on
        callback = self._inflight[1]
        self._inflight = None
        if NOT_CONTROLLER in error_codes(response):
            self.retarget(hint)
        callback(response)

    def _timed_out(self, incarnation: int, cid: int) -> None:
        if incarnation != self.incarnation or self._inflight is None or self._inflight[0] != cid:
            return
        callback = self._inflight[1]
        self._inflight = None
        self.retarget(-1)
        callback(None)

    def retarget(self, hint: int) -> None:
        voters = self.cluster.voter_ids
        if hint in voters and hint != self.target:
            self.target = hint
        else:
            others = [v for v in voters if v != self.target] or voters
            self.target = self.rng.choice(others)

    def forget_inflight(self) -> None:
        """A restart: answers to the previous life are ignored."""
        self.incarnation += 1
        self._inflight = None


class SimBroker(SimClient):
    """States: down, registering, running, shutting_down (controlled shutdown); ``paused``
    stops heartbeats without forgetting anything (a long GC pause or SIGSTOP)."""

    def __init__(self, broker_id: int, cluster, rng, timeout_ms: int, interval_ms: int, rack: str | None):
        super().__init__(broker_id, cluster, rng, timeout_ms)
        self.interval_ms = interval_ms
        self.rack = rack
        self.state = "down"
        self.paused = False
        self.incarnation_id = None
        self.epoch = -1
        self.reported_offset = -1
        self.registrations = self.heartbeats = self.shutdowns = 0

    def start(self) -> None:
        if self.state != "down":
            return
        self.forget_inflight()
        self.incarnation_id = uuid.UUID(int=self.rng.getrandbits(128))
        self.epoch = -1
        self.reported_offset = -1
        self.state = "registering"
        self.paused = False
        self._loop(self.incarnation)

    def stop(self) -> None:
        self.state = "down"
        self.forget_inflight()

    def controlled_shutdown(self) -> None:
        if self.state == "running":
            self.state = "shutting_down"

    def _loop(self, incarnation: int) -> None:
        if self.state == "down" or incarnation != self.incarnation:
            return
        if not self.paused and not self.busy:
            if self.state == "registering":
                self._register()
            else:
                self._heartbeat()
        c = self.cluster
        c.schedule(c.now + self.interval_ms, self._loop, incarnation)

    def _register(self) -> None:
        R = BrokerRegistrationRequest
        self.call(R(broker_id=self.id, cluster_id=CLUSTER_ID, incarnation_id=self.incarnation_id,
                    listeners=[R.Listener(name="PLAINTEXT", host="sim", port=9000 + self.id % 1000,
                                          security_protocol=0)],
                    features=[], rack=self.rack, log_dirs=[]), self._registered)

    def _registered(self, response) -> None:
        if response is not None and response.error_code == 0:
            self.epoch = response.broker_epoch
            self.state = "running"
            self.registrations += 1

    def _metadata_offset(self) -> int:
        """The last metadata offset the broker's replay reached (Kafka's currentMetadataOffset):
        as far as one node it can reach applied, picked at random (a broker follows the log
        from any voter, so it lags), never going back."""
        c = self.cluster
        reachable = [n for n in c.alive_nodes() if c.network.can_reach(n.id, self.id)]
        best = self.reported_offset
        if reachable:
            best = max(best, self.rng.choice(reachable).controller.next_offset - 1)
        self.reported_offset = best
        return best

    def _heartbeat(self) -> None:
        self.call(BrokerHeartbeatRequest(broker_id=self.id, broker_epoch=self.epoch,
                                         current_metadata_offset=self._metadata_offset(), want_fence=False,
                                         want_shut_down=self.state == "shutting_down"), self._heartbeat_answer)

    def _heartbeat_answer(self, response) -> None:
        if response is None or self.state == "down":
            return
        code = response.error_code
        if code == 0:
            self.heartbeats += 1
            if response.should_shut_down and self.state == "shutting_down":
                self.shutdowns += 1
                self.stop()
                c = self.cluster
                c.schedule(c.now + self.rng.randint(200, 3_000), self.start)
        elif code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            self.state = "registering"


class SimAdmin(SimClient):
    """Owns ``topics`` and works on them one operation at a time, retrying NOT_CONTROLLER and
    timeouts up to ``max_attempts``; every outcome goes to the ``TopicLedger``."""

    def __init__(self, admin_id: int, cluster, rng, timeout_ms: int, topics, ledger, *, max_attempts: int = 12):
        super().__init__(admin_id, cluster, rng, timeout_ms)
        self.topics = list(topics)
        self.ledger = ledger
        self.max_attempts = max_attempts
        self.believed: dict[str, int] = {}  # topic -> partitions, for topics thought to exist
        self.running = False
        self.operations = 0
        self.in_operation = False  # from the first attempt until the outcome is settled

    def start(self) -> None:
        self.running = True
        self._next()

    def _next(self) -> None:
        if not self.running:
            return
        c = self.cluster
        c.schedule(c.now + self.rng.randint(20, 400), self._operate)

    def _operate(self) -> None:
        if not self.running or self.in_operation:
            return
        rng = self.rng
        topic = rng.choice(self.topics)
        self.operations += 1
        if topic not in self.believed:
            n, rf = rng.choice([1, 1, 2, 3, 6]), rng.choice([1, 2, 2, 3])
            T = CreateTopicsRequest.Topic
            if rng.random() < 0.2:  # a manual assignment, fenced or unknown brokers included
                ids = [b.id for b in self.cluster.brokers] + [BROKER_ID_BASE + 99]
                A = T.Assignment
                assignments = [A(partition_index=i, broker_ids=rng.sample(ids, min(rf, len(ids))))
                               for i in range(n)]
                topic_spec = T(name=topic, num_partitions=-1, replication_factor=-1, assignments=assignments,
                               configs=[])
            else:
                topic_spec = T(name=topic, num_partitions=n, replication_factor=rf, assignments=[], configs=[])
            req = CreateTopicsRequest(topics=[topic_spec], timeout_ms=5000, validate_only=False)
            self._run("create", topic, req, n)
            return
        kind = rng.choice(["delete", "partitions", "config", "config"])
        if kind == "delete":
            req = DeleteTopicsRequest(topics=[DeleteTopicsRequest.Topic(name=topic)], timeout_ms=5000)
            self._run("delete", topic, req, None)
        elif kind == "partitions":
            count = self.believed[topic] + rng.randint(1, 2)
            P = CreatePartitionsRequest.Topic
            req = CreatePartitionsRequest(topics=[P(name=topic, count=count, assignments=None)], timeout_ms=5000,
                                          validate_only=False)
            self._run("partitions", topic, req, count)
        else:
            key = rng.choice(CONFIG_KEYS)
            value = None if rng.random() < 0.25 else str(rng.choice([1000, 60_000, 86_400_000]) if
                                                          key == "retention.ms" else rng.randint(1024, 1 << 20))
            R = IncrementalAlterConfigsRequest.Resource
            op = R.Config(name=key, config_operation=OP_DELETE if value is None else OP_SET, value=value)
            req = IncrementalAlterConfigsRequest(resources=[R(resource_type=TOPIC, resource_name=topic,
                                                              configs=[op])], validate_only=False)
            self._run("config", topic, req, (key, value))

    def _run(self, kind: str, topic: str, request, data) -> None:
        state = {"attempts": 0, "indeterminate": False, "entry": self.ledger.begin(topic, kind, data)}
        self.in_operation = True

        def answered(response):
            code = None if response is None else _item_code(response)
            if code is None or code == NOT_CONTROLLER:
                state["indeterminate"] = True
                if state["attempts"] < self.max_attempts and self.running:
                    c = self.cluster
                    c.schedule(c.now + self.rng.randint(10, 200), attempt)
                    return
                self._settle(kind, topic, state["entry"], "unknown", data)
                return
            if code == 0:
                self._settle(kind, topic, state["entry"], "ok", data)
            else:
                self._settle(kind, topic, state["entry"], "unknown" if state["indeterminate"] else "error", data,
                             code)

        def attempt():
            state["attempts"] += 1
            self.call(request, answered)

        attempt()

    def _settle(self, kind: str, topic: str, entry: int, outcome: str, data, code=None) -> None:
        self.in_operation = False
        self.ledger.settle(topic, entry, outcome)
        if kind == "create":
            if outcome == "ok" or code == ErrorCode.TOPIC_ALREADY_EXISTS:
                self.believed[topic] = data
        elif kind == "delete":
            if outcome == "ok" or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                self.believed.pop(topic, None)
        elif kind == "partitions" and outcome == "ok":
            self.believed[topic] = data
        elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            self.believed.pop(topic, None)
        self._next()


def _item_code(response) -> int:
    """The error of a one-topic / one-resource admin answer."""
    for name in ("topics", "responses", "results"):
        items = getattr(response, name, None)
        if items:
            return items[0].error_code
    return response.error_code


def unregister_request(broker_id: int) -> UnregisterBrokerRequest:
    return UnregisterBrokerRequest(broker_id=broker_id)
