"""cdk-nag (AwsSolutions) and cfn-lint on the synthesized templates: nothing unacknowledged,
and every acknowledgement or accepted finding carries a reason that can be checked against
the template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file  # type: ignore[import-untyped]

from conftest import Synth, as_list, render
from infra.nag import accepted

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
TIMER_ACTIONS = {"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"}
VALUE_ACTIONS = {"s3:PutObject", "s3:GetObject", "s3:DeleteObject"}
BASIC_EXECUTION = "arn:<Ref:AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def nag_report(synth: Synth) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((synth.outdir / "validation-report.json").read_text(encoding="utf-8"))
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return plugin  # type: ignore[no-any-return]


# --- cdk-nag --------------------------------------------------------------------------------------


def test_cdk_nag_runs_at_synth_and_finds_nothing_unacknowledged(auction: Synth) -> None:
    """AwsSolutions checks run at every synth (infra/nag.py) and report no open finding."""
    plugin = nag_report(auction)
    assert plugin["violations"] == []
    assert plugin["conclusion"] == "success"
    assert plugin["suppressedViolations"], "the checks ran (they have findings to acknowledge)"


def test_every_acknowledgement_matches_a_finding(auction: Synth) -> None:
    """A stale acknowledgement would silently cover a future finding: each one in
    infra/nag.py must acknowledge something the checks found in this stack."""
    found = {s["acknowledgedId"] for s in nag_report(auction)["suppressedViolations"]}
    assert set(accepted(auction.stack)) == found


def test_every_acknowledgement_carries_a_specific_reason(auction: Synth) -> None:
    """Each acknowledgement explains itself in its own words — not the rule's description, not
    a placeholder, not a reason copied from another rule."""
    reasons: dict[str, str] = {}
    for s in nag_report(auction)["suppressedViolations"]:
        reason = s["reason"]
        assert reason == accepted(auction.stack)[s["acknowledgedId"]]
        assert len(reason) >= 60 and len(reason.split()) >= 10, s["acknowledgedId"]
        assert reason.strip().lower() != s["description"].strip().lower()
        assert not any(w in reason.lower() for w in ("todo", "tbd", "fixme", "xxx")), reason
        reasons[s["acknowledgedId"]] = reason
    assert len(set(reasons.values())) == len(reasons)


def test_acknowledged_wildcards_cover_only_what_their_reasons_describe(auction: Synth) -> None:
    """IAM5 acknowledgements are stack-wide, so the template itself must hold them to their
    reasons: '*' only for X-Ray's two actions, '/index/*' only for DynamoDB on this stack's
    journal table, 'schedule/<group>/lf-*' only for the timer verbs on runs' schedules in this
    stack's group (not the declared 'lfs-' ones),
    '<values bucket>/runs/*' only for putting, getting and deleting run values,
    '<values bucket>/code/*' only for getting and putting code versions (issue 29.2: the
    worker reads, the deploy gate writes too), and the one AWS managed policy is the Lambda
    logging role."""
    table = auction.id(auction.stack.journal.table)
    bucket = auction.id(auction.stack.values.bucket)
    group = auction.props(auction.id(auction.stack.wake.group))["Name"]
    assert group == f"{auction.name}-timers"
    for logical, props in auction.of_type("AWS::IAM::Policy").items():
        for s in props["PolicyDocument"]["Statement"]:
            actions = set(as_list(s["Action"]))
            assert not any("*" in a for a in actions), (logical, s)
            for resource in as_list(s["Resource"]):
                if "*" not in resource:
                    continue
                if resource == "*":
                    assert actions <= XRAY, (logical, s)
                elif resource.endswith("/index/*"):
                    assert resource == f"<GetAtt:{table}.Arn>/index/*", (logical, s)
                    assert all(a.startswith("dynamodb:") for a in actions), (logical, s)
                elif ":schedule/" in resource:
                    assert resource.endswith(f":schedule/{group}/lf-*"), (logical, s)
                    assert actions <= TIMER_ACTIONS, (logical, s)
                elif resource.endswith("/runs/*"):
                    assert resource == f"<GetAtt:{bucket}.Arn>/runs/*", (logical, s)
                    assert actions <= VALUE_ACTIONS, (logical, s)  # the deploy gate only reads
                elif resource.endswith("/code/*"):
                    assert resource == f"<GetAtt:{bucket}.Arn>/code/*", (logical, s)
                    assert actions <= {"s3:GetObject", "s3:PutObject"}, (logical, s)
                else:
                    pytest.fail(f"unacknowledged kind of wildcard in {logical}: {resource}")
    for logical, props in auction.of_type("AWS::IAM::Role").items():
        assert set(props.get("ManagedPolicyArns", [])) <= {BASIC_EXECUTION}, logical


def test_a_project_with_a_secret_synthesizes_under_cdk_nag(queue_project: Synth) -> None:
    """`cdk synth` of a project that reads `secret "api-key"` must pass the AwsSolutions checks."""
    assert queue_project.error is None
    assert nag_report(queue_project)["violations"] == []


# --- cfn-lint -------------------------------------------------------------------------------------


def _own_role_dependency(template: dict[str, Any], path: list[Any]) -> bool:
    """W3005 on a Lambda function's DependsOn entry that names the function's own role."""
    if len(path) != 4 or path[0] != "Resources" or path[2] != "DependsOn":
        return False
    resource = template["Resources"][path[1]]
    if resource["Type"] != "AWS::Lambda::Function":
        return False
    role = render(resource["Properties"]["Role"])
    return bool(
        as_list(resource["DependsOn"])[path[3]] == role.removeprefix("<GetAtt:").removesuffix(".Arn>")
    )


# Rule id -> (which findings of that rule are accepted, why).
ACCEPTED_LINT = {
    "W3005": (
        _own_role_dependency,
        "CDK makes each Lambda function DependsOn its service role and the role's default policy, "
        "so the function is created only once its permissions exist; the role half is already "
        "implied by the Role GetAtt, which is all W3005 says. Deployment order is unchanged.",
    ),
}


@pytest.fixture(scope="module")
def lint_results() -> dict[str, list[Any]]:
    return {}


def lint(synth: Synth, cache: dict[str, list[Any]]) -> list[Any]:
    if synth.name not in cache:
        cache[synth.name] = lint_file(Path(synth.outdir / f"{synth.name}.template.json"))
    return cache[synth.name]


def accepted_finding(synth: Synth, match: Any) -> bool:
    rule = ACCEPTED_LINT.get(match.rule.id)
    return rule is not None and rule[0](synth.template, list(match.path))


@pytest.mark.parametrize("project", ["auction", "queue_project"])
def test_cfn_lint_reports_nothing_beyond_the_accepted_findings(
    project: str, request: pytest.FixtureRequest, lint_results: dict[str, list[Any]]
) -> None:
    """cfn-lint on the template `cdk synth` writes: no error, no warning, no informational
    finding except those accepted above with their reasons."""
    synth: Synth = request.getfixturevalue(project)
    open_findings = [
        f"{m.rule.id} {'/'.join(map(str, m.path))}: {m.message}"
        for m in lint(synth, lint_results)
        if not accepted_finding(synth, m)
    ]
    assert open_findings == []


def test_every_accepted_lint_finding_still_occurs_and_has_a_reason(
    auction: Synth, lint_results: dict[str, list[Any]]
) -> None:
    """An acceptance that no longer matches anything should be deleted, not kept as cover."""
    seen = {m.rule.id for m in lint(auction, lint_results) if accepted_finding(auction, m)}
    assert seen == set(ACCEPTED_LINT)
    for _, reason in ACCEPTED_LINT.values():
        assert len(reason.split()) >= 10
