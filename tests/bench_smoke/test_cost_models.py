"""bench/aws_cost.py's all-in comparison (issue 31.1): the peers priced by their metering rules,
the floor's arithmetic, and a tiny real fan-out measured on moto. Figures are not compared
with targets here (benchmarks print them); what is checked is that each model counts what its
rules say it counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import cost_models  # noqa: E402
import prices  # noqa: E402
from cost_models import Usage  # noqa: E402


def _sums(requests: int = 0, wru: float = 0, gsi_wru: float = 0, rru: float = 0) -> SimpleNamespace:
    return SimpleNamespace(requests=requests, wru=wru, gsi_wru=gsi_wru, rru=rru)


def _sale(**more: int) -> Usage:
    """One run: a step, a race over two signal names consumed by one signal, a step."""
    fields = dict(
        label="sale",
        per="runs",
        units=1,
        db=_sums(10, 8, 6, 3),
        app=_sums(),
        other={},
        wakes=2,
        fired=0,
        api=2,
        stored_bytes=2000,
        journal_bytes=1000,
        runs=1,
        steps=2,
        sleeps=0,
        awaits=1,
        names=2,
        signals=1,
        timer_fires=0,
    )
    fields.update(more)
    return Usage(**fields)  # type: ignore[arg-type]


def test_a_race_over_two_names_is_two_callbacks_idiomatic_and_one_minimal() -> None:
    u = _sale()
    # start 1 + steps 2 + waitForCallback 3 per callback
    assert u.durable_operations(idiomatic=True) == 1 + 2 + 3 * 2
    assert u.durable_operations(idiomatic=False) == 1 + 2 + 3 * 1
    table = prices.apply([])
    gap = u.durable(table, idiomatic=True) - u.durable(table, idiomatic=False)
    assert gap == pytest.approx(3 * table["durable_operations_per_million"] * 1e-6)


def test_the_peers_pay_the_same_application_work_less_lunaflows_object_locks() -> None:
    table = prices.apply([])
    plain, busy = _sale(), _sale(app=_sums(4, 6, 2, 3), lock_wru=1)
    work = busy.application(table)
    assert work == pytest.approx((6 + 2) * 0.625e-6 + 3 * 0.125e-6)
    assert busy.lines(table)["application work (kv, objects)"] == pytest.approx(work)
    # a peer's step writes an object's state with one conditional write: no lock write
    peers = work - 1 * 0.625e-6
    # and waits on the 4 requests in its Lambda (the next test)
    waited = 4 * prices.ROUND_TRIP_MS / 1000 * prices.MEMORY_MB / 1024 * table["lambda_arm_gb_second"]
    assert busy.durable(table) - plain.durable(table) == pytest.approx(peers + waited)
    assert busy.step_functions(table) - plain.step_functions(table) == pytest.approx(peers + waited)
    assert busy.floor_lines(table)["application work (kv, objects)"] == pytest.approx(peers)


def test_the_floor_counts_one_write_per_run_step_signal_and_fired_timer() -> None:
    table = prices.apply(["dynamodb_wru_per_million=1", "dynamodb_rru_per_million=1"])
    floor = _sale(timer_fires=1, sleeps=1).floor_lines(table)
    assert floor["DynamoDB writes"] == pytest.approx((1 + 2 + 1 + 1) * 1e-6)
    # an all-runs entry once, a waiting-runs entry in and out per wait (an await and a sleep)
    assert floor["DynamoDB index writes"] == pytest.approx((1 + 2 * 2) * 1e-6)
    assert floor["DynamoDB reads"] == pytest.approx((1 + 1) * 1e-6)
    assert floor["Scheduler (fires)"] == pytest.approx(table["scheduler_invocations_per_million"] * 1e-6)


def test_the_floor_with_hand_offs_adds_an_invocation_and_a_read_per_hand_off() -> None:
    """A step with no timeout cannot run while an HTTP request waits: each activation a
    request began that met one (a wake the fetch function handed to the worker) costs the
    floor an invocation, with its time, INIT share and log line, and a read of the run."""
    table = prices.apply([])
    u = _sale(wakes=3, fired=1, handed=2)
    assert u.handoffs() == 2
    floor, handed = u.floor_lines(table), u.floor_handoff_lines(table)
    added = {name: handed[name] - floor[name] for name in floor}
    assert added["DynamoDB reads"] == pytest.approx(2 * table["dynamodb_rru_per_million"] * 1e-6)
    assert added["Lambda requests"] == pytest.approx(2 * table["lambda_requests_per_million"] * 1e-6)
    gb_s = 2 * (prices.HANDLER_MS + prices.ROUND_TRIP_MS) / 1000 * prices.MEMORY_MB / 1024
    assert added["Lambda GB-seconds (arm64, model)"] == pytest.approx(gb_s * table["lambda_arm_gb_second"])
    init_gb_s = 2 * table["cold_start_share"] * table["lunaflow_init_ms"] / 1000 * prices.MEMORY_MB / 1024
    assert added["Lambda INIT (cold share, model)"] == pytest.approx(
        init_gb_s * table["lambda_arm_gb_second"]
    )
    assert added["CloudWatch logs"] == pytest.approx(
        2 * prices.OWN_LOG_BYTES / 2**30 * table["cloudwatch_logs_gb"]
    )
    changed = {"DynamoDB reads", "Lambda requests", "Lambda GB-seconds (arm64, model)"}
    changed |= {"Lambda INIT (cold share, model)", "CloudWatch logs"}
    assert {name for name, dollars in added.items() if dollars} == changed
    # A wake a worker sent (a step signalling another run) or a timer's is no hand-off.
    assert _sale(wakes=3, fired=1).floor_handoff_lines(table) == _sale(wakes=3, fired=1).floor_lines(table)


def test_batched_wakes_lower_lunaflows_invocations_not_its_writes() -> None:
    table = prices.apply([])
    one = _sale(wakes=10).lines(table)
    ten = _sale(wakes=10, batch=10).lines(table)
    assert ten["Lambda requests"] < one["Lambda requests"]
    assert ten["SQS requests"] < one["SQS requests"]
    assert ten["DynamoDB writes"] == one["DynamoDB writes"]


def test_a_hand_off_to_the_runner_is_an_invocation_with_no_queue_requests() -> None:
    """A wake the runner takes (an asynchronous invocation) pays its invocation, and none of
    the wake queue's send, receive and delete; under load it is not batched."""
    table = prices.apply([])
    queued, direct = _sale(wakes=2).lines(table), _sale(wakes=2, direct=1).lines(table)
    assert queued["SQS requests"] - direct["SQS requests"] == pytest.approx(2 * 0.4e-6)  # receive, delete
    assert direct["Lambda requests"] == queued["Lambda requests"]
    loaded = _sale(wakes=20, direct=10, batch=10).lines(table)
    # The queue's ten wakes in one invocation, the runner's ten in ten, and the two requests.
    assert loaded["Lambda requests"] == pytest.approx((1 + 10 + 2) * 0.2e-6)


def test_a_scheduler_fire_is_charged_with_its_sqs_delivery() -> None:
    table = prices.apply([])
    fired, not_fired = _sale(fired=1).lines(table), _sale().lines(table)
    assert fired["Scheduler (fires)"] == pytest.approx(1e-6)
    assert fired["SQS requests"] - not_fired["SQS requests"] == pytest.approx(0.4e-6)


def test_the_bench_measures_a_small_fan_out_and_prints_the_floor_beside_it() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "aws_cost.py"),
            "--all-in-only",
            "--steps",
            "2",
            "--fanout",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "fan-out: 2 parked runs, each woken by a signal" in text
    assert "2 runs, 2 steps, 2 signal waits over 2 names, 0 sleeps, 2 signals, 0 timer fires" in text
    # the auction's timed-out sale: its timer fired through Scheduler, as in production
    assert "1 Scheduler fires" in text and "1 timer fires" in text
    assert "Lambda durable functions, idiomatic" in text and "Lambda durable functions, minimal" in text
    for line in text.splitlines():
        if line.strip().startswith("lunaflow / durable functions:"):
            ours_to_floor = float(line.rsplit("lunaflow / floor", 1)[1])
            assert ours_to_floor >= 1.0, line  # nothing measured beats the floor
        if line.strip().startswith("the floor with its hand-offs:"):
            assert float(line.rsplit("lunaflow / it", 1)[1]) >= 1.0, line
    assert text.count("the floor with its hand-offs:") == 3
    # Hand-offs are the fetch function's: the 2-step run's start, the auction's three starts
    # (its paid sale's wake comes from the payment's step, on the worker), each fan-out signal.
    handed = [
        line.split("(", 1)[1].split(" hand-offs")[0]
        for line in text.splitlines()
        if "with its hand-offs:" in line
    ]
    assert handed == ["1", "3", "2"], handed
    # Each a hand-off to the runner: the fan-out's wakes pay no queue requests.
    fanout = text.split("fan-out: 2 parked runs", 1)[1]
    sqs = next(line for line in fanout.splitlines() if line.strip().startswith("SQS requests"))
    assert sqs.split()[3] == "0.00", sqs
    assert cost_models.__doc__ and "The floor" in cost_models.__doc__
    # Retention: each workload's runs are deleted at their expiry and charged for it, with the
    # same workload's runs kept for ever printed beside it, cheaper by the deletes.
    assert text.count("of which deleting the runs at their expiry ([runs] retention)") == 3
    lines = text.splitlines()
    kept = [float(line.split("$")[1].split()[0]) for line in lines if "runs kept for ever" in line]
    totals = [float(line.split("$")[1].split()[0]) for line in lines if line.strip().startswith("total ")]
    assert len(kept) == len(totals) == 3
    assert all(k < total for k, total in zip(kept, totals, strict=True)), (kept, totals)


def test_the_cost_profile_names_a_journal_append_and_not_the_flows_collection() -> None:
    """Both grow a list in place (``list_append``): only a chunk's (sk ``J#...``) is the
    journal's (a review found the flow's collection labelled as a journal append)."""
    import aws_cost

    grow = {
        "Key": {"pk": {"S": "RUN#r"}, "sk": {"S": "J#0000000002"}},
        "UpdateExpression": "SET #rows = list_append(#rows, :batch)",
    }
    collect = {
        "Key": {"pk": {"S": "RUN#r"}, "sk": {"S": "#C"}},
        "UpdateExpression": "SET events = list_append(events, :e)",
    }
    assert aws_cost.describe("UpdateItem", grow) == "journal append (in place)"
    assert aws_cost.describe("UpdateItem", collect) != "journal append (in place)"


def test_the_cost_model_prices_the_memory_the_stack_gives_a_default_project() -> None:
    from infra.memory import function_memory_mb
    from runtime.engine.sandbox import DEFAULT_MEMORY_BYTES

    assert function_memory_mb(DEFAULT_MEMORY_BYTES) == prices.MEMORY_MB


def test_every_side_waits_in_lambda_on_the_applications_own_requests() -> None:
    """A peer's step bodies make the project's kv and object requests too, and wait on them
    in its Lambda as lunaflow's do: before stop 52 only lunaflow's Lambda time counted them
    (the auction's 16 requests, about $1.71 per million auctions)."""
    table = prices.apply([])
    plain, busy = _sale(), _sale(app=_sums(4, 6, 2, 3), lock_wru=1, lock_requests=1)
    waited = prices.ROUND_TRIP_MS / 1000 * prices.MEMORY_MB / 1024 * table["lambda_arm_gb_second"]
    gb = "Lambda GB-seconds (arm64, model)"
    assert busy.lines(table)[gb] - plain.lines(table)[gb] == pytest.approx(4 * waited)
    work = busy.application(table, peer=True) - plain.application(table, peer=True)
    # less the object lock's request, which a peer's step does without
    assert busy.durable(table) - plain.durable(table) == pytest.approx(work + 3 * waited)
    assert busy.step_functions(table) - plain.step_functions(table) == pytest.approx(work + 3 * waited)
    assert busy.floor_lines(table)[gb] - plain.floor_lines(table)[gb] == pytest.approx(3 * waited)


def test_a_jump_of_the_clock_charges_no_warm_container_s_reads_of_the_names() -> None:
    """A warm container reads the recorded workflow names every ``WORKFLOWS_RECHECK_S``: a
    few reads an hour, not a workload's. The auction's 72-hour jump of the fake clock charged
    its timed-out sale one (0.5 RRU and a round trip) until the bench kept its containers
    warm across a jump (``Deployment.later``)."""
    import aws_cost

    with aws_cost.deployment(aws_cost.STEPS_PROJECT) as d:
        d.later(72 * 3600)
        with d.meter.measuring("after the jump"):
            for rt in (d.front, d.worker):
                for name in sorted(rt.platform.worker.code.workflows):
                    assert rt.store.register_workflow(name)
        assert [c.what for c in d.meter.calls if c.phase == "after the jump"] == []
        d.clock.advance(72 * 3600)  # a jump the containers did not stay warm through
        with d.meter.measuring("cold names"):
            d.worker.store.register_workflow(sorted(d.worker.platform.worker.code.workflows)[0])
        assert [c.op for c in d.meter.calls if c.phase == "cold names"] == ["GetItem"]
