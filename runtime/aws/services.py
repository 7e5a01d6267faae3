"""The services on AWS: kv and object state in the store's DynamoDB table, user queues on
SQS, secrets in Secrets Manager (through the store), databases through the RDS Data API."""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from runtime.core.clock import Clock
from runtime.core.durations import parse_ms
from runtime.core.values import compact
from runtime.services import builtins, deadline, effects
from runtime.services.base import ObjectRunner, QueueRunner, ServiceError
from runtime.services.keys import check_key, check_name, fits_a_key, options, shown, stored
from runtime.services.kv import MAX_LIST
from runtime.services.queues import MAX_DELAY_S
from runtime.store.items import condition_failed, conditional, n, s

# A call's lock on its key lasts 10 s and is renewed every 3 s while the call runs, so a
# call cut off by its invocation's end (a timeout, a kill) blocks the key for 10 s at most,
# and a caller waiting 15 s always outlasts it.
OBJECT_LOCK_MS = 10_000
OBJECT_RENEW_S = 3.0
OBJECT_WAIT_S = 15.0
# An optimistic call that meets this many conflicts in a row takes the lock: under
# contention, waiting in line costs less than running the method again and again.
OPTIMISTIC_TRIES = 3
MAX_EFFECTFUL = 10_000  # (class, method) pairs remembered as making effects
# An object's item lists the calls that saved its last few states (``savers``), so a call
# whose write was refused can tell "mine committed, then others saved" (a retry of its own
# committed write) from "another saved first" as long as fewer than this many saved since.
SAVERS_KEPT = 8
REFUSED_ON_A_RETRY = "its write was refused on a retry, after more calls saved than it can check"
# The lock is free: never taken, dropped, or past its time (a call cut off by its end).
UNLOCKED = "attribute_not_exists(lock_until) OR lock_until < :now"
MAX_HIDE_S = 12 * 60 * 60  # SQS's longest visibility timeout


class DynamoKV:
    """``kv "ns"`` items: pk ``KV#<ns>``, sk the key; ``expires_at`` is the table's TTL
    attribute (DynamoDB deletes expired items lazily, so reads check it too)."""

    def __init__(self, db: Any, table: str, clock: Clock) -> None:
        self._db, self.table, self._clock = db, table, clock

    def call(self, ns: str, method: str, args: list[Any]) -> list[Any]:
        check_name(ns, f"kv '{shown(ns)}'")
        now = self._clock.now()
        if method in ("get", "put", "delete"):
            if not args or not isinstance(args[0], str) or not args[0]:
                raise ServiceError(f"kv '{ns}':{method} expects a non-empty string key first")
            key = {"pk": s(f"KV#{ns}"), "sk": s(check_key(args[0], f"kv '{ns}':{method}"))}
        if method == "get":
            item = self._db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            if item is None or ("expires_at" in item and float(item["expires_at"]["N"]) <= now):
                return [None]
            return [json.loads(item["value"]["S"])]
        if method == "put":
            value = args[1] if len(args) > 1 else None
            opts = options(args[2] if len(args) > 2 else None, ("ttl",), f"kv '{ns}':put", '{ ttl = "1h" }')
            if value is None:
                self._db.delete_item(TableName=self.table, Key=key)
                return []
            item = {**key, "value": s(stored(value, f"the value of kv '{ns}' key '{shown(args[0])}'"))}
            if opts.get("ttl") is not None:
                item["expires_at"] = n(
                    math.ceil(now + parse_ms(opts["ttl"], f"the ttl of kv '{ns}':put") / 1000)
                )
            self._db.put_item(TableName=self.table, Item=item)
            return []
        if method == "delete":
            old = self._db.delete_item(TableName=self.table, Key=key, ReturnValues="ALL_OLD").get(
                "Attributes"
            )
            return [old is not None]
        if method == "list":
            opts = options(
                args[0] if args else None,
                ("prefix", "limit"),
                f"kv '{ns}':list",
                '{ prefix = "a", limit = 100 }',
            )
            limit = opts.get("limit", MAX_LIST)
            if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST:
                raise ServiceError(f"kv '{ns}':list limit must be a whole number from 1 to {MAX_LIST}")
            prefix = str(opts.get("prefix") or "")
            if not fits_a_key(prefix):
                return [[]]  # DynamoDB would refuse the condition; no key could match it
            out: list[dict[str, Any]] = []
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :p AND begins_with(sk, :prefix)",
                "ExpressionAttributeValues": {
                    ":p": s(f"KV#{ns}"),
                    ":prefix": s(prefix),
                },
                "ConsistentRead": True,
            }
            while len(out) < limit:
                page = self._db.query(**request)
                for item in page.get("Items", []):
                    if "expires_at" in item and float(item["expires_at"]["N"]) <= now:
                        continue
                    out.append({"key": item["sk"]["S"], "value": json.loads(item["value"]["S"])})
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            return [out[:limit]]
        raise ServiceError(f"kv '{ns}' has no method '{method}'; use get, put, delete or list")


class DynamoObjects:
    """Object state: pk ``OBJ#<class>``, sk the key; calls to one key are serialized across
    every Lambda.

    A call first runs its method **optimistically**: it reads the item, runs the method on
    that state, and writes the new state on condition that the version is still the one read
    and no call holds the key's lock; a method that changed nothing writes nothing. A
    conflict runs the method again (it made no effect: see below), and after
    ``OPTIMISTIC_TRIES`` conflicts the call takes the lock. Its log lines are said once the
    attempt counts.

    A method that reaches outside (``runtime/services/effects.py``; ``READS`` in
    ``runtime/engine/host.py`` are the service calls that do not) takes the key's **lock**
    at its first such host call, on condition the state is still the one read: from there it
    runs as a locked call does, and if the state moved, the attempt stops before the effect
    and the call runs again under the lock. A (class, method) that once made an effect takes
    the lock from the start in this process, as every call did before: the lock is a
    conditional write (10 s, renewed while the call runs), and the state write drops it.
    Whatever stops that write, the lock is dropped on its own: a key left locked would
    refuse every call for ``OBJECT_LOCK_MS``."""

    def __init__(self, db: Any, table: str, clock: Clock) -> None:
        self._db, self.table, self._clock = db, table, clock
        self._effectful: set[tuple[str, str]] = set()

    def call(self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]) -> list[Any]:
        check_name(cls, f"object '{shown(cls)}'")
        what = f"{cls}('{shown(key)}'):{method}"
        item_key = {"pk": s(f"OBJ#{cls}"), "sk": s(check_key(key, what))}
        if (cls, method) not in self._effectful:
            for _ in range(OPTIMISTIC_TRIES):
                attempt = _Attempt(self, item_key, what)
                try:
                    outcome = attempt.run(runner, cls, key, method, args)
                finally:
                    if attempt.locked or attempt.stopped:
                        self._made_effects(cls, method)
                if outcome is not None:
                    return outcome
                if attempt.stopped or attempt.busy:
                    break
        return self._locked_call(runner, cls, key, method, args, item_key, what)

    def _made_effects(self, cls: str, method: str) -> None:
        if len(self._effectful) >= MAX_EFFECTFUL:
            self._effectful.clear()
        self._effectful.add((cls, method))

    def _locked_call(
        self,
        runner: ObjectRunner,
        cls: str,
        key: str,
        method: str,
        args: list[Any],
        item_key: dict[str, Any],
        what: str,
    ) -> list[Any]:
        me = _call_id()
        item = self._lock(item_key, me, what)
        with self._renewing(item_key, me):
            try:
                state = json.loads(item["state"]["S"]) if "state" in item else {}
                results, new_state = runner.call_object(cls, key, method, state, args)
                text = _state_text(cls, key, new_state)
            except BaseException:
                self._unlock(item_key, me)
                raise
        return self._save_locked(item_key, me, text, item, what, results)

    def _save_locked(
        self,
        item_key: dict[str, Any],
        me: str,
        text: str,
        read: dict[str, Any],
        what: str,
        results: list[Any],
    ) -> list[Any]:
        try:
            self._save(item_key, me, text, read)
        except (ClientError, BotoCoreError) as e:
            if isinstance(e, ClientError) and condition_failed(e):
                found = e.response.get("Item")
                if _saved_by(found, me):
                    return results  # botocore's retry of our committed write: the state holds it
                if _retried(e) and not _not_saved_by_a_listed_call(found, _version(read)):
                    self._unlock(item_key, me)
                    raise _unknown(what, REFUSED_ON_A_RETRY) from e
                self._unlock(item_key, me)
                raise ServiceError(
                    f"{what}: the call held the object's lock past {OBJECT_LOCK_MS // 1000}s and another "
                    "call saved the state meanwhile, so this call's state change was dropped; keep object "
                    "methods short"
                ) from e
            # The outcome is unknown (the put may have committed). Dropping the lock first
            # settles it: a put still on its way fails its condition afterwards, and an unlock
            # refused because the put committed finds the item saved by this call.
            unlocked = self._unlock(item_key, me)
            if not unlocked and _saved_by(unlocked.item, me):
                return results
            if not unlocked and not _not_saved_by_a_listed_call(unlocked.item, _version(read)):
                raise _unknown(what, _said(e)) from e
            raise _unsaved(what, e) from e
        return results

    def state(self, cls: str, key: str) -> Any:
        """The key's state as the last call saved it (None before any), read consistently:
        what tests look at, as ``runtime.services.objects.Objects.state`` on a data folder."""
        item = self._db.get_item(
            TableName=self.table, Key={"pk": s(f"OBJ#{cls}"), "sk": s(key)}, ConsistentRead=True
        ).get("Item")
        return None if item is None or "state" not in item else json.loads(item["state"]["S"])

    @contextlib.contextmanager
    def _renewing(self, key: dict[str, Any], me: str) -> Iterator[None]:
        done = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(key, me, done), daemon=True)
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join()

    def _renew(self, key: dict[str, Any], me: str, done: threading.Event) -> None:
        while not done.wait(OBJECT_RENEW_S):
            with contextlib.suppress(ClientError):  # a missed renewal only shortens the lock
                conditional(
                    self._db.update_item,
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET lock_until = :until",
                    ConditionExpression="lock_owner = :me",
                    ExpressionAttributeValues={
                        ":me": s(me),
                        ":until": n(int(self._clock.now() * 1000) + OBJECT_LOCK_MS),
                    },
                )

    def _lock(self, key: dict[str, Any], me: str, what: str) -> dict[str, Any]:
        """Take the key's lock; the object's item as it is now."""
        give_up = time.monotonic() + OBJECT_WAIT_S
        pause = 0.02
        while True:
            now = int(self._clock.now() * 1000)
            locked = conditional(
                self._db.update_item,
                TableName=self.table,
                Key=key,
                UpdateExpression="SET lock_owner = :me, lock_until = :until",
                ConditionExpression=UNLOCKED,
                ExpressionAttributeValues={":me": s(me), ":until": n(now + OBJECT_LOCK_MS), ":now": n(now)},
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            if locked:
                item: dict[str, Any] = locked["Attributes"]
                return item
            if locked.item is not None and locked.item.get("lock_owner", {}).get("S") == me:
                return dict(locked.item)  # botocore's retry of our committed lock: it is ours
            if time.monotonic() > give_up:
                raise ServiceError(
                    f"{what}: the object is busy with another call for over {OBJECT_WAIT_S:.0f}s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _lock_at(self, key: dict[str, Any], me: str, version: int) -> bool:
        """Take the key's lock on condition the state is still at ``version``: an optimistic
        attempt's first effect. False when the state moved or another call holds the lock."""
        until = int(self._clock.now() * 1000) + OBJECT_LOCK_MS
        locked = self._update_at(
            key,
            version,
            "SET lock_owner = :me, lock_until = :until",
            {":me": s(me), ":until": n(until)},
        )
        if locked:
            return True
        return locked.item is not None and locked.item.get("lock_owner", {}).get("S") == me

    def _save(self, key: dict[str, Any], me: str, state: str, read: dict[str, Any]) -> None:
        """Write the state (its JSON text) and drop the lock: one put of the whole item, on
        condition that the lock is still ours and the state is the one the call read (a lock
        that lapsed while another call saved, or a settling ``_fence``, refuses it). The item
        lists the call among its ``savers``: a retry of this put whose first attempt
        committed fails its condition, and the item it finds says the state holds the change."""
        at, values = _at_version(_version(read))
        self._db.put_item(
            TableName=self.table,
            Item=_saved(key, state, read, me),
            ConditionExpression=f"lock_owner = :me AND {at}",
            ExpressionAttributeValues={**values, ":me": s(me)},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def _put_at(self, key: dict[str, Any], me: str, state: str, read: dict[str, Any]) -> Any:
        """An optimistic attempt's state: one put, on condition the version is still the one
        read and no call holds the lock; ``Lost`` with the item as found when refused."""
        at, values = _at_version(_version(read))
        return conditional(
            self._db.put_item,
            TableName=self.table,
            Item=_saved(key, state, read, me),
            ConditionExpression=f"{at} AND ({UNLOCKED})",
            ExpressionAttributeValues={**values, ":now": n(int(self._clock.now() * 1000))},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def _fence(self, key: dict[str, Any], version: int) -> Any:
        """Settle an optimistic put of unknown outcome: move the version on, so a put still on
        its way fails its condition; ``Lost`` with the item when the version had moved or a
        call holds the lock (which the put, conditional on no lock, cannot pass either: the
        settling waits for that call's save rather than void it)."""
        return self._update_at(key, version, "SET version = :next", {":next": n(version + 1)})

    def _update_at(self, key: dict[str, Any], version: int, update: str, values: dict[str, Any]) -> Any:
        """An update on condition the state is still at ``version`` and no call holds the
        lock; ``Lost`` with the item as found when refused."""
        at, at_values = _at_version(version)
        return conditional(
            self._db.update_item,
            TableName=self.table,
            Key=key,
            UpdateExpression=update,
            ConditionExpression=f"{at} AND ({UNLOCKED})",
            ExpressionAttributeValues={**at_values, **values, ":now": n(int(self._clock.now() * 1000))},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def _unlock(self, key: dict[str, Any], me: str) -> Any:
        """Drop the lock, leaving the state as it was (a lock another call took is left
        alone); ``Lost`` with the item as it is when the lock was no longer ours."""
        return conditional(
            self._db.update_item,
            TableName=self.table,
            Key=key,
            UpdateExpression="REMOVE lock_owner, lock_until",
            ConditionExpression="lock_owner = :me",
            ExpressionAttributeValues={":me": s(me)},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )


class _Stopped(ServiceError):
    """An optimistic attempt met an effect after the state moved: it stops there, the effect
    not made, and the call runs again under the lock. A method that catches it (``pcall``)
    changes nothing: the attempt's results are dropped all the same."""


class _Attempt:
    """One optimistic run of an object method (``DynamoObjects``): the guard its host calls
    ask before an effect (``runtime.services.effects``)."""

    def __init__(self, objects: DynamoObjects, key: dict[str, Any], what: str) -> None:
        self.objects, self.key, self.what = objects, key, what
        self.me = _call_id()
        self.version = 0
        self.locked = False  # the lock was taken at an effect: the call is a locked one now
        self.stopped = False  # an effect found the state moved: run again under the lock
        self.busy = False  # another call held the lock when the item was read
        self._held: list[Callable[[], None]] = []
        self._renewal: contextlib.ExitStack | None = None

    def run(self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]) -> list[Any] | None:
        """The call's results once its state is saved; None to run it again (a conflict, or
        ``stopped``). A method's error, or a refused state, is raised as final."""
        objects = self.objects
        read = objects._db.get_item(TableName=objects.table, Key=self.key, ConsistentRead=True)
        item: dict[str, Any] = read.get("Item") or {}
        if _locked(item, int(objects._clock.now() * 1000)):
            self.busy = True  # a locked call runs: wait for it in line
            return None
        self.version = _version(item)
        old = item["state"]["S"] if "state" in item else None
        with contextlib.ExitStack() as renewal:
            self._renewal = renewal
            try:
                with effects.guarded(self):
                    results, new_state = runner.call_object(
                        cls, key, method, json.loads(old) if old is not None else {}, args
                    )
                if self.stopped:
                    return None
                text = _state_text(cls, key, new_state)
            except Exception:
                if self.stopped:
                    return None  # the method saw the stop as an error: it ran no effect
                if self.locked:
                    objects._unlock(self.key, self.me)
                self._say_held()
                raise
            except BaseException:
                if self.locked:
                    objects._unlock(self.key, self.me)
                raise
        if self.locked:
            self._say_held()
            return objects._save_locked(self.key, self.me, text, item, self.what, results)
        if text == old or (old is None and text == "{}" and not item):
            self._say_held()
            return results  # nothing changed: the call was a read, serialized at it
        try:
            saved = self._put(text, item, results)
        except Exception:
            self._say_held()
            raise
        if saved is not None:
            self._say_held()  # the attempt counts (one run again says its own lines)
        return saved

    def _put(self, text: str, item: dict[str, Any], results: list[Any]) -> list[Any] | None:
        try:
            put = self.objects._put_at(self.key, self.me, text, item)
        except (ClientError, BotoCoreError) as e:
            return self._settle(results, e)
        if put:
            return results
        if _saved_by(put.item, self.me):
            return results  # botocore's retry of this put, which had committed
        if put.retried and not _not_saved_by_a_listed_call(put.item, self.version):
            raise _unknown(self.what, REFUSED_ON_A_RETRY)
        return None  # another call saved first (one attempt, or not listed): run again

    def _settle(self, results: list[Any], e: Exception) -> list[Any]:
        """The put's outcome is unknown: move the version on, so the put can no longer commit
        if it has not, then look whether it had. While a locked call holds the key the put
        cannot commit either, so the settling waits for that call's save."""
        give_up = time.monotonic() + OBJECT_WAIT_S
        pause = 0.02
        while True:
            try:
                fenced = self.objects._fence(self.key, self.version)
            except (ClientError, BotoCoreError) as again:
                raise _unknown(self.what, _said(again)) from e
            if fenced:
                raise _unsaved(self.what, e) from e  # the put can never commit now
            found = fenced.item or {}
            if _saved_by(found, self.me):
                return results
            if _version(found) != self.version:
                if _not_saved_by_a_listed_call(found, self.version):
                    raise _unsaved(self.what, e) from e  # others saved since, this call not among them
                raise _unknown(self.what, _said(e)) from e
            if time.monotonic() > give_up:
                raise _unknown(self.what, f"{_said(e)}; the key stayed locked by another call") from e
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    # --- the guard -------------------------------------------------------------------------

    def before_effect(self) -> None:
        if self.locked:
            return
        if self.stopped:
            raise self._stop()
        try:
            locked = self.objects._lock_at(self.key, self.me, self.version)
        except (ClientError, BotoCoreError):
            # Its outcome is unknown: a lock it may have taken must not stand for 10 s.
            with contextlib.suppress(ClientError, BotoCoreError):
                self.objects._unlock(self.key, self.me)
            raise
        if locked:
            self.locked = True
            assert self._renewal is not None
            self._renewal.enter_context(self.objects._renewing(self.key, self.me))
            self._say_held()  # the attempt counts from here: it will not run again
            return
        self.stopped = True
        raise self._stop()

    def _stop(self) -> _Stopped:
        return _Stopped(f"{self.what}: the call runs again under the key's lock")

    def hold(self, say: Callable[[], None]) -> bool:
        if self.locked:
            return False
        if not self.stopped:
            self._held.append(say)
        return True

    def _say_held(self) -> None:
        held, self._held = self._held, []
        for line in held:
            line()


def _state_text(cls: str, key: str, state: Any) -> str:
    """A method's new state as the item stores it, held to the state's size limit."""
    return stored({} if state is None else state, f"the state of {cls}('{shown(key)}')")


def _call_id() -> str:
    return uuid.uuid4().hex[:16]


def _savers(item: dict[str, Any]) -> list[str]:
    """The calls that saved the item's last states, oldest first."""
    listed = [x["S"] for x in item.get("savers", {}).get("L", [])]
    if not listed and "saved_by" in item:
        listed = [item["saved_by"]["S"]]  # an item saved before the list was kept
    return listed


def _saved(key: dict[str, Any], state: str, read: dict[str, Any], me: str) -> dict[str, Any]:
    """The whole item a call saves: its state, the next version, and ``me`` among the savers."""
    savers = [*_savers(read)[-(SAVERS_KEPT - 1) :], me]
    return {
        **key,
        "state": s(state),
        "version": n(_version(read) + 1),
        "saved_by": s(me),
        "savers": {"L": [s(x) for x in savers]},
    }


def _saved_by(item: Any, me: str) -> bool:
    """Whether an object's item (as a refused write found it) holds a save by call ``me``."""
    return me in _savers(item or {})


def _not_saved_by_a_listed_call(item: Any, read_version: int) -> bool:
    """Whether an item that does not list a call shows the call's write never committed:
    nothing saved since its read, or every save since is in the list (``savers`` keeps the
    last SAVERS_KEPT, and each save moves the version by one). An item a call of older code
    saved (no list) cannot say."""
    if item is None:
        return True  # a committed write would have made it
    moved = _version(item) - read_version
    if moved <= 0:
        return True
    return "savers" in item and moved <= SAVERS_KEPT


def _retried(e: ClientError) -> bool:
    return bool(e.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


def _version(item: dict[str, Any]) -> int:
    return int(item["version"]["N"]) if "version" in item else 0


def _locked(item: dict[str, Any], now_ms: int) -> bool:
    return "lock_until" in item and int(item["lock_until"]["N"]) >= now_ms


def _at_version(version: int) -> tuple[str, dict[str, Any]]:
    """The condition that the item's state is still at ``version`` (0: never saved)."""
    if version == 0:
        return "attribute_not_exists(version)", {}
    return "version = :v", {":v": n(version)}


def _said(e: Exception) -> str:
    if isinstance(e, ClientError):
        error = e.response.get("Error", {})
        return f"DynamoDB said {error.get('Code')}: {error.get('Message')}"
    return str(e)


def _unsaved(what: str, e: Exception) -> ServiceError:
    return ServiceError(
        f"{what}: its new state could not be saved ({_said(e)}); the state is as it was before the "
        "call — call it again"
    )


def _unknown(what: str, why: str) -> ServiceError:
    return ServiceError(
        f"{what}: whether its new state was saved is unknown ({why}); a call may be repeated only "
        "when the method recognises a repeat — read the state before calling again"
    )


class SqsQueues:
    def __init__(self, sqs: Any, urls: dict[str, str]) -> None:
        self._sqs, self.urls = sqs, urls

    def hide(self, name: str, receipt_handle: str, seconds: int) -> None:
        """Hide a received message for ``seconds`` from now (0: visible again at once)."""
        url = self.urls.get(name)
        if url is None:
            return  # not a queue of this deployment: its own visibility timeout applies
        self._sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=max(0, min(seconds, MAX_HIDE_S))
        )

    def call(self, name: str, method: str, args: list[Any]) -> list[Any]:
        if method != "send":
            raise ServiceError(f"queue '{name}' has no method '{method}'; use send")
        url = self.urls.get(name)
        if url is None:
            raise ServiceError(
                f"queue '{name}' has no SQS queue in this deployment; declare its handler with "
                f'on "queue" ("{name}", ...) so the stack creates it, then deploy'
            )
        opts = options(
            args[1] if len(args) > 1 else None, ("delay",), f"queue '{name}':send", '{ delay = "30s" }'
        )
        delay = 0
        if opts.get("delay") is not None:
            delay = math.ceil(parse_ms(opts["delay"], f"the delay of queue '{name}':send") / 1000)
            if delay > MAX_DELAY_S:
                raise ServiceError(f"queue '{name}':send delay is over the limit of 15m")
        sent = self._sqs.send_message(
            QueueUrl=url, MessageBody=compact(args[0] if args else None), DelaySeconds=delay
        )
        return [sent["MessageId"]]


class AwsServices:
    """``runtime.services.base.Services`` on AWS."""

    def __init__(
        self,
        *,
        dynamodb: Any,
        table: str,
        sqs: Any,
        queue_urls: dict[str, str],
        clock: Clock,
        databases: Any = None,
    ) -> None:
        self.kv = DynamoKV(dynamodb, table, clock)
        self.objects = DynamoObjects(dynamodb, table, clock)
        self.queues = SqsQueues(sqs, queue_urls)
        self.databases = databases

    def declare(self, kind: str, name: str, opts: Any, project_root: Path) -> None:
        if kind == "database" and self.databases is not None:
            self.databases.declare(name, opts, project_root)

    def call(self, kind: str, name: str, method: str, args: list[Any]) -> list[Any]:
        # A step attempt's deadline bounds these as it bounds http.request: boto3 cannot cut a
        # request, so one that hangs is waited for only until then.
        if kind == "kv":
            return deadline.within(lambda: self.kv.call(name, method, args))
        if kind == "queue":
            return deadline.within(lambda: self.queues.call(name, method, args))
        if kind == "database":
            if self.databases is None:
                raise ServiceError(
                    f"database '{name}' has no backend in this deployment; the stack provisions Aurora "
                    "(RDS Data API) when the project declares a database — deploy again"
                )
            result: list[Any] = self.databases.call(name, method, args)
            return result
        raise ServiceError(f"no service of kind '{kind}' on AWS")

    def call_object(
        self, runner: ObjectRunner, cls: str, key: str, method: str, args: list[Any]
    ) -> list[Any]:
        return self.objects.call(runner, cls, key, method, args)

    def http(self, spec: dict[str, Any], data: bytes | None) -> dict[str, Any]:
        return builtins.http_request(spec, data)

    def run_due(self, runner: QueueRunner) -> int:
        return 0  # SQS delivers user queues to the queue Lambda

    def next_due(self, runner: QueueRunner) -> float | None:
        return None

    def close(self) -> None:
        pass
