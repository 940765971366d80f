"""``BrokerLeases``: the active controller's soft state about brokers (Kafka's
``BrokerHeartbeatManager``): when each broker was last heard from, the metadata offset it
reported, and the offset of its registration record (it is unfenced once it has read that far).

Not in the image and never replicated: a new active controller starts with every registered
broker's lease fresh from the moment it took over (Kafka does the same), so a failover never
fences a live broker. Time is injected (``now_ms``). This module must not write records.
"""

from __future__ import annotations


class Lease:
    __slots__ = ("last_contact_ms", "metadata_offset")

    def __init__(self, last_contact_ms: int, metadata_offset: int = -1):
        self.last_contact_ms = last_contact_ms
        self.metadata_offset = metadata_offset


class BrokerLeases:
    def __init__(self, session_timeout_ms: int = 9000):
        self.session_timeout_ms = session_timeout_ms
        self._leases: dict[int, Lease] = {}
        #: broker id -> offset of its latest RegisterBrokerRecord (unfence once read past it)
        self.registered_at: dict[int, int] = {}

    def reset(self, broker_ids, now_ms: int) -> None:
        """Taking over as the active controller: every registered broker starts a fresh lease."""
        self._leases = {b: Lease(now_ms) for b in broker_ids}

    def clear(self) -> None:
        self._leases = {}

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int = -1) -> None:
        lease = self._leases.get(broker_id)
        if lease is None:
            self._leases[broker_id] = Lease(now_ms, metadata_offset)
        else:
            lease.last_contact_ms = max(lease.last_contact_ms, now_ms)
            lease.metadata_offset = max(lease.metadata_offset, metadata_offset)

    def shorten(self, broker_id: int, now_ms: int, within_ms: int) -> None:
        """The broker must be heard from again within ``within_ms`` (its connection closed):
        the lease ends then unless it already ends sooner. The next heartbeat restores it."""
        lease = self._leases.get(broker_id)
        if lease is not None:
            lease.last_contact_ms = min(lease.last_contact_ms, now_ms + within_ms - self.session_timeout_ms)

    def forget(self, broker_id: int) -> None:
        self._leases.pop(broker_id, None)
        self.registered_at.pop(broker_id, None)

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        lease = self._leases.get(broker_id)
        return lease is not None and now_ms - lease.last_contact_ms < self.session_timeout_ms

    def expired(self, broker_ids, now_ms: int) -> list[int]:
        """The brokers among ``broker_ids`` whose lease ran out (no lease counts as expired
        only if it was never started: such a broker gets one now)."""
        out = []
        for b in broker_ids:
            lease = self._leases.get(b)
            if lease is None:
                self._leases[b] = Lease(now_ms)
            elif now_ms - lease.last_contact_ms >= self.session_timeout_ms:
                out.append(b)
        return out

    def caught_up(self, broker_id: int, metadata_offset: int, broker_epoch: int) -> bool:
        """Has the broker read its own registration record? (``broker_epoch`` is a lower bound
        of that record's offset when this controller did not see it written.)"""
        return metadata_offset >= self.registered_at.get(broker_id, broker_epoch)
