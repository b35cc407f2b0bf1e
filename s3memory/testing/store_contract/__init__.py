"""The contract of an object store, as classes of pytest tests: :class:`ObjectStoreContract`.

Imported by :mod:`s3memory.testing`, where store authors find it (``from s3memory.testing
import ObjectStoreContract``); the fixtures that mock AWS are there, the contract is here.
The tests use only the store under test: no AWS, no moto.

The contract is cut by capability, as fsspec's shipped abstract tests are, one class (and
module) each, all on :class:`StoreContractBase` (``_base``: the ``store`` fixture,
``lacks``, :meth:`StoreContractBase.unless_lacking`):

- :class:`StoreReadWriteContract` (``_read_write``): get, head and put, metadata,
  ``max_bytes``, tags, the store's identity;
- :class:`StorePreconditionsContract` (``_preconditions``): ``if_match`` and
  ``if_none_match`` on put, copy and delete;
- :class:`StoreCopyContract` (``_copy``): copy;
- :class:`StoreListContract` (``_list``): listing by prefix, ``limit``, pages;
- :class:`StoreDeleteContract` (``_delete``): delete and purge;
- :class:`StoreVersionsContract` (``_versions``): list, get, head and delete versions.

:class:`ObjectStoreContract` combines them all: the suite every store of s3memory passes.
A store that offers only some capabilities subclasses those classes instead.

A store declares in ``lacks`` the capabilities (:data:`STORE_CAPABILITIES`) it does not
have. A test that needs one calls :meth:`StoreContractBase.unless_lacking` first, which
makes the test a strict expected failure on such a store: its body still runs, a failure
is reported as expected (``XFAIL``), and a pass fails the test (``[XPASS(strict)]``),
because then the store has the capability and its declaration is stale.
"""

from __future__ import annotations

from ._base import STORE_CAPABILITIES, StoreContractBase
from ._copy import StoreCopyContract
from ._delete import StoreDeleteContract
from ._list import StoreListContract
from ._preconditions import StorePreconditionsContract
from ._read_write import StoreReadWriteContract
from ._versions import StoreVersionsContract

__all__ = [
    "STORE_CAPABILITIES",
    "ObjectStoreContract",
    "StoreContractBase",
    "StoreCopyContract",
    "StoreDeleteContract",
    "StoreListContract",
    "StorePreconditionsContract",
    "StoreReadWriteContract",
    "StoreVersionsContract",
]


# pytest collects a base class's tests before its subclass's (in reverse method resolution
# order), so the capabilities are listed last first: the tests run reads first, versions last.
class ObjectStoreContract(
    StoreVersionsContract,
    StoreDeleteContract,
    StoreListContract,
    StoreCopyContract,
    StorePreconditionsContract,
    StoreReadWriteContract,
):
    """The contract of :class:`~s3memory.stores.ObjectStore`, as pytest tests to subclass:
    every capability class at once.

    Every store s3memory ships passes it (``S3Store`` on moto and on radosgw 16 lacks the
    three conditional capabilities, which those servers ignore; real S3 has them; a store,
    or a bucket, that keeps no versions lacks ``versions``). Subclass it in a test
    module under a name pytest collects (``Test...``), define a ``store`` fixture returning a
    fresh, empty store, and list in ``lacks`` what the store cannot do (see
    :data:`STORE_CAPABILITIES`), each with the reason. The tests of those capabilities then
    run as strict expected failures: a failure is reported as ``XFAIL``, and a pass fails the
    test (``[XPASS(strict)]``, with the reason), so a declaration the store has outgrown is
    noticed and removed::

        import pytest
        from s3memory.testing import ObjectStoreContract

        class TestMyStore(ObjectStoreContract):
            lacks = {"delete_if_match": "the backend has no conditional delete"}

            @pytest.fixture
            def store(self, tmp_path):
                return MyStore(tmp_path)

    A store with only some capabilities subclasses the classes of those instead, with the
    same ``store`` fixture and ``lacks`` (e.g. ``class TestMyStore(StoreReadWriteContract,
    StoreListContract, StoreDeleteContract)``).

    The tests use keys under ``t/``, ``t2/``, ``tt/`` and ``u/``, and write at most a few
    thousand small objects (listing and deleting more than one page of 1,000). The tests of
    versions are named ``test_versions_...``, and none of them needs a precondition, so a
    fixture may give them a versioned bucket and the other tests an unversioned one (as on
    a server that refuses conditional writes on a versioned bucket). No class of the
    contract has a ``Test`` prefix, so pytest never collects one by itself, nor where it is
    imported.
    """
