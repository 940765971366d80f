"""Coordinators over internal partitions, as sans-I/O state machines (no asyncio, sockets, time,
threading or random: time comes in as ``now_ms``, ids from an injected source).

``group_records``: ``__consumer_offsets`` keys and values in Kafka's own schemas.
``classic_group``: one classic group's members and state machine (Empty / PreparingRebalance /
CompletingRebalance / Stable / Dead). ``group_shard``: the groups and committed offsets of one
``__consumer_offsets`` partition and the request handlers over them; a KIP-848 group type would
sit beside ``ClassicGroup`` in the same shard, keyed by group id.
"""
