"""Coordinators over internal partitions, as sans-I/O state machines (no asyncio, sockets, time,
threading or random: time comes in as ``now_ms``, ids from an injected source).

``group_records``: ``__consumer_offsets`` keys and values in Kafka's own schemas (and
``consumer_records``: the KIP-848 ones). ``classic_group``: one classic group's members and
state machine (Empty / PreparingRebalance / CompletingRebalance / Stable / Dead).
``consumer_group``: one KIP-848 consumer group, rebuilt from its records, and one member's
reconciliation step; ``assignors``: its server-side ``uniform`` and ``range`` assignors.
``group_shard``: the groups and committed offsets of one ``__consumer_offsets`` partition and
the request handlers over them (classic groups there, offsets in ``offset_handlers``, consumer
groups in ``consumer_handlers``, classic members of consumer groups and the online
upgrade/downgrade in ``mixed_groups``, the embedded consumer protocol in ``consumer_protocol``).
"""
