"""The moto server keeps a client's connection open (``runtime.aws.motoserver``): request
after request on one connection, each answered whole, whatever the one before it sent (a
body, none, a chunked one, an error), and a client that asks for the connection to close
gets that."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import urllib3.util.connection

from runtime.aws.motoserver import MotoServer

REGION = "eu-west-1"
SIGNED = (
    "AWS4-HMAC-SHA256 Credential=testing/20260101/eu-west-1/dynamodb/aws4_request, "
    "SignedHeaders=host, Signature=0"
)


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    started = MotoServer()
    try:
        yield started
    finally:
        started.close()


class _Connection(http.client.HTTPConnection):
    """Notes the local address of each socket it sends a request on."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, timeout=10)
        self.sockets: set[Any] = set()

    def connect(self) -> None:
        super().connect()
        self.sockets.add(self.sock.getsockname())


def _connection(server: MotoServer) -> _Connection:
    host, port = server.endpoint.removeprefix("http://").split(":")
    return _Connection(host, int(port))


def _dynamodb(conn: _Connection, action: str, body: Any, **headers: str) -> Any:
    conn.request(
        "POST",
        "/",
        body=json.dumps(body).encode(),
        headers={
            "X-Amz-Target": f"DynamoDB_20120810.{action}",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": SIGNED,
            **headers,
        },
    )
    answer = conn.getresponse()
    return answer.status, json.loads(answer.read() or b"null"), answer


def test_one_connection_serves_request_after_request_each_whole(server: MotoServer) -> None:
    conn = _connection(server)
    table = {
        "TableName": "kept",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    assert _dynamodb(conn, "CreateTable", table)[0] == 200
    for i in range(5):
        # A body, then a request with none, then one refused: the next one still reads from
        # where the last one ended.
        item = {"TableName": "kept", "Item": {"pk": {"S": f"k{i}"}, "v": {"S": "x" * (1000 * i)}}}
        assert _dynamodb(conn, "PutItem", item)[0] == 200
        conn.request("GET", "/_lunaflow/ping")
        assert json.loads(conn.getresponse().read()) == {"lunaflow": True}
        status, body, _ = _dynamodb(conn, "GetItem", {"TableName": "missing", "Key": {"pk": {"S": "k"}}})
        assert status == 400 and "ResourceNotFoundException" in body["__type"]
    status, body, _ = _dynamodb(conn, "Scan", {"TableName": "kept"})
    assert status == 200 and body["Count"] == 5
    assert len(conn.sockets) == 1, "every request went over the first connection"


def test_a_chunked_body_is_read_whole_and_the_connection_goes_on(server: MotoServer) -> None:
    conn = _connection(server)
    conn.putrequest("POST", "/")
    for name, value in {
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        "Content-Type": "application/x-amz-json-1.0",
        "Authorization": SIGNED,
        "Transfer-Encoding": "chunked",
    }.items():
        conn.putheader(name, value)
    conn.endheaders()
    conn.send(b"2\r\n{}\r\n0\r\n\r\n")
    answer = conn.getresponse()
    assert answer.status == 200 and "TableNames" in json.loads(answer.read())
    conn.request("GET", "/_lunaflow/ping")
    assert json.loads(conn.getresponse().read()) == {"lunaflow": True}
    assert len(conn.sockets) == 1


def test_a_client_asking_to_close_gets_a_closed_connection(server: MotoServer) -> None:
    conn = _connection(server)
    status, _, answer = _dynamodb(conn, "ListTables", {}, Connection="close")
    assert status == 200 and answer.will_close


def test_botocore_reuses_its_connection(server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = boto3.client(
        "dynamodb",
        endpoint_url=server.endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    opened: list[Any] = []
    connect = urllib3.util.connection.create_connection

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(args[0])
        return connect(*args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", counted)
    for _ in range(20):
        client.list_tables()
    assert len(opened) == 1, f"{len(opened)} connections for 20 requests"
