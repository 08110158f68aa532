"""Providers: the real anthropic and openai SDKs against a scripted local server (loopback only).

One starlette app speaks the three wire formats (Messages, Responses, Chat
Completions; non-streaming), records every request it sees (path, headers, JSON
body) and answers from a per-test script, so each test can assert on what went
over the wire and on what came back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeServer, Scripted, body_for, call_for, error_body, running_fake_server, usage_for

from qb_client.replies.contracts import NATIVE_TOOL, extract, fence
from qb_client.adapters.providers import (
    Generation, GenerationRequest, Provider, ProviderError, RetryPolicy, ToolCall, make_provider,
)
from qb_client.adapters.providers.openai_chat import split_think
from qb_client.adapters.providers.retry import parse_retry_after
from tasks.load import suite

HOSTILE = ("printf '%s\\n' \"a'b\" $HOME `id` \\ ! % * ? [x] {a,b} ~ # ; & | < > (\n"
           "\tnext\rline\r\n é 漢 🙂 \u200b \x7f end\\")
KEY_A = "sk-ant-TESTKEY-a1b2c3d4e5"
KEY_O = "sk-openai-TESTKEY-f6g7h8i9"
FAST = RetryPolicy(tries=3, base_s=0.001, cap_s=0.01, jitter=0.5)
KINDS = ("anthropic", "openai", "openai-chat")
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/responses", "openai-chat": "/v1/chat/completions"}


@pytest.fixture(scope="module")
def live_server() -> Iterator[FakeServer]:
    yield from running_fake_server()


@pytest.fixture
def server(live_server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    live_server.reset()
    for var in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_PROFILE",
                "OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY_A)
    monkeypatch.setenv("OPENAI_API_KEY", KEY_O)
    return live_server


# ---------------------------------------------------------------- helpers


def provider(kind: str, server: FakeServer, effort: str = "unset", params: dict[str, Any] | None = None,
             retry: RetryPolicy = FAST, timeout_s: float = 5.0, base_url: str | None = None) -> Provider:
    return make_provider(f"{kind}:test-model", base_url=base_url or server.url, effort=effort, params=params,
                         retry=retry, timeout_s=timeout_s)


def request(contract: str = "raw", p: Provider | None = None) -> GenerationRequest:
    task = suite()[0]
    config = p.config if p is not None else make_provider("reference").config
    return GenerationRequest.for_task(task, contract, config)


def generate(p: Provider, contract: str = "raw") -> Generation:
    """One generation in a fresh event loop, closing the loop's SDK client afterwards."""
    async def go() -> Generation:
        try:
            return await p.generate(request(contract, p))
        finally:
            close = getattr(p, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(go())


def fail(p: Provider, contract: str = "raw") -> ProviderError:
    with pytest.raises(ProviderError) as info:
        generate(p, contract)
    return info.value


# ---------------------------------------------------------------- replies


@pytest.mark.parametrize("kind", KINDS)
def test_text_replies_with_and_without_fence(server: FakeServer, kind: str) -> None:
    fenced = "Here you go:\n\n```bash\n" + HOSTILE + "\n```\n\nThis writes the file."
    server.queue(Scripted(body=body_for(kind, fenced)), Scripted(body=body_for(kind, "\n  echo plain  \n")))
    p = provider(kind, server)
    gen = generate(p)
    assert gen.text == fenced and gen.tool_calls == []
    assert gen.extract("raw").command == HOSTILE
    gen = generate(p, "disclosed")
    assert gen.extract("disclosed").command == "echo plain"
    assert [s.path for s in server.seen] == [PATHS[kind]] * 2
    sent = server.seen[0].body
    task = suite()[0]
    if kind == "anthropic":
        assert sent["system"] == request().system and sent["messages"] == [{"role": "user", "content": task.instruction}]
        assert "tools" not in sent and sent["max_tokens"] == 32000
    elif kind == "openai":
        assert sent["instructions"] == request().system
        assert sent["input"] == [{"role": "user", "content": task.instruction}] and "tools" not in sent
    else:
        assert sent["messages"] == [{"role": "system", "content": request().system},
                                    {"role": "user", "content": task.instruction}] and "tools" not in sent


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_tool_call_command_is_byte_identical(server: FakeServer, kind: str, ensure_ascii: bool) -> None:
    server.queue(Scripted(body=body_for(kind, None, [call_for(kind, HOSTILE, ensure_ascii), call_for(kind, "no")])))
    gen = generate(provider(kind, server), "native")
    assert len(gen.tool_calls) == 2 and gen.tool_calls[0].name == "bash"
    if kind != "anthropic":
        assert gen.tool_calls[0].arguments == json.dumps({"command": HOSTILE}, ensure_ascii=ensure_ascii)
    e = gen.extract("native")
    assert e.command == HOSTILE and e.command.encode() == HOSTILE.encode()
    tools = server.seen[0].body["tools"]
    if kind == "anthropic":
        assert tools == [NATIVE_TOOL.model_dump()]
    elif kind == "openai":
        assert tools == [{"type": "function", "name": "bash", "description": NATIVE_TOOL.description,
                          "parameters": NATIVE_TOOL.input_schema, "strict": False}]
    else:
        assert tools == [{"type": "function", "function": {"name": "bash", "description": NATIVE_TOOL.description,
                                                           "parameters": NATIVE_TOOL.input_schema}}]


@pytest.mark.parametrize("kind", KINDS)
def test_thinking_is_not_part_of_the_reply(server: FakeServer, kind: str) -> None:
    decoy = "Plan:\n```bash\nrm -rf ~\n```"
    server.queue(Scripted(body=body_for(kind, "```bash\necho real\n```", thinking=decoy)))
    gen = generate(provider(kind, server))
    assert "rm -rf" not in gen.text and gen.reasoning == decoy
    assert gen.extract("raw").command == "echo real"


def test_leading_think_block_of_a_local_model_is_kept_apart(server: FakeServer) -> None:
    server.queue(Scripted(body=body_for("openai-chat", "<think>\n```bash\nrm -rf ~\n```\n</think>\n\n```bash\necho ok\n```")))
    gen = generate(provider("openai-chat", server))
    assert gen.extract("raw").command == "echo ok" and "rm -rf" in (gen.reasoning or "")
    assert split_think("echo <think>x</think>") == ("echo <think>x</think>", None)


@pytest.mark.parametrize("kind", KINDS)
def test_usage_with_reasoning_tokens(server: FakeServer, kind: str) -> None:
    server.queue(Scripted(body=body_for(kind, "ls", usage=usage_for(kind, 123, 456, 78))))
    gen = generate(provider(kind, server))
    assert (gen.usage.input_tokens, gen.usage.output_tokens, gen.usage.reasoning_tokens) == (123, 456, 78)
    assert gen.generate_ms > 0 and gen.attempts == 1 and gen.stop_reason in ("end_turn", "completed", "stop")


@pytest.mark.parametrize("kind", KINDS)
def test_empty_replies(server: FakeServer, kind: str) -> None:
    empty = body_for(kind, None if kind == "openai-chat" else "")
    server.queue(Scripted(body=empty), Scripted(body=empty))
    p = provider(kind, server)
    gen = generate(p)
    assert gen.text == "" and gen.extract("raw").command == ""
    e = generate(p, "native").extract("native")
    assert e.command is None and e.error == "no tool call in the reply"


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_tool_arguments_are_extraction_failures(server: FakeServer, kind: str) -> None:
    if kind == "anthropic":
        bad = [({"cmd": "ls"}, "no 'command' field"), ("ls", "not a JSON object"), ({"command": 7}, "not a string")]
    else:
        bad = [('{"command": "ls"', "not valid JSON"), ('{"cmd": "ls"}', "no 'command' field"),
               ("", "not valid JSON"), ('{"command": ["ls"]}', "not a string")]
    server.queue(*(Scripted(body=body_for(kind, None, [args])) for args, _ in bad))
    p = provider(kind, server)
    for _, reason in bad:
        e = generate(p, "native").extract("native")
        assert e.command is None and reason in (e.error or "")


# ---------------------------------------------------------------- effort and params


@pytest.mark.parametrize("kind", KINDS)
def test_effort_unset_sends_no_field_and_a_set_effort_does(server: FakeServer, kind: str) -> None:
    server.queue(Scripted(body=body_for(kind, "ls")), Scripted(body=body_for(kind, "ls")))
    generate(provider(kind, server, effort="unset"))
    p = provider(kind, server, effort="high")
    generate(p)
    unset, high = server.seen[0].body, server.seen[1].body
    assert p.config.label == f"{kind}:test-model@high"
    if kind == "anthropic":
        assert "output_config" not in unset and high["output_config"] == {"effort": "high"}
    elif kind == "openai":
        assert "reasoning" not in unset and high["reasoning"] == {"effort": "high"}
    else:
        assert "reasoning_effort" not in unset and high["reasoning_effort"] == "high"
    for body in (unset, high):
        assert "effort" not in json.dumps({k: v for k, v in body.items() if k not in ("output_config", "reasoning",
                                                                                      "reasoning_effort")})


def sdk_efforts(kind: str) -> list[str]:
    """The effort values the installed SDK's own types document for the field each provider fills."""
    import typing

    if kind == "anthropic":
        from anthropic.types import OutputConfigParam as Params
        field = "effort"
    elif kind == "openai":
        from openai.types.shared_params import Reasoning as Params
        field = "effort"
    else:
        from openai.types.chat.completion_create_params import CompletionCreateParamsBase as Params
        field = "reasoning_effort"
    found: list[str] = []
    todo = [typing.get_type_hints(Params)[field]]
    while todo:
        t = todo.pop(0)
        args = typing.get_args(t)
        if typing.get_origin(t) is typing.Literal:
            found += [a for a in args if isinstance(a, str) and a not in found]
        else:
            todo += list(args)
    return found


EFFORT_FIELD = {"anthropic": lambda b: b["output_config"]["effort"], "openai": lambda b: b["reasoning"]["effort"],
                "openai-chat": lambda b: b["reasoning_effort"]}


@pytest.mark.parametrize("kind", KINDS)
def test_an_undocumented_effort_is_refused_naming_the_allowed_ones(server: FakeServer, kind: str) -> None:
    allowed = sdk_efforts(kind)
    assert {"low", "medium", "high"} <= set(allowed)
    with pytest.raises(ValueError) as info:
        provider(kind, server, effort="hihg")
    assert str(info.value) == (f"--effort 'hihg': {kind} takes {', '.join(allowed)} (or 'unset' to send none; "
                               "'raw:hihg' sends it unchecked)")
    assert server.seen == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_documented_effort_is_sent_and_raw_passes_a_new_one(server: FakeServer, kind: str) -> None:
    allowed = sdk_efforts(kind)
    server.forever = Scripted(body=body_for(kind, "ls"))
    for effort in allowed:
        generate(provider(kind, server, effort=effort))
    p = provider(kind, server, effort="raw:ultra")
    generate(p)
    assert [EFFORT_FIELD[kind](s.body) for s in server.seen] == [*allowed, "ultra"]
    assert p.config.effort == "ultra" and p.config.label == f"{kind}:test-model@ultra"


def test_a_raw_effort_still_needs_a_word(server: FakeServer) -> None:
    with pytest.raises(ValueError, match="^--effort 'raw:': give a single word after 'raw:' \\(e.g. raw:ultra\\)$"):
        provider("anthropic", server, effort="raw:")


def test_offline_providers_take_any_effort_word_as_a_label() -> None:
    assert make_provider("reference", effort="whatever").config.label == "reference:reference@whatever"
    assert make_provider("habits", effort="raw:ultra").config.effort == "ultra"


def test_params_pass_through_and_are_recorded(server: FakeServer) -> None:
    server.queue(Scripted(body=body_for("anthropic", "ls")), Scripted(body=body_for("openai", "ls")))
    pa = provider("anthropic", server, effort="max", params={"thinking": {"type": "adaptive"}, "max_tokens": 64000})
    generate(pa)
    assert server.seen[0].body["thinking"] == {"type": "adaptive"} and server.seen[0].body["max_tokens"] == 64000
    assert server.seen[0].body["output_config"] == {"effort": "max"}
    assert pa.config.params == {"thinking": {"type": "adaptive"}, "max_tokens": 64000}
    po = provider("openai", server, effort="low", params={"reasoning": {"summary": "auto"}, "max_output_tokens": 900})
    generate(po)
    assert server.seen[1].body["reasoning"] == {"summary": "auto", "effort": "low"}
    assert server.seen[1].body["max_output_tokens"] == 900


@pytest.mark.parametrize("kind, params, match", [
    ("anthropic", {"output_config": {"effort": "low"}}, "--effort"),
    ("openai", {"reasoning": {"effort": "low"}}, "--effort"),
    ("openai-chat", {"reasoning_effort": "low"}, "may not set 'reasoning_effort'"),
    ("openai-chat", {"reasoning": {"effort": "low"}}, "not in params 'reasoning.effort'"),
    ("openai-chat", {"chat_template_kwargs": {"reasoning_effort": "low"}},
     "not in params 'chat_template_kwargs.reasoning_effort'"),
    ("anthropic", {"messages": []}, "may not set 'messages'"),
    ("openai-chat", {"api_key": "x"}, "keys come from the environment"),
    ("anthropic", {"extra_headers": {"x": "y"}}, "keys come from the environment"),
])
def test_params_that_would_lie_or_leak_are_refused(server: FakeServer, kind: str, params: dict[str, Any],
                                                    match: str) -> None:
    with pytest.raises(ValueError, match=match):
        provider(kind, server, params=params)


# ---------------------------------------------------------------- retries and errors


@pytest.mark.parametrize("kind", KINDS)
def test_429_then_success_is_retried(server: FakeServer, kind: str) -> None:
    server.queue(Scripted(429, error_body("slow down"), {"retry-after": "0"}), Scripted(body=body_for(kind, "ls")))
    gen = generate(provider(kind, server))
    assert gen.text == "ls" and gen.attempts == 2 and len(server.seen) == 2


def test_retry_after_is_honoured(server: FakeServer) -> None:
    server.queue(Scripted(429, error_body("later"), {"retry-after-ms": "300"}), Scripted(body=body_for("openai", "ls")))
    started = time.monotonic()
    gen = generate(provider("openai", server))
    assert gen.attempts == 2 and time.monotonic() - started >= 0.28


@pytest.mark.parametrize("kind", KINDS)
def test_500_forever_gives_a_provider_error_after_n_tries(server: FakeServer, kind: str) -> None:
    server.forever = Scripted(500, error_body("upstream\nexploded"))
    err = fail(provider(kind, server))
    assert len(server.seen) == FAST.tries and err.attempts == FAST.tries and err.status == 500 and err.retryable
    assert str(err) == f"{kind}:test-model@unset: HTTP 500: upstream exploded (after 3 tries)"
    assert "\n" not in repr(err)


@pytest.mark.parametrize("kind", KINDS)
def test_other_4xx_is_not_retried(server: FakeServer, kind: str) -> None:
    server.queue(Scripted(400, error_body("bad model name")))
    err = fail(provider(kind, server))
    assert len(server.seen) == 1 and err.status == 400 and not err.retryable
    assert str(err) == f"{kind}:test-model@unset: HTTP 400: bad model name"


def test_plain_text_error_bodies_are_reported(server: FakeServer) -> None:
    server.queue(Scripted(404, "no such route"))
    assert "HTTP 404: no such route" in str(fail(provider("openai-chat", server)))


@pytest.mark.parametrize("kind", KINDS)
def test_a_2xx_that_is_not_the_api_shape_is_an_error(server: FakeServer, kind: str) -> None:
    server.queue(Scripted(200, "<html>proxy page</html>"), Scripted(200, {"unexpected": True}))
    p = provider(kind, server)
    assert str(fail(p)) == f"{kind}:test-model@unset: the response body is not valid JSON"
    assert "the response has no" in str(fail(p)) and len(server.seen) == 2


def test_an_html_page_served_as_html_is_named_not_taken_for_an_empty_reply(server: FakeServer) -> None:
    """A 200 HTML page (a proxy's or a web UI's, behind a wrong base URL) once read "the response has no
    choices"."""
    server.queue(Scripted(200, "<html><body>Welcome to the web UI</body></html>",
                          headers={"content-type": "text/html; charset=utf-8"}))
    message = str(fail(provider("openai-chat", server)))
    assert "not JSON" in message and "Welcome to the web UI" in message and "no choices" not in message


def _malformed(kind: str, what: str) -> dict[str, Any]:
    body = body_for(kind, "ls")
    if what == "usage":
        body["usage"][{"anthropic": "input_tokens", "openai": "input_tokens", "openai-chat": "prompt_tokens"}[kind]] = 1.5
    elif what == "usage-text":
        body["usage"]["output_tokens" if kind != "openai-chat" else "completion_tokens"] = "many"
    elif kind == "anthropic":
        body["stop_reason"] = ["end_turn"]
    elif kind == "openai":
        body["status"] = 7
    else:
        body["choices"][0]["finish_reason"] = 7
    return body


@pytest.mark.parametrize("what", ["usage", "usage-text", "stop"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_2xx_with_wrongly_typed_fields_is_a_provider_error(server: FakeServer, kind: str, what: str) -> None:
    server.forever = Scripted(200, _malformed(kind, what))
    err = fail(provider(kind, server))
    assert str(err).startswith(f"{kind}:test-model@unset: the response is not the API's shape: field '")
    assert not err.retryable and err.attempts == 1 and len(server.seen) == 1 and "\n" not in str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_408_is_retried(server: FakeServer, kind: str) -> None:
    server.queue(Scripted(408, error_body("request timeout")), Scripted(body=body_for(kind, "ls")))
    gen = generate(provider(kind, server))
    assert gen.text == "ls" and gen.attempts == 2 and len(server.seen) == 2


def test_connection_errors_are_retried(server: FakeServer) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens there now: connection refused, on loopback
    p = make_provider("openai-chat:m", base_url=dead, retry=RetryPolicy(tries=2, base_s=0.001, cap_s=0.01))
    err = fail(p)
    assert err.attempts == 2 and err.status is None and "connection error" in str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_timeouts_are_retried(server: FakeServer, kind: str) -> None:
    server.forever = Scripted(body=body_for(kind, "ls"), delay=1.0)
    p = provider(kind, server, timeout_s=0.2, retry=RetryPolicy(tries=2, base_s=0.001, cap_s=0.01))
    err = fail(p)
    assert "timed out" in str(err) and err.attempts == 2 and len(server.seen) == 2


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None
    assert RetryPolicy(base_s=10, cap_s=30).backoff(5) == 30


# ---------------------------------------------------------------- keys


@pytest.mark.parametrize("kind", KINDS)
def test_key_goes_in_the_header_and_nowhere_else(server: FakeServer, kind: str) -> None:
    key = KEY_A if kind == "anthropic" else KEY_O
    server.queue(Scripted(body=body_for(kind, "ls", [call_for(kind, "ls")])),
                 Scripted(401, error_body(f"invalid key {key} (Bearer {key})")))
    p = provider(kind, server, effort="low")
    gen = generate(p, "native")
    assert server.seen[0].headers["authorization"] == f"Bearer {key}"
    err = fail(p)
    assert err.status == 401 and len(server.seen) == 2
    for text in (gen.model_dump_json(), repr(p), str(p), p.config.model_dump_json(), str(err), repr(err),
                 repr(vars(p))):
        assert key not in text
    assert "***" in str(err)


def test_openai_chat_needs_no_key(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    server.queue(Scripted(body=body_for("openai-chat", "ls")))
    generate(provider("openai-chat", server))
    assert server.seen[0].headers["authorization"] == "Bearer sk-no-key"
    with pytest.raises(ValueError, match="set OPENAI_API_KEY"):
        make_provider("openai:gpt-x")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ValueError, match="set ANTHROPIC_API_KEY"):
        make_provider("anthropic:claude-x")


def test_base_urls_are_normalised(server: FakeServer) -> None:
    server.queue(Scripted(body=body_for("anthropic", "a")), Scripted(body=body_for("openai-chat", "b")))
    generate(provider("anthropic", server, base_url=server.url + "/v1/"))
    generate(provider("openai-chat", server, base_url=server.url + "/v1"))
    assert [s.path for s in server.seen] == ["/v1/messages", "/v1/chat/completions"]


def test_one_provider_serves_two_event_loops(server: FakeServer) -> None:
    server.queue(Scripted(body=body_for("openai", "a")), Scripted(body=body_for("openai", "b")))
    p = provider("openai", server)
    assert generate(p).text == "a" and generate(p).text == "b"


# ---------------------------------------------------------------- factory and offline providers


@pytest.mark.parametrize("spec, match", [
    ("gemini:pro", "unknown provider 'gemini'"),
    ("anthropic", "anthropic needs MODEL"),
    ("openai-chat:", "openai-chat needs MODEL"),
    ("replay", "replay needs FILE"),
    ("reference:x", "reference takes no model"),
])
def test_factory_refuses_bad_specs_in_one_line(spec: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        make_provider(spec)
    assert "\n" not in str(info.value)


def test_offline_providers_refuse_a_base_url() -> None:
    with pytest.raises(ValueError, match="--base-url is only for"):
        make_provider("reference", base_url="http://127.0.0.1:1")


def test_reference_provider_goes_through_extraction() -> None:
    p = make_provider("reference")
    assert isinstance(p, Provider) and p.config.label == "reference:reference@unset"
    for task in suite()[:8]:
        for contract, want in (("raw", task.solution), ("native", task.solution),
                               ("disclosed", task.solution_disclosed),
                               ("disclosed-single", task.solution.replace("'", "'\\''"))):
            gen = asyncio.run(p.generate(GenerationRequest.for_task(task, contract, p.config)))
            assert gen.command is None and gen.extract(contract).command == want
            assert (gen.tool_calls != []) == (contract == "native")


def write_store(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln, ensure_ascii=False)) + "\n"
                            for ln in lines), encoding="utf-8")
    return path


def test_replay_provider(tmp_path: Path) -> None:
    t0, t1, t2 = (t.id for t in suite()[:3])
    cfg = {"provider": "anthropic", "model": "m", "effort": "high", "params": {}}
    store = write_store(tmp_path / "replies.jsonl", [
        {"task_id": t0, "command": HOSTILE, "reply_id": "r-1", "config": cfg},
        {"task_id": t0, "reply": "```bash\necho disclosed\n```", "contract": "disclosed", "draw": 1, "config": cfg},
        {"task_id": t1, "command": HOSTILE, "contract": "native", "config": cfg,
         "usage": {"input_tokens": 5}, "timing": {"generate_ms": 12.5}},
        {"task_id": t2, "reply": "", "contract": "native", "config": cfg,
         "tool_calls": [{"name": "bash", "arguments": '{"command": "echo tc"}'}]},
        {"task_id": t0, "command": HOSTILE, "reply_id": "r-1", "config": cfg},  # an exact repeat: dropped
    ])
    with open(store, "a", encoding="utf-8") as fh:
        fh.write('{"task_id": "torn')  # the last write, cut short by a kill (no newline)
    p = make_provider(f"replay:{store}")
    assert p.config.label == "anthropic:m@high"
    tasks = {t.id: t for t in suite()}

    def gen(task_id: str, contract: str, draw: int = 0) -> Generation:
        return asyncio.run(p.generate(GenerationRequest.for_task(tasks[task_id], contract, p.config, draw)))

    g = gen(t0, "raw")
    assert g.extract("raw").command == HOSTILE and extract("raw", g.text).command == HOSTILE and g.reply_id == "r-1"
    assert gen(t0, "disclosed", 1).extract("disclosed").command == "echo disclosed"
    g = gen(t1, "native")
    assert extract("native", g.text, g.tool_calls).command == HOSTILE
    assert g.usage.input_tokens == 5 and g.generate_ms == 12.5
    assert gen(t2, "native").extract("native").command == "echo tc"
    with pytest.raises(ProviderError, match=f"no reply for task {t0}, contract disclosed, draw 0 in {store}"):
        gen(t0, "disclosed")


@pytest.mark.parametrize("lines, match", [
    ([{"command": "ls"}, {"task_id": "x", "command": "ls"}], "line 1: field 'task_id': Field required"),
    ([{"task_id": "x"}], "line 1: needs a 'command' or a 'reply'"),
    (["not json", {"task_id": "x", "command": "ls"}], "line 1: not valid JSON"),
    ([{"task_id": "x", "command": "ls", "contract": "nested"}], "line 1: field 'contract': unknown contract"),
    ([{"task_id": "x", "command": "a", "config": {"model": "a"}},
      {"task_id": "x", "command": "b", "config": {"model": "b"}}], "line 2: a second reply for x raw draw 0"),
    ([], "holds no replies"),
])
def test_replay_store_errors_name_the_file_and_line(tmp_path: Path, lines: list[Any], match: str) -> None:
    store = write_store(tmp_path / "bad.jsonl", lines)
    with pytest.raises(ValueError, match=match) as info:
        make_provider(f"replay:{store}")
    assert str(store) in str(info.value)


def test_replay_provider_refuses_a_torn_line_in_the_middle(tmp_path: Path) -> None:
    t0, t1 = (t.id for t in suite()[:2])
    store = tmp_path / "replies.jsonl"
    store.write_text(json.dumps({"task_id": t0, "command": "echo a"}) + "\n" + '{"task_id": "' + t1 + '", "comm\n'
                     + json.dumps({"task_id": t1, "command": "echo b"}) + "\n")
    with pytest.raises(ValueError, match=r"line 2: not valid JSON \(") as info:
        make_provider(f"replay:{store}")
    assert str(info.value).startswith(f"{store}: line 2:") and "\n" not in str(info.value)


def test_generation_extract_prefers_a_stored_command() -> None:
    g = Generation(text="```\nfrom text\n```", tool_calls=[ToolCall(name="bash", arguments='{"command": "t"}')],
                   command="stored")
    assert g.extract("raw").command == "stored" and g.extract("raw").method == "stored"
    assert Generation(text=fence("x")).extract("raw").command == "x"
