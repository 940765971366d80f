"""A broker's TLS listeners take a new keystore without a restart, as Kafka's dynamic
``listener.name.<listener>.ssl.keystore.*`` update does for certificate rotation: when this
broker's per-broker dynamic configs for a listener's keystore change in the metadata image,
the store is loaded and checked (same subject and subject alternative names as before,
kraft.server.tls.reload_keystore) and put into the listener's live TLS context, so handshakes
from then on present it; connections already open keep theirs. The controller cannot read a
broker's files: a store that does not load or does not match is refused here, with an error
line, and the listener keeps the store it had (``failures`` counts them). Deleting the dynamic
settings goes back to server.properties'.

A controller listener's keystore is replaced the same way (Kafka's controllers take the same
dynamic update): ``ControllerKeystores`` looks at the controller's image once a second; the
contexts this node dials the other controllers with present the new store too."""

from __future__ import annotations

import asyncio
import logging

from kraft.errors import ConfigError
from kraft.metadata.broker_config_defs import KEYSTORE_KEYS
from kraft.metadata.configs import BROKER
from kraft.server.tls import keystore_chain, reload_keystore

log = logging.getLogger("kraft.broker")


class _Listener:
    __slots__ = ("ctx", "chain", "applied", "clients")

    def __init__(self, ctx, chain: bytes, clients):
        self.ctx, self.chain, self.applied, self.clients = ctx, chain, {}, tuple(clients)


class KeystoreReload:
    def __init__(self, cfg, contexts: dict, client_contexts: dict | None = None):
        """``contexts``: listener name -> its server SSLContext (None: no TLS, ignored);
        ``client_contexts``: listener name -> the context this node dials it with (it presents
        the same keystore to the other nodes)."""
        self.cfg = cfg
        self.failures = 0
        self.listeners = {name: _Listener(ctx, keystore_chain(cfg.given, name), [
                              c for c in [(client_contexts or {}).get(name)] if c is not None])
                          for name, ctx in contexts.items() if ctx is not None}

    def on_image(self, image) -> None:
        if not self.listeners:
            return
        dynamic = image.configs.config(BROKER, str(self.cfg.node_id))
        for name, entry in self.listeners.items():
            prefix = f"listener.name.{name.lower()}."
            wanted = {k: v for k, v in dynamic.items() if k.startswith(prefix) and k[len(prefix):] in KEYSTORE_KEYS}
            if wanted == entry.applied:
                continue
            entry.applied = wanted
            try:
                entry.chain = reload_keystore(entry.ctx, {**self.cfg.given, **wanted}, name, entry.chain,
                                              also=entry.clients)
            except ConfigError as exc:
                self.failures += 1
                log.error("node %d: listener %s keeps its keystore: %s", self.cfg.node_id, name, exc)
                continue
            log.info("node %d: listener %s reloaded its keystore (%s)", self.cfg.node_id, name,
                     ", ".join(sorted(wanted)) or "server.properties")


#: How often a controller listener looks for a changed keystore in the controller's image.
CONTROLLER_CHECK_S = 1.0


class ControllerKeystores:
    """The controller listener's ``KeystoreReload``, driven by a timer (the controller applies
    records without telling anyone; a comparison of a few configs a second costs nothing)."""

    def __init__(self, cfg, listener: str, ctx, dial_contexts, image):
        self.reload = KeystoreReload(cfg, {listener: ctx}, None)
        self.reload.listeners[listener].clients = tuple(dial_contexts)
        self.image = image
        self._timer = None

    @property
    def failures(self) -> int:
        return self.reload.failures

    def start(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(CONTROLLER_CHECK_S, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        try:
            image = self.image()
            if image is not None:
                self.reload.on_image(image)
        except Exception:  # a bug here must not stop the timer
            log.exception("controller listener keystore check failed")
        self.start()
