"""A node in-process: its metrics after one election, its startup errors."""

from __future__ import annotations

import asyncio
import socket

import pytest
from ops_helpers import CLUSTER, write_config

from kraft.config import NodeConfig
from kraft.errors import ConfigError
from kraft.log.formatting import format_storage
from kraft.server import eventloop
from kraft.server.node import KraftNode


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_config(tmp_path, port=None, **extra) -> NodeConfig:
    cfg = NodeConfig.from_file(write_config(tmp_path, port=port or _free_port(), **extra))
    format_storage(cfg, CLUSTER)
    return cfg


def test_one_election_counts_one_leader_change(tmp_path):
    """A single voter goes unattached → candidate → leader in epoch 1: one leader change.
    Before: every (leader, epoch) transition counted, so 3 after one election."""
    async def run():
        node = KraftNode(_node_config(tmp_path))
        await node.start()
        try:
            for _ in range(600):
                if node.driver.core.is_leader():
                    break
                await asyncio.sleep(0.01)
            assert node.driver.core.is_leader()
            await asyncio.sleep(0.05)  # let the first commit go through too
            return node.metrics.leader_changes.value
        finally:
            await node.shutdown(resign_wait_s=0)
    assert eventloop.run(run()) == 1


def test_a_listener_port_in_use_names_the_listeners_setting(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg = _node_config(tmp_path, port=busy.getsockname()[1])

        async def run():
            node = KraftNode(cfg)
            try:
                await node.start()
            finally:
                await node.shutdown(resign_wait_s=0)
        with pytest.raises(ConfigError, match=r"^listeners: cannot listen on 127\.0\.0\.1:\d+ .*address already in use"):
            eventloop.run(run())
