"""Texts in the DynamoDB store's items: inline while small, else an S3 object
(``runtime.store.blobs``) whose key the item holds under the attribute's name + ``REF``. The
object is written before the item that points to it; a write that loses its condition
deletes what it wrote.
"""

from __future__ import annotations

from typing import Any

from runtime.errors import LunaflowError
from runtime.store.blobs import Blobs
from runtime.store.dynamodb_layout import OLDER_CODE_REFUSED, REF


def _pointed(item: dict[str, Any] | None) -> set[str]:
    """The S3 keys an item points to (its ``*_ref`` attributes: a key, or a set of them)."""
    keys: set[str] = set()
    for k, v in (item or {}).items():
        if k.endswith(REF):
            keys |= {str(v["S"])} if "S" in v else {str(x) for x in v.get("SS", [])}
    return keys - {OLDER_CODE_REFUSED}


class Spill:
    """Texts inline or in S3: a part of ``DynamoDBStore`` (``runtime.store.dynamodb``)."""

    blobs: Blobs | None

    # --- texts: inline while small, else in S3 -----------------------------------------

    def _spill(self, run_id: str, what: str, value: str, limit: int, written: list[str]) -> tuple[str, str]:
        """``(attribute suffix, attribute value)`` for a text: ``("", text)`` inline, or
        ``(REF, key)`` once it is written to S3 (its key added to ``written``)."""
        if len(value.encode("utf-8")) <= limit:
            return "", value
        if self.blobs is None:
            raise LunaflowError(
                f"the {what} of run '{run_id}' is {len(value.encode('utf-8'))} bytes, more than an item "
                f"holds inline ({limit}), and this store has no values bucket; deploy the stack again "
                "(it sets LUNAFLOW_VALUES_BUCKET)"
            )
        key = self.blobs.put(run_id, what, value)
        written.append(key)
        return REF, key

    def _text(self, item: dict[str, Any], name: str) -> str | None:
        """An item's text attribute, inline or from S3."""
        if name in item:
            return str(item[name]["S"])
        if name + REF in item:
            if self.blobs is None:
                raise LunaflowError(f"attribute {name} lives in S3 and this store has no values bucket")
            return self.blobs.get(item[name + REF]["S"])
        return None

    def _drop(self, written: list[str], committed: dict[str, Any] | None) -> None:
        """Delete the objects a write that lost its condition wrote, except any the item as
        it is (``committed``) points to. A write whose outcome is unknown (an error other
        than its condition) deletes nothing: it may have committed, and a leftover object
        costs storage, not meaning."""
        keep = _pointed(committed)
        gone = [key for key in written if key not in keep]
        if gone and self.blobs is not None:
            self.blobs.delete(gone)
