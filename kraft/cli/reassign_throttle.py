"""``kraft reassign-partitions --execute --throttle N``: Kafka's replication throttle for a
reassignment (ReassignPartitionsCommand). For every partition that moves, its current replicas
go into the topic's ``leader.replication.throttled.replicas`` and the replicas it gains into
``follower.replication.throttled.replicas``, and every broker holding or receiving one gets
``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` of N bytes/s
(kraft.broker.replication_quotas enforces them; in-sync replicas are never held back). A later
``--verify`` that finds every move of the file done removes the throttles again, as Kafka's
does. The lists are pure functions; the requests are IncrementalAlterConfigs."""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.metadata.configs import BROKER, TOPIC
from kraft.protocol import IncrementalAlterConfigsRequest
from kraft.protocol.messages.configs import OP_DELETE, OP_SET

LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
           "is removed.")


def throttles(current: dict, targets: dict) -> tuple[dict[str, dict[str, str]], list[int]]:
    """({topic: {list config: "p:b,..."}}, brokers to rate-limit) for the moves of ``targets``."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in sorted(targets.items()):
        now = current.get((topic, partition), [])
        if list(now) == list(target):
            continue
        leader.setdefault(topic, []).extend(f"{partition}:{b}" for b in now)
        follower.setdefault(topic, []).extend(f"{partition}:{b}" for b in target if b not in now)
        brokers.update(now)
        brokers.update(target)
    topics = {}
    for topic in sorted(set(leader) | set(follower)):
        topics[topic] = {LEADER_REPLICAS: ",".join(leader.get(topic, [])),
                         FOLLOWER_REPLICAS: ",".join(follower.get(topic, []))}
    return topics, sorted(brokers)


def _request(resources) -> IncrementalAlterConfigsRequest:
    R = IncrementalAlterConfigsRequest.Resource
    return IncrementalAlterConfigsRequest(validate_only=False, resources=[
        R(resource_type=rtype, resource_name=name,
          configs=[R.Config(name=k, config_operation=op, value=v) for k, op, v in configs])
        for rtype, name, configs in resources])


def _check(response) -> None:
    bad = [f"{r.resource_name or '(default)'}: {ErrorCode(r.error_code).name} {r.error_message or ''}".rstrip()
           for r in response.responses if r.error_code]
    if bad:
        from kraft.cli.reassign_partitions import ReassignmentError
        raise ReassignmentError("Error setting the replication throttle:\n" + "\n".join(bad))


async def set_throttle(admin, current: dict, targets: dict, rate: int) -> list[str]:
    topics, brokers = throttles(current, targets)
    if not brokers:
        return []
    resources = [(TOPIC, t, [(k, OP_SET, v) for k, v in values.items() if v]) for t, values in topics.items()]
    resources += [(BROKER, str(b), [(LEADER_RATE, OP_SET, str(rate)), (FOLLOWER_RATE, OP_SET, str(rate))])
                  for b in brokers]
    _check(await admin._call(_request(resources), 1))
    return [WARNING, f"The inter-broker throttle limit was set to {rate} B/s"]


async def clear_throttle(admin, topics, brokers) -> list[str]:
    """Kafka's ``clearAllThrottles`` once a reassignment is complete: the rates of ``brokers``
    and the lists of ``topics`` are deleted (deleting what is not set changes nothing)."""
    resources = [(BROKER, str(b), [(LEADER_RATE, OP_DELETE, None), (FOLLOWER_RATE, OP_DELETE, None)])
                 for b in sorted(brokers)]
    resources += [(TOPIC, t, [(LEADER_REPLICAS, OP_DELETE, None), (FOLLOWER_REPLICAS, OP_DELETE, None)])
                  for t in sorted(topics)]
    _check(await admin._call(_request(resources), 1))
    return [f"Clearing broker-level throttles on brokers {','.join(str(b) for b in sorted(brokers))}",
            f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(sorted(topics))}"]
