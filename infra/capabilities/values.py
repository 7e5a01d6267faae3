"""The values bucket: journal chunks and texts too large for a DynamoDB item
(``runtime.store.blobs``), each written once under a run's prefix and pointed to by an item.

It lives as long as the journals it completes: runs have no retention of their own (the
table is kept, point-in-time recovery on, even past ``cdk destroy``), so neither do their
objects. Versioning keeps a deleted or overwritten object for the 35 days a point-in-time
restore of the table reaches back, so a restored journal finds every value it points to;
incomplete uploads are cleaned after a day. Encrypted (S3-managed keys), TLS only, no
public access.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from runtime.store.blobs import PREFIX

PITR_DAYS = 35  # how far back DynamoDB's point-in-time recovery restores the table


class ValuesBucket(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            removal_policy=RemovalPolicy.RETAIN,  # journals outlive a stack, and so do their values
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="restorable-window",
                    noncurrent_version_expiration=Duration.days(PITR_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                    expired_object_delete_marker=True,
                )
            ],
        )

    def grant(self, fn: lambda_.Function) -> None:
        """Write, read and (a lost commit's own) delete objects under the runs' prefix."""
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:GetObject", "s3:DeleteObject"],
                resources=[self.bucket.arn_for_objects(f"{PREFIX}*")],
            )
        )
