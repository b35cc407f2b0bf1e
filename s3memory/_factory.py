"""Assembles an :class:`EncryptedMemory` from the public options (no anthropic import)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast, get_args, overload

from ._core.access import AccessLog
from ._core.limits import Limits
from ._core.memory import EncryptedMemory
from ._core.mounts import Mount, MountedMemory, check_mounts
from ._core.protocol import Memory
from ._core.quarantine import DEFAULT_INSTRUCTION_POLICY, InstructionPolicy
from ._crypto.cache import KeyCache, process_key_cache
from ._crypto.keychain import TenantKeychain
from ._crypto.keyring import Keyring, KmsKeyring, TenantKeyring
from ._crypto.master import KmsMasterKey, LocalMasterKey, MasterKey
from ._crypto.provenance import DEFAULT_ACTOR, validate_actor
from ._errors import ConfigurationError
from ._layout import TenantLayout
from ._paths import ROOT, validate_tenant
from .stores import ObjectStore, S3Store

if TYPE_CHECKING:
    from typing_extensions import Unpack

KeyMode = Literal["tenant", "kms"]
SensitiveDataPolicy = Literal["refuse", "redact", "allow"]
KEY_MODES: tuple[KeyMode, ...] = get_args(KeyMode)
SENSITIVE_DATA_POLICIES: tuple[SensitiveDataPolicy, ...] = get_args(SensitiveDataPolicy)
DEFAULT_SENSITIVE_DATA: SensitiveDataPolicy = "refuse"


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
    configured as ``s3memory._aws.clients.client_config`` says, shared as the default S3
    client is (``s3memory._aws.shared.kms_client``)."""
    from ._aws.shared import kms_client

    region = getattr(getattr(s3_client, "meta", None), "region_name", None)
    return kms_client(region_name=region, timeout=timeout)


#: The one list of the options' defaults: each option not given is the value here, else None;
#: ``user_id`` has none (:func:`open_memory` requires it). :func:`open_memory`'s signature is
#: made of :class:`MemoryOptions` and these, and :class:`~s3memory.Settings` starts from them.
OPTION_DEFAULTS: MemoryOptions = {
    "prefix": "",
    "key_mode": "tenant",
    "encrypt_names": False,
    "sensitive_data": DEFAULT_SENSITIVE_DATA,
    "track_access": False,
    "actor": DEFAULT_ACTOR,
    "instruction_policy": DEFAULT_INSTRUCTION_POLICY,
}
REQUIRED_OPTION = "user_id"
#: Every option but the required one, with its default.
_EVERY_DEFAULT = cast(
    MemoryOptions,
    {name: OPTION_DEFAULTS.get(name) for name in MemoryOptions.__annotations__ if name != REQUIRED_OPTION},
)


def _with_defaults(options: Mapping[str, Any]) -> MemoryOptions:
    """``options`` and the default of each option not given; refused with the ``TypeError``
    Python raises for a call of :func:`open_memory` with a name that is not an option, or
    without ``user_id``."""
    unknown = next((name for name in options if name not in MemoryOptions.__annotations__), None)
    if unknown is not None:
        raise TypeError(f"open_memory() got an unexpected keyword argument {unknown!r}")
    if REQUIRED_OPTION not in options:
        raise TypeError(f"open_memory() missing 1 required keyword-only argument: {REQUIRED_OPTION!r}")
    return cast(MemoryOptions, {**_EVERY_DEFAULT, **options})


F = TypeVar("F", bound=Callable[..., Any])


def _taking_each_option(function: F) -> F:
    """``function(*, mounts=None, **options)`` described as taking each option by name, with its
    type and default (``inspect.signature``, ``help()``, ``typing.get_type_hints``): the
    signature :func:`open_memory` has, made of :class:`MemoryOptions` and
    :data:`OPTION_DEFAULTS` rather than written a third time."""
    described: Any = function
    own = dict(described.__annotations__)  # mounts, options, return
    hints = {name: getattr(hint, "__forward_arg__", hint) for name, hint in MemoryOptions.__annotations__.items()}
    hints["mounts"] = own["mounts"]
    keyword, empty = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty
    defaults: dict[str, Any] = {**_EVERY_DEFAULT, "mounts": None}
    parameters = [
        inspect.Parameter(name, keyword, default=defaults.get(name, empty), annotation=hint)
        for name, hint in hints.items()
    ]
    described.__signature__ = inspect.Signature(parameters, return_annotation=own["return"])
    described.__annotations__ = {**hints, "return": own["return"]}
    return function


def _open_store(options: MemoryOptions, *, shown_root: str = ROOT, read_only: bool = False) -> EncryptedMemory:
    """:func:`open_memory` for one store (the own one, or one mounted at ``shown_root``), with
    every option given (:func:`_with_defaults`)."""
    store, bucket, s3_client, timeout = options["store"], options["bucket"], options["s3_client"], options["timeout"]
    master_key, kms_key_id, kms_client = options["master_key"], options["kms_key_id"], options["kms_client"]
    key_mode, encrypt_names, sensitive_data = options["key_mode"], options["encrypt_names"], options["sensitive_data"]
    layout = TenantLayout(options["user_id"], options["prefix"])
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
    key_cache = options["key_cache"]
    cache = key_cache if key_cache is not None else process_key_cache()
    if not isinstance(encrypt_names, bool):
        raise ConfigurationError("encrypt_names must be True or False")

    keyring: Keyring
    master: MasterKey
    if key_mode == "tenant":
        if (master_key is None) == (kms_key_id is None):
            raise ConfigurationError("tenant key mode needs exactly one of master_key=... or kms_key_id=...")
        if master_key is not None:
            master = LocalMasterKey(master_key)
        else:
            assert kms_key_id is not None
            master = KmsMasterKey(kms_client or default_kms_client(s3_client, timeout=timeout), kms_key_id)
        keychain = TenantKeychain(store, layout, master, cache)
        keyring = keychain.tenant_keyring()
    elif key_mode == "kms":
        if kms_key_id is None or master_key is not None:
            raise ConfigurationError('key_mode="kms" needs kms_key_id=... and no master_key')
        kms = kms_client or default_kms_client(s3_client, timeout=timeout)
        keyring = KmsKeyring(kms_client=kms, key_id=kms_key_id, cache=cache)
        # The KMS key wraps the names and history keys.
        keychain = TenantKeychain(store, layout, KmsMasterKey(kms, kms_key_id), cache)
    else:
        raise ConfigurationError(f'key_mode must be "tenant" or "kms", not {key_mode!r}')
    if encrypt_names:
        prefetch = keyring.prepare if isinstance(keyring, TenantKeyring) else None
        layout = replace(layout, names=keychain.name_cipher(prefetch=prefetch))
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
    track_access = options["track_access"]
    if not isinstance(track_access, bool):
        raise ConfigurationError("track_access must be True or False")
    return EncryptedMemory(
        store=store,
        layout=layout,
        keyring=keyring,
        limits=options["limits"],
        screen_text=screen,
        screen_edit=screen_edit,
        track_access=track_access,
        access_log=options["access_log"],
        actor=validate_actor(options["actor"]),
        instruction_policy=options["instruction_policy"],
        shown_root=shown_root,
        read_only=read_only,
        history_key=keychain.history_key(layout),
    )


@overload
def open_memory(*, mounts: None = None, **options: Unpack[MemoryOptions]) -> EncryptedMemory: ...
@overload
def open_memory(*, mounts: Sequence[Mount], **options: Unpack[MemoryOptions]) -> MountedMemory: ...
# Python sees the options as **options; inspect.signature, help() and typing.get_type_hints
# see each of them by name, with its type and default (_taking_each_option).
@_taking_each_option
def open_memory(*, mounts: Sequence[Mount] | None = None, **options: Unpack[MemoryOptions]) -> Memory:
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
    given = _with_defaults(options)  # the own store and each mount are opened with them
    if mounts is None:
        return _open_store(given)
    checked = check_mounts(mounts, validate_tenant(given["user_id"]))
    if given["kms_key_id"] is not None and given["kms_client"] is None:
        given["kms_client"] = default_kms_client(given["s3_client"], timeout=given["timeout"])
    own = _open_store(given)
    # Every mount on the very same store (one client, one connection pool) and KMS client.
    shared: MemoryOptions = {**given, "store": own.store, "bucket": None, "s3_client": None}
    mounted = []
    for mount in checked:
        mount_options: MemoryOptions = {
            **shared,
            "user_id": mount.user_id,
            "track_access": bool(given["track_access"]) and not mount.read_only,
        }
        if mount.encrypt_names is not None:
            mount_options["encrypt_names"] = mount.encrypt_names
        mounted.append(
            (mount, _open_store(mount_options, shown_root=mount.path.rstrip("/"), read_only=mount.read_only))
        )
    return MountedMemory(own, mounted)


#: A user id that passes validation, for checking options before any run names a user.
_PROBE_USER = "s3memory-options-check"


class UserMemories:
    """The memory of whichever user a run names, for adapters that serve many users.

    Give it the options of :func:`open_memory` without ``user_id`` (and ``mounts=`` if every
    user mounts the same stores), or ``opener``, a function from a user id to that user's
    memory (to vary the options per user: an ``actor``, a quota). ``memories.open(user_id)``
    opens the user's memory: about 0.06 ms and no request, since the store with its S3 client,
    the KMS client, the key cache and the access log are made once here and shared by every
    user (a tenant's keys stay its own: each memory unwraps its tenant's key). The options
    are checked once, here: a wrong key or an unknown option fails at construction, not at
    the first user's first command.
    """

    def __init__(
        self,
        opener: Callable[[str], Memory] | None = None,
        *,
        mounts: Sequence[Mount] | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        if opener is not None:
            if options or mounts is not None:
                raise TypeError("give either an opener or the options of open_memory, not both")
            self._opener = opener
            self._actor_opener: Callable[[str, str], Memory] | None = None
            return
        if REQUIRED_OPTION in options:
            raise TypeError("UserMemories opens each run's user: give the options without user_id")
        given = _with_defaults({**options, REQUIRED_OPTION: _PROBE_USER})
        if given["store"] is None and given["bucket"] is not None:
            # One store, one connection pool, for every user (as the mounts of one memory share one).
            probe = _open_store(given)
            given = cast(MemoryOptions, {**given, "store": probe.store, "bucket": None, "s3_client": None})
        if given["kms_key_id"] is not None and given["kms_client"] is None:
            given["kms_client"] = default_kms_client(given["s3_client"], timeout=given["timeout"])
        if given["key_cache"] is None:
            given["key_cache"] = process_key_cache()
        shared = cast(MemoryOptions, {name: value for name, value in given.items() if name != REQUIRED_OPTION})

        def open_for(user_id: str, actor: str | None = None) -> Memory:
            options_of_user: MemoryOptions = {**shared, "user_id": user_id}
            if actor is not None:
                options_of_user["actor"] = actor
            if mounts is None:
                return open_memory(**options_of_user)
            return open_memory(mounts=mounts, **options_of_user)

        open_for(_PROBE_USER)  # every option checked now, not at the first user's first command
        self._opener = open_for
        self._actor_opener = open_for

    def sample(self) -> Memory:
        """The memory of a placeholder user, for checking what is the same for every user
        (the root, the limits, a mount's access) before any run names one; sends no request."""
        return self._opener(_PROBE_USER)

    def open(self, user_id: str, *, actor: str | None = None) -> Memory:
        """The memory of ``user_id`` (validated as :func:`open_memory` validates it), its
        changes made as ``actor`` if given (who a request's history names), else as the
        options said.

        Raises:
            ConfigurationError: ``user_id`` is not a valid user id, or ``actor`` is not a
                valid actor.
            TypeError: ``actor`` with an ``opener`` (which decides the options itself).
        """
        if actor is None:
            return self._opener(validate_tenant(user_id))
        if self._actor_opener is None:
            raise TypeError("actor= needs UserMemories built from options, not from an opener")
        return self._actor_opener(validate_tenant(user_id), validate_actor(actor))


def memory_from(memory: Memory | None, options: MemoryOptions) -> Memory:
    """What a tool adapter for one user runs on: ``memory=`` as given, or one opened from the
    options of :func:`open_memory` (never both)."""
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
