"""Pairing a run's tool calls with the harness's shells, and the harness x model rows (no harness run)."""

from __future__ import annotations

from qb_client.campaign.harness_run import REFUSED, pair, steps_of
from qb_client.campaign.harness_wire import classify, parse_reply, render, skeleton
from qb_client.report.harness_runs import harness_rows, wilson
from tasks.validate import Verdict
from transports.harnesses.agent import Shell


def sh(received: str | None, code: int | None = 0) -> Shell:
    return Shell(seq=0, wrapper=received, received=received, exit_code=code)


def test_each_command_gets_its_own_shell_in_order() -> None:
    pairs, extra = pair(["a", "b", "c"], [sh("a"), sh("b"), sh("c")])
    assert [(c, s.received if s else None) for c, s in pairs] == [("a", "a"), ("b", "b"), ("c", "c")] and extra == 0


def test_a_command_without_a_shell_is_refused_and_a_changed_one_keeps_its_shell() -> None:
    pairs, extra = pair(["a", "b", "c"], [sh("a"), sh("c")])  # the harness never ran b
    assert [(c, s.received if s else None) for c, s in pairs] == [("a", "a"), ("b", None), ("c", "c")] and extra == 0
    pairs, extra = pair(["a", "b"], [sh("a"), sh("B!")])  # b arrived changed
    assert [(c, s.received if s else None) for c, s in pairs] == [("a", "a"), ("b", "B!")] and extra == 0
    pairs, extra = pair(["a"], [sh("x"), sh("a")])  # a shell of the harness's own before it
    assert [(c, s.received if s else None) for c, s in pairs] == [("a", "a")] and extra == 1
    steps = steps_of(pair(["a", "b"], [sh("a", 3)])[0], Verdict(passed=True, checks=[]))
    assert steps[0].exit_code == 3 and steps[1].transport_error == REFUSED and steps[1].received is None
    assert [s.passed for s in steps] == [False, True]  # judged once, at the end


def rec(harness: str, passed: bool, steps: list[dict], model: str = "m") -> dict:
    return {"contract": "harness", "harness": harness, "harness_version": "1", "agent": {"turns": len(steps), "stop": "end"},
            "config": {"provider": "p", "model": model, "effort": "unset", "variant": f"harness={harness}"},
            "verdict": {"passed": passed}, "steps": steps, "timing": {"exec_ms": 2000.0},
            "usage": {"input_tokens": 100, "output_tokens": 10}, "error": None}


def test_the_rows_count_what_the_harness_changed() -> None:
    same = {"command": "x", "received": "x", "exit_code": 0}
    records = [
        rec("a", True, [same]),
        rec("a", False, [same, {"command": "y", "received": "y'", "exit_code": 0}]),  # changed, and looked fine
        rec("a", False, [{"command": "z", "received": None, "exit_code": None}]),  # refused: no shell ran
        rec("b", False, [same, {"command": "w", "received": "w", "exit_code": 1}]),
        {**rec("b", True, [same]), "error": "provider: turn 0: HTTP 500"},  # out of every rate
        {"contract": "raw", "verdict": {"passed": True}},  # not a harness run
    ]
    a, b = harness_rows(records)
    assert (a["harness"], a["n"], a["passed"], a["steps"], a["changed"], a["refused"]) == ("a", 3, 1, 4, 1, 1)
    assert (a["exit_zero_wrong"], a["failing_with_shell"]) == (1, 1)
    assert a["per_run"] == {"turns": 1.33, "steps": 1.33, "seconds": 2.0, "input_tokens": 100.0, "output_tokens": 10.0}
    assert (b["n"], b["passed"], b["exit_zero_wrong"], b["failing_with_shell"]) == (1, 0, 0, 1)
    assert a["ci95"] == wilson(1, 3) and wilson(14, 14) == (0.7847, 1.0)


def test_the_wire_formats_round_trip() -> None:
    for fmt in ("anthropic", "chat"):
        for stream in (False, True):
            body, _ = render(fmt, stream, "m", ["echo 'a b'", "ls"], "hi", 0)
            r = parse_reply(fmt, body)
            assert r.commands == ["echo 'a b'", "ls"] and r.text == "hi", (fmt, stream)
    assert classify("/v1/messages?beta=true", b'{"tools": [{"name": "Bash"}], "stream": true}') == ("anthropic", True, True)
    assert classify("/v1/chat/completions", b'{"tools": [{"type": "function", "function": {"name": "bash"}}]}') == ("chat", True, False)
    assert classify("/v1/messages", b"not json") == ("anthropic", False, False)
    assert classify("/v1/messages/count_tokens", b'{"tools": [{"name": "Bash"}]}') == ("anthropic", False, False)
    assert classify("/other", b"{}")[0] is None
    assert parse_reply("anthropic", b"\xff{garbage").commands == [] and skeleton("chat", b"[1, 2]") == ["tools:"]
