"""Assembles an :class:`EncryptedMemory` from the public options (no anthropic import)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast, overload

from ._core.access import AccessLog
from ._core.memory import EncryptedMemory, Limits
from ._core.mounts import Mount, MountedMemory, check_mounts
from ._core.protocol import Memory
from ._core.quarantine import DEFAULT_INSTRUCTION_POLICY, InstructionPolicy
from ._crypto.historykey import HistoryKey
from ._crypto.keydocs import KeyCache, KmsMasterKey, LocalMasterKey, process_key_cache
from ._crypto.keyring import Keyring, KmsKeyring, TenantKeyring
from ._crypto.names import NameCipher
from ._crypto.provenance import DEFAULT_ACTOR, validate_actor
from ._errors import ConfigurationError
from ._layout import HISTORY_KEY, NAMES_KEY, TENANT_KEY, TenantLayout
from ._paths import ROOT, validate_tenant
from .stores import ObjectStore, S3Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

KeyMode = Literal["tenant", "kms"]
SensitiveDataPolicy = Literal["refuse", "redact", "allow"]


class MemoryOptions(TypedDict, total=False):
    """The keyword options of :func:`open_memory`, for type checkers: ``S3MemoryTool(...)``
    and ``AsyncS3MemoryTool(...)`` take them too (``user_id`` is required there as well)."""

    user_id: str
    bucket: str | None
    s3_client: Any | None
    store: ObjectStore | None
    prefix: str
    master_key: bytes | None
    kms_key_id: str | None
    kms_client: Any | None
    key_mode: KeyMode
    limits: Limits | None
    key_cache: KeyCache | None
    encrypt_names: bool
    sensitive_data: SensitiveDataPolicy | Callable[[str], str]
    track_access: bool
    timeout: float | None
    access_log: AccessLog | None
    actor: str
    instruction_policy: InstructionPolicy


def default_kms_client(s3_client: Any | None = None, *, timeout: float | None = None) -> Any:
    """A KMS client in the S3 client's region (else the region ``resolve_region`` finds),
    configured as ``s3memory._aws.clients.client_config`` says."""
    from ._aws.clients import new_client

    region = getattr(getattr(s3_client, "meta", None), "region_name", None)
    return new_client("kms", region_name=region, timeout=timeout)


def _open_store(
    *,
    user_id: str,
    bucket: str | None = None,
    s3_client: Any | None = None,
    store: ObjectStore | None = None,
    prefix: str = "",
    master_key: bytes | None = None,
    kms_key_id: str | None = None,
    kms_client: Any | None = None,
    key_mode: KeyMode = "tenant",
    limits: Limits | None = None,
    key_cache: KeyCache | None = None,
    encrypt_names: bool = False,
    sensitive_data: SensitiveDataPolicy | Callable[[str], str] = "refuse",
    track_access: bool = False,
    timeout: float | None = None,
    access_log: AccessLog | None = None,
    actor: str = DEFAULT_ACTOR,
    instruction_policy: InstructionPolicy = DEFAULT_INSTRUCTION_POLICY,
    shown_root: str = ROOT,
    read_only: bool = False,
) -> EncryptedMemory:
    """:func:`open_memory` for one store (the own one, or one mounted at ``shown_root``)."""
    layout = TenantLayout(user_id, prefix)
    if timeout is not None:
        from ._aws.clients import check_timeout

        timeout = check_timeout(timeout)
    if store is None:
        if bucket is None:
            raise ConfigurationError("give bucket=... (with s3_client=...) or store=...")
        if s3_client is None:
            from .stores._s3 import default_s3_client

            s3_client = default_s3_client(timeout=timeout)
        store = S3Store(bucket, s3_client)
    elif bucket is not None:
        raise ConfigurationError("give either bucket=... or store=..., not both")
    cache = key_cache if key_cache is not None else process_key_cache()
    if not isinstance(encrypt_names, bool):
        raise ConfigurationError("encrypt_names must be True or False")

    keyring: Keyring
    if key_mode == "tenant":
        if (master_key is None) == (kms_key_id is None):
            raise ConfigurationError("tenant key mode needs exactly one of master_key=... or kms_key_id=...")
        if master_key is not None:
            master: LocalMasterKey | KmsMasterKey = LocalMasterKey(master_key)
        else:
            assert kms_key_id is not None
            master = KmsMasterKey(kms_client or default_kms_client(s3_client, timeout=timeout), kms_key_id)
        keyring = TenantKeyring(
            store=store,
            tenant=layout.tenant,
            tenant_key_object=layout.key_document(TENANT_KEY),
            master=master,
            cache=cache,
            store_identity=store.identity,
            prefix=layout.prefix,
            files_prefix=layout.memory_prefix,
        )
    elif key_mode == "kms":
        if kms_key_id is None or master_key is not None:
            raise ConfigurationError('key_mode="kms" needs kms_key_id=... and no master_key')
        kms = kms_client or default_kms_client(s3_client, timeout=timeout)
        keyring = KmsKeyring(kms_client=kms, key_id=kms_key_id, cache=cache)
        master = KmsMasterKey(kms, kms_key_id)  # wraps the names key, if names are encrypted
    else:
        raise ConfigurationError(f'key_mode must be "tenant" or "kms", not {key_mode!r}')
    if encrypt_names:
        names = NameCipher(
            store=store,
            tenant=layout.tenant,
            key_object=layout.key_document(NAMES_KEY),
            files_prefix=layout.memory_prefix,
            master=master,
            cache=cache,
            store_identity=store.identity,
            # A cold process fetches the tenant key alongside the names key, not after it.
            prefetch=keyring.prepare if isinstance(keyring, TenantKeyring) else None,
            prefix=layout.prefix,
        )
        layout = replace(layout, names=names)
    screen: Callable[[str], str] | None = None
    screen_edit: Callable[[str, str], str] | None = None
    if isinstance(sensitive_data, str):
        from ._screening.secrets import SecretGuard

        if sensitive_data != "allow":
            guard = SecretGuard(sensitive_data)
            screen, screen_edit = guard.apply, guard.screen_edit
    elif callable(sensitive_data):
        # A guard of the application's own screens whole edited files if it can (screen_edit).
        screen = sensitive_data
        candidate = getattr(sensitive_data, "screen_edit", None)
        screen_edit = candidate if callable(candidate) else None
    else:
        raise ConfigurationError('sensitive_data must be "refuse", "redact", "allow" or a callable')
    if not isinstance(track_access, bool):
        raise ConfigurationError("track_access must be True or False")
    return EncryptedMemory(
        store=store,
        layout=layout,
        keyring=keyring,
        limits=limits,
        screen_text=screen,
        screen_edit=screen_edit,
        track_access=track_access,
        access_log=access_log,
        actor=validate_actor(actor),
        instruction_policy=instruction_policy,
        shown_root=shown_root,
        read_only=read_only,
        history_key=HistoryKey(
            store=store,
            tenant=layout.tenant,
            key_object=layout.key_document(HISTORY_KEY),
            master=master,
            cache=cache,
            store_identity=store.identity,
            records_prefix=layout.history_prefix,
            is_sealed_record=layout.is_sealed_name_record,
            prefix=layout.prefix,
        ),
    )


@overload
def open_memory(*, mounts: None = None, **options: Unpack[MemoryOptions]) -> EncryptedMemory: ...
@overload
def open_memory(*, mounts: Sequence[Mount], **options: Unpack[MemoryOptions]) -> MountedMemory: ...
# The overloads take MemoryOptions, where user_id is optional (a tool may get memory=
# instead); here user_id is required, which mypy counts as not accepting every call.
def open_memory(  # type: ignore[misc]
    *,
    user_id: str,
    bucket: str | None = None,
    s3_client: Any | None = None,
    store: ObjectStore | None = None,
    prefix: str = "",
    master_key: bytes | None = None,
    kms_key_id: str | None = None,
    kms_client: Any | None = None,
    key_mode: KeyMode = "tenant",
    limits: Limits | None = None,
    key_cache: KeyCache | None = None,
    encrypt_names: bool = False,
    sensitive_data: SensitiveDataPolicy | Callable[[str], str] = "refuse",
    track_access: bool = False,
    timeout: float | None = None,
    access_log: AccessLog | None = None,
    actor: str = DEFAULT_ACTOR,
    instruction_policy: InstructionPolicy = DEFAULT_INSTRUCTION_POLICY,
    mounts: Sequence[Mount] | None = None,
) -> Memory:
    """Build the memory of one user.

    Args:
        user_id: the tenant; validated (ASCII letters, digits, ``. _ @ + = -``).
        bucket, s3_client: where to store (a default boto3 client if none is given).
        store: any :class:`ObjectStore` instead of S3 (``LocalDirStore``, ``InMemoryStore``).
        prefix: a bucket-wide key prefix ending in ``/`` (``""`` by default).
        master_key: 32 random bytes that wrap each tenant key (tenant mode).
        kms_key_id, kms_client: a KMS key that wraps each tenant key (tenant mode) or each
            object's data key (``key_mode="kms"``).
        key_mode: ``"tenant"`` (default; zero KMS calls per command once warm) or ``"kms"``
            (one KMS data key per object; readable by the official S3 Encryption Client).
        limits: size, path, view and quota limits.
        key_cache: where unwrapped keys are cached; by default one cache per process.
        encrypt_names: seal every file and directory name in the object keys (AES-SIV under a
            per-tenant names key, wrapped by the master key or, with ``key_mode="kms"``, by the
            KMS key), so the bucket's keys show no names; see ``s3memory._crypto.names`` for what is
            still visible and the shorter path limits. Choose it once per user: a memory
            written with it cannot be read without it, nor the other way round.
        sensitive_data: what to do with secrets (private keys, AWS keys, API tokens, JWTs,
            card numbers) in text the model writes: ``"refuse"`` (default; the command fails,
            naming the kind of secret), ``"redact"`` (replaced by ``[REDACTED: kind]``),
            ``"allow"``, or any callable taking and returning the text (e.g. a
            ``SecretGuard`` with your own detectors).
        track_access: record reads (one PUT per file per day and process, after a read that
            found the file) so that ``s3memory.expire_memories`` can find memories nobody reads.
        access_log: where ``track_access`` notes the reads already recorded today (one marker
            PUT per file per day); by default one log per process.
        timeout: seconds to connect and per read (5 by default), three attempts, for the S3
            and KMS clients s3memory builds when none is given; a client you pass keeps its
            own configuration.
        actor: who writes through this memory, recorded (sealed) with every change it makes
            (e.g. ``"session:abc"``, ``"user:42"``); ``"api"`` by default. The application
            names it; the model never does. See :meth:`EncryptedMemory.history`.
        instruction_policy: what to do with text the model writes that reads like
            instructions to a future session (memory poisoning: override attempts, orders to
            the assistant, exfiltration, role-play of system messages): ``"flag"`` (default;
            written, and the finding recorded with its provenance), ``"quarantine"`` (not
            written: held for review, see :meth:`EncryptedMemory.pending`), or ``"allow"``
            (not screened).

        mounts: other users' stores to show under ``/memories/{name}/`` (at most 8; see
            :class:`~s3memory.Mount`), opened with the same store, master or KMS key and
            options, each with its own tenant key, history and quota. Given (even empty), a
            :class:`~s3memory.MountedMemory` is returned instead of an :class:`EncryptedMemory`.
            A read-only mount records no reads.

    Raises:
        ConfigurationError: for an invalid user id, master key or combination of options.
    """
    # Every argument but ``mounts``, as given: the own store and each mount are opened with them.
    options = cast(MemoryOptions, {name: value for name, value in locals().items() if name != "mounts"})
    if mounts is None:
        return _open_store(**options)
    checked = check_mounts(mounts, validate_tenant(options["user_id"]))
    if options.get("kms_key_id") is not None and options.get("kms_client") is None:
        options["kms_client"] = default_kms_client(options.get("s3_client"), timeout=options.get("timeout"))
    own = _open_store(**options)
    # Every mount on the very same store (one client, one connection pool) and KMS client.
    shared: MemoryOptions = {**options, "store": own.store, "bucket": None, "s3_client": None}
    mounted = []
    for mount in checked:
        mount_options: MemoryOptions = {
            **shared,
            "user_id": mount.user_id,
            "track_access": bool(options.get("track_access", False)) and not mount.read_only,
        }
        if mount.encrypt_names is not None:
            mount_options["encrypt_names"] = mount.encrypt_names
        mounted.append(
            (mount, _open_store(**mount_options, shown_root=mount.path.rstrip("/"), read_only=mount.read_only))
        )
    return MountedMemory(own, mounted)


def memory_from(memory: Memory | None, options: MemoryOptions) -> Memory:
    """What a tool adapter runs on: ``memory=`` as given, or one opened from the options of
    :func:`open_memory` (never both)."""
    unknown = sorted(set(options) - set(MemoryOptions.__annotations__) - {"mounts"})
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    if memory is not None:
        if options:
            raise TypeError("give either memory=... or the options to build one, not both")
        return memory
    if "user_id" not in options:
        raise TypeError("give user_id=... (and where to store: bucket=... or store=...), or memory=...")
    return open_memory(**options)
