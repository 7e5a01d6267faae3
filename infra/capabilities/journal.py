"""The DynamoDB table: runs, journals, signals, kv and object state (docs/architecture.md)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from runtime.store.dynamodb import INDEXES, PROJECTIONS, TTL_ATTRIBUTE


class JournalTable(Construct):
    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        string = dynamodb.AttributeType.STRING
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=string),
            sort_key=dynamodb.Attribute(name="sk", type=string),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute=TTL_ATTRIBUTE,  # kv entries with a ttl, owner heartbeats
            removal_policy=RemovalPolicy.RETAIN,  # journals outlive a stack
        )
        for name, (pk, sk) in INDEXES.items():
            self.table.add_global_secondary_index(
                index_name=name,
                partition_key=dynamodb.Attribute(name=pk, type=string),
                sort_key=dynamodb.Attribute(name=sk, type=string),
                projection_type=(
                    dynamodb.ProjectionType.INCLUDE
                    if PROJECTIONS[name]
                    else dynamodb.ProjectionType.KEYS_ONLY
                ),
                non_key_attributes=PROJECTIONS[name] or None,
            )
