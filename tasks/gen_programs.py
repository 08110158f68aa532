"""Payload makers for the families that hand a payload to a program: argv, environment, JSON, git, wrappers.

Same interface as :mod:`tasks.gen_files`: ``maker(rng, tier) -> (payload, solution, note)``.
"""

from __future__ import annotations

import json
from random import Random
from typing import Any

from .gen_quote import heredoc, sq, word, write_text
from .gen_text import (ADJ, FIRST, NOUNS, PLACES, QUOTED, VARS, boundary_fragment, control_phrase, glob_word,
                       h1_phrase, h2_phrase, h3_line, h3_lines, number, pick, secret, windows_path)

Drawn = tuple[dict[str, Any], str, str]


def _value(rng: Random, tier: str) -> str:
    """One string value of the tier's class (used inside argv, environment and JSON payloads)."""
    if tier == "control":
        return control_phrase(rng)
    if tier == "h1":
        return h1_phrase(rng)
    if tier == "h2":
        return pick(rng, (h2_phrase, secret))(rng)
    return pick(rng, (lambda: "\n".join(h3_lines(rng, 2)), lambda: h3_line(rng) + "  ",
                      lambda: f"-- \n* {control_phrase(rng)}\n* ask in [#{pick(rng, NOUNS)}]  "))()


# ---------------------------------------------------------------- argv-pass


def argv_pass(rng: Random, tier: str) -> Drawn:
    flags = [f"--{n}" for n in ("title", "customer", "note", "owner", "label", "message", "comment", "team")]
    rng.shuffle(flags)
    args = [flags[0], _value(rng, tier), flags[1], _value(rng, tier) if tier != "control" else number(rng)]
    if tier == "h2":
        args += ["--date-format", pick(rng, ("%Y-%m-%d", "%d/%m/%Y %H:%M", "%s")), "--share",
                 "\\\\" + pick(rng, ("fs01", "nas", "files")) + "\\" + pick(rng, NOUNS) + "$"]
    elif tier == "h3":
        args += ["--exclude", "sales-*.csv" if rng.random() < 0.5 else "*.csv", "--prefix", "", "--",
                 f"-{pick(rng, ADJ)} {pick(rng, NOUNS)}.txt "]
    return {"args": args}, "./show-args " + " ".join(word(a) if a else "''" for a in args), ""


# ---------------------------------------------------------------- env-pass


ENV_NAMES = ("GREETING", "DEPLOY_NOTE", "DB_PASSWORD", "RELEASE_NOTES", "APP_TITLE", "BANNER_TEXT", "SLACK_MESSAGE",
             "API_TOKEN", "MOTD_TEXT", "COMMIT_MSG", "ALERT_BODY", "SIGNATURE")


def env_pass(rng: Random, tier: str) -> Drawn:
    name = pick(rng, ENV_NAMES)
    value = _value(rng, tier)
    return {"name": name, "value": value}, f"{name}={sq(value)} ./show-env", ""


# ---------------------------------------------------------------- json-write


def json_write(rng: Random, tier: str) -> Drawn:
    path = f"{pick(rng, NOUNS)}.json"
    doc: dict[str, Any] = {
        "name": _value(rng, tier),
        "version": rng.randint(1, 20),
        "enabled": rng.random() < 0.5,
        "owner": {"team": _value(rng, tier), "city": pick(rng, PLACES)},
        "tags": [_value(rng, tier), pick(rng, NOUNS)],
        "retries": rng.randint(0, 5),
    }
    if tier == "h2":
        doc["date_format"] = pick(rng, ("%Y-%m-%d", "%H:%M:%S"))
        doc["share"] = "\\\\" + pick(rng, ("fs01", "nas")) + "\\" + pick(rng, NOUNS) + "$"
    if tier == "h3":
        doc["separator"] = "\t"
        doc["exclude"] = [glob_word(rng), "*"]
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return {"path": path, "doc": doc}, heredoc(f"cat > {word(path)}", text), ""


# ---------------------------------------------------------------- json-edit


def _base_config(rng: Random) -> tuple[dict[str, Any], str]:
    """A realistic configuration document and the jq path of one of its string fields."""
    kind = rng.randrange(3)
    if kind == 0:
        doc = {"service": pick(rng, NOUNS), "port": rng.randint(1024, 9999), "debug": False,
               "database": {"host": "db.internal", "port": 5432, "user": f"{pick(rng, NOUNS)}_app", "password": "changeme"},
               "owner": {"team": "Payments", "contact": "ops@example.com"}}
        return doc, pick(rng, (".owner.team", ".database.password"))
    if kind == 1:
        doc = {"site": {"name": f"{pick(rng, FIRST)} Shop", "locale": "en-GB"},
               "banner": {"enabled": True, "message": "Welcome back", "style": "info"},
               "cache_seconds": rng.randint(30, 900), "admins": [pick(rng, FIRST).lower(), pick(rng, FIRST).lower()]}
        return doc, pick(rng, (".banner.message", ".site.name"))
    doc = {"service": "status-page", "maintenance": {"active": False, "footer": "All systems normal"},
           "checks": [{"name": "api", "interval": 30}, {"name": "db", "interval": 60}], "timezone": "UTC"}
    return doc, ".maintenance.footer"


def json_edit(rng: Random, tier: str) -> Drawn:
    doc, field = _base_config(rng)
    value = _value(rng, tier)
    expected = json.loads(json.dumps(doc))
    node = expected
    keys = field.strip(".").split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    payload = {"field": field, "value": value, "original": json.dumps(doc, indent=2) + "\n", "expected": expected}
    solution = (f"jq --arg v {sq(value)} '{field} = $v' config.json > config.json.new "
                "&& mv config.json.new config.json")
    return payload, solution, ""


# ---------------------------------------------------------------- git-commit


def git_commit(rng: Random, tier: str) -> Drawn:
    """A message that git keeps as it is under its default cleanup: no trailing whitespace, no doubled blank lines."""
    if tier == "control":
        subject = f"{pick(rng, ('Add', 'Raise', 'Lower', 'Fix'))} retry limit {number(rng, 2, 9)} in deploy script"
        body = [f"Retry the upload step up to {number(rng, 2, 9)} times before giving up"]
    elif tier == "h1":
        subject = f"{pick(rng, ('Don', 'Can', 'Won'))}'t give up on \"{pick(rng, QUOTED)}\" uploads"
        body = [f"The '{pick(rng, QUOTED)}' state is no longer a failure;", f"{pick(rng, FIRST)}'s \"retry\" patch is kept."]
    elif tier == "h2":
        subject = f"Fix ${pick(rng, VARS)} handling in `deploy.sh` ({number(rng, 10, 100)}% of cases!)"
        body = [f"Windows paths such as {windows_path(rng, True)} lost their trailing \\",
                f"and %APPDATA% was read as ${pick(rng, VARS)}."]
    else:
        subject = f"Revert \"{pick(rng, ('Rotate', 'Skip', 'Keep'))} {glob_word(rng)} before upload\""
        body = [h3_line(rng).rstrip() for _ in range(rng.randint(2, 3))] + ["", f"#{number(rng, 100, 999)} was caused by it."]
    message = subject + "\n\n" + "\n".join(body) + "\n"
    return {"message": message}, heredoc("git commit -F -", message), ""


# ---------------------------------------------------------------- remote-exec


REMOTE_TAKEN = ("app.log", "reports", "tmp1")


def remote_exec(rng: Random, tier: str) -> Drawn:
    path = pick(rng, ("status.txt", "release-notes.txt", "deploy.env", "sync-filter.rules", "motd.txt", "queue.txt"))
    if tier == "control":
        content = control_phrase(rng) + "\n"
    elif tier == "h1":
        content = h1_phrase(rng) + ".\n"
    elif tier == "h2":
        content = f"DEPLOY_KEY={secret(rng)}\\n{number(rng)}\\\\z\n"
    else:
        content = "\n".join(h3_lines(rng, 2) + [boundary_fragment(rng), "- *"]) + "\n"
    return {"path": path, "content": content}, write_text(content, f"| ./remote {sq('cat > ' + path)}"), ""


# ---------------------------------------------------------------- container-exec


CONTAINER_TAKEN = ("app.log", "cache1.db")


def container_exec(rng: Random, tier: str) -> Drawn:
    path = pick(rng, ("status.txt", "queue-note.txt", "disk-alert.txt", "cleanup.txt", "health.txt"))
    if tier == "control":
        text = control_phrase(rng) + "\n"
    elif tier == "h1":
        text = h1_phrase(rng) + "\n"
    elif tier == "h2":
        text = h2_phrase(rng) + "\n"
    else:
        text = "\n".join([f"{pick(rng, NOUNS)} pending:", f"- rotate *.log in $APP_HOME/{pick(rng, NOUNS)}s",
                          h3_line(rng)]) + "\n"
    inner = '{ printf "%s: " "$APP_ENV"; cat; } > ' + path
    return {"path": path, "text": text}, write_text(text, f"| ./cexec {sq(inner)}"), ""
