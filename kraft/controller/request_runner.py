"""How a controller request is run against a ``QuorumController``, in one place for every
driver (the asyncio controller listener in ``server/`` and the simulator in ``testing/``).

Reads (``READ_ONLY``) are answered at once from the committed image, on any controller. Writes
go to ``QuorumController.submit`` unless the controller still believes it is active while its
Raft core has already moved on (the listener hears of a lost leadership only when the driver
delivers the effect): such a request is answered NOT_CONTROLLER, because its records could not
be appended in the controller's epoch. Sans-I/O: time comes in as ``now_ms``; this module must
not import asyncio or sockets, nor catch handler bugs (each driver decides what a bug does).
"""

from __future__ import annotations

import dataclasses

from kraft.controller.handlers import HANDLERS, READ_ONLY
from kraft.errors import ErrorCode


def read_only_response(controller, api_key: int, request, version: int, now_ms: int, active_controller_id: int):
    """The answer of a read from the committed image (never from uncommitted state)."""
    ctx = dataclasses.replace(controller.context(version, now_ms), image=controller.image,
                              settings={**controller.settings, "active.controller.id": active_controller_id})
    return HANDLERS[api_key](ctx, request).response


def core_leads_epoch(core, controller) -> bool:
    """Does the Raft core still lead the epoch in which the controller became active?"""
    return core.is_leader() and core.epoch == controller.epoch


def submit_write(controller, core, api_key: int, request, version: int, now_ms: int, token) -> None:
    """Run a write request; ``controller.respond(token, ...)`` answers it (now or at commit)."""
    if controller.active and not core_leads_epoch(core, controller):
        controller.answer_error(token, api_key, request, version, ErrorCode.NOT_CONTROLLER)
        return
    controller.submit(api_key, request, version, now_ms, token)


__all__ = ["READ_ONLY", "core_leads_epoch", "read_only_response", "submit_write"]
