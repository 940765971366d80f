"""SCRAM credential arguments as Kafka's tools take them.

``kafka-storage.sh format --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'``
(also ``iterations=``, ``salt=`` base64, or ``saltedpassword=`` base64 with ``salt=``), and
``kafka-configs.sh --entity-type users --add-config
'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=x]'``. Values may
be double-quoted. The PBKDF2 runs here, in the tool, as in Kafka's.
"""

from __future__ import annotations

import base64
import binascii
import os
import re

from kraft.errors import KraftError
from kraft.metadata.records import UserScramCredentialRecord
from kraft.metadata.scram import (MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS, credential_from_salted,
                                  salted_password)

DEFAULT_ITERATIONS = 4096  # Kafka's ScramMechanism default for the tools
_SPEC = re.compile(r'\s*([A-Za-z0-9-]+)\s*=\s*\[(.*?)\]\s*(?:,|$)', re.S)
_ITEM = re.compile(r'\s*([A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|$)')


def parse_scram_specs(text: str, what: str) -> list[tuple[str, dict[str, str]]]:
    """``MECH=[k=v,...][,MECH=[...]]`` → [(mechanism name, {key: value})]."""
    out, pos = [], 0
    while pos < len(text):
        m = _SPEC.match(text, pos)
        if not m:
            raise KraftError(f"{what}: expected 'SCRAM-SHA-256=[key=value,...]', got {text[pos:pos + 40]!r}")
        name = m.group(1).upper()
        if name not in MECHANISM_TYPES:
            raise KraftError(f"{what}: unknown SCRAM mechanism {m.group(1)!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
        items, body, ipos = {}, m.group(2), 0
        while ipos < len(body):
            item = _ITEM.match(body, ipos)
            if not item or item.end() == ipos:
                raise KraftError(f"{what}: cannot parse {body[ipos:ipos + 30]!r} in {name}=[...]")
            value = item.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            items[item.group(1).lower()] = value
            ipos = item.end()
        out.append((name, items))
        pos = m.end()
    return out


def _b64(value: str, key: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise KraftError(f"{what}: {key} is not base64: {value!r}") from None


def salted_credential(mechanism: str, items: dict, what: str) -> tuple[int, bytes, bytes]:
    """(iterations, salt, salted password) of one spec; the salt is random unless given."""
    unknown = set(items) - {"name", "password", "salt", "saltedpassword", "iterations"}
    if unknown:
        raise KraftError(f"{what}: unknown key(s) {', '.join(sorted(unknown))} in {mechanism}=[...]")
    try:
        iterations = int(items.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise KraftError(f"{what}: iterations must be a number, got {items['iterations']!r}") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise KraftError(f"{what}: iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    salt = _b64(items["salt"], "salt", what) if "salt" in items else os.urandom(32)
    mech = MECHANISM_TYPES[mechanism]
    if ("password" in items) == ("saltedpassword" in items):
        raise KraftError(f"{what}: give exactly one of password= or saltedpassword= in {mechanism}=[...]")
    if "saltedpassword" in items:
        if "salt" not in items:
            raise KraftError(f"{what}: saltedpassword= needs salt= in {mechanism}=[...]")
        return iterations, salt, _b64(items["saltedpassword"], "saltedpassword", what)
    return iterations, salt, salted_password(mech, items["password"], salt, iterations)


def add_scram_records(specs) -> list[UserScramCredentialRecord]:
    """``--add-scram`` values (repeatable) → the records bootstrap.checkpoint carries."""
    records, seen = [], set()
    for text in specs or ():
        for mechanism, items in parse_scram_specs(text, "--add-scram"):
            name = items.get("name", "")
            if not name:
                raise KraftError(f"--add-scram: {mechanism}=[...] needs name=<user>")
            if (name, mechanism) in seen:
                raise KraftError(f"--add-scram: {mechanism} credential of {name!r} given twice")
            seen.add((name, mechanism))
            iterations, salt, salted = salted_credential(mechanism, items, "--add-scram")
            c = credential_from_salted(MECHANISM_TYPES[mechanism], salt, salted, iterations)
            records.append(UserScramCredentialRecord(name=name, mechanism=MECHANISM_TYPES[mechanism], salt=c.salt,
                                                     stored_key=c.stored_key, server_key=c.server_key,
                                                     iterations=iterations))
    return records
