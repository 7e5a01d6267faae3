"""The values bucket (issue 15.1): texts too large for a DynamoDB item live in S3, so the
bucket is as durable and as private as the table whose items point into it."""

from __future__ import annotations

from conftest import Synth, render
from infra.capabilities.values import PITR_DAYS
from runtime.aws.config import AwsConfig
from runtime.aws.contract import Env, Output


def bucket(auction: Synth) -> tuple[str, dict]:  # type: ignore[type-arg]
    logical = auction.id(auction.stack.values.bucket)
    return logical, auction.resource(logical)


def test_the_bucket_is_encrypted_private_and_kept_with_the_journals(auction: Synth) -> None:
    logical, resource = bucket(auction)
    assert resource["DeletionPolicy"] == "Retain" and resource["UpdateReplacePolicy"] == "Retain"
    props = resource["Properties"]
    [rule] = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    policies = [
        p
        for p in auction.of_type("AWS::S3::BucketPolicy").values()
        if render(p["Bucket"]) == f"<Ref:{logical}>"
    ]
    [policy] = policies
    denies = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


def test_lifecycle_keeps_what_a_table_restore_can_point_to(auction: Synth) -> None:
    """Objects live as long as the journals pointing to them (runs have no retention); a
    replaced or deleted version stays for the point-in-time-recovery window."""
    _, resource = bucket(auction)
    [rule] = resource["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled"
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": PITR_DAYS}
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert "ExpirationInDays" not in rule  # current objects never expire on their own
    table = auction.props(auction.id(auction.stack.journal.table))
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_every_function_finds_the_bucket_and_the_stack_names_it(auction: Synth) -> None:
    logical, _ = bucket(auction)
    for fn in auction.functions().values():
        env = render(auction.props(fn)["Environment"]["Variables"])
        assert env[Env.VALUES_BUCKET] == f"<Ref:{logical}>"
        assert AwsConfig.from_env(env).values_bucket == f"<Ref:{logical}>"
    assert render(auction.template["Outputs"][Output.VALUES_BUCKET]["Value"]) == f"<Ref:{logical}>"
