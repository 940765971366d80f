"""Operator-side voter changes of a dynamic quorum (KIP-853): AddRaftVoter and RemoveRaftVoter
sent to the leader, found through DescribeQuorum from any bootstrap address; and kraft's own
ReassignRaftVoters (seed 002's target voters).

Retries while the answer proves nothing was changed — NOT_LEADER_OR_FOLLOWER (leadership
moved), REQUEST_TIMED_OUT (another change pending, the new voter still catching up, no high
watermark yet) — until the deadline; any other error is final. Used by ``kraft
metadata-quorum add-controller / remove-controller`` and by tests.
"""

from __future__ import annotations

import asyncio
import time

from kraft.errors import ErrorCode, KraftError, NetworkError
from kraft.protocol import AddRaftVoterRequest, ReassignRaftVotersRequest, RemoveRaftVoterRequest
from kraft.protocol.primitives import uuid_from_wire
from kraft.client.quorum import QuorumClient

RETRIABLE = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT)


class VoterChangeError(KraftError):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = ErrorCode(code)


async def _to_leader(client: QuorumClient, request, version: int, deadline_s: float, what: str,
                     done_already=None):
    """Send until answered NONE. ``done_already(description)``: after an earlier attempt timed
    out, a final error may only mean that attempt's change committed since; it says so."""
    end = time.monotonic() + deadline_s
    last = None
    attempts = 0
    while True:
        try:
            d = await client.describe(max(0.1, end - time.monotonic()))
            addr = client.nodes.get(d.leader_id)
            if addr is None:
                raise KraftError(f"no address known for leader {d.leader_id}")
            resp = await client.client(addr).request(request, version, timeout_ms=int(
                max(1.0, end - time.monotonic()) * 1000) + 5000)
            if resp.error_code == 0:
                return resp
            last = VoterChangeError(f"{what}: {ErrorCode(resp.error_code).name}"
                                    + (f" ({resp.error_message})" if resp.error_message else ""), resp.error_code)
            if resp.error_code not in RETRIABLE:
                if attempts and done_already is not None and done_already(await client.describe(5.0)):
                    return resp
                raise last
            attempts += 1
        except NetworkError as exc:
            last = exc
        if time.monotonic() > end:
            raise last if isinstance(last, KraftError) else KraftError(f"{what}: {last}")
        await asyncio.sleep(0.1)


async def add_voter(client: QuorumClient, voter_id: int, directory_id: bytes, listeners, *,
                    deadline_s: float = 30.0):
    """``listeners``: (name, host, port) of the new voter. Returns once the change commits."""
    L = AddRaftVoterRequest.Listener
    req = AddRaftVoterRequest(timeout_ms=int(deadline_s * 1000), voter_id=voter_id,
                              voter_directory_id=uuid_from_wire(directory_id),
                              listeners=[L(name=n, host=h, port=p) for n, h, p in listeners])
    def added(d):
        return any(v.replica_id == voter_id and v.replica_directory_id == uuid_from_wire(directory_id)
                   for v in d.voters)
    return await _to_leader(client, req, 1, deadline_s, f"add voter {voter_id}", added)


async def remove_voter(client: QuorumClient, voter_id: int, directory_id: bytes, *, deadline_s: float = 30.0):
    req = RemoveRaftVoterRequest(voter_id=voter_id, voter_directory_id=uuid_from_wire(directory_id))
    def removed(d):
        return all(v.replica_id != voter_id for v in d.voters)
    return await _to_leader(client, req, 0, deadline_s, f"remove voter {voter_id}", removed)


async def reassign_voters(client: QuorumClient, targets, *, cancel: bool = False, deadline_s: float = 30.0):
    """Record a target voter set (``targets``: (id, directory id bytes or None, [(name, host,
    port)])) or cancel the one under way; returns once the leader has it in the log (the
    steps follow on their own: watch DescribeQuorum's target_voters)."""
    R = ReassignRaftVotersRequest
    req = R(target_voters=[R.TargetVoter(voter_id=i, voter_directory_id=uuid_from_wire(d or bytes(16)),
                                         listeners=[R.Listener(name=n, host=h, port=p) for n, h, p in listeners])
                           for i, d, listeners in targets], cancel=cancel)
    if cancel:
        def settled(d):
            return d.target_voters is None
    else:
        def settled(d):
            return d.target_voters is not None and {t.voter_id for t in d.target_voters} == {t[0] for t in targets}
    return await _to_leader(client, req, 0, deadline_s, "cancel the reassignment" if cancel else "reassign voters",
                            settled)


async def wait_for_reassignment(client: QuorumClient, *, deadline_s: float = 120.0, progress=None):
    """The quorum description once no target is left (the reassignment finished or was
    cancelled); KraftError at the deadline. ``progress(description)`` is called after each
    poll that is still under way (a terminal shows where the reassignment stands)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            d = await client.describe(max(0.5, min(5.0, end - time.monotonic())))
            if d.target_voters is None:
                return d
            if progress is not None:
                progress(d)
        except KraftError:
            pass
        if time.monotonic() > end:
            raise KraftError(f"the reassignment did not finish within {deadline_s:g} s")
        await asyncio.sleep(0.2)
