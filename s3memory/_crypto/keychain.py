"""One tenant's key documents, handed out from what they share (:class:`TenantKeychain`).

The tenant key (``keyring.TenantKeyring``), the names key (``names.NameCipher``) and the
history key (``historykey.HistoryKey``) are each one key document of the tenant
(``keydocs``): stored in the same store under the tenant's internal prefix, wrapped by the
same master key, kept in the same cache, bound to the same deployment. The keychain holds
those once, so that the three are built alike and a fourth would be too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._layout import HISTORY_KEY, NAMES_KEY, TENANT_KEY, TenantLayout
from ..stores import ObjectStore
from .cache import KeyCache
from .historykey import HistoryKey
from .keyring import TenantKeyring
from .master import MasterKey
from .names import NameCipher


@dataclass(frozen=True)
class TenantKeychain:
    """The key documents of the tenant of ``layout`` in ``store``, wrapped by ``master``."""

    store: ObjectStore
    layout: TenantLayout
    master: MasterKey
    cache: KeyCache

    def tenant_keyring(self) -> TenantKeyring:
        """The tenant key, which wraps every data key in tenant-key mode."""
        return TenantKeyring(
            store=self.store,
            tenant=self.layout.tenant,
            tenant_key_object=self.layout.key_document(TENANT_KEY),
            master=self.master,
            cache=self.cache,
            store_identity=self.store.identity,
            prefix=self.layout.prefix,
            files_prefix=self.layout.memory_prefix,
        )

    def name_cipher(self, *, prefetch: Callable[[], None] | None = None) -> NameCipher:
        """The names key, which seals file names; ``prefetch`` is run beside its first load
        (a cold process fetches the tenant key alongside the names key, not after it)."""
        return NameCipher(
            store=self.store,
            tenant=self.layout.tenant,
            key_object=self.layout.key_document(NAMES_KEY),
            files_prefix=self.layout.memory_prefix,
            master=self.master,
            cache=self.cache,
            store_identity=self.store.identity,
            prefetch=prefetch,
            prefix=self.layout.prefix,
        )

    def history_key(self, files: TenantLayout) -> HistoryKey:
        """The history key, which seals provenance in record names; ``files`` is the layout
        the tenant's files are named by (with the name cipher, if names are encrypted),
        which tells a sealed record's name from a plain one."""
        return HistoryKey(
            store=self.store,
            tenant=self.layout.tenant,
            key_object=self.layout.key_document(HISTORY_KEY),
            master=self.master,
            cache=self.cache,
            store_identity=self.store.identity,
            records_prefix=files.history_prefix,
            is_sealed_record=files.is_sealed_name_record,
            prefix=self.layout.prefix,
        )
