"""The hostile corpus every agent harness route is measured on: 37 commands, one per hazard the harness
survey (HARNESSES.md) probed, each short and harmless (they write files in the working directory only).

Why a corpus of its own
    The reference solutions cover the tasks; these cover what a harness's own handling of the tool call can
    change: quoting, history expansion, parameter syntax, backslashes at every position, heredocs, trailing
    separators, ANSI-C quotes, continuations, brace and process substitution, an outer ``bash -c '...'`` (which
    one harness strips), leading and trailing blanks, unicode, syntax errors and exit codes. A route delivers R
    intact when ``received == R`` on every one of them (tests/test_harness_corpus.py; the per-harness counts
    are in docs/harnesses.md).
"""

from __future__ import annotations

HOSTILE: list[tuple[str, str]] = [
    ("double-quotes", 'echo "hello world" > out.txt'),
    ("single-in-double", "echo \"it's here\" > out.txt"),
    ("escaped-single", "printf '%s\\n' 'Don'\\''t \"quote\" me' > out.txt"),
    ("bang-history", "echo !! !$ '!' \"!\" > out.txt"),
    ("bang-in-double", 'echo "wow!" "a!b" > out.txt'),
    ("dollar-brace", 'x=5; echo "${x}" \'${x}\' ${x:-d} > out.txt'),
    ("dollar-literal", "echo '$HOME' \\$HOME \"\\$HOME\" > out.txt"),
    ("backslash-mid", "printf 'a\\\\b\\tc\\n' > out.txt"),
    ("backslash-end", "echo trailing \\\\ > out.txt"),
    ("backslash-newline", "echo one \\\ntwo > out.txt"),
    ("heredoc-quoted", "cat > out.txt <<'EOF'\n$literal `not run` \\n \"q\" 'q'\nEOF"),
    ("heredoc-expanding", "x=v; cat > out.txt <<EOF\nvalue=$x tab=\\t\nEOF"),
    ("heredoc-tabs", "cat > out.txt <<-EOF\n\tindented\n\tEOF"),
    ("trailing-semicolon", "echo a > out.txt;"),
    ("trailing-ampersand-wait", "echo bg > out.txt & wait"),
    ("ansi-c", "echo $'tab\\there\\nnext' > out.txt"),
    ("continuation-comment", "echo a \\\n  b > out.txt # it's a comment"),
    ("brace-expansion", "echo {a,b}{1,2} > out.txt"),
    ("process-substitution", "cat <(echo inner) > out.txt"),
    ("command-substitution", "echo $(echo sub) > out.txt"),
    ("backticks", "echo `echo tick` > out.txt"),
    ("nested-substitution", "echo \"$(echo \"in 'q' $(echo deep)\")\" > out.txt"),
    ("outer-bash-c", "bash -c 'echo \"wrapped\" > out.txt'"),
    ("outer-sh-c", "sh -c \"echo 'sh wrapped' > out.txt\""),
    ("leading-blanks", "   echo lead > out.txt"),
    ("trailing-blanks", "echo trail > out.txt   "),
    ("trailing-newline", "echo nl > out.txt\n"),
    ("leading-newline", "\necho first-line-empty > out.txt"),
    ("unicode", "echo 'é 漢 🙂 \u200b' > out.txt"),
    ("tab-and-cr", "printf 'a\\tb\\r\\n' > out.txt\t"),
    ("glob-chars", "touch a1 b2; echo [ab]? '*' \"?\" > out.txt"),
    ("semicolons-pipes", "echo a; echo b | tr b c > out.txt && echo ok >> out.txt || true"),
    ("syntax-error", "echo 'unbalanced"),
    ("exit-code", "echo before > out.txt; exit 3"),
    ("set-e", "set -e; false; echo after > out.txt"),
    ("json-ish", "printf '%s\\n' '{\"k\": \"v\\\\n\", \"q\": \"\\u0041\"}' > out.txt"),
    ("percent-format", "printf '%d%%\\n' 50 > out.txt"),
]
"""(name, command): the names are test ids and the keys of docs/harnesses.md's per-harness counts."""



def crashed(record: object) -> bool:
    """The record of a harness that died of a crash signal before its shell: a harness error
    (transports.harnesses.harness.crashed), which a resumed replay retries; tests run it again too."""
    error = getattr(record, "error", None)
    return error is not None and "before it started a shell" in error


assert len(HOSTILE) == 37 and len({n for n, _ in HOSTILE}) == 37
