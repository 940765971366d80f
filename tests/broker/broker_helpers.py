"""A real BrokerNode on 127.0.0.1 for tests: in a background thread with its own event loop
(so blocking clients such as confluent-kafka can run in the test thread), or as a separate
process (``python -m kraft.server.broker_node``) for restart tests and kcat."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

from kraft.server.broker_node import BrokerNode, broker_config, static_image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BrokerThread:
    """``with BrokerThread(dir, {"t": 1}) as b: b.bootstrap``."""

    def __init__(self, log_dir: str, topics: dict, *, node_id: int = 1, props: dict | None = None):
        self.cfg = broker_config(node_id, log_dir, props=props)
        self.topics = dict(topics)
        self.loop = asyncio.new_event_loop()
        self.node = BrokerNode(self.cfg, cluster_id="test-cluster")
        self._thread = threading.Thread(target=self.loop.run_forever, name="broker-loop", daemon=True)

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's loop thread and return its result."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def start(self):
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.node.start(), self.loop).result(30)
        self.call(lambda: self.node.publish(static_image(self.node.registration_record(), self.topics)))
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.node.port()}"

    def stop(self):
        try:
            asyncio.run_coroutine_threadsafe(self.node.shutdown(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class BrokerProcess:
    """One broker as its own process; ``stop()`` sends SIGTERM, ``kill()`` SIGKILL."""

    def __init__(self, log_dir: str, topics: dict, *, port: int = 0, props: dict | None = None):
        self.log_dir = log_dir
        self.port_file = os.path.join(os.path.dirname(log_dir.rstrip("/")), "broker.port")
        args = [sys.executable, "-m", "kraft.server.broker_node", "--log-dir", log_dir,
                "--listener", f"PLAINTEXT://127.0.0.1:{port}", "--port-file", self.port_file]
        for name, n in topics.items():
            args += ["--topic", f"{name}:{n}"]
        for k, v in (props or {}).items():
            args += ["--set", f"{k}={v}"]
        self.args = args
        self.proc = None
        self.port = None

    def start(self, timeout: float = 30):
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(self.args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited: {self.proc.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("broker did not start")
            time.sleep(0.05)
        with open(self.port_file) as f:
            self.port = int(f.read())
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
