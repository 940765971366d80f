"""Throwaway certificates for TLS tests: a CA, certificates it signs (server for 127.0.0.1 /
localhost, clients with a chosen subject), and the stores Kafka configs name (PEM files,
PKCS12 with a password). Made with the ``cryptography`` package in a temporary folder."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _name(cn: str, org: str = "kraft") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass
class Issued:
    key: object
    cert: x509.Certificate

    def key_pem(self, password: str | None = None) -> str:
        enc = (serialization.BestAvailableEncryption(password.encode()) if password
               else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc).decode()

    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()


class CertAuthority:
    def __init__(self, cn: str = "kraft-test-ca"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.name = _name(cn)
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))

    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, cn: str, org: str = "kraft", server: bool = False, expired: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        if expired:
            now -= datetime.timedelta(days=60)  # valid from 61 to 30 days ago
        b = (x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(self.name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=30)))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                             x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                critical=False)
        return Issued(key, b.sign(self.key, hashes.SHA256()))


def write(folder: str, name: str, data) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


def pkcs12_bytes(issued: Issued, ca: CertAuthority, password: str) -> bytes:
    return pkcs12.serialize_key_and_certificates(b"kraft", issued.key, issued.cert, [ca.cert],
                                                 serialization.BestAvailableEncryption(password.encode()))


def trust_pkcs12_bytes(ca: CertAuthority, password: str) -> bytes:
    return pkcs12.serialize_key_and_certificates(None, None, None, [ca.cert],
                                                 serialization.BestAvailableEncryption(password.encode()))
