"""What every capability class of the store contract shares: :class:`StoreContractBase`.

The ``store`` fixture a subclass overrides, the ``lacks`` it declares (names from
:data:`STORE_CAPABILITIES`, checked when the subclass is defined) and
:meth:`StoreContractBase.unless_lacking`, which makes a test of a declared gap a strict
expected failure. No tests: those are in the capability classes beside this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from ...stores import ObjectStore

__all__ = ["STORE_CAPABILITIES", "StoreContractBase"]


STORE_CAPABILITIES = frozenset({"copy_if_match", "copy_if_none_match", "delete_if_match", "versions"})
"""What a subclass of the contract (:class:`~s3memory.testing.ObjectStoreContract`, or of its
capability classes) may declare its store ``lacks``:

- ``copy_if_match``: ``copy(..., if_match=etag)`` refuses a source whose ETag differs;
- ``copy_if_none_match``: ``copy(..., if_none_match=True)`` refuses an existing destination;
- ``delete_if_match``: ``delete(keys, if_match={...})`` keeps an object whose ETag differs
  (these three are tested by :class:`~s3memory.testing.StorePreconditionsContract`);
- ``versions``: the store keeps every version (``keeps_versions()`` is true): a write adds a
  version, a delete a delete marker, and ``list_versions``, ``get_version``,
  ``head_version`` and ``delete_version`` reach them (the tests named ``test_versions_...``,
  in :class:`~s3memory.testing.StoreVersionsContract`). A store that keeps none lists each
  current object once, as version ``NULL_VERSION``.
"""


class StoreContractBase:
    """The fixtures and helpers the store contract's capability classes share (no tests).

    A subclass defines a ``store`` fixture returning a fresh, empty store and lists in
    ``lacks`` what the store cannot do (see :data:`STORE_CAPABILITIES`), each with the
    reason; a test of such a capability calls :meth:`unless_lacking` first. Subclass the
    capability classes (or :class:`~s3memory.testing.ObjectStoreContract`, all of them),
    not this one, unless writing tests of your own that use :meth:`unless_lacking`.
    """

    lacks: ClassVar[Mapping[str, str]] = {}
    """Capabilities (names in :data:`STORE_CAPABILITIES`) the store lacks, each with why."""

    _request: pytest.FixtureRequest | None = None  # the running test's, for unless_lacking

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.lacks, Mapping):
            raise TypeError(f"{cls.__name__}.lacks must map capability names to reasons, not {cls.lacks!r}")
        unknown = sorted(set(cls.lacks) - STORE_CAPABILITIES)
        if unknown:
            known = ", ".join(sorted(STORE_CAPABILITIES))
            raise TypeError(f"{cls.__name__}.lacks names unknown capabilities {unknown}; known: {known}")

    @pytest.fixture
    def store(self) -> ObjectStore:
        """Override: a fresh, empty store for one test."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `store` fixture returning a fresh, empty ObjectStore"
        )

    @pytest.fixture(autouse=True)
    def _s3memory_contract_request(self, request: pytest.FixtureRequest) -> None:
        """Internal: keeps the running test's request, to which :meth:`unless_lacking` adds a mark."""
        self._request = request

    def unless_lacking(self, capability: str) -> None:
        """Make the running test a strict expected failure if the store lacks ``capability``.

        The test goes on either way. On a store that declares ``capability`` in ``lacks``, a
        failure of the rest of the test is reported as expected (``XFAIL``, with the declared
        reason), and a pass fails the test (``[XPASS(strict)]``): the store has the capability
        after all, and its declaration is stale.

        Raises:
            ValueError: ``capability`` is not in :data:`STORE_CAPABILITIES`.
        """
        if capability not in STORE_CAPABILITIES:
            raise ValueError(f"unknown store capability {capability!r}")
        if capability not in self.lacks:
            return
        reason = (
            f"the store lacks {capability}: {self.lacks[capability]} "
            f"(strict: should this test pass, the declaration in {type(self).__name__}.lacks is stale)"
        )
        if self._request is None:  # not in a test of this class (its autouse fixture did not run)
            pytest.xfail(reason)
        self._request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
