"""A TLS listener's keystore replaced at run time through the broker's dynamic configs
(``listener.name.<listener>.ssl.keystore.*``, per broker), as Kafka rotates certificates: a real
BrokerNode publishing images. New handshakes present the new certificate, a connection opened
before keeps working; a store whose certificate has another subject, or that does not open
(a wrong password), is refused with the listener keeping the store it had; deleting the dynamic
settings goes back to server.properties'."""

from __future__ import annotations

import socket
import ssl
import struct

from broker_helpers import BrokerThread
from cryptography import x509

from kraft.metadata import ConfigRecord, MetadataDelta
from kraft.metadata.configs import BROKER

from tls_certs import CertAuthority, pkcs12_bytes, write

PREFIX = "listener.name.plaintext."


def _serial(port: int, ca_file: str) -> int:
    ctx = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def _api_versions_answered(tls) -> bool:
    body = struct.pack(">hhih", 18, 0, 9, 4) + b"test"
    tls.sendall(struct.pack(">i", len(body)) + body)
    return len(tls.recv(4)) == 4


def test_a_listeners_keystore_is_replaced_checked_and_restored_at_run_time(tmp_path):
    folder = str(tmp_path)
    ca = CertAuthority()
    first, second, other = (ca.issue("localhost", server=True), ca.issue("localhost", server=True),
                            ca.issue("elsewhere", server=True))
    ca_file = write(folder, "ca.pem", ca.cert_pem())
    stores = {name: write(folder, f"{name}.p12", pkcs12_bytes(issued, ca, "pw-" + name))
              for name, issued in (("first", first), ("second", second), ("other", other))}
    props = {"listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
             "ssl.keystore.type": "PKCS12", "ssl.keystore.location": stores["first"],
             "ssl.keystore.password": "pw-first"}
    with BrokerThread(folder + "/logs", {"t": 1}, props=props) as b:
        port = b.node.port()

        def set_keystore(name, password=None):
            delta = MetadataDelta(b.node.state.image)
            for key, value in (("ssl.keystore.location", stores.get(name)),
                               ("ssl.keystore.password", password or (name and "pw-" + name))):
                delta.replay(ConfigRecord(resource_type=BROKER, resource_name="1", name=PREFIX + key, value=value))
            b.node.publish(delta.apply())
            return b.node.keystores.failures

        assert _serial(port, ca_file) == first.cert.serial_number
        opened = ssl.create_default_context(cafile=ca_file).wrap_socket(
            socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
        try:
            assert b.call(set_keystore, "second") == 0
            assert _serial(port, ca_file) == second.cert.serial_number
            assert _api_versions_answered(opened)  # opened before the change: still served
        finally:
            opened.close()
        # Another subject: refused, the listener keeps the second store.
        assert b.call(set_keystore, "other") == 1
        assert _serial(port, ca_file) == second.cert.serial_number
        # A store that does not open: refused the same way.
        assert b.call(set_keystore, "first", "wrong") == 2
        assert _serial(port, ca_file) == second.cert.serial_number
        # The dynamic settings deleted: server.properties' store again.
        assert b.call(set_keystore, None) == 2
        assert _serial(port, ca_file) == first.cert.serial_number
