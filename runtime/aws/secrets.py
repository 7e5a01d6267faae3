"""Secret versions in AWS Secrets Manager, numbered 1, 2, ... for lunaflow.

Secrets Manager names versions by UUID; lunaflow numbers them so a run can pin "version 3".
The number-to-version map lives in the store's table (``#SECRET#<name>`` items). A pinned
version gets a staging label: Secrets Manager deletes unlabelled versions beyond 100 (not
those under a day old), and a labelled one never ages out. Note the quota of 20 staging
labels per secret: a secret with more than ~18 versions pinned by live runs needs care.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from runtime.errors import LunaflowError


def _label(version: int) -> str:
    return f"lunaflow-v{version}"


class SecretsManagerSecrets:
    def __init__(self, secretsmanager: Any, dynamodb: Any, table: str, *, prefix: str = "") -> None:
        self._sm = secretsmanager
        self._db = dynamodb
        self.table = table
        self.prefix = prefix

    def _id(self, name: str) -> str:
        return self.prefix + name

    def _versions(self, name: str) -> dict[int, str]:
        page = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": f"#SECRET#{name}"}},
            ConsistentRead=True,
        )
        return {int(i["version"]["N"]): i["version_id"]["S"] for i in page.get("Items", [])}

    def add(self, name: str, value: str) -> int:
        secret_id = self._id(name)
        try:
            version_id = self._sm.put_secret_value(SecretId=secret_id, SecretString=value)["VersionId"]
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
            version_id = self._sm.create_secret(Name=secret_id, SecretString=value)["VersionId"]
        version = max(self._versions(name), default=0) + 1
        try:
            self._db.put_item(
                TableName=self.table,
                Item={
                    "pk": {"S": f"#SECRET#{name}"},
                    "sk": {"S": f"V#{version:010d}"},
                    "version": {"N": str(version)},
                    "version_id": {"S": version_id},
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as e:
            raise LunaflowError(
                f"secret '{name}' was set twice at once; version {version} was taken — set it again"
            ) from e
        return version

    def get(self, name: str, version: int | None) -> tuple[int, str] | None:
        versions = self._versions(name)
        if not versions:
            return None
        number = max(versions) if version is None else version
        if number not in versions:
            return None
        try:
            value = self._sm.get_secret_value(SecretId=self._id(name), VersionId=versions[number])[
                "SecretString"
            ]
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return None
            raise
        return number, str(value)

    def keep(self, name: str, version: int) -> None:
        """Label the version so Secrets Manager never deletes it while runs are pinned to it."""
        versions = self._versions(name)
        if version not in versions:
            return
        try:
            self._sm.update_secret_version_stage(
                SecretId=self._id(name), VersionStage=_label(version), MoveToVersionId=versions[version]
            )
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("ResourceNotFoundException",):
                raise
