"""Launchers for the systems bench/bench_peers.py compares: kraft, ZooKeeper, etcd, PySyncObj.

Each module has a cluster class (start/stop/leader/kill_leader/restart/server_pids, run in the
benchmark's parent process) and a ``Writer`` (connect/write/close, run inside a client process,
built from the picklable ``spec`` the cluster hands out). Nothing here measures anything.
"""
