"""Issue 31 ("objects: one conditional write per call instead of lock, state, unlock"), held
to SPEC section 2 ("calls to one key are serialized"): on DynamoDB an object call runs its
method on the state it read and saves with one put conditional on that version; a method
that reaches outside takes the key's lock at its first such call, before the effect.

The methods here are Python stand-ins for the Lua runner (as the host calls them: an effect
asks ``runtime.services.effects`` first), on an in-process moto table; the same calls with
real Lua, under contention, are in ``tests/services/test_objects.py`` on both harnesses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from runtime.aws.services import OBJECT_LOCK_MS, OPTIMISTIC_TRIES, DynamoObjects
from runtime.core.clock import FakeClock
from runtime.services import effects
from runtime.store.dynamodb import table_definition

KEY = {"pk": {"S": "OBJ#Tally"}, "sk": {"S": "t"}}


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="eu-west-1")
        db.create_table(**table_definition("objects"))
        yield db


class Requests:
    """The DynamoDB operations a client sends, in order (botocore's retries not counted)."""

    def __init__(self, client: Any) -> None:
        self.sent: list[str] = []
        client.meta.events.register("before-call.dynamodb", self._sent)

    def _sent(self, model: Any, **_: Any) -> None:
        self.sent.append(model.name)

    def take(self) -> list[str]:
        out, self.sent = self.sent, []
        return out


class Method:
    """``add(n)`` on ``state.n``, as the Lua runner answers it. ``before`` runs first on each
    attempt (given the attempt's number, from 1); ``effect`` makes a host call that reaches
    outside, counted in ``made`` once it was allowed."""

    def __init__(self, *, effect: bool = False, before: Callable[[int], None] | None = None) -> None:
        self.effect, self.before = effect, before
        self.calls = 0
        self.made = 0
        self.seen: list[int] = []

    def call_object(
        self, cls: str, key: str, method: str, state: Any, args: list[Any]
    ) -> tuple[list[Any], Any]:
        self.calls += 1
        n = int((state or {}).get("n", 0))
        self.seen.append(n)
        if self.before is not None:
            self.before(self.calls)
        if self.effect:
            effects.before_effect()
            self.made += 1
        if not args:
            return [n], state
        return [n + int(args[0])], {"n": n + int(args[0])}


def state(table: Any) -> dict[str, Any]:
    item: dict[str, Any] = table.get_item(TableName="objects", Key=KEY, ConsistentRead=True).get("Item", {})
    return item


def test_a_call_that_changes_only_its_state_is_one_read_and_one_write(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    sent = Requests(table)
    assert objects.call(Method(), "Tally", "t", "add", [2]) == [2]
    assert sent.take() == ["GetItem", "PutItem"]
    assert objects.call(Method(), "Tally", "t", "add", [3]) == [5]
    assert sent.take() == ["GetItem", "PutItem"]
    assert objects.state("Tally", "t") == {"n": 5}
    assert "lock_owner" not in state(table)


def test_a_call_that_changes_nothing_writes_nothing(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    objects.call(Method(), "Tally", "t", "add", [4])
    sent = Requests(table)
    assert objects.call(Method(), "Tally", "t", "read", []) == [4]
    assert sent.take() == ["GetItem"]
    assert objects.call(Method(), "Tally", "never-called", "read", []) == [0]
    assert sent.take() == ["GetItem"]
    assert objects.state("Tally", "never-called") is None


def test_a_call_that_reaches_outside_takes_the_lock_before_the_effect(table: Any) -> None:
    """Its first effect takes the key's lock on condition the state is still the one read;
    the state write drops it. Later calls of that method take the lock first, as before."""
    objects = DynamoObjects(table, "objects", FakeClock())
    held: list[Any] = []
    method = Method(effect=True)
    method.before = lambda _: held.append(None)
    real = method.call_object

    def call_object(*a: Any) -> tuple[list[Any], Any]:
        out = real(*a)
        held.append(state(table).get("lock_owner"))  # after the effect: the lock is the call's
        return out

    method.call_object = call_object  # type: ignore[method-assign]
    sent = Requests(table)
    assert objects.call(method, "Tally", "t", "add", [1]) == [1]
    assert held[-1] is not None
    assert [x for x in sent.take() if x != "GetItem"][:2] == ["UpdateItem", "PutItem"]
    assert "lock_owner" not in state(table)
    sent.take()
    assert objects.call(Method(effect=True), "Tally", "t", "add", [1]) == [2]
    assert sent.take() == ["UpdateItem", "PutItem"]  # the lock at once: no read first


def test_a_conflict_runs_the_method_again_on_the_state_another_call_saved(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    other = DynamoObjects(table, "objects", FakeClock())

    def meanwhile(attempt: int) -> None:
        if attempt == 1:  # another call saves between this one's read and its write
            assert other.call(Method(), "Tally", "t", "add", [10]) == [10]

    method = Method(before=meanwhile)
    assert objects.call(method, "Tally", "t", "add", [1]) == [11]
    assert method.seen == [0, 10]
    assert objects.state("Tally", "t") == {"n": 11}


def test_an_effect_after_the_state_moved_is_not_made_and_the_call_runs_under_the_lock(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    other = DynamoObjects(table, "objects", FakeClock())

    def meanwhile(attempt: int) -> None:
        if attempt == 1:
            other.call(Method(), "Tally", "t", "add", [10])

    method = Method(effect=True, before=meanwhile)
    assert objects.call(method, "Tally", "t", "add", [1]) == [11]
    assert (method.calls, method.made) == (2, 1)  # the stopped attempt made no effect
    assert objects.state("Tally", "t") == {"n": 11}
    assert "lock_owner" not in state(table)


def test_a_method_that_catches_the_stop_changes_nothing(table: Any) -> None:
    """A method may catch the stop as an error (``pcall`` in Lua) and return; its results
    and its state are dropped all the same, and the call runs again under the lock."""
    objects = DynamoObjects(table, "objects", FakeClock())
    other = DynamoObjects(table, "objects", FakeClock())
    runs: list[str] = []

    class Catching:
        def call_object(
            self, cls: str, key: str, method: str, state: Any, args: list[Any]
        ) -> tuple[list[Any], Any]:
            if not runs:
                other.call(Method(), "Tally", "t", "add", [10])
            try:
                effects.before_effect()
                runs.append("effect")
            except Exception:
                runs.append("caught")
                return ["wrong"], {"n": -1}
            return ["right"], {"n": int(state.get("n", 0)) + 1}

    assert objects.call(Catching(), "Tally", "t", "add", []) == ["right"]
    assert runs == ["caught", "effect"]
    assert objects.state("Tally", "t") == {"n": 11}


def test_log_lines_of_an_attempt_run_again_are_not_said(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    other = DynamoObjects(table, "objects", FakeClock())
    said: list[int] = []

    def meanwhile(attempt: int) -> None:
        effects.say(lambda: said.append(attempt))
        if attempt == 1:
            other.call(Method(), "Tally", "t", "add", [10])

    objects.call(Method(before=meanwhile), "Tally", "t", "add", [1])
    assert said == [2]


def test_log_lines_before_an_effect_are_said_once_and_in_order(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    said: list[str] = []

    class Saying:
        def call_object(
            self, cls: str, key: str, method: str, state: Any, args: list[Any]
        ) -> tuple[list[Any], Any]:
            effects.say(lambda: said.append("before"))
            assert said == []  # held: the attempt may still run again
            effects.before_effect()
            assert said == ["before"]  # the lock is taken: the attempt counts
            effects.say(lambda: said.append("after"))
            return [], state

    objects.call(Saying(), "Tally", "t", "go", [])
    assert said == ["before", "after"]


def test_a_failing_method_says_its_log_lines_and_leaves_the_state(table: Any) -> None:
    objects = DynamoObjects(table, "objects", FakeClock())
    objects.call(Method(), "Tally", "t", "add", [3])
    said: list[str] = []

    class Failing:
        def call_object(self, *a: Any) -> tuple[list[Any], Any]:
            effects.say(lambda: said.append("trying"))
            raise RuntimeError("the method raised")

    with pytest.raises(RuntimeError):
        objects.call(Failing(), "Tally", "t", "fail", [])
    assert said == ["trying"]
    assert objects.state("Tally", "t") == {"n": 3}


def test_a_call_waits_in_line_while_another_holds_the_lock(table: Any) -> None:
    """No attempt runs on a state a locked call is about to replace: the call waits for the
    lock as a locked call does."""
    clock = FakeClock()
    objects = DynamoObjects(table, "objects", clock)
    objects.call(Method(), "Tally", "t", "add", [1])
    until = int(clock.now() * 1000) + OBJECT_LOCK_MS
    table.update_item(
        TableName="objects",
        Key=KEY,
        UpdateExpression="SET lock_owner = :o, lock_until = :u",
        ExpressionAttributeValues={":o": {"S": "someone"}, ":u": {"N": str(until)}},
    )
    method = Method()
    done: list[Any] = []
    caller = threading.Thread(target=lambda: done.append(objects.call(method, "Tally", "t", "add", [1])))
    caller.start()
    time.sleep(0.5)
    assert method.calls == 0 and not done
    table.update_item(TableName="objects", Key=KEY, UpdateExpression="REMOVE lock_owner, lock_until")
    caller.join(10)
    assert done == [[2]] and method.calls == 1


def test_calls_that_keep_conflicting_take_the_lock(table: Any) -> None:
    """After OPTIMISTIC_TRIES conflicts in a row, the call waits in line for the lock."""
    objects = DynamoObjects(table, "objects", FakeClock())
    other = DynamoObjects(table, "objects", FakeClock())

    def always(attempt: int) -> None:
        if attempt <= OPTIMISTIC_TRIES:
            other.call(Method(), "Tally", "t", "add", [10])

    method = Method(before=always)
    assert objects.call(method, "Tally", "t", "add", [1]) == [10 * OPTIMISTIC_TRIES + 1]
    assert method.calls == OPTIMISTIC_TRIES + 1
