"""A database when the project declares one: Aurora Serverless v2 (PostgreSQL) with the RDS
Data API, so Lambdas reach it over HTTPS without joining a VPC."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_rds as rds
from constructs import Construct


class Database(Construct):
    def __init__(
        self, scope: Construct, id: str, names: list[str], *, deletion_protection: bool = False
    ) -> None:
        """``deletion_protection`` (``-c databaseDeletionProtection=true``) makes ``cdk destroy``
        fail on the cluster until it is turned off; without it the cluster is deleted with the
        stack and leaves a final snapshot (the removal policy)."""
        super().__init__(scope, id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="data", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
            ],
        )
        self.vpc.add_flow_log("FlowLog")
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=rds.DatabaseClusterEngine.aurora_postgres(
                version=rds.AuroraPostgresEngineVersion.VER_17_9
            ),
            writer=rds.ClusterInstance.serverless_v2("writer"),
            serverless_v2_min_capacity=0.5,
            serverless_v2_max_capacity=4,
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            enable_data_api=True,
            storage_encrypted=True,
            deletion_protection=deletion_protection,
            iam_authentication=True,
            default_database_name=names[0] if names else None,
            removal_policy=RemovalPolicy.SNAPSHOT,
        )
        self.names = names
