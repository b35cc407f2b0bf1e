"""The library logs what it did on ``logging.getLogger("s3memory")``, and never what the
memory holds: no path, no file name, no content, no secret, no user id."""

from __future__ import annotations

import logging

import pytest

from s3memory import InMemoryStore, SensitiveDataError, generate_master_key, open_memory, rotate_tenant_key

USER = "tenant-zq7"
SECRETS = ("AKIAZQ7ZQ7ZQ7ZQ7ZQ7Z",)
PRIVATE = ("diary-zq7", "plans-zq7", "moved-zq7", "tea-with-milk-zq7", USER, *SECRETS)


def test_events_at_info_and_never_a_path_content_or_user(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="s3memory")
    for encrypt_names in (False, True):
        memory = open_memory(
            user_id=USER, store=InMemoryStore(), master_key=generate_master_key(), encrypt_names=encrypt_names
        )
        memory.create("/memories/diary-zq7/plans-zq7.md", "tea-with-milk-zq7\n")
        with pytest.raises(SensitiveDataError):
            memory.create("/memories/diary-zq7/key.md", f"aws_access_key_id = {SECRETS[0]}\n")
        with pytest.raises(SensitiveDataError):
            memory.str_replace("/memories/diary-zq7/plans-zq7.md", "tea", f"key {SECRETS[0]}")
        memory.rename("/memories/diary-zq7", "/memories/moved-zq7")
        rotate_tenant_key(memory, retire_after=0)
        memory.delete("/memories/moved-zq7")
        memory.create("/memories/a.md", "x")
        memory.clear_all()
    messages = [record.getMessage() for record in caplog.records if record.name == "s3memory"]
    info = [m for m, r in zip(messages, caplog.records, strict=True) if r.levelno == logging.INFO]
    for expected in (
        "created a tenant key",
        "created a names key",
        "refused a write holding 1 secrets (AWS access key)",
        "renamed: 1 files moved",
        "rotated a tenant key",
        "deleted 1 objects",
        "cleared the memory of one tenant: 1 objects deleted",
    ):
        assert any(expected in m for m in info), (expected, info)
    for message in messages:
        for private in PRIVATE:
            assert private not in message, message


def test_a_failing_access_marker_logs_no_url(caplog: pytest.LogCaptureFixture) -> None:
    """The warning for an access that could not be recorded carries no exception: its cause is
    botocore's, whose text is the request's URL, with the tenant and file name in it."""
    from s3memory import StorageUnavailableError

    class FailingMarkers(InMemoryStore):
        def put(self, key: str, *args: object, **kwargs: object) -> str:
            if "/.s3memory/access/" in key:
                try:
                    raise TimeoutError(f'Read timeout on endpoint URL: "https://bucket.s3.amazonaws.com/{key}"')
                except TimeoutError as cause:
                    raise StorageUnavailableError("Error: Memory storage failed during put_object.") from cause
            return super().put(key, *args, **kwargs)  # type: ignore[arg-type]

    caplog.set_level(logging.DEBUG, logger="s3memory")
    memory = open_memory(user_id=USER, store=FailingMarkers(), master_key=generate_master_key(), track_access=True)
    memory.create("/memories/diary-zq7.md", "x")
    assert memory.view("/memories/diary-zq7.md").endswith("1\tx")  # bookkeeping never fails a read
    formatter = logging.Formatter("%(message)s")
    written = "\n".join(formatter.format(record) for record in caplog.records)  # with any traceback
    assert "could not record an access to a file" in written
    assert USER not in written and "diary-zq7" not in written and "Traceback" not in written
