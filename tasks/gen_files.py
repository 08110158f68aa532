"""Payload makers for the families that work on files: their payload, reference solution and note per tier.

Each maker is ``maker(rng, tier) -> (payload, solution, note)``. The payload has
exactly the fields the family's templates name (see ``tasks/families``); the
solution is built by :mod:`tasks.gen_quote` from the payload alone.
"""

from __future__ import annotations

import fnmatch
from random import Random
from typing import Any

from .gen_quote import heredoc, sed_substitute, sq, word, write_text
from .gen_text import (ADJ, EXTS, FIRST, NOUNS, PLACES, QUOTED, boundary_fragment, control_phrase, glob_word,
                       h1_phrase, h2_phrase, h3_line, h3_lines, number, pick, secret, windows_path)

Drawn = tuple[dict[str, Any], str, str]


def filename(rng: Random, ext: str | None = None) -> str:
    return f"{pick(rng, NOUNS)}-{pick(rng, ADJ)}.{ext or pick(rng, ('txt', 'md', 'log', 'cfg'))}"


# ---------------------------------------------------------------- file-write


def file_write(rng: Random, tier: str) -> Drawn:
    path = filename(rng, "txt")
    if tier == "control":
        content = control_phrase(rng) + "\n"
    elif tier == "h1":
        content = h1_phrase(rng) + ".\n"
    elif tier == "h2":
        content = h2_phrase(rng) + "\n"
    else:
        lines = h3_lines(rng)
        content = "\n".join(lines) + pick(rng, ("", "\n", "  "))
    return {"path": path, "content": content}, write_text(content, f"> {word(path)}"), ""


# ---------------------------------------------------------------- file-append


def file_append(rng: Random, tier: str) -> Drawn:
    other = "README.md"
    if tier == "control":
        path = pick(rng, ("deploy.log", "changelog.txt", "visits.log", "queue.txt"))
        existing = "".join(f"2024-05-0{d} {pick(rng, ('deployed', 'tested', 'tagged'))} build {100 + d}\n" for d in (1, 2))
        line = f"2024-05-03 {control_phrase(rng)}\n"
    elif tier == "h1":
        path = pick(rng, ("contacts.csv", "customers.csv", "guests.csv"))
        existing = f"id,name,city\n1,\"Smith, Jo\",{pick(rng, PLACES)}\n"
        line = f"{number(rng, 2, 99)},\"{pick(rng, ('O', 'D'))}'{pick(rng, FIRST)}, {pick(rng, FIRST)}\",\"{pick(rng, ('St. John', 'King', 'Queen'))}'s {pick(rng, ('Road', 'Yard', 'Court'))}\"\n"
    elif tier == "h2":
        path = pick(rng, (".pgpass", ".netrc-backup", "secrets.env"))
        existing = "localhost:5432:app:app:devpass\n"
        line = f"db{number(rng, 1, 9)}.internal:5432:{pick(rng, NOUNS)}:svc_{pick(rng, NOUNS)}:{secret(rng)}\n"
    else:
        ext = pick(rng, EXTS)
        path = pick(rng, ("backup.filter", "rsync.rules", ".ignore-list"))
        other = f"{pick(rng, NOUNS)}.{ext}"
        existing = "- .git/\n- node_modules/\n"
        line = f"- *.{ext}{pick(rng, ('', '  ', ' '))}\n"
    payload = {"path": path, "other": other, "existing": existing, "line": line}
    return payload, write_text(line, f">> {word(path)}"), ""


# ---------------------------------------------------------------- hostile-filenames


def hostile_filename(rng: Random, tier: str) -> Drawn:
    if tier == "control":
        name = f"{pick(rng, ADJ)} {pick(rng, NOUNS)} {number(rng, 2000, 2030)}.txt"
    elif tier == "h1":
        name = f"{pick(rng, FIRST)}'s \"{pick(rng, QUOTED)}\" {pick(rng, NOUNS)}.txt"
    elif tier == "h2":
        name = pick(rng, (
            lambda: f"{pick(rng, NOUNS).capitalize()} ${pick(rng, ('USD', 'EUR', 'HOME', 'TMP'))} {number(rng, 5, 99)}%! `v{number(rng, 2, 9)}` Q{number(rng, 1, 3)}\\Q4.txt",
            lambda: f"{pick(rng, NOUNS)} `{pick(rng, ('draft', 'old', 'copy'))}` {number(rng, 10, 99)}% ${pick(rng, ('EUR', 'USD'))}!.txt",
        ))()
    else:
        name = pick(rng, (
            lambda: f"-{pick(rng, NOUNS)} [v{number(rng, 2, 9)}] notes*.txt ",
            lambda: f"--{pick(rng, ADJ)} {pick(rng, NOUNS)}?.txt\t",
            lambda: f"-{pick(rng, NOUNS)} *[{pick(rng, ('a-z', 'old', '0-9'))}].txt  ",
        ))()
    note = "" if tier != "h3" else "Leading dash, a glob that can match notes.txt unquoted, trailing whitespace."
    return {"name": name}, f"mv -- draft.txt {sq(name)}", note


# ---------------------------------------------------------------- find-glob


def _find_tree(rng: Random, pattern: str, matching: list[str], distractors: list[str]) -> dict[str, Any]:
    """Spread names over a top level and two subdirectories; expected is what ``find . -name PATTERN`` prints."""
    dirs = ["", f"{pick(rng, NOUNS)}s", f"{pick(rng, NOUNS)}s/{number(rng, 2019, 2024)}"]
    paths: list[str] = []
    for k, name in enumerate(matching + distractors):
        d = dirs[k % 3] if k >= 1 else ""  # the first matching name always sits at the top: an unquoted glob finds it
        paths.append(f"{d}/{name}" if d else name)
    paths = sorted(dict.fromkeys(paths))
    expected = sorted(f"./{p}" for p in paths if fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], pattern))
    top = sorted({p.split("/", 1)[0] for p in paths} | {"found.txt"})
    return {"pattern": pattern, "expected": "".join(e + "\n" for e in expected), "top": top,
            "files": [{"path": p, "text": ""} for p in paths]}


FIND_EXTS = ("log", "csv", "json", "md", "bak")  # never txt: found.txt must not match the pattern


def find_glob(rng: Random, tier: str) -> Drawn:
    noun, ext = pick(rng, NOUNS), pick(rng, FIND_EXTS)
    if tier == "control":
        pattern = f"*.{ext}"
        matching = [f"{noun}.{ext}", f"{pick(rng, NOUNS)}.{ext}", f"old {noun}.{ext}", f"{noun} {number(rng)}.{ext}"]
        distractors = [f"{noun}.{ext}.1", f"{noun}.txt" if ext != "txt" else f"{noun}.md", f"{noun}{ext}"]
    elif tier == "h1":
        q = pick(rng, QUOTED)
        pattern = f"*'s \"{q}\"*"
        matching = [f"{pick(rng, FIRST)}'s \"{q}\" {noun}.txt", f"{pick(rng, FIRST)}'s \"{q}\" v2.md",
                    f"{pick(rng, FIRST)}'s \"{q}\".{ext}"]
        distractors = [f"{pick(rng, FIRST)}'s {q} {noun}.txt", f"\"{q}\" {noun}.txt", f"{pick(rng, FIRST)}s \"{q}\" x.txt"]
    elif tier == "h2":
        office = pick(rng, ("docx", "xlsx", "pptx"))
        kind = rng.randrange(3)
        if kind == 0:
            pattern = f"~$*.{office}"
            matching = [f"~${noun}.{office}", f"~${pick(rng, NOUNS)} plan.{office}", f"~$q{number(rng, 1, 4)}.{office}"]
            distractors = [f"{noun}.{office}", f"~${noun}.{ext}", f"~{noun}.{office}"]
        elif kind == 1:
            cur = pick(rng, ("USD", "EUR", "GBP"))
            pattern = f"*-${cur}-*.csv"
            matching = [f"{noun}-${cur}-2024.csv", f"{pick(rng, NOUNS)}-${cur}-q{number(rng, 1, 4)}.csv"]
            distractors = [f"{noun}-{cur}-2024.csv", f"{noun}-$-2024.csv", f"{noun}-${cur}-2024.txt"]
        else:
            tag = pick(rng, ("draft", "old", "wip"))
            pattern = f"*`{tag}`*!.md"
            matching = [f"{noun} `{tag}` 1!.md", f"`{tag}`!.md", f"{pick(rng, NOUNS)} `{tag}` {number(rng)}%!.md"]
            distractors = [f"{noun} {tag} 1!.md", f"{noun} `{tag}` 1.md", f"{noun} '{tag}' 1!.md"]
    else:
        kind = rng.randrange(3)
        if kind == 0:
            pattern = f"{noun}-[0-9]?.csv"
            matching = [f"{noun}-{number(rng, 10, 99)}.csv", f"{noun}-0{number(rng, 1, 9)}.csv", f"{noun}-5x.csv"]
            distractors = [f"{noun}-7.csv", f"{noun}-420.csv", f"{noun}-x1.csv", f"{noun}-01.csv.bak"]
        elif kind == 1:
            pattern = f"-*.{ext}"
            matching = [f"-{noun}.{ext}", f"--{pick(rng, ADJ)}.{ext}", f"-{number(rng)}.{ext}"]
            distractors = [f"{noun}.{ext}", f"{noun}-x.{ext}", f"-{noun}.{ext}.old"]
        else:
            pattern = "[._]*.tmp"
            matching = [f".{noun}.tmp", f"_{pick(rng, NOUNS)}.tmp", "._cache.tmp"]
            distractors = [f"{noun}.tmp", f"x_{noun}.tmp", f".{noun}.tmp.1"]
    payload = _find_tree(rng, pattern, matching, distractors)
    return payload, f"find . -name {sq(pattern)} | LC_ALL=C sort > found.txt", ""


# ---------------------------------------------------------------- grep-count


def _near(rng: Random, needle: str) -> list[str]:
    """Lines that almost hold the needle: a character dropped, case changed, quotes swapped."""
    variants = [needle.swapcase(), needle[:1] + needle[2:], needle.replace('"', "'").replace("$", "").replace("`", "'"),
                needle.replace(" ", "  ", 1), needle[:-1]]
    return [v for v in dict.fromkeys(variants) if needle not in v]


def grep_count(rng: Random, tier: str) -> Drawn:
    path = pick(rng, ("server.log", "app.log", "notes.txt", "crontab.txt", "TODO.md"))
    if tier == "control":
        needle = f"{pick(rng, ('connection', 'request', 'upload', 'job'))} {pick(rng, ('timed out', 'failed', 'retried'))}"
    elif tier == "h1":
        needle = f"can't open \"{pick(rng, NOUNS)}.{pick(rng, ('yml', 'json', 'cfg'))}\""
    elif tier == "h2":
        needle = pick(rng, (f"$(date +\\%F-\\%H)", f"${{{pick(rng, ('HOME', 'DATA_DIR', 'TMPDIR'))}}}/bin",
                            f"`{pick(rng, ('hostname', 'whoami'))}`", f"{number(rng, 10, 90)}% off! ${number(rng, 5, 50)}"))
    else:
        needle = pick(rng, (f"- [ ] {pick(rng, ('ship', 'todo', 'fix'))}", f"--{pick(rng, ('force', 'dry-run', 'verbose'))} *.{pick(rng, EXTS)}",
                            f"-[{pick(rng, ('x', 'ok', '!'))}] ", "*.tmp? "))
    near = _near(rng, needle)
    lines = [f"{number(rng, 10, 23)}:{number(rng, 10, 59)} {pick(rng, NOUNS)} {needle} {pick(rng, ('again', 'ok', 'x2'))}"
             for _ in range(rng.randint(2, 4))]
    lines[0] = needle  # the needle alone on a line (leading dash, trailing space) counts too
    lines += [f"{number(rng, 10, 23)}:{number(rng, 10, 59)} {v}" for v in near]
    lines.append(f"{number(rng, 10, 23)}:00 {needle} and {needle} twice")
    rng.shuffle(lines)
    text = "".join(line + "\n" for line in lines)
    count = sum(needle in line for line in lines)
    payload = {"path": path, "needle": needle, "count": str(count), "text": text}
    return payload, f"grep -cF -e {sq(needle)} {word(path)} > count.txt", ""


# ---------------------------------------------------------------- sed-replace


def sed_replace(rng: Random, tier: str) -> Drawn:
    if tier == "control":
        a, b = pick(rng, ("Acme", "Globex", "Initech", "Umbrella", "Stark")), pick(rng, ("Corp", "Ltd", "Inc"))
        old, new = f"{a} {b}", f"{a} {pick(rng, ('Group', 'Holdings', 'Labs'))}"
        path, distract = "contract.txt", [f"{a.upper()} {b.upper()} CONFIDENTIAL", f"{a}{b} support"]
    elif tier == "h1":
        label = pick(rng, ("Q&A", "R&D", "Terms & Conditions", "FAQ"))
        old, new = f"\"{label}\"", f"'{label} ({pick(rng, ('new', 'beta', 'draft'))})'"
        path, distract = "menu.yml", [f"label: '{label}'", f"label: \"{label} archive\"", f"{label}"]
    elif tier == "h2":
        old = windows_path(rng) + f"\\*.{pick(rng, EXTS)}"
        new = f"${pick(rng, ('HOME', 'DATA_DIR', 'APP_HOME'))}/{pick(rng, NOUNS)}s/*.{pick(rng, EXTS)}"
        path, distract = "collect.conf", [old.replace("\\", "/"), old[:-1], f"%APPDATA%\\{pick(rng, NOUNS)}"]
    else:
        kind = rng.randrange(3)
        if kind == 0:
            item = pick(rng, ("deploy", "review", "ship"))
            old, new = f"- [x] {item}", f"- [ ] {item}"
            path, distract = "TODO.md", ["- [X] done upstream", "- x marks the spot", "[x] stays"]
        elif kind == 1:
            flag = pick(rng, ("verbose", "force", "dry-run"))
            old, new = f"--{flag} *.{pick(rng, EXTS)}", f"--{flag} [a-z]*.{pick(rng, EXTS)}"
            path, distract = "run.sh", [f"-{flag} all", f"--{flag}", f"--{flag}  *"]
        else:
            old, new = "TODO: ", "DONE:\t"
            path, distract = "notes.md", ["TODO:", "todo: later", "TODO list"]
    lines = [f"{pick(rng, NOUNS)} {old} {control_phrase(rng)}", f"{old}{pick(rng, NOUNS)}", f"see {old} and {old} again"]
    lines += [f"{pick(rng, NOUNS)} {d}" for d in distract if old not in d]
    rng.shuffle(lines)
    text = "".join(line + "\n" for line in lines)
    payload = {"path": path, "old": old, "new": new, "text": text, "expected": text.replace(old, new)}
    return payload, f"sed -i {sq(sed_substitute(old, new))} {word(path)}", ""


# ---------------------------------------------------------------- heredoc


def heredoc_family(rng: Random, tier: str) -> Drawn:
    if tier == "control":
        path = "notes.txt"
        content = "".join(control_phrase(rng) + "\n" for _ in range(3))
    elif tier == "h1":
        path = "seed.sql"
        rows = [f"  ('{pick(rng, ('O', 'D'))}''{pick(rng, FIRST)}', 'Say \"{pick(rng, QUOTED)}\"')" for _ in range(2)]
        content = f"INSERT INTO {pick(rng, NOUNS)}s (author, text) VALUES\n" + ",\n".join(rows) + ";\n"
    elif tier == "h2":
        path = "backup.sh"
        var = pick(rng, ("HOME", "DATA_DIR", "APP_HOME"))
        content = ("#!/bin/sh\n# nightly job, started by cron\n"
                   f"stamp=$(date +%F)\ntar czf \"/backup/{pick(rng, NOUNS)}-$stamp.tgz\" \\\n"
                   f"  \"${var}/{pick(rng, NOUNS)}s\" `cat \"${var}/.extra\"`\n"
                   f"printf '{pick(rng, NOUNS)} %s done (100%%!)\\n' \"$stamp\"\n")
    else:
        path = "install.sh"
        content = ("#!/bin/sh\n" + boundary_fragment(rng) + "\n" + f"cat > /etc/{pick(rng, NOUNS)} <<EOF\n"
                   + "\n".join(h3_lines(rng, 2)) + "\nEOF\n" + "\t" + h3_line(rng) + "\n")
    return {"path": path, "content": content}, heredoc(f"cat > {word(path)}", content), ""
