"""Kafka's per-address connection limits, as its ``ConnectionQuotas`` applies them on every
listener, and the KafkaServer keyword arguments read from a node's connection settings:

* ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``): a connection from an
  address that already has that many open is closed at once;
* the ``connection_creation_rate`` client quota of an ``ip`` entity (KIP-612; the entity with
  no name is every address's default): each new connection is recorded in the address's rate
  (``quota.window.num`` samples of ``quota.window.size.seconds``, kraft.broker.quotas.Rate);
  one that takes the rate over the quota is un-recorded, never read from, and closed after the
  time the rate needs to fall back (at most one window), as Kafka's acceptor delays closing a
  throttled socket. The rate is checked before the count, as Kafka's ``inc`` does.

No I/O but the one resolution of override host names when the listener starts, as Kafka
resolves them when it reads its config (ip quota entities are literal addresses: the
controller refuses names)."""

from __future__ import annotations

import ipaddress
import logging
import socket

from kraft.broker.quotas import Rate, throttle_ms
from kraft.config import parse_connection_overrides

log = logging.getLogger("kraft.network")


def canonical_address(host: str) -> str:
    """The canonical text of an IP address (so ::ffff:127.0.0.1 style spellings compare)."""
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return host


IP_RATE = "connection_creation_rate"
REFUSED, THROTTLED = "refused", "throttled"


def ip_connection_rates(entities: dict) -> tuple[dict[str, int], int | None]:
    """(rate by canonical address, default rate or None) of the image's ``ip`` quota entities
    (kraft.metadata.client_quotas keys: ``(("ip", name or None),)``)."""
    rates, default = {}, None
    for entity, quotas in entities.items():
        if len(entity) != 1 or entity[0][0] != "ip" or IP_RATE not in quotas:
            continue
        name, rate = entity[0][1], int(quotas[IP_RATE])
        if name is None:
            default = rate
            continue
        try:
            rates[str(ipaddress.ip_address(name))] = rate
        except ValueError:  # the controller accepts literal addresses only; an old record may differ
            log.warning("connection_creation_rate for ip %s: not an IP address; not applied", name)
    return rates, default


class ConnectionCaps:
    """Open connections counted per address against ``per_ip`` or the address's override, and
    new connections per address against its ``connection_creation_rate`` quota."""

    def __init__(self, per_ip: int, overrides_by_name: dict[str, int] | None = None, *,
                 samples: int = 11, window_ms: int = 1000):
        self.per_ip = per_ip  # changed at run time by a dynamic max.connections.per.ip
        self._overrides_by_name = dict(overrides_by_name or {})
        self._cap_by_address: dict[str, int] = {}
        self._open_by_address: dict[str, int] = {}
        self.samples, self.window_ms = samples, window_ms
        self._entities: dict | None = None  # the image's quota entities the rates were read from
        self._rates: dict[str, int] = {}
        self._default_rate: int | None = None
        self._sensors: dict[str, Rate] = {}

    def set_quotas(self, entities: dict) -> None:
        """Take the ``ip`` entities' connection_creation_rate from a (new) image's quotas."""
        if entities is self._entities:
            return
        self._entities = entities
        self._rates, self._default_rate = ip_connection_rates(entities)
        if self._default_rate is None:
            self._sensors = {a: r for a, r in self._sensors.items() if a in self._rates}

    def _throttle_ms(self, address: str, now_ms: int) -> int:
        bound = self._rates.get(address, self._default_rate)
        if bound is None:
            return 0
        rate = self._sensors.get(address)
        if rate is None:
            if len(self._sensors) > 100_000:  # addresses that stopped connecting long ago
                self._sensors = {a: r for a, r in self._sensors.items()
                                 if r.measure(now_ms) > 0}
            rate = self._sensors[address] = Rate(self.samples, self.window_ms)
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        rate.record(-1.0, now_ms)  # not accepted: not counted (Kafka un-records it)
        # Kafka's boundedThrottleTime: at most one quota window; at least 1 ms once over.
        return max(1, min(throttle_ms(measured, bound, rate.window_ms_at(now_ms)), self.window_ms))

    async def resolve(self, loop) -> None:
        for name, cap in self._overrides_by_name.items():
            try:
                infos = await loop.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
            except OSError as exc:
                log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s); entry ignored", name, exc)
                continue
            for info in infos:
                self._cap_by_address[canonical_address(info[4][0])] = cap

    def admit(self, address: str, now_ms: int) -> tuple[str, int] | None:
        """Count one more connection of ``address``: None; else ``(THROTTLED, ms to wait
        before closing it)`` or ``(REFUSED, the address's cap)``."""
        ms = self._throttle_ms(address, now_ms)
        if ms:
            return THROTTLED, ms
        cap = self._cap_by_address.get(address, self.per_ip)
        n = self._open_by_address.get(address, 0)
        if n >= cap:
            return REFUSED, cap
        self._open_by_address[address] = n + 1
        return None

    def release(self, address: str) -> None:
        n = self._open_by_address.get(address, 0) - 1
        if n > 0:
            self._open_by_address[address] = n
        else:
            self._open_by_address.pop(address, None)


def connection_limits(cfg) -> dict:
    """KafkaServer keyword arguments from a NodeConfig's connection settings.
    ``queued.max.requests`` (Kafka: the requests its network threads queue before they stop
    reading, 500) bounds here the requests read from one connection and not yet answered."""
    return dict(max_in_flight=cfg.int("queued.max.requests"),
                quota_samples=cfg.int("quota.window.num"), quota_window_ms=1000 * cfg.int("quota.window.size.seconds"),
                failed_authentication_delay_ms=cfg.int("connection.failed.authentication.delay.ms"),
                connections_max_idle_ms=cfg.int("connections.max.idle.ms"),
                max_connections_per_ip=cfg.int("max.connections.per.ip"),
                max_connections_per_ip_overrides=parse_connection_overrides(
                    "max.connections.per.ip.overrides", cfg.values["max.connections.per.ip.overrides"]))
