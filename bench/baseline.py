"""The obvious approach a user would write, as the benchmark's point of comparison.

The official S3 Encryption Client (``amazon-s3-encryption-client-python``) with a KMS
keyring, one encrypted object per memory file, and the six commands written the
straightforward way: check, then act, one request after another. It binds the tenant
(not the path) as encryption context, so a rename can copy objects server-side. It is a
fair, competent baseline, not a straw man: batch deletes, server-side copies, paginated
listings. Its strings are close to the contract's, not checked against it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from s3_encryption import S3EncryptionClient, S3EncryptionClientConfig
from s3_encryption.materials.kms_keyring import KmsKeyring

from s3memory import format_size


def _missing(error: ClientError) -> bool:
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404


class ObviousMemory:
    def __init__(
        self, *, bucket: str, user_id: str, s3_client: Any, s3_client_to_wrap: Any, kms_client: Any, kms_key_id: str
    ) -> None:
        self.bucket, self.user_id = bucket, user_id
        self.s3 = s3_client  # plain requests (HEAD, LIST, COPY, DELETE)
        keyring = KmsKeyring(kms_client=kms_client, kms_key_id=kms_key_id)
        # The official client hooks the client it wraps, so it gets a client of its own.
        self.encrypted = S3EncryptionClient(
            wrapped_s3_client=s3_client_to_wrap, config=S3EncryptionClientConfig(keyring=keyring)
        )
        self.context = {"tenant": user_id}

    def _key(self, path: str) -> str:
        return f"{self.user_id}/memories/{path[len('/memories/') :]}" if path != "/memories" else ""

    def _exists(self, key: str) -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as error:
            if _missing(error):
                return False
            raise

    def _list(self, prefix: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend(page.get("Contents", []))
        return found

    def _read(self, key: str) -> str:
        response = self.encrypted.get_object(Bucket=self.bucket, Key=key, EncryptionContext=self.context)
        return str(response["Body"].read().decode())

    def _write(self, key: str, text: str) -> None:
        self.encrypted.put_object(Bucket=self.bucket, Key=key, Body=text.encode(), EncryptionContext=self.context)

    def view(self, path: str) -> str:
        key = self._key(path)
        if key and self._exists(key):
            lines = self._read(key).split("\n")
            return f"Here's the content of {path} with line numbers:\n" + "\n".join(
                f"{i:>6}\t{line}" for i, line in enumerate(lines, 1)
            )
        prefix = (key + "/") if key else f"{self.user_id}/memories/"
        objects = self._list(prefix)
        if key and not objects:
            raise FileNotFoundError(path)
        rows = [f"{format_size(sum(o['Size'] for o in objects))}\t{path}"]
        rows += [f"{format_size(o['Size'])}\t{path}/{o['Key'][len(prefix) :]}" for o in objects]
        return "Here're the files and directories up to 2 levels deep in {path}:\n" + "\n".join(rows)

    def create(self, path: str, text: str) -> str:
        key = self._key(path)
        if self._exists(key) or self._list(key + "/"):
            raise FileExistsError(path)
        self._write(key, text)
        return f"File created successfully at: {path}"

    def str_replace(self, path: str, old: str, new: str) -> str:
        key = self._key(path)
        if not self._exists(key):
            raise FileNotFoundError(path)
        content = self._read(key)
        if content.count(old) != 1:
            raise ValueError("old_str must occur exactly once")
        self._write(key, content.replace(old, new))
        return "The memory file has been edited."

    def insert(self, path: str, line: int, text: str) -> str:
        key = self._key(path)
        if not self._exists(key):
            raise FileNotFoundError(path)
        lines = self._read(key).split("\n")
        lines.insert(line, text)
        self._write(key, "\n".join(lines))
        return f"The file {path} has been edited."

    def delete(self, path: str) -> str:
        key = self._key(path)
        if self._exists(key):
            self.encrypted.delete_object(Bucket=self.bucket, Key=key)
        else:
            keys = [o["Key"] for o in self._list(key + "/")]
            if not keys:
                raise FileNotFoundError(path)
            for start in range(0, len(keys), 1000):
                batch = [{"Key": k} for k in keys[start : start + 1000]]
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        return f"Successfully deleted {path}"

    def rename(self, old_path: str, new_path: str) -> str:
        old, new = self._key(old_path), self._key(new_path)
        if self._exists(new) or self._list(new + "/"):
            raise FileExistsError(new_path)
        sources = [old] if self._exists(old) else [o["Key"] for o in self._list(old + "/")]
        if not sources:
            raise FileNotFoundError(old_path)
        for source in sources:
            target = new + source[len(old) :]
            self.s3.copy_object(Bucket=self.bucket, Key=target, CopySource={"Bucket": self.bucket, "Key": source})
        for start in range(0, len(sources), 1000):
            batch = [{"Key": k} for k in sources[start : start + 1000]]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        return f"Successfully renamed {old_path} to {new_path}"
