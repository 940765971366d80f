"""Logger levels as Kafka's BROKER_LOGGER config resource (KIP-412): DescribeConfigs lists a
node's loggers with their levels, IncrementalAlterConfigs sets or unsets them while it runs.
``kraft configs --entity-type broker-loggers`` is the command.

Kafka's rules (``ConfigAdminManager``, ``Log4jController``), over Python's ``logging``:

* the resource name is the node's id (empty: "Broker id must not be empty"; another id:
  "Unexpected broker id, ..."), both INVALID_REQUEST; a node answers for itself, never
  forwards these to the controller (brokers on their listeners, controllers on the controller
  listener, as ``--bootstrap-controller`` reaches them: ``answer_with_loggers``);
* the loggers are every logger the process has made and their parents, plus ``root``, each with its effective
  level in log4j's names (Python's WARNING is WARN, CRITICAL is FATAL; TRACE and OFF are
  levels 5 and 60); source DYNAMIC_BROKER_LOGGER_CONFIG, not read-only, no synonyms;
* SET needs a logger that exists (else INVALID_CONFIG "Logger x does not exist!") and one of
  OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE (else INVALID_CONFIG naming them); DELETE makes
  the logger inherit its parent's level again, refused for root (INVALID_REQUEST); APPEND and
  SUBTRACT are INVALID_REQUEST; a resource is checked whole before any change, and
  ``validate_only`` changes nothing;
* as in Kafka the levels are not stored: a restart starts from ``--log-level`` again.
"""

from __future__ import annotations

import asyncio
import logging

from kraft.errors import ErrorCode
from kraft.metadata.config_defs import ConfigSource
from kraft.protocol.messages.configs import DescribeConfigsResponse, IncrementalAlterConfigsResponse

ROOT = "root"
TRACE, OFF = 5, logging.CRITICAL + 10
#: log4j's level names, most to least severe (Kafka's LogLevelConfig.VALID_LOG_LEVELS)
LEVELS = {"OFF": OFF, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
_NAMES = {v: k for k, v in LEVELS.items()}
OP_SET, OP_DELETE = 0, 1
log = logging.getLogger("kraft.server.broker_loggers")
_OP_NAMES = {2: "APPEND", 3: "SUBTRACT"}


def level_name(level: int) -> str:
    """The log4j name of a Python level (a level between two names takes the more severe)."""
    for value in sorted(_NAMES):
        if level <= value:
            return _NAMES[value]
    return "OFF"


def loggers(manager: logging.Manager | None = None) -> dict[str, logging.Logger]:
    manager = manager or logging.Logger.manager
    # A parent that no module asked for by name ("kraft") is a PlaceHolder in Python's
    # hierarchy; it is a logger an operator sets (its children inherit), so it is made real.
    found = {name: lg if isinstance(lg, logging.Logger) else manager.getLogger(name)
             for name, lg in list(manager.loggerDict.items())
             if isinstance(lg, (logging.Logger, logging.PlaceHolder))}
    found[ROOT] = manager.root
    return found


def _resource_error(name: str, node_id: int) -> str | None:
    if not name:
        return "Broker id must not be empty"
    if name.strip() != str(node_id):
        return f"Unexpected broker id, expected {node_id} but received {name}"
    return None


def describe(resource, node_id: int, manager: logging.Manager | None = None):
    """One DescribeConfigs result for a BROKER_LOGGER resource of this node."""
    R = DescribeConfigsResponse.Result
    error = _resource_error(resource.resource_name, node_id)
    if error is not None:
        return R(error_code=int(ErrorCode.INVALID_REQUEST), error_message=error,
                 resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[])
    keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
    configs = [R.Config(name=name, value=level_name(lg.getEffectiveLevel()), read_only=False,
                        config_source=int(ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG), is_sensitive=False,
                        synonyms=[], documentation=None)
               for name, lg in sorted(loggers(manager).items()) if keys is None or name in keys]
    return R(error_code=0, error_message=None, resource_type=resource.resource_type,
             resource_name=resource.resource_name, configs=configs)


def _check(resource, node_id: int, known: dict) -> tuple[ErrorCode, str] | None:
    error = _resource_error(resource.resource_name, node_id)
    if error is not None:
        return ErrorCode.INVALID_REQUEST, error
    for c in resource.configs:
        if c.config_operation in _OP_NAMES:
            return (ErrorCode.INVALID_REQUEST,
                    f"{_OP_NAMES[c.config_operation]} operation is not allowed for the BROKER_LOGGER resource")
        if c.config_operation not in (OP_SET, OP_DELETE):
            return ErrorCode.INVALID_REQUEST, f"Unknown operation type {c.config_operation}"
        if c.name not in known:
            return ErrorCode.INVALID_CONFIG, f"Logger {c.name} does not exist!"
        if c.config_operation == OP_DELETE and c.name == ROOT:
            return ErrorCode.INVALID_REQUEST, f"Removing the log level of the {ROOT} logger is not allowed"
        if c.config_operation == OP_SET and (c.value or "").upper() not in LEVELS:
            return (ErrorCode.INVALID_CONFIG,
                    f"Cannot set the log level of {c.name} to {c.value} as it is not a supported log level. "
                    f"Valid log levels are {', '.join(LEVELS)}")
    return None


def alter(resource, node_id: int, validate_only: bool, manager: logging.Manager | None = None):
    """One IncrementalAlterConfigs result for a BROKER_LOGGER resource of this node, applied
    unless it is refused or ``validate_only``."""
    R = IncrementalAlterConfigsResponse.Resource
    known = loggers(manager)
    refused = _check(resource, node_id, known)
    if refused is not None:
        code, message = refused
        return R(error_code=int(code), error_message=message, resource_type=resource.resource_type,
                 resource_name=resource.resource_name)
    if not validate_only:
        for c in resource.configs:
            lg = known[c.name]
            if c.config_operation == OP_SET:
                lg.setLevel(LEVELS[c.value.upper()])
            else:
                lg.setLevel(logging.NOTSET)
            log.info(
                "logger %s set to %s by IncrementalAlterConfigs", c.name,
                c.value.upper() if c.config_operation == OP_SET else "its parent's level")
    return R(error_code=0, error_message=None, resource_type=resource.resource_type,
             resource_name=resource.resource_name)


#: the BROKER_LOGGER config resource type
LOGGERS = 8


def answer_with_loggers(key: int, request, node_id: int, rest):
    """DescribeConfigs (32) / IncrementalAlterConfigs (44) naming BROKER_LOGGER resources: those
    answered by this node, the others by ``rest(request with only them)`` (an answer or an
    awaitable of one); one answer, results in request order."""
    mine = [r.resource_type == LOGGERS for r in request.resources]
    others = [r for r, m in zip(request.resources, mine) if not m]
    if key == 32:
        local = [describe(r, node_id) for r, m in zip(request.resources, mine) if m]
    else:
        local = [alter(r, node_id, request.validate_only) for r, m in zip(request.resources, mine) if m]
    field = "results" if key == 32 else "responses"
    answer = rest(_with_resources(request, others)) if others else None
    if asyncio.isfuture(answer) or asyncio.iscoroutine(answer):
        async def later():
            return _merged(key, mine, local, await answer, field)
        return later()
    return _merged(key, mine, local, answer, field)


def _with_resources(request, resources):
    copy = type(request)(**{f.name: getattr(request, f.name) for f in request.FIELDS})
    copy.resources = resources
    return copy


def _merged(key: int, mine: list, local: list, rest, field: str):
    """``local`` results where ``mine`` is true, ``rest``'s elsewhere, in order."""
    cls = DescribeConfigsResponse if key == 32 else IncrementalAlterConfigsResponse
    local_it, rest_it = iter(local), iter(getattr(rest, field) if rest is not None else [])
    out = cls(throttle_time_ms=0)
    setattr(out, field, [next(local_it) if m else next(rest_it) for m in mine])
    return out
