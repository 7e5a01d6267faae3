"""Issue 17, point 5: the routes ``lunaflow new`` writes answer bad requests the way users
will copy: 400 for a body that is not what the route needs, 404 for an order that does not
exist. A real ``lunaflow dev`` on a freshly scaffolded project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.devserver import DevServer, Servers


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    folder = tmp_path_factory.mktemp("new")
    d = cli("new", "shop", cwd=folder)
    assert d.code == 0, str(d)
    s = Servers(folder)
    try:
        yield s.start(folder / "shop", folder / "data")
    finally:
        s.close()


@pytest.mark.parametrize("path", ["/orders", "/orders/approve"])
@pytest.mark.parametrize("body", ["{not json", "", "[]", '"x"', "null"])
def test_a_body_that_is_not_a_json_object_is_400(dev: DevServer, path: str, body: str) -> None:
    r = dev.request("POST", path, body, headers={"content-type": "application/json"})
    assert r.status == 400, f"POST {path} with {body!r}: {r.status} {r.body}"
    assert "error" in r.json()


@pytest.mark.parametrize(
    "body",
    [
        {"item": "tea"},
        {"id": 7, "item": "tea"},
        {"id": "", "item": "tea"},
        {"id": "a/b", "item": "tea"},
        {"id": "1"},
    ],
)
def test_an_order_without_a_usable_id_or_item_is_400_not_500(dev: DevServer, body: dict[str, object]) -> None:
    r = dev.post_json("/orders", body)
    assert r.status == 400, f"{body}: {r.status} {r.body}"


def test_approving_an_unknown_order_is_404_and_without_an_id_400(dev: DevServer) -> None:
    r = dev.post_json("/orders/approve", {"id": "nope", "by": "ada"})
    assert r.status == 404, f"unknown order: {r.status} {r.body}"
    r = dev.post_json("/orders/approve", {"by": "ada"})
    assert r.status == 400, f"no id: {r.status} {r.body}"


def test_an_order_is_created_then_approved(dev: DevServer) -> None:
    """The guard: the routes still do their job (201, then 202, then 409 once ended)."""
    r = dev.post_json("/orders", {"id": "1", "item": "tea"})
    assert r.status == 201, r
    dev.wait_status("order-1", {"awaiting"})
    assert dev.post_json("/orders/approve", {"id": "1", "by": "ada"}).status == 202
    dev.wait_status("order-1", {"completed"})
    assert dev.post_json("/orders/approve", {"id": "1", "by": "ada"}).status == 409


def test_an_unknown_route_is_404(dev: DevServer) -> None:
    assert dev.request("GET", "/nowhere").status == 404


def test_the_scaffolds_own_lua_tests_cover_the_bad_requests(tmp_path: Path) -> None:
    """The template's tests (what a user copies first) include a 400 and a 404 case, and pass."""
    assert cli("new", "shop", cwd=tmp_path).code == 0
    text = (tmp_path / "shop" / "tests" / "orders_test.lua").read_text()
    assert "400" in text and "404" in text
    d = cli("test", str(tmp_path / "shop"))
    assert d.code == 0, str(d)
