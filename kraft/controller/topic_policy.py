"""Per-topic election policy read from the image: is unclean election allowed, and the min ISR
that ELR tracks (Kafka's ``ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic``
and ``ReplicationControlManager.getTopicEffectiveMinIsr``).

A topic config wins over the cluster default (a broker-default config record in the image),
which wins over the controller's own setting. ELR (KIP-966) is on when the controller setting
``eligible.leader.replicas.enable`` is true or the feature ``eligible.leader.replicas.version``
is finalized at 1 or more. This module only reads; it must not build records.
"""

from __future__ import annotations

from kraft.metadata.configs import BROKER, TOPIC

ELR_FEATURE = "eligible.leader.replicas.version"


def _truthy(value) -> bool:
    return str(value).strip().lower() == "true"


def _lookup(image, settings, topic_name: str, key: str, default):
    configs = image.configs
    value = configs.config(TOPIC, topic_name).get(key)
    if value is None:
        value = configs.config(BROKER, "").get(key)
    if value is None:
        value = settings.get(key, default)
    return value


def unclean_allowed(image, settings, topic_name: str) -> bool:
    return _truthy(_lookup(image, settings, topic_name, "unclean.leader.election.enable", "false"))


def elr_enabled(image, settings) -> bool:
    return (_truthy(settings.get("eligible.leader.replicas.enable", "false"))
            or image.features.finalized_versions.get(ELR_FEATURE, 0) >= 1)


def min_isr(image, settings, topic_name: str) -> int:
    try:
        return max(1, int(_lookup(image, settings, topic_name, "min.insync.replicas", 1)))
    except (TypeError, ValueError):
        return 1


def elr_min_isr(image, settings):
    """``topic_name -> min ISR`` for the builder's ``elr_min_isr`` (0 everywhere when ELR is off),
    or None when ELR is off (the bulk builders then skip the lookups)."""
    if not elr_enabled(image, settings):
        return None
    cache: dict = {}

    def of(topic_name: str) -> int:
        v = cache.get(topic_name)
        if v is None:
            v = cache[topic_name] = min_isr(image, settings, topic_name)
        return v
    return of
