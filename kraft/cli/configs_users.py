"""``kraft configs --entity-type users``: SCRAM credentials as Kafka's ConfigCommand handles
them (DescribeUserScramCredentials / AlterUserScramCredentials through confluent-kafka's
AdminClient, which salts the password itself):

* ``--alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=s]'``
  (``salt=`` base64 optional) and ``--delete-config SCRAM-SHA-256``: "Completed updating
  config for user alice."
* ``--describe [--entity-name alice]``: "SCRAM credential configs for user-principal 'alice'
  are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096" per user with credentials.

Quota keys (``producer_byte_rate`` ...) of users are ``configs_quotas``'s (``configs`` routes them).
"""

from __future__ import annotations

import base64

from kraft.cli.kafka_tool_args import ToolError, wait
from kraft.cli.scram_args import DEFAULT_ITERATIONS, parse_scram_specs
from kraft.metadata.scram import MECHANISM_TYPES


def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism
    return ScramMechanism(MECHANISM_TYPES[name])


def describe_users(args, adm) -> int:
    futures = adm.describe_user_scram_credentials([args.entity_name] if args.entity_name else None)
    if not isinstance(futures, dict):  # every user: one future for the whole answer
        results = wait(futures)
    else:
        results = {}
        for user, future in futures.items():
            try:
                results[user] = wait(future)
            except ToolError as exc:
                if "RESOURCE_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                    continue  # Kafka prints nothing for a user without credentials
                raise
    for user in sorted(results):
        infos = sorted(results[user].scram_credential_infos, key=lambda i: i.mechanism.value)
        shown = ", ".join(f"{i.mechanism.name.replace('_', '-')}=iterations={i.iterations}" for i in infos)
        print(f"SCRAM credential configs for user-principal '{user}' are {shown}")
    return 0


def alter_users(args, adm, add_config: str, delete_config: str) -> int:
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion
    if not args.entity_name:
        raise ToolError("--entity-type users needs --entity-name")
    user = args.entity_name
    alterations = []
    try:
        specs = parse_scram_specs(add_config, "--add-config") if add_config.strip() else []
    except Exception as exc:
        raise ToolError(str(exc)) from None
    for mechanism, items in specs:
        unknown = set(items) - {"password", "iterations", "salt"}
        if unknown or "password" not in items:
            raise ToolError(f"--add-config: {mechanism}=[...] takes password= and optionally iterations=, salt=")
        iterations = int(items.get("iterations", DEFAULT_ITERATIONS))
        salt = base64.b64decode(items["salt"]) if "salt" in items else None
        alterations.append(UserScramCredentialUpsertion(
            user, ScramCredentialInfo(_mechanism(mechanism), iterations), items["password"].encode(), salt))
    for name in (k.strip().upper() for k in delete_config.split(",") if k.strip()):
        if name not in MECHANISM_TYPES:
            raise ToolError(f"--delete-config: kraft keeps only SCRAM credentials for users, not {name!r}")
        alterations.append(UserScramCredentialDeletion(user, _mechanism(name)))
    if not alterations:
        raise ToolError("--alter needs --add-config or --delete-config")
    for future in adm.alter_user_scram_credentials(alterations).values():
        wait(future)
    print(f"Completed updating config for user {user}.")
    return 0
