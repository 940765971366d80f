"""Tells the controller which log directory holds each local replica (AssignReplicasToDirs,
KIP-858; Kafka's broker-side AssignmentsManager), so the image's PartitionRecord ``Directories``
match the disks and a failed directory's partitions can be found and moved.

``pending(image, logs, broker_id)`` is the pure part: every local log whose directory differs
from what the image says for this broker's replica. ``DirectoryAssigner`` looks only at logs
made, opened or moved since the image last showed their directory (``unconfirmed``) and sends
those in one request at a time; what was sent is not sent again until the image had time to
show it (``RESEND_S``). Only online directories
with a ``directory.id`` are reported.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kraft.errors import ErrorCode, KraftError
from kraft.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsRequest as A

log = logging.getLogger("kraft.broker")

#: a sent assignment not yet in the image is sent again after this long (lost answer, new leader)
RESEND_S = 5.0
TIMEOUT_S = 10.0


def pending(image, logs, broker_id: int, only=None) -> dict:
    """{directory id: {topic id: [partition, ...]}} of local logs (of the (topic, partition)s
    in ``only``; None: all) whose directory the image does not show for this broker's replica."""
    out: dict = {}
    by_id = image.topics.by_id
    plogs = logs if only is None else (p for p in map(lambda tp: logs.get(*tp), only) if p is not None)
    for plog in plogs:
        want = logs.dirs.id_of(plog.log_dir)
        if want is None:
            continue
        topic = by_id.get(plog.topic_id)
        reg = topic.partitions.get(plog.partition) if topic is not None else None
        if reg is None or broker_id not in reg.replicas:
            continue
        if reg.directories[reg.replicas.index(broker_id)] != want:
            out.setdefault(want, {}).setdefault(plog.topic_id, []).append(plog.partition)
    return out


class DirectoryAssigner:
    def __init__(self, broker_id: int, logs, image_of, broker_epoch, client):
        self.broker_id = broker_id
        self.logs = logs
        self.image_of = image_of  # () -> the broker's current image
        self.broker_epoch = broker_epoch  # () -> its epoch (-1 while unregistered)
        self.client = client  # the forwarding client to the active controller
        self._sent: dict = {}  # (dir, topic id, partition) -> monotonic time sent
        #: (topic, partition)s whose directory the image has not been seen to show yet: only
        #: these are looked at (a broker of 30,000 partitions must not scan them all per image)
        self.unconfirmed: set = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="directory-assigner")

    def poke(self) -> None:
        self._wake.set()

    def note(self, plogs) -> None:
        """Logs just made, opened or moved: their directories are to be confirmed."""
        self.unconfirmed.update((p.topic, p.partition) for p in plogs)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                again = await self._send_once()
            except KraftError as exc:
                log.warning("broker %d: AssignReplicasToDirs: %s (retrying)", self.broker_id, exc)
                again = True
            if again:  # unsent leftovers, or a failure: look again shortly
                asyncio.get_running_loop().call_later(1.0, self._wake.set)

    async def _send_once(self) -> bool:
        epoch = self.broker_epoch()
        if epoch < 0:
            return True
        now = time.monotonic()
        todo = pending(self.image_of(), self.logs, self.broker_id, self.unconfirmed)
        left = {(self._topic_name(tid), p) for topics in todo.values() for tid, ps in topics.items() for p in ps}
        self.unconfirmed &= left  # the rest are shown by the image (or gone)
        self._sent = {k: t for k, t in self._sent.items() if k[1] in todo.get(k[0], ())}
        dirs, keys, waiting = [], [], False
        for d, topics in todo.items():
            ts = []
            for tid, parts in topics.items():
                fresh = [p for p in parts if now - self._sent.get((d, tid, p), -RESEND_S) >= RESEND_S]
                waiting |= len(fresh) < len(parts)
                if fresh:
                    ts.append(A.Directory.Topic(topic_id=tid, partitions=fresh))
                    keys += [(d, tid, p) for p in fresh]
            if ts:
                dirs.append(A.Directory(id=d, topics=ts))
        if not dirs:
            return waiting
        resp = await self.client.call(A(broker_id=self.broker_id, broker_epoch=epoch, directories=dirs), version=0,
                                      deadline_s=TIMEOUT_S)
        if resp.error_code != 0:
            raise KraftError(f"answered {ErrorCode(resp.error_code).name}")
        for k in keys:
            self._sent[k] = now
        log.info("broker %d: assigned %d replicas to their log directories", self.broker_id, len(keys))
        return True  # check once more that the image shows them

    def _topic_name(self, topic_id) -> str | None:
        topic = self.image_of().topics.by_id.get(topic_id)
        return None if topic is None else topic.name

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
