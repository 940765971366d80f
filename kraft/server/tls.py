"""TLS for listeners: an ``ssl.SSLContext`` built from Kafka's ``ssl.*`` configs (with the
``listener.name.<listener>.ssl.*`` overrides), and the principal of a client certificate.

Key and trust stores as Kafka reads them: PEM (KIP-651, inline text or a file), PKCS12, and
JKS refused with one line saying how to convert. Every mistake is a :class:`ConfigError`
naming the key, raised when the listener is built, never at the first handshake. This module
does no network I/O; :mod:`kraft.server.network` runs the handshakes.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile

from kraft.config import security_protocol
from kraft.errors import ConfigError

#: Kafka's default protocols (``ssl.enabled.protocols``), oldest first.
_PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
              "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"
_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\s*", re.S)


class ListenerSettings:
    """Kafka's lookup of a listener's security config: ``listener.name.<name lowercase>.<key>``
    first, then ``<key>``, then the default."""

    def __init__(self, given: dict, listener: str):
        self.given = given
        self.prefix = f"listener.name.{listener.lower()}."

    def key(self, key: str) -> str:
        """The name the value was given under (for error messages)."""
        return self.prefix + key if self.prefix + key in self.given else key

    def get(self, key: str, default: str = "") -> str:
        value = self.given.get(self.prefix + key)
        if value is None:
            value = self.given.get(key)
        return default if value is None else value.strip()


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None


def _refuse_jks(data: bytes, key: str, path: str) -> None:
    if data[:4] in (_JKS_MAGIC, _JCEKS_MAGIC):
        raise ConfigError(f"{key}: {path} is a JKS keystore, which kraft cannot read; convert it with "
                          f"keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
                          f"-deststoretype PKCS12 and set the store type to PKCS12")


def _store_type(s: ListenerSettings, key: str) -> str:
    # Kafka's default is JKS; Java reads PKCS12 files under that type too (keystore
    # compatibility mode), so a file is sniffed below rather than refused for its type name.
    kind = s.get(key, "JKS").upper()
    if kind not in ("JKS", "PKCS12", "PEM"):
        raise ConfigError(f"{s.key(key)}: unsupported store type {kind!r} (PEM, PKCS12; JKS after conversion)")
    return kind


def _pkcs12(data: bytes, password: str, key: str):
    from cryptography.hazmat.primitives.serialization import pkcs12
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise ConfigError(f"{key}: cannot open the PKCS12 store (wrong password or not PKCS12): {exc}") from None


def _pem(obj) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding
    return obj.public_bytes(Encoding.PEM)


def _load_chain(ctx: ssl.SSLContext, chain_pem: bytes, key_pem: bytes, password: str | None, key: str) -> None:
    """``load_cert_chain`` reads only files: the PEM goes through a private temporary file,
    removed at once (the key in it is encrypted when it came encrypted)."""
    folder = tempfile.mkdtemp(prefix="kraft-tls-")
    path = os.path.join(folder, "chain.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem + b"\n" + chain_pem)
        ctx.load_cert_chain(path, password=password or None)
    except ssl.SSLError as exc:
        raise ConfigError(f"{key}: cannot load the key and certificate chain: {exc.reason or exc}") from None
    finally:
        try:
            os.unlink(path)
        finally:
            os.rmdir(folder)


def _load_keystore(ctx: ssl.SSLContext, s: ListenerSettings) -> bytes:
    """Load the listener's key and certificate chain into ``ctx``; the chain's PEM."""
    kind = _store_type(s, "ssl.keystore.type")
    location = s.get("ssl.keystore.location")
    key_password = s.get("ssl.key.password")
    if kind == "PEM" and not location:
        chain, key = s.get("ssl.keystore.certificate.chain"), s.get("ssl.keystore.key")
        if not chain or not key:
            raise ConfigError(f"{s.key('ssl.keystore.certificate.chain')}: a PEM keystore needs "
                              "ssl.keystore.certificate.chain and ssl.keystore.key, or ssl.keystore.location")
        _load_chain(ctx, chain.encode(), key.encode(), key_password, s.key("ssl.keystore.key"))
        return chain.encode()
    if not location:
        raise ConfigError(f"{s.key('ssl.keystore.location')}: an SSL listener needs a keystore "
                          "(ssl.keystore.location, or PEM ssl.keystore.certificate.chain + ssl.keystore.key)")
    where = s.key("ssl.keystore.location")
    data = _read(location, where)
    _refuse_jks(data, where, location)
    if kind == "PEM" or data.lstrip().startswith(b"-----BEGIN"):
        _load_chain(ctx, data, b"", key_password, where)
        return b"".join(_CERTIFICATE.findall(data))
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat
    key, cert, extra = _pkcs12(data, s.get("ssl.keystore.password"), where)
    if key is None or cert is None:
        raise ConfigError(f"{where}: the PKCS12 store {location} holds no private key with its certificate")
    secret = secrets.token_hex(16)  # the key is written encrypted, even to a private file
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(secret.encode()))
    chain_pem = b"".join(_pem(c) for c in [cert, *(extra or [])])
    _load_chain(ctx, chain_pem, key_pem, secret, where)
    return chain_pem


def keystore_chain(given: dict, listener: str) -> bytes:
    """The certificate chain (PEM) a listener's keystore holds, loaded as the listener would."""
    return _load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), ListenerSettings(given, listener))


def reload_keystore(ctx: ssl.SSLContext, given: dict, listener: str, current_chain: bytes, also=()) -> bytes:
    """Load the keystore ``given`` now names into a live server context: handshakes from now on
    present it, connections already open keep theirs. It is first loaded on a scratch context,
    and, as Kafka requires of a dynamically updated keystore, its certificate must keep the
    subject and the subject alternative names of the one it replaces. Returns the new chain;
    raises ConfigError (and changes nothing) otherwise. ``also``: client contexts that present
    the same keystore to other nodes (kraft.server.tls.node_client_context)."""
    from cryptography import x509
    s = ListenerSettings(given, listener)
    chain = _load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), s)
    old, new = (x509.load_pem_x509_certificate(_CERTIFICATE.findall(c)[0]) for c in (current_chain, chain))
    if old.subject != new.subject:
        raise ConfigError(f"{s.key('ssl.keystore.location')}: Keystore DistinguishedName does not match: "
                          f"existing={{{old.subject.rfc4514_string()}}}, new={{{new.subject.rfc4514_string()}}}")
    if _sans(old) != _sans(new):
        raise ConfigError(f"{s.key('ssl.keystore.location')}: Keystore SubjectAltNames do not match: "
                          f"existing={sorted(_sans(old))}, new={sorted(_sans(new))}")
    for target in (ctx, *also):
        _load_keystore(target, s)
    return chain


def _sans(cert) -> set:
    from cryptography import x509
    try:
        return {str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value}
    except x509.ExtensionNotFound:
        return set()


def _load_truststore(ctx: ssl.SSLContext, s: ListenerSettings) -> bool:
    """Trust what the truststore holds; False when none is configured."""
    kind = _store_type(s, "ssl.truststore.type")
    location = s.get("ssl.truststore.location")
    inline = s.get("ssl.truststore.certificates")
    if kind == "PEM" and inline and not location:
        pem, where = inline.encode(), s.key("ssl.truststore.certificates")
    elif location:
        where = s.key("ssl.truststore.location")
        data = _read(location, where)
        _refuse_jks(data, where, location)
        if kind == "PEM" or data.lstrip().startswith(b"-----BEGIN"):
            pem = data
        else:
            _key, cert, extra = _pkcs12(data, s.get("ssl.truststore.password"), where)
            pem = b"".join(_pem(c) for c in [cert, *(extra or [])] if c is not None)
    else:
        return False
    try:
        ctx.load_verify_locations(cadata=pem.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{where}: no usable certificate in the truststore: {exc}") from None
    return True


def _set_protocols(ctx: ssl.SSLContext, s: ListenerSettings) -> None:
    names = [p.strip() for p in s.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOLS]
    if not names or unknown:
        raise ConfigError(f"{s.key('ssl.enabled.protocols')}: unknown protocol {', '.join(unknown) or '(none)'} "
                          f"(one or more of {', '.join(_PROTOCOLS)})")
    order = list(_PROTOCOLS)
    idx = sorted(order.index(p) for p in names)
    # OpenSSL takes a range of versions, not a set.
    if idx != list(range(idx[0], idx[-1] + 1)):
        raise ConfigError(f"{s.key('ssl.enabled.protocols')}: the protocols must be consecutive versions")
    ctx.minimum_version = _PROTOCOLS[order[idx[0]]]
    ctx.maximum_version = _PROTOCOLS[order[idx[-1]]]


def openssl_cipher(name: str) -> str:
    """Kafka (Java) names cipher suites as IANA does (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    OpenSSL differently (ECDHE-RSA-AES128-GCM-SHA256); OpenSSL names pass through."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kex, cipher = name[4:].split("_WITH_", 1)
    kex = kex.replace("_", "-").replace("RSA-RSA", "RSA")
    kex = "" if kex == "RSA" else kex + "-"
    c = cipher.replace("AES_128_", "AES128-").replace("AES_256_", "AES256-").replace("_", "-")
    c = c.replace("CBC-", "").replace("CHACHA20-POLY1305-SHA256", "CHACHA20-POLY1305")
    return kex + c


def _set_ciphers(ctx: ssl.SSLContext, s: ListenerSettings) -> None:
    names = [c.strip() for c in s.get("ssl.cipher.suites").split(",") if c.strip()]
    if not names:
        return
    tls13 = [n for n in names if n.startswith("TLS_") and "_WITH_" not in n]
    if tls13:
        # Python's ssl module cannot restrict the TLS 1.3 suites; accepting them silently
        # would claim a restriction that does not happen.
        raise ConfigError(f"{s.key('ssl.cipher.suites')}: kraft cannot restrict TLS 1.3 suites "
                          f"({', '.join(tls13)}); list TLS 1.2 suites only, or limit ssl.enabled.protocols")
    try:
        ctx.set_ciphers(":".join(openssl_cipher(n) for n in names))
    except ssl.SSLError:
        raise ConfigError(f"{s.key('ssl.cipher.suites')}: no cipher suite this node's OpenSSL knows in "
                          f"{', '.join(names)}") from None


def server_context(given: dict, listener: str) -> ssl.SSLContext:
    """The server-side context of an SSL or SASL_SSL listener."""
    s = ListenerSettings(given, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, s)
    _set_ciphers(ctx, s)
    _load_keystore(ctx, s)
    auth = s.get("ssl.client.auth", "none").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"{s.key('ssl.client.auth')}: expected none, requested or required, got {auth!r}")
    rules = s.get("ssl.principal.mapping.rules", "DEFAULT")
    if rules != "DEFAULT":
        raise ConfigError(f"{s.key('ssl.principal.mapping.rules')}: only DEFAULT is supported (got {rules!r})")
    has_trust = _load_truststore(ctx, s)
    if auth != "none" and not has_trust:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def listener_context(cfg, listener: str) -> ssl.SSLContext | None:
    """The TLS context a listener of ``cfg`` (a NodeConfig) serves with; None: no TLS."""
    if security_protocol(cfg.values, listener) not in ("SSL", "SASL_SSL"):
        return None
    return server_context(cfg.given, listener)


def node_client_context(cfg, listener: str) -> ssl.SSLContext | None:
    """The context a node connects to another node's ``listener`` with (the controller
    listener, the inter-broker listener); None when that listener has no TLS. As Kafka's
    inter-broker and controller clients do, it reads that listener's own ``ssl.*`` settings:
    it trusts the listener's truststore and presents the listener's keystore (so
    ``ssl.client.auth=required`` between nodes works, and the node's principal is its
    certificate's subject); ``ssl.endpoint.identification.algorithm`` (default https) checks
    the host name it dials against the peer's certificate."""
    if security_protocol(cfg.values, listener) not in ("SSL", "SASL_SSL"):
        return None
    s = ListenerSettings(cfg.given, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, s)
    _set_ciphers(ctx, s)
    if not _load_truststore(ctx, s):
        ctx.load_default_certs()
    _load_keystore(ctx, s)
    if s.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
        ctx.check_hostname = False
    return ctx


def client_context(given: dict) -> ssl.SSLContext:
    """A client context from Kafka's client names (``ssl.truststore.*``, ``ssl.keystore.*``)
    or librdkafka's (``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``)."""
    s = ListenerSettings(given, "-")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if s.get("ssl.ca.location"):
        ctx.load_verify_locations(cafile=s.get("ssl.ca.location"))
    elif not _load_truststore(ctx, s):
        ctx.load_default_certs()
    if s.get("ssl.certificate.location"):
        ctx.load_cert_chain(s.get("ssl.certificate.location"), s.get("ssl.key.location") or None,
                            s.get("ssl.key.password") or None)
    elif s.get("ssl.keystore.location") or s.get("ssl.keystore.certificate.chain"):
        _load_keystore(ctx, s)
    if s.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
        ctx.check_hostname = False
    return ctx


def watch_handshakes(ctx: ssl.SSLContext, on_failure) -> None:
    """Call ``on_failure(reason)`` for each handshake on ``ctx`` that fails: asyncio's and
    uvloop's TLS layers report those only in debug mode, and both build their TLS objects
    with ``ctx.wrap_bio``, hence ``sslobject_class``."""

    class Watched(ssl.SSLObject):
        def do_handshake(self):
            try:
                return super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise
            except ssl.SSLError as exc:
                on_failure(exc.reason or str(exc))
                raise

    ctx.sslobject_class = Watched


def peer_principal(ssl_object) -> str:
    """Kafka's DEFAULT principal of a TLS peer: ``User:`` + the certificate subject as
    RFC 2253 text, ``User:ANONYMOUS`` without a certificate (``ssl.client.auth`` none)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return "User:ANONYMOUS"
    from cryptography import x509
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
