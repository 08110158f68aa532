"""Help text that reads like the command line it documents: typer 0.29 shows every option's Python type
(``<bool>`` next to a flag, ``<str>``, ``<list[Path]>``). Here each parameter without a metavar of its
own gets one a user would type: nothing for a flag, ``TEXT``, ``N``, ``SECONDS``, ``PATH``."""

from __future__ import annotations

from typing import Any

_BY_TYPE = {"bool": "", "str": "TEXT", "int": "N", "float": "NUMBER", "Path": "PATH"}


def _metavar(param: Any) -> str | None:
    if getattr(param, "is_flag", False):
        return ""
    try:
        annotation = param.type_descriptor.annotation
    except AttributeError:
        return None
    name = getattr(annotation, "__name__", str(annotation))
    if name == "list":  # list[Path] arguments: the element, repeated
        return "PATH"
    return _BY_TYPE.get(name)


def _argument(param: Any) -> None:
    """An argument's name is its metavar: no type next to it, and ``FILE...`` once in the usage line."""
    name = (param.metavar or param.name.upper()).removesuffix("...")
    repeated = param.nargs != 1
    param.display_type_rich = lambda ctx: None
    param._usage_display_name = lambda: (name + "..." if repeated else name) if param.required else \
        f"[{name}{'...' if repeated else ''}]"


def _help_option(command: Any) -> None:
    made = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


def tidy(command: Any) -> Any:
    """Give every parameter of ``command`` and its subcommands a readable metavar; ``command`` itself."""
    _help_option(command)
    for param in getattr(command, "params", []):
        if param.param_type_name == "argument":
            _argument(param)
        elif param.metavar is None and (m := _metavar(param)) is not None:
            param.metavar = m
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
    return command
