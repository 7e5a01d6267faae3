"""Values too large for a DynamoDB item, as S3 objects the item points to.

The DynamoDB store keeps a run's texts in its items while they are small and moves larger
ones here: a journal chunk over ``INLINE_CHUNK_BYTES``, a run-item text (the input, the
result, an error) over ``INLINE_TEXT_BYTES``, a signal over ``INLINE_SIGNAL_BYTES``
(``runtime.store.dynamodb``). Why S3 and not items split across a transaction: an append has
no bound of its own (a wait loop can consume thousands of signals in one activation), while
a transaction holds at most 100 items and 4 MB; a key in one item keeps every append one
conditional write, whatever its size (docs/architecture.md, "Large values").

An object is written once, under a fresh key, before the item that points to it: the item's
conditional write is the commit. A writer whose commit loses deletes its objects; a process
that dies between the two leaves one object nothing points to. Objects are never
overwritten, so a process may cache what it read (``cache_bytes``).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from runtime.errors import LunaflowError

CACHE_BYTES = 32 * 1024 * 1024
PREFIX = "runs/"  # every object's key begins so (the functions' grant is limited to it)


def run_prefix(run_id: str) -> str:
    """Every object of a run lives under one prefix (a hash: run ids may hold any character)."""
    return f"{PREFIX}{hashlib.sha256(run_id.encode('utf-8')).hexdigest()[:32]}/"


class Blobs:
    def __init__(self, s3: Any, bucket: str, *, cache_bytes: int = CACHE_BYTES) -> None:
        self._s3 = s3
        self.bucket = bucket
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached = 0
        self._limit = cache_bytes
        self._lock = threading.Lock()

    def put(self, run_id: str, what: str, text: str) -> str:
        """Write ``text`` under a fresh key of the run's; returns the key."""
        key = f"{run_prefix(run_id)}{what}-{uuid.uuid4().hex}"
        self._s3.put_object(
            Bucket=self.bucket, Key=key, Body=text.encode("utf-8"), ContentType="application/json"
        )
        self._remember(key, text)
        return key

    def put_at(self, key: str, text: str) -> None:
        """Write ``text`` under ``key`` (code snapshots: one object per version, written once)."""
        self._s3.put_object(
            Bucket=self.bucket, Key=key, Body=text.encode("utf-8"), ContentType="application/json"
        )

    def find(self, key: str) -> str | None:
        """The text under ``key``, or None when there is none."""
        try:
            return self.get(key)
        except LunaflowError:
            return None

    def get(self, key: str) -> str:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as e:
            raise LunaflowError(
                f"value {key} is missing from bucket {self.bucket} ({e}); the table points to it, so the "
                "bucket lost an object: restore it from the bucket's versions"
            ) from e
        text = str(body.decode("utf-8"))
        self._remember(key, text)
        return text

    def delete(self, keys: Iterable[str]) -> None:
        """Best effort: objects a lost commit wrote (a leftover costs storage, not meaning)."""
        for key in keys:
            with self._lock:
                text = self._cache.pop(key, None)
                self._cached -= 0 if text is None else len(text)
            with contextlib.suppress(ClientError):
                self._s3.delete_object(Bucket=self.bucket, Key=key)

    def _remember(self, key: str, text: str) -> None:
        if len(text) > self._limit // 4:
            return
        with self._lock:
            if key in self._cache:
                return
            self._cache[key] = text
            self._cached += len(text)
            while self._cached > self._limit:
                _, old = self._cache.popitem(last=False)
                self._cached -= len(old)
