"""AlterUserScramCredentials (51) and DescribeUserScramCredentials (50): Kafka's
``ScramControlManager.alterCredentials`` and ``ScramImage.describe`` as pure handlers.

Alter: a user may appear once per request, deletions and upsertions together (a second time:
DUPLICATE_RESOURCE for that user, and nothing of it is written); an empty name is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside
4096..16384 UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many iterations"), deleting a
credential that does not exist RESOURCE_NOT_FOUND, and a metadata.version before 3.5-IV2
UNSUPPORTED_VERSION. The client sends the salt and the salted password; the controller stores
the salt, StoredKey and ServerKey (``kraft.metadata.scram``). The records are one atomic unit.
Describe: the mechanisms and iterations of the named users (every user when none is named),
RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE for a user named twice.
Nothing here mutates the image or does I/O.
"""

from __future__ import annotations

from kraft.controller.result import ControllerContext, ControllerResult
from kraft.errors import ErrorCode
from kraft.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kraft.metadata.scram import MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, credential_from_salted
from kraft.protocol.messages.scram_credentials import (AlterUserScramCredentialsResponse,
                                                       DescribeUserScramCredentialsResponse)

#: metadata.version 3.5-IV2, the first that stores SCRAM credentials (Kafka's isScramSupported)
SCRAM_METADATA_VERSION = 11
TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
DESCRIBE_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "


def _check_name_and_mechanism(name: str, mechanism: int):
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(u):
    error = _check_name_and_mechanism(u.name, u.mechanism)
    if error is not None:
        return error
    if u.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def handle_alter_user_scram_credentials(ctx: ControllerContext, request) -> ControllerResult:
    supported = ctx.image.features.metadata_version >= SCRAM_METADATA_VERSION
    stored = ctx.image.scram.credentials
    deletions: dict = {}
    upsertions: dict = {}
    errors: dict = {}  # user -> (code, message)

    def admit(name: str, check, into: dict, item) -> None:
        if name in errors:
            return
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE, TWICE)
        elif not supported:
            errors[name] = (ErrorCode.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")
        else:
            error = check(item)
            if error is not None:
                errors[name] = error
            else:
                into[name] = item

    def check_deletion(d):
        error = _check_name_and_mechanism(d.name, d.mechanism)
        if error is None and (d.name, d.mechanism) not in stored:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return error

    for d in request.deletions:
        admit(d.name, check_deletion, deletions, d)
    for u in request.upsertions:
        admit(u.name, _check_upsertion, upsertions, u)
    Result = AlterUserScramCredentialsResponse.Result
    results, records = [], []
    for d in deletions.values():
        results.append(Result(user=d.name, error_code=0, error_message=None))
        records.append(RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism))
    for u in upsertions.values():
        c = credential_from_salted(u.mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)
        results.append(Result(user=u.name, error_code=0, error_message=None))
        records.append(UserScramCredentialRecord(name=u.name, mechanism=u.mechanism, salt=c.salt,
                                                 stored_key=c.stored_key, server_key=c.server_key,
                                                 iterations=c.iterations))
    for name, (code, message) in errors.items():
        results.append(Result(user=name, error_code=int(code), error_message=message))
    return ControllerResult(records=records, response=AlterUserScramCredentialsResponse(results=results),
                            atomic=bool(records))


def describe_scram(image, request) -> DescribeUserScramCredentialsResponse:
    """Kafka's ``ScramImage.describe``: also what a broker answers from its own image."""
    by_user = image.scram.users()
    named: dict = {}  # user -> named twice?
    if not request.users:
        named = {user: False for user in sorted(by_user)}
    else:
        for u in request.users:
            named[u.name] = u.name in named
    R = DescribeUserScramCredentialsResponse.Result
    Info = R.CredentialInfo
    results = []
    for user, twice in named.items():
        if twice:
            results.append(R(user=user, error_code=int(ErrorCode.DUPLICATE_RESOURCE),
                             error_message=DESCRIBE_DUPLICATE + user, credential_infos=[]))
        elif user not in by_user:
            results.append(R(user=user, error_code=int(ErrorCode.RESOURCE_NOT_FOUND),
                             error_message=DESCRIBE_MISSING + user, credential_infos=[]))
        else:
            infos = [Info(mechanism=m, iterations=i) for m, i in sorted(by_user[user].items())]
            results.append(R(user=user, error_code=0, error_message=None, credential_infos=infos))
    return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)


def handle_describe_user_scram_credentials(ctx: ControllerContext, request) -> ControllerResult:
    return ControllerResult(response=describe_scram(ctx.image, request))


def alter_error(req, version, code, message=None):
    R = AlterUserScramCredentialsResponse.Result
    names = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return AlterUserScramCredentialsResponse(results=[R(user=n, error_code=int(code), error_message=message)
                                                      for n in names])


def describe_error(req, version, code, message=None):
    return DescribeUserScramCredentialsResponse(error_code=int(code), error_message=message, results=[])


HANDLERS = {51: handle_alter_user_scram_credentials, 50: handle_describe_user_scram_credentials}
ERROR_RESPONSES = {51: alter_error, 50: describe_error}
