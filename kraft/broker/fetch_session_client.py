"""Fetch sessions (KIP-227), the fetcher's side: Kafka's ``FetchSessionHandler``. A fetcher
says each round which partitions it wants with which parameters; this decides whether the
request is full (every partition, session epoch 0) or incremental (only the partitions added
or changed since the last request, plus the ones to forget), and follows the answers.

  * no session yet, or after any session error, a failed request or an answer that closed the
    session: a full fetch (naming the old session, if any, so the leader frees it);
  * a full answer with a session id: incremental requests from epoch 1 on;
  * FETCH_SESSION_ID_NOT_FOUND: a full fetch that names no session; other session errors:
    a full fetch that closes the named one.

Sans-I/O and blind to what a partition's parameters mean: they are compared as values
(``PartitionParams``), so a partition whose fetch offset, log start offset, leader epoch,
last fetched epoch, byte limit or topic id changed is sent again and an idle one is not.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.broker.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from kraft.errors import ErrorCode

NONE = int(ErrorCode.NONE)


class PartitionParams(NamedTuple):
    topic_id: object
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int


class SessionRequest(NamedTuple):
    """What one Fetch carries: its session fields, the partitions to send (tp -> params) and
    the ones to forget ((tp, topic id) pairs)."""
    session_id: int
    session_epoch: int
    to_send: dict
    to_forget: list

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class ClientFetchSession:
    """Invariant: after ``build``, ``partitions`` is what the leader's session will hold once
    it accepts that request."""

    def __init__(self, *, enabled: bool = True):
        self.enabled = enabled  # False: every request is sessionless (epoch -1), today's behaviour
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH if enabled else FINAL_EPOCH
        self.partitions: dict = {}  # tp -> PartitionParams, in session order

    @property
    def open(self) -> bool:
        """The leader holds a session for us (as far as we know)."""
        return self.session_id != INVALID_SESSION_ID and self.epoch > INITIAL_EPOCH

    def build(self, wanted: dict) -> SessionRequest:
        """The request for ``wanted`` (tp -> PartitionParams, in the order to ask)."""
        if self.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self.partitions = dict(wanted)
            return SessionRequest(self.session_id, self.epoch, dict(wanted), [])
        to_send: dict = {}
        to_forget: list = []
        session = self.partitions
        for tp, prev in list(session.items()):
            now = wanted.get(tp)
            if now is None:
                del session[tp]
                to_forget.append((tp, prev.topic_id))
            elif now is not prev and now != prev:
                if now.topic_id != prev.topic_id:
                    to_forget.append((tp, prev.topic_id))  # recreated topic: a different partition there
                session[tp] = now
                to_send[tp] = now
        for tp, params in wanted.items():
            if tp not in session:
                session[tp] = params
                to_send[tp] = params
        return SessionRequest(self.session_id, self.epoch, to_send, to_forget)

    def build_changed(self, changed: dict) -> SessionRequest:
        """The incremental request when only the partitions of ``changed`` (tp -> params, each
        already in the session) may differ from what the session holds: ``build`` without the
        pass over every partition."""
        if not self.open:
            raise ValueError("an incremental request needs an open session")
        to_send: dict = {}
        session = self.partitions
        for tp, now in changed.items():
            prev = session.get(tp)
            if prev is None or (now is not prev and now != prev):
                session[tp] = now
                to_send[tp] = now
        return SessionRequest(self.session_id, self.epoch, to_send, [])

    def on_response(self, error_code: int, session_id: int) -> bool:
        """Follow an answer; False when it was a session error (nothing in it is usable and
        the next request is full)."""
        if not self.enabled:
            return error_code == NONE
        if error_code != NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH  # close the named session and start again
            return False
        if session_id == INVALID_SESSION_ID:
            # No slot for us (full answer) or the leader closed the session (incremental).
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self.epoch == INITIAL_EPOCH:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def on_error(self) -> None:
        """The request failed as a whole (connection lost, timeout): start again with a full
        fetch that closes the session the leader may still hold."""
        if self.enabled:
            self.epoch = INITIAL_EPOCH
