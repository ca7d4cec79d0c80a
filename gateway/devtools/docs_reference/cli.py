"""The CLI reference (`docs/reference/cli.md`), generated from `gateway.cli.build_parser`.

One section per command and sub-command, anchored by its words joined with `-`
(`#gateway-dlq-replay`): what it does, a synopsis, each argument and option with its help
and default, and the examples its `--help` shows. The synopsis and option spellings are
composed here rather than taken from argparse's formatter, whose layout changes between
Python releases: the page must not depend on the interpreter that renders it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from gateway.cli import build_parser
from gateway.cli.common import common_parser
from gateway.devtools.docs_reference.text import code, escape, generated_header, table


def render() -> str:
    """The whole page."""
    parser = build_parser()
    common = common_parser()
    shared = {s for a in common._actions for s in a.option_strings}
    parts = [
        generated_header("gateway/cli/ (argparse)"),
        "# CLI reference\n\n",
        "Every command of the `gateway` console script, as its `--help` describes it.\n\n",
        "## Common options {#common-options}\n\n",
        "Every command accepts these, before or after its name (`gateway --json dlq stats` "
        "and `gateway dlq stats --json` are the same); they are not repeated below.\n\n",
        table(["argument", "default", "description"], map(_row, common._actions)),
        "\n",
    ]
    parts += [_section(prog, p, summary, shared) for prog, p, summary in _commands(parser, "")]
    return "".join(parts).rstrip("\n") + "\n"


def _commands(
    parser: argparse.ArgumentParser, summary: str
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """`parser` and every sub-command below it, depth first, in the order they were added."""
    yield parser.prog, parser, summary
    for action in _subcommands(parser):
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            yield from _commands(sub, helps.get(name, ""))


def _subcommands(
    parser: argparse.ArgumentParser,
) -> list[argparse._SubParsersAction[argparse.ArgumentParser]]:
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def anchor(prog: str) -> str:
    """A command's anchor on the page: `gateway dlq list` -> `gateway-dlq-list`."""
    return prog.replace(" ", "-")


def _section(prog: str, parser: argparse.ArgumentParser, summary: str, shared: set[str]) -> str:
    # `gateway` and its commands at level 2, sub-commands (`gateway dlq list`) at 3.
    level = "#" * max(2, min(prog.count(" ") + 1, 4))
    out = [f"{level} {code(prog)} {{#{anchor(prog)}}}\n\n"]
    if summary:
        out.append(f"{escape(summary)}\n\n")
    if parser.description:
        out.append(f"{escape(parser.description)}\n\n")
    out.append(f"```text\n{synopsis(prog, parser)}\n```\n\n")
    for sub_action in _subcommands(parser):
        helps = {choice.dest: choice.help or "" for choice in sub_action._choices_actions}
        rows = [
            [
                f"[{code(f'{prog} {name}')}](#{anchor(f'{prog} {name}')})",
                escape(helps.get(name, "")),
            ]
            for name in sub_action.choices
        ]
        out.append(table(["command", "what it does"], rows) + "\n")
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if _documented(a) and not shared.intersection(a.option_strings)
        ]
        if actions:
            out.append(f"**{escape(group.title or 'arguments')}**\n\n")
            out.append(table(["argument", "default", "description"], map(_row, actions)) + "\n")
    if parser.epilog:
        out.append(f"```text\n{parser.epilog.strip()}\n```\n\n")
    return "".join(out)


def _documented(action: argparse.Action) -> bool:
    return action.help is not argparse.SUPPRESS and not isinstance(
        action, argparse._SubParsersAction | argparse._HelpAction
    )


def synopsis(prog: str, parser: argparse.ArgumentParser) -> str:
    """`usage: PROG` with its required options, `[options]` and its positionals."""
    words = [prog]
    optional = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words.append(str(action.metavar or "COMMAND"))
        elif action.help is argparse.SUPPRESS:
            continue
        elif action.option_strings:
            if action.required:
                words.append(_invocation(action, first_only=True))
            else:
                optional = True
        else:
            words.append(_positional(action))
    if optional:
        words.insert(1, "[options]")
    return "usage: " + " ".join(words)


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, tuple):
        return " ".join(action.metavar)
    if action.metavar is not None:
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _positional(action: argparse.Action) -> str:
    name = _metavar(action)
    return {
        "?": f"[{name}]",
        "*": f"[{name} ...]",
        "+": f"{name} [{name} ...]",
    }.get(str(action.nargs), name)


def _invocation(action: argparse.Action, first_only: bool = False) -> str:
    """`-n, --limit N`: the spellings, then what follows them (nothing for a flag)."""
    names = action.option_strings[-1:] if first_only else action.option_strings
    spelled = ", ".join(names)
    if action.nargs == 0:
        return spelled
    value = _metavar(action)
    if action.nargs in ("*", "+"):
        value = f"{value} ..."
    elif action.nargs == "?":
        value = f"[{value}]"
    return f"{spelled} {value}"


def _help(action: argparse.Action) -> str:
    """The help text with its `%(...)s` filled in, as argparse's own formatter does."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params = {k: getattr(v, "__name__", v) for k, v in params.items()}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in action.choices or ())
    return text % params


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()):
        return ""  # flags, and values that are absent unless given
    if isinstance(action.default, list | tuple):
        return code(" ".join(str(v) for v in action.default))
    return code(str(action.default))


def _row(action: argparse.Action) -> list[str]:
    spelled = code(_invocation(action) if action.option_strings else _positional(action))
    if action.required and action.option_strings:
        spelled += " (required)"
    return [spelled, _default(action), escape(_help(action))]
