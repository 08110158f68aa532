"""Word banks and phrase makers for generated payloads, one maker per hazard class.

Each maker draws from its ``random.Random`` only (no global state) and returns
text of a realistic shape whose hazard is built in by construction:

* ``control``: letters, digits and spaces only;
* ``h1``: at least one single and one double quote;
* ``h2``: at least one of ``$NAME``/``${...}``/``$(...)`` or a backtick pair (what a double-quoted
  paste expands), plus some of ``\\``, ``%``, ``!``;
* ``h3``: newlines, leading dashes, globs, trailing whitespace and parser-boundary conflicts.

The family makers (:mod:`tasks.gen_files`, :mod:`tasks.gen_programs`) give these
pieces their shapes: filenames, JSON values, sed patterns, commit messages.
"""

from __future__ import annotations

from random import Random

FIRST = ("Ana", "Ben", "Carla", "Dana", "Eli", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kai", "Lena", "Marta",
         "Nils", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tomas", "Uma", "Vera", "Wes", "Yara", "Zoe")
APOSTROPHE_NAMES = ("O'Brien", "O'Neil", "D'Angelo", "O'Hara", "D'Souza", "O'Connor", "L'Estrange", "O'Malley")
CONTRACTIONS = ("don't", "can't", "isn't", "won't", "it's", "we're", "they're", "that's", "doesn't", "shouldn't",
                "wasn't", "you're", "didn't", "aren't")
QUOTED = ("final", "staging", "beta", "legacy", "urgent", "draft", "checkout", "prod", "hotfix", "nightly",
          "approved", "pending", "read only", "do not merge")
NOUNS = ("report", "invoice", "backup", "release", "server", "cluster", "queue", "worker", "budget", "summary",
         "ticket", "order", "schedule", "config", "mirror", "archive", "payroll", "roadmap", "export", "survey")
VERBS = ("shipped", "restored", "approved", "deployed", "archived", "rotated", "reviewed", "merged", "scheduled",
         "renamed", "migrated", "cleared", "exported", "tagged")
PLACES = ("London", "Porto", "Lagos", "Oslo", "Quito", "Osaka", "Tartu", "Lyon", "Accra", "Perth")
ADJ = ("weekly", "quarterly", "nightly", "monthly", "daily", "annual", "regional", "internal", "legacy", "shared")
EXTS = ("log", "csv", "txt", "json", "md", "bak", "cfg", "tmp", "xml", "yml")
VARS = ("HOME", "PATH", "USER", "TMPDIR", "DATA_DIR", "APP_HOME", "BUILD_ID", "RELEASE", "PWD", "LANG")
SUBSTITUTIONS = ("$(date +%F)", "$(whoami)", "$(hostname -s)", "`date +%s`", "`whoami`", "`git rev-parse HEAD`",
                 "`cat VERSION`", "$(cat VERSION)")
WIN_DIRS = ("Users", "deploy", "bin", "logs", "backup", "Program Files", "temp", "share", "finance", "reports")


def pick(rng: Random, seq):
    return seq[rng.randrange(len(seq))]


def number(rng: Random, lo: int = 2, hi: int = 999) -> str:
    return str(rng.randint(lo, hi))


def control_phrase(rng: Random) -> str:
    """Letters, digits and spaces: ``Ana shipped 12 orders to Porto``."""
    shapes = (
        lambda: f"{pick(rng, FIRST)} {pick(rng, VERBS)} {number(rng)} {pick(rng, NOUNS)}s",
        lambda: f"{pick(rng, ADJ).capitalize()} {pick(rng, NOUNS)} {number(rng)} {pick(rng, VERBS)} in {pick(rng, PLACES)}",
        lambda: f"{pick(rng, NOUNS).capitalize()} {number(rng)} is ready for {pick(rng, FIRST)} and {pick(rng, FIRST)}",
        lambda: f"All {number(rng, 2, 40)} {pick(rng, NOUNS)}s {pick(rng, VERBS)} without errors",
    )
    return pick(rng, shapes)()


def h1_phrase(rng: Random) -> str:
    """Both kinds of quote: an apostrophe and a double-quoted word."""
    q = pick(rng, QUOTED)
    shapes = (
        lambda: f"{pick(rng, CONTRACTIONS).capitalize()} touch the \"{q}\" {pick(rng, NOUNS)} before {number(rng, 1, 12)} o'clock",
        lambda: f"{pick(rng, APOSTROPHE_NAMES)} said \"{q}\" about the {pick(rng, NOUNS)}",
        lambda: f"The \"{q}\" {pick(rng, NOUNS)} {pick(rng, CONTRACTIONS)} ready for {pick(rng, FIRST)}'s team",
        lambda: f"{pick(rng, FIRST)}'s \"{q}\" {pick(rng, NOUNS)} {pick(rng, CONTRACTIONS)} signed off",
    )
    return pick(rng, shapes)()


def windows_path(rng: Random, trailing: bool = False) -> str:
    parts = [pick(rng, WIN_DIRS) for _ in range(rng.randint(1, 3))]
    return "C:\\" + "\\".join(parts) + ("\\" if trailing else "")


def secret(rng: Random) -> str:
    """A password-like token with ``$``, a backtick pair, ``!`` and ``%`` (and sometimes a backslash)."""
    head = pick(rng, ("Pa", "N3w", "Pr0d", "S3cr", "Qx", "Lv", "Zz9"))
    mid = pick(rng, ("$$", "$", "$ecret", "$Ab"))
    tail = pick(rng, ("`2024`", "`x`", "`42`", "`id`"))
    end = pick(rng, ("!", "!%", "%!", "\\!", "!\\"))
    return f"{head}{mid}w{number(rng, 0, 99)}{tail}{end}"


def h2_phrase(rng: Random) -> str:
    """Something a double-quoted paste expands (``$NAME``, ``$(...)`` or backticks), with ``%``, ``!``, ``\\``."""
    var = pick(rng, VARS)
    shapes = (
        lambda: f"Total: ${number(rng, 2, 99)}.{number(rng, 10, 99)} ({number(rng, 5, 90)}% off!) via `{pick(rng, NOUNS)}` code",
        lambda: f"Copy {windows_path(rng, True)} to ${var}/{pick(rng, NOUNS)}s ({number(rng, 2, 99)}% done!)",
        lambda: f"Backup written on {pick(rng, SUBSTITUTIONS)} to ${{{var}}}\\{pick(rng, NOUNS)} (100%!)",
        lambda: f"Run `{pick(rng, ('df -h', 'uptime', 'id -u', 'ls -la'))}` if ${var} is {number(rng, 50, 99)}% full!",
        lambda: f"Password is {secret(rng)} for {pick(rng, FIRST)}",
    )
    return pick(rng, shapes)()


def glob_word(rng: Random) -> str:
    shapes = (
        lambda: f"*.{pick(rng, EXTS)}",
        lambda: f"{pick(rng, NOUNS)}-?.{pick(rng, EXTS)}",
        lambda: f"[{pick(rng, ('a-z', '0-9', '._', 'Rr', 'ab'))}]*.{pick(rng, EXTS)}",
        lambda: f"{pick(rng, NOUNS)}[0-9]*",
    )
    return pick(rng, shapes)()


def h3_line(rng: Random) -> str:
    """One line with a leading dash and a glob (``- rotate *.log``, ``--exclude [._]*.tmp``)."""
    shapes = (
        lambda: f"- {pick(rng, VERBS[:6])} {glob_word(rng)} in {pick(rng, NOUNS)}s/",
        lambda: f"--exclude {glob_word(rng)}",
        lambda: f"- keep {pick(rng, NOUNS)}-?.tar.gz and {glob_word(rng)}",
        lambda: f"-{pick(rng, ('n', 'e', 'rf', 'v'))} {glob_word(rng)} [{pick(rng, NOUNS)}]",
    )
    return pick(rng, shapes)()


def h3_lines(rng: Random, n: int | None = None) -> list[str]:
    """Several lines: leading dashes and globs, one with trailing whitespace."""
    lines = [h3_line(rng) for _ in range(n or rng.randint(2, 4))]
    k = rng.randrange(len(lines))
    lines[k] += pick(rng, ("  ", " ", "\t", "   "))
    return lines


def boundary_fragment(rng: Random) -> str:
    """A parser-boundary conflict: text that means something to the shell on the far side of a paste."""
    return pick(rng, (f'# don\'t touch "${pick(rng, VARS)}" here', f'echo "${{{pick(rng, VARS)}}}" done',
                      f'cd "${pick(rng, VARS)}/{pick(rng, NOUNS)}s" && ls', f'test -n "$1" || exit 1'))
