"""Issue 29 §1 in the template: the functions that run project code serve through a
``live`` alias, the deploy gate's check resource runs the new code's bundle and names the new
versions, and every alias waits for the check (DependsOn), so a FAILED check rolls the
update back before an alias moves. Everything that invokes project code invokes the alias.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Synth, as_list
from infra.capabilities.gate import READ_ACTIONS, REPORT_OUTPUT, RESOURCE_TYPE
from runtime.aws.contract import GATE_SERVICE_TIMEOUT_S, Env, Handler
from runtime.engine.project import ProjectSource


def _aliases(auction: Synth) -> dict[str, tuple[str, dict[str, Any]]]:
    live = auction.stack.functions.live
    return {name: (auction.id(alias), auction.props(auction.id(alias))) for name, alias in live.items()}


def _gate(auction: Synth) -> tuple[str, dict[str, Any]]:
    [(gate_id, props)] = auction.of_type(RESOURCE_TYPE).items()
    return gate_id, props


def test_project_code_serves_through_a_live_alias_on_a_published_version(auction: Synth) -> None:
    aliases = _aliases(auction)
    assert set(aliases) == {
        "Fetch",
        "Worker",
        "Runner",
    }  # the auction handles no queue; the console runs no project code
    functions = auction.functions()
    for name, (_, props) in aliases.items():
        assert props["Name"] == "live"
        assert props["FunctionName"] == f"<Ref:{functions[name]}>"
        version = props["FunctionVersion"]
        assert version.startswith("<GetAtt:") and version.endswith(".Version>"), version
        version_id = version[len("<GetAtt:") : -len(".Version>")]
        assert auction.resource(version_id)["Type"] == "AWS::Lambda::Version"


def test_the_check_resource_runs_the_new_bundle_and_names_the_new_versions(auction: Synth) -> None:
    gate_id, props = _gate(auction)
    gate_fn = auction.id(auction.stack.gate.function)
    assert props["ServiceToken"] == f"<GetAtt:{gate_fn}.Arn>"
    assert props["ServiceTimeout"] == str(GATE_SERVICE_TIMEOUT_S)
    fn = auction.props(gate_fn)
    assert fn["Handler"] == Handler.GATE
    # The same bundle as the functions it gates: the new code is what replays.
    worker = auction.functions()["Worker"]
    assert auction.resource(gate_fn)["Properties"]["Code"] == auction.resource(worker)["Properties"]["Code"]
    assert fn["Environment"]["Variables"][Env.CODE_DIGEST] == props["CodeDigest"]
    assert props["Force"] == "false"
    for name, (_, alias) in _aliases(auction).items():
        assert props["Versions"][name] == alias["FunctionVersion"]


def test_every_alias_waits_for_the_check(auction: Synth) -> None:
    gate_id, _ = _gate(auction)
    for alias_id, _ in _aliases(auction).values():
        assert gate_id in as_list(auction.resource(alias_id).get("DependsOn", []))


def test_whatever_invokes_project_code_invokes_the_alias(auction: Synth) -> None:
    aliases = {name: f"<Ref:{alias_id}>" for name, (alias_id, _) in _aliases(auction).items()}
    [mapping] = auction.of_type("AWS::Lambda::EventSourceMapping").values()
    # CDK names the alias as <function name>:live, the name taken from the alias's ARN.
    assert aliases["Worker"] in str(mapping["FunctionName"]) and str(mapping["FunctionName"]).endswith(
        ":live"
    )
    [integration] = auction.of_type("AWS::ApiGatewayV2::Integration").values()
    assert integration["IntegrationUri"] == aliases["Fetch"]
    targets = [t for rule in auction.of_type("AWS::Events::Rule").values() for t in rule.get("Targets", [])]
    assert [t["Arn"] for t in targets] == [aliases["Worker"], aliases["Runner"]]
    functions = auction.functions()
    invoked = {p["FunctionName"] for p in auction.of_type("AWS::Lambda::Permission").values()}
    assert (
        f"<GetAtt:{functions['Fetch']}.Arn>" not in invoked and f"<Ref:{functions['Fetch']}>" not in invoked
    )


def test_the_gate_reads_and_writes_only_pins_and_code_versions(auction: Synth) -> None:
    """It reads journals; it writes run items (their pin attribute, issue 29.2) and objects
    under code/ alone (each version it lets through)."""
    statements = auction.function_statements(auction.id(auction.stack.gate.function))
    actions = {a for s in statements for a in as_list(s["Action"])}
    assert actions == {
        *READ_ACTIONS,
        "dynamodb:UpdateItem",
        "s3:GetObject",
        "s3:PutObject",
    }  # and no X-Ray: tracing is off by default (tests/infra/test_operations.py)
    bucket = auction.id(auction.stack.values.bucket)
    for s in statements:
        if "s3:PutObject" in as_list(s["Action"]):
            assert as_list(s["Resource"]) == [f"<GetAtt:{bucket}.Arn>/code/*"], s


def test_the_gate_carries_the_projects_version(auction: Synth) -> None:
    """An update's old ProjectDigest names the code the diverging runs may be pinned to."""
    _, props = _gate(auction)
    auction_code = Path(__file__).resolve().parents[2] / "examples" / "auction"
    assert props["ProjectDigest"] == ProjectSource.read(auction_code).digest


def test_the_stack_prints_the_gate_report(auction: Synth) -> None:
    gate_id, _ = _gate(auction)
    assert auction.template["Outputs"][REPORT_OUTPUT]["Value"] == {"Fn::GetAtt": [gate_id, "Report"]}
