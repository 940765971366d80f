"""The only layer with I/O: asyncio network server and client, the Raft driver (effects,
timers, flusher hand-off), node assembly, signals and the metrics endpoint.

Everything below this package is sans-I/O or synchronous; nothing outside it may start
threads, open sockets or read the clock for protocol decisions.
"""
