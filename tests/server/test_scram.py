"""SCRAM-SHA-256 / SCRAM-SHA-512: the credential records byte for byte, the image and its
replay errors, the controller's Alter/DescribeUserScramCredentials rules (Kafka's
ScramControlManager and ScramImage.describe), the server side of the exchange against RFC
7677's example, and real logins over a KafkaServer at every SaslAuthenticate version and with
v0 raw framing, refused with Kafka's message for a wrong password or an unknown user."""

from __future__ import annotations

import base64
import struct

import pytest

from kraft.controller.result import ControllerContext
from kraft.controller.scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from kraft.errors import ErrorCode, MetadataReplayError
from kraft.metadata import EMPTY_IMAGE, FeatureLevelRecord, MetadataDelta
from kraft.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kraft.client.sasl_client import ScramClient
from kraft.metadata.scram import (SCRAM_SHA_256, SCRAM_SHA_512, credential_from_password, salted_password,
                                  stored_key)
from kraft.metadata.serde import decode_record, encode_record
from kraft.protocol.messages.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                          SaslHandshakeResponse)
from kraft.protocol.messages.scram_credentials import (AlterUserScramCredentialsRequest,
                                                       DescribeUserScramCredentialsRequest)
from kraft.server.network import KafkaServer
from kraft.server.sasl import sasl_settings
from kraft.server.scram_sasl import AuthenticationFailed, ScramMechanism

from server_helpers import RawConnection, api_versions_frame, decode_api_versions, run
from test_sasl import PrincipalHandler, _call

E = ErrorCode
INVALID_256 = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
               "SCRAM-SHA-256")

# --- records and image ---------------------------------------------------------------------


def test_user_scram_credential_record_bytes():
    r = UserScramCredentialRecord(name="al", mechanism=2, salt=b"\x01\x02", stored_key=b"S", server_key=b"K",
                                  iterations=4096)
    wire = encode_record(r, 0)
    # frame v1, api key 11, version 0; compact string "al", int8 2, compact bytes x3, int32, no tags
    assert wire == bytes([1, 11, 0, 3]) + b"al" + bytes([2, 3, 1, 2, 2]) + b"S" + bytes([2]) + b"K" \
        + struct.pack(">i", 4096) + bytes([0])
    assert decode_record(wire).record == r
    rm = RemoveUserScramCredentialRecord(name="al", mechanism=1)
    assert encode_record(rm, 0) == bytes([1, 22, 0, 3]) + b"al" + bytes([1, 0])
    assert decode_record(encode_record(rm, 0)).record == rm


def _image(*records, mv=21):
    d = MetadataDelta(EMPTY_IMAGE)
    d.replay(FeatureLevelRecord(name="metadata.version", feature_level=mv))
    d.replay_all(records)
    return d.apply()


def _cred(user, mechanism=SCRAM_SHA_512, iterations=8192):
    c = credential_from_password(mechanism, "pw", b"salt", iterations)
    return UserScramCredentialRecord(name=user, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key,
                                     server_key=c.server_key, iterations=iterations)


def test_credentials_replay_into_the_image_and_a_missing_removal_is_an_error():
    image = _image(_cred("alice"), _cred("alice", SCRAM_SHA_256), _cred("bob"),
                   RemoveUserScramCredentialRecord(name="bob", mechanism=SCRAM_SHA_512))
    assert sorted(image.scram.credentials) == [("alice", 1), ("alice", 2)]
    assert image.scram.lookup("alice", 2).iterations == 8192
    d = MetadataDelta(image)
    with pytest.raises(MetadataReplayError, match="Unable to find credential to delete"):
        d.replay(RemoveUserScramCredentialRecord(name="bob", mechanism=SCRAM_SHA_512))
    assert d.apply() is image or d.apply().scram == image.scram


# --- controller handlers -------------------------------------------------------------------


def _alter(image, deletions=(), upsertions=()):
    A = AlterUserScramCredentialsRequest
    req = A(deletions=[A.Deletion(name=n, mechanism=m) for n, m in deletions],
            upsertions=[A.Upsertion(name=n, mechanism=m, iterations=i, salt=b"salt",
                                    salted_password=salted_password(max(m, 1) if m in (1, 2) else 1, "pw", b"salt", 4096))
                        for n, m, i in upsertions])
    result = handle_alter_user_scram_credentials(ControllerContext(image=image, version=0, now_ms=0), req)
    return result, {r.user: (r.error_code, r.error_message) for r in result.response.results}


def test_alter_applies_kafka_validations():
    image = _image(_cred("alice"), _cred("dup"))
    result, codes = _alter(image, deletions=[("alice", 2), ("ghost", 2), ("dup", 2), ("e", 9)],
                           upsertions=[("new", 1, 4096), ("dup", 1, 4096), ("ghost", 1, 4096), ("few", 2, 4095), ("many", 2, 16385),
                                       ("", 2, 8192), ("odd", 0, 8192)])
    assert codes == {
        "alice": (0, None), "new": (0, None),
        "ghost": (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "dup": (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "e": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "few": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "odd": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}
    assert result.atomic
    kinds = [(type(r).__name__, r.name) for r in result.records]
    assert kinds == [("RemoveUserScramCredentialRecord", "alice"), ("UserScramCredentialRecord", "new")]
    # the controller stores StoredKey/ServerKey, never the salted password
    new = result.records[1]
    assert new.stored_key == stored_key(1, salted_password(1, "pw", b"salt", 4096))
    after = MetadataDelta(image)
    after.replay_all(result.records)
    assert sorted(after.apply().scram.credentials) == [("dup", 2), ("new", 1)]  # dup: nothing written


def test_alter_before_metadata_version_3_5_iv2_is_unsupported():
    _, codes = _alter(_image(mv=10), upsertions=[("alice", 2, 8192)])
    assert codes == {"alice": (E.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")}


def test_describe_all_named_unknown_and_twice():
    image = _image(_cred("alice"), _cred("alice", SCRAM_SHA_256, 4096), _cred("bob"))
    D = DescribeUserScramCredentialsRequest

    def describe(users):
        ctx = ControllerContext(image=image, version=0, now_ms=0)
        resp = handle_describe_user_scram_credentials(ctx, D(users=users)).response
        return {r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in resp.results}
    every = {"alice": (0, [(1, 4096), (2, 8192)]), "bob": (0, [(2, 8192)])}
    assert describe(None) == every and describe([]) == every
    assert describe([D.UserName(name="bob"), D.UserName(name="nope"), D.UserName(name="alice"),
                     D.UserName(name="alice")]) == {
        "bob": (0, [(2, 8192)]), "nope": (E.RESOURCE_NOT_FOUND, []), "alice": (E.DUPLICATE_RESOURCE, [])}


# --- the exchange --------------------------------------------------------------------------

RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _rfc_mechanism():
    cred = credential_from_password(SCRAM_SHA_256, "pencil", RFC_SALT, 4096)
    return ScramMechanism("SCRAM-SHA-256", lambda user, m: cred if (user, m) == ("user", 1) else None,
                          nonce=lambda: RFC_SERVER_NONCE)


def test_rfc_7677_example():
    """RFC 7677 section 3, byte for byte: the server's two answers to the client's messages."""
    exchange = _rfc_mechanism().start()
    first = exchange.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert not exchange.complete
    final = exchange.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                          b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.complete and exchange.user == "user"


@pytest.mark.parametrize("first,final", [
    (b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",  # a wrong proof (last byte changed)
     b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVA="),
    (b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",  # a nonce other than the server's
     b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
    (b"n,,n=nobody,r=abc", None),  # an unknown user
    (b"y,,n=user,r=abc", None),  # channel binding flags other than n
    (b"n,,n=user,r=abc,tokenauth=true", None),  # delegation tokens
    (b"\xff\xfe", None),
])
def test_refusals_carry_kafkas_message(first, final):
    exchange = _rfc_mechanism().start()
    with pytest.raises(AuthenticationFailed) as err:
        exchange.step(first)
        exchange.step(final)
    assert str(err.value) == INVALID_256
    assert not exchange.complete


def test_authorization_id_other_than_the_user_is_refused():
    with pytest.raises(AuthenticationFailed, match="different from username"):
        _rfc_mechanism().start().step(b"n,a=admin,n=user,r=abc")


STORE = {("alice", SCRAM_SHA_512): credential_from_password(SCRAM_SHA_512, "alice-secret", b"NaCl", 4096)}
GIVEN = {"sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256"}


async def _serve():
    handler = PrincipalHandler()
    server = KafkaServer(handler, "127.0.0.1", 0, listener_name="SASL",
                         sasl=sasl_settings(GIVEN, "SASL", lambda user, m: STORE.get((user, m))),
                         failed_authentication_delay_ms=0)
    await server.start()
    return server, handler


@pytest.mark.parametrize("av", [0, 1, 2])
def test_scram_sha_512_login_over_saslauthenticate_at_every_version(av):
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            hs = await _call(conn, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1, 1, SaslHandshakeResponse)
            assert (hs.error_code, hs.mechanisms) == (0, ["SCRAM-SHA-512", "SCRAM-SHA-256"])
            client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
            a1 = await _call(conn, SaslAuthenticateRequest(auth_bytes=client.first()), av, 2, SaslAuthenticateResponse)
            assert a1.error_code == 0 and a1.auth_bytes.startswith(b"r=" + client.nonce.encode())
            a2 = await _call(conn, SaslAuthenticateRequest(auth_bytes=client.final(a1.auth_bytes)), av, 3,
                             SaslAuthenticateResponse)
            assert a2.error_code == 0 and client.verify(a2.auth_bytes)
            await conn.send(api_versions_frame(4))
            assert decode_api_versions(await conn.read_frame())[0] == 4
        finally:
            await server.close()
    run(main())


def test_scram_login_with_v0_raw_tokens():
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            hs = await _call(conn, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0, 1, SaslHandshakeResponse)
            assert hs.error_code == 0
            client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
            await conn.send(struct.pack(">i", len(client.first())) + client.first())
            server_first = await conn.read_frame()
            final = client.final(server_first)
            await conn.send(struct.pack(">i", len(final)) + final)
            assert client.verify(await conn.read_frame())
        finally:
            await server.close()
    run(main())


@pytest.mark.parametrize("user,password,mechanism", [("alice", "wrong", "SCRAM-SHA-512"),
                                                     ("nobody", "x", "SCRAM-SHA-512"),
                                                     ("alice", "alice-secret", "SCRAM-SHA-256")])
def test_wrong_password_unknown_user_or_mechanism_is_refused_with_kafkas_error(user, password, mechanism):
    async def main():
        server, handler = await _serve()
        try:
            conn = await RawConnection.open(server.port)
            await _call(conn, SaslHandshakeRequest(mechanism=mechanism), 1, 1, SaslHandshakeResponse)
            client = ScramClient(mechanism, user, password)
            a1 = await _call(conn, SaslAuthenticateRequest(auth_bytes=client.first()), 2, 2, SaslAuthenticateResponse)
            if a1.error_code == 0:
                a1 = await _call(conn, SaslAuthenticateRequest(auth_bytes=client.final(a1.auth_bytes)), 2, 3,
                                 SaslAuthenticateResponse)
            assert a1.error_code == E.SASL_AUTHENTICATION_FAILED
            assert a1.error_message == ("Authentication failed during authentication due to invalid credentials "
                                        f"with SASL mechanism {mechanism}")
            assert await conn.is_closed_by_peer()
            assert handler.principals == []
        finally:
            await server.close()
    run(main())


# --- storage format --add-scram ------------------------------------------------------------


def test_format_add_scram_writes_credentials_into_the_bootstrap_checkpoint(tmp_path, capsys):
    from kraft.cli import main
    from kraft.log.bootstrap import read_bootstrap_checkpoint, read_bootstrap_values
    config = tmp_path / "server.properties"
    config.write_text(f"node.id=1\nprocess.roles=controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                      f"listeners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n"
                      f"log.dirs={tmp_path / 'meta'}\n")
    salted = base64.b64encode(salted_password(SCRAM_SHA_256, "bob-secret", b"salt", 8192)).decode()
    code = main(["storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "-c", str(config),
                 "--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]",
                 "--add-scram", f'SCRAM-SHA-256=[name=bob,iterations=8192,salt="c2FsdA==",saltedpassword="{salted}"]'])
    assert code == 0, capsys.readouterr()
    meta = str(tmp_path / "meta")
    assert read_bootstrap_checkpoint(meta)["metadata.version"] >= 11  # features read as before
    records = [decode_record(v).record for v in read_bootstrap_values(meta)]
    assert [(r.name, r.mechanism, r.iterations) for r in records] == [("alice", 2, 4096), ("bob", 1, 8192)]
    alice, bob = records
    assert len(alice.salt) == 32  # random, as Kafka's ScramFormatter.secureRandomBytes
    assert alice.stored_key == stored_key(2, salted_password(2, "alice-secret", alice.salt, 4096))
    assert bob.salt == b"salt" and bob.stored_key == stored_key(1, salted_password(1, "bob-secret", b"salt", 8192))


@pytest.mark.parametrize("spec,message", [
    ("SCRAM-SHA-1=[name=a,password=p]", "unknown SCRAM mechanism"),
    ("SCRAM-SHA-512=[password=p]", "needs name="),
    ("SCRAM-SHA-512=[name=a]", "exactly one of password= or saltedpassword="),
    ("SCRAM-SHA-512=[name=a,password=p,iterations=100]", "between 4096 and 16384"),
    ("SCRAM-SHA-512=[name=a,saltedpassword=AAAA]", "needs salt="),
    ("SCRAM-SHA-512=[name=a,password=p,colour=red]", "unknown key"),
    ("alice", "expected 'SCRAM-SHA-256=\\[key=value"),
])
def test_add_scram_mistakes_are_one_line_errors(spec, message):
    from kraft.cli.scram_args import add_scram_records
    from kraft.errors import KraftError
    with pytest.raises(KraftError, match=message) as err:
        add_scram_records([spec])
    assert "\n" not in str(err.value)
