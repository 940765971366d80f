"""Group configs (Kafka 4's GROUP config resource, KIP-848): per-group overrides of the consumer
group session timeout and heartbeat interval, set with IncrementalAlterConfigs on resource type
GROUP and stored as ``ConfigRecord``s like topic configs.

Kafka's ``GroupConfig``: the names, types and lower bounds below; the values, with the defaults
filled in, must lie within the broker's ``group.consumer.{min,max}.{session.timeout,
heartbeat.interval}.ms`` (and the share-group bounds), and a session timeout must exceed the
heartbeat interval, each refused as INVALID_CONFIG with Kafka's message. An unknown name is
"Unknown group config name: x". A consumer group's coordinator uses the group's values for its
members' sessions and the interval it gives them; the share-group ones are kept and described
but have no effect (kraft has no share groups, KIP-932).
"""

from __future__ import annotations

from kraft.errors import ConfigError
from kraft.metadata.broker_config_defs import BROKER_CONFIGS
from kraft.metadata.config_defs import ConfigDef, ConfigType, Status, at_least

T, S = ConfigType, Status
_SHARE = "kraft has no share groups (KIP-932)"

GROUP_CONFIGS = {d.name: d for d in (
    ConfigDef("consumer.session.timeout.ms", T.INT, "45000", at_least(1),
              "The timeout to detect client failures when using the consumer group protocol.", S.APPLIED,
              "the session of this group's members (its coordinator expires a member without a heartbeat)"),
    ConfigDef("consumer.heartbeat.interval.ms", T.INT, "5000", at_least(1),
              "The heartbeat interval given to the members of a consumer group.", S.APPLIED,
              "the interval this group's members are given"),
    ConfigDef("share.session.timeout.ms", T.INT, "45000", at_least(1),
              "The timeout to detect client failures when using the share group protocol.", S.ACCEPTED, _SHARE),
    ConfigDef("share.heartbeat.interval.ms", T.INT, "5000", at_least(1),
              "The heartbeat interval given to the members of a share group.", S.ACCEPTED, _SHARE),
    ConfigDef("share.record.lock.duration.ms", T.INT, "30000", at_least(1000),
              "The record acquisition lock duration of a share group.", S.ACCEPTED, _SHARE),
)}

#: the broker settings bounding each group config (Kafka's GroupCoordinatorConfig / ShareGroupConfig
#: names and defaults): group config -> ((min setting, default), (max setting, default))
BOUNDS = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
}
#: Kafka's defaults of the share-group bounds: kraft has no share groups, so no broker setting
#: holds them (the consumer bounds' defaults are the broker configs' own)
_SHARE_BOUND_DEFAULTS = {
    "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
    "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
}


def _bound_default(setting: str) -> int:
    known = BROKER_CONFIGS.get(setting)
    return int(known.default) if known is not None else _SHARE_BOUND_DEFAULTS[setting]


#: a group config's default: the broker setting it overrides (Kafka's extractGroupConfigMap)
BROKER_DEFAULTS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
}


def _setting(settings: dict, name: str, default: int) -> int:
    try:
        return int(settings.get(name, default))
    except (TypeError, ValueError):
        return default


def effective(overrides: dict, settings: dict | None = None) -> dict[str, int]:
    """Every group config's value: the group's override, else the broker's setting, else Kafka's
    default (values already validated; a bad broker setting falls back to the default)."""
    settings = settings or {}
    out = {}
    for name, d in GROUP_CONFIGS.items():
        if name in overrides:
            out[name] = int(overrides[name])
        else:
            out[name] = _setting(settings, BROKER_DEFAULTS[name], int(d.default))
    return out


def validate_group_configs(merged: dict, settings: dict | None = None) -> None:
    """Kafka's ``GroupConfig.validate`` over a group's configs after a change; ConfigError with
    Kafka's message (INVALID_CONFIG)."""
    for name in merged:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")
    parsed = {}
    for name, text in merged.items():
        parsed[name] = GROUP_CONFIGS[name].check(text)
    settings = settings or {}
    values = {n: int(parsed.get(n, GROUP_CONFIGS[n].default)) for n in GROUP_CONFIGS}
    for name, (low_name, high_name) in BOUNDS.items():
        if values[name] < _setting(settings, low_name, _bound_default(low_name)):
            raise ConfigError(f"{name} must be greater than or equal to {low_name}")
        if values[name] > _setting(settings, high_name, _bound_default(high_name)):
            raise ConfigError(f"{name} must be less than or equal to {high_name}")
    for kind in ("consumer", "share"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
            raise ConfigError(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")
