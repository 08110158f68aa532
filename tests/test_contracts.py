"""Contracts: prompt texts, and the SPEC extraction rule on every edge case we decided."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qb_client.replies.contracts import (
    CONTRACTS, NATIVE_TOOL, PROMPT_VERSION, SYSTEM_TEMPLATES, ToolCall, UnknownContractError, build_messages,
    extract, extract_command, extract_text, extract_tool_call, fence, quote_for_single, reference_reply, tools_for,
)
from tasks.load import suite

HOSTILE = "printf '%s\\n' \"a'b\" $HOME `id` ! % * ? [x] {a,b} ~ # ; & | < > (\n\tnext\r\nline é 漢 🙂 \u200b end\\"


# ---------------------------------------------------------------- prompts


def test_prompt_version_and_every_contract_has_a_template() -> None:
    assert PROMPT_VERSION
    assert set(SYSTEM_TEMPLATES) == set(CONTRACTS)


def test_messages_carry_the_instruction_verbatim_for_every_contract() -> None:
    for task in suite():
        for c in CONTRACTS:
            system, user = build_messages(task, c)
            assert user == task.instruction
            assert system == SYSTEM_TEMPLATES[c]


def test_each_contract_states_its_boundary() -> None:
    assert "`bash -c`" in SYSTEM_TEMPLATES["raw"] and "verbatim" in SYSTEM_TEMPLATES["raw"]
    assert '`bash -c "R"`' in SYSTEM_TEMPLATES["disclosed"] and "unescaped" in SYSTEM_TEMPLATES["disclosed"]
    assert "`bash -c 'R'`" in SYSTEM_TEMPLATES["disclosed-single"]
    assert "unescaped" in SYSTEM_TEMPLATES["disclosed-single"]


def test_native_says_nothing_about_shells_beyond_the_tool() -> None:
    native = SYSTEM_TEMPLATES["native"].lower()
    for word in ("bash -c", "shell", "quot", "escape", "interpolat", "verbatim", "fence"):
        assert word not in native
    assert "`bash` tool" in native
    assert tools_for("native") == [NATIVE_TOOL]
    assert NATIVE_TOOL.input_schema["properties"] == {"command": {"type": "string", "description": "The command to run."}}
    assert all(tools_for(c) == [] for c in CONTRACTS if c != "native")


def test_unknown_contract_is_refused() -> None:
    task = suite()[0]
    with pytest.raises(UnknownContractError, match="unknown contract 'nested'"):
        build_messages(task, "nested")


# ---------------------------------------------------------------- text extraction


@pytest.mark.parametrize("reply, command, method", [
    ("echo hi", "echo hi", "whole"),
    ("\n\n  echo hi  \n\n", "echo hi", "whole"),
    ("", "", "whole"),
    ("   \n\t ", "", "whole"),
    ("Here:\n```\necho hi\n```\nDone.", "echo hi", "fence"),
    ("```bash\necho hi\n```", "echo hi", "fence"),
    ("```sh title=x\necho hi\n```", "echo hi", "fence"),
    ("~~~bash\necho hi\n~~~", "echo hi", "fence"),
    ("~~~\nx\n```\ny\n~~~", "x\n```\ny", "fence"),                    # ``` does not close ~~~
    ("````bash\n```\ninner\n```\n````\n", "```\ninner\n```", "fence"),  # longer fence holds ``` lines
    ("```\na\n`````\n", "a", "fence"),                                 # a longer closing fence closes
    ("````\na\n```\nb\n````", "a\n```\nb", "fence"),                   # a shorter one does not
    ("```bash\n\n\necho hi\n\n\n```", "\n\necho hi\n\n", "fence"),     # blank edge lines kept
    ("```bash\necho hi\n\n```", "echo hi\n", "fence"),                 # only the last newline goes
    ("```bash\n```", "", "fence"),
    ("```bash\r\necho a\r\necho b\r\n```\r\n", "echo a\r\necho b\r", "fence"),  # CRLF: CRs stay in R
    ("   ```bash\n  echo hi\n   ```", "  echo hi", "fence"),          # indented fence, body verbatim
    ("    ```bash\necho hi", "```bash\necho hi", "whole"),           # 4 spaces: not a fence
    ("    ```bash\necho hi\n```", "", "fence-unterminated"),          # ... so the last ``` opens one
    ("```bash\necho hi\n```  \n", "echo hi", "fence"),                 # trailing blanks after closing
    ("```bash\necho hi\n``` x\n```", "echo hi\n``` x", "fence"),       # ``` x is not a closing fence
    ("run ```echo hi``` now", "run ```echo hi``` now", "whole"),       # inline, not at line start
    ("```a`b\necho hi", "```a`b\necho hi", "whole"),                # backtick in info: not an opening
    ("```bash\necho hi\n", "echo hi", "fence-unterminated"),
    ("```bash\necho hi", "echo hi", "fence-unterminated"),
    ("```bash\necho hi\n\n", "echo hi\n", "fence-unterminated"),
    ("```bash\n", "", "fence-unterminated"),
    ("```one\nfirst\n```\n```two\nsecond\n```", "first", "fence"),      # the first block wins
    ("```text\nnot bash\n```\n```bash\necho\n```", "not bash", "fence"),  # even if not bash
])
def test_extract_text(reply: str, command: str, method: str) -> None:
    e = extract_text(reply)
    assert (e.command, e.method, e.error) == (command, method, None)


def test_hostile_body_survives_a_fence_byte_for_byte() -> None:
    assert extract_text("Sure:\n```bash\n" + HOSTILE + "\n```\nBye").command == HOSTILE
    assert extract_text(HOSTILE).command == HOSTILE.strip(" \t\n\r\f\v")


@given(st.text(alphabet=st.sampled_from(list("`~ \t\r\n\\'\"$ab!*?[]#é🙂")), max_size=60))
@settings(max_examples=400, deadline=None)
def test_fence_round_trips_any_command(command: str) -> None:
    assert extract_text(fence(command)).command == command
    assert extract_text("Preamble ```not a fence```\n" + fence(command) + "trailing ```\n").command == command


# ---------------------------------------------------------------- native extraction


def call(arguments: str, name: str = "bash") -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def test_tool_call_command_is_exact() -> None:
    for ensure_ascii in (True, False):
        args = json.dumps({"command": HOSTILE}, ensure_ascii=ensure_ascii)
        assert extract_tool_call([call(args)]).command == HOSTILE


def test_first_tool_call_wins_and_extra_fields_are_ignored() -> None:
    e = extract_tool_call([call('{"command": "a", "restart": false}'), call('{"command": "b"}')])
    assert (e.command, e.method) == ("a", "tool-call")


@pytest.mark.parametrize("arguments, reason", [
    ("not json {", "not valid JSON"),
    ("", "not valid JSON"),
    ('["ls"]', "not a JSON object"),
    ('"ls"', "not a JSON object"),
    ('{"cmd": "ls"}', "no 'command' field"),
    ('{"command": 5}', "'command' is a int, not a string"),
    ('{"command": null}', "'command' is a NoneType, not a string"),
])
def test_malformed_tool_arguments_fail_with_a_reason(arguments: str, reason: str) -> None:
    e = extract_tool_call([call(arguments)])
    assert e.command is None and not e.ok
    assert reason in (e.error or "") and "'bash'" in (e.error or "")


def test_no_tool_call_is_a_failure() -> None:
    e = extract("native", "I would run ```ls```", [])
    assert (e.command, e.method, e.error) == (None, "none", "no tool call in the reply")
    assert extract_command("echo hi", "native") == (None, "no tool call in the reply")
    assert extract_command("```\necho hi\n```", "disclosed") == ("echo hi", None)


def test_text_contracts_ignore_tool_calls() -> None:
    assert extract("raw", "echo text", [call('{"command": "echo tool"}')]).command == "echo text"


# ---------------------------------------------------------------- reference replies


def test_reference_replies_extract_to_the_task_solutions() -> None:
    for task in suite():
        expected = {"raw": task.solution, "native": task.solution, "disclosed": task.solution_disclosed,
                    "disclosed-single": task.solution.replace("'", "'\\''")}
        for c in CONTRACTS:
            ref = reference_reply(task, c)
            assert ref.command == expected[c]
            assert extract(c, ref.text, ref.tool_calls).command == expected[c]
            if c == "native":
                assert ref.text == "" and ref.tool_calls[0].name == "bash"
            else:
                assert ref.text.startswith("```") and "bash\n" in ref.text.splitlines(True)[0]


def test_quote_for_single() -> None:
    assert quote_for_single("echo 'a' b") == "echo '\\''a'\\'' b"
