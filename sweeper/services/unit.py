"""Rendering a systemd service unit from a `Launch`, quoted by systemd's own rules.

systemd does not use a shell: ExecStart= splits words itself, honours double quotes with C-style
escapes, expands `$VAR` / `${VAR}` from the environment and `%x` specifiers. So every argument is
written double-quoted with `\\`, `"` escaped, control characters as `\\xNN`, `%` doubled and (in
ExecStart= only, where variables expand) `$` doubled: a value like `"; touch /tmp/pwned #"`
reaches the runtime as one literal argument. See systemd.syntax(7), systemd.service(5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sweeper.engines.launch import Launch

#: Env names systemd and the runtime accept (the spec enforces the same shape).
_ENV_NAME_FIRST = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"


@dataclass(frozen=True)
class UnitOptions:
    """Unit settings that do not come from the launch itself."""

    description: str = "DDTree runtime (managed by sweeper)"
    #: The 0600 file holding the secret environment; None when the launch has no secrets.
    environment_file: str | None = None
    user: str | None = None
    timeout_start_s: float = 900.0
    timeout_stop_s: float = 15.0


def quote_word(value: str, *, expand_dollar: bool) -> str:
    """One systemd word in double quotes (see the module docstring for the rules)."""
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and expand_dollar:
            out.append("$$")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def environment_file_text(env: Mapping[str, str]) -> str:
    """An EnvironmentFile= body: `NAME="value"` lines, with backslash, quote, `$` and backtick
    escaped as systemd's parser (shell-like double quotes) expects."""
    lines = []
    for name, value in env.items():
        _check_env_name(name)
        if "\n" in value or "\r" in value:
            raise ValueError(f"environment value of {name} contains a newline")
        escaped = (
            value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        )
        lines.append(f'{name}="{escaped}"')
    return "".join(line + "\n" for line in lines)


def render_unit(launch: Launch, options: UnitOptions) -> str:
    """The whole unit file. Restart=no: the sweeper alone decides when the runtime restarts."""
    if not launch.argv:
        raise ValueError("launch has an empty argv")
    exec_start = " ".join(quote_word(arg, expand_dollar=True) for arg in launch.argv)
    lines = [
        "# Written by sweeper; replaced at every restart. Do not edit.",
        "[Unit]",
        f"Description={_one_line(options.description)}",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=exec",
    ]
    if options.user:
        lines.append(f"User={_plain(options.user, 'User')}")
    if launch.workdir:
        lines.append(f"WorkingDirectory={_plain(launch.workdir, 'WorkingDirectory')}")
    for name, value in launch.env.items():
        _check_env_name(name)
        lines.append(f"Environment={quote_word(f'{name}={value}', expand_dollar=False)}")
    if options.environment_file:
        lines.append(f"EnvironmentFile={_plain(options.environment_file, 'EnvironmentFile')}")
    lines += [
        f"Environment={quote_word(f'SWEEPER_LAUNCH_ID={launch.launch_id}', expand_dollar=False)}",
        f"ExecStart={exec_start}",
        "Restart=no",
        f"TimeoutStartSec={options.timeout_start_s:g}",
        f"TimeoutStopSec={options.timeout_stop_s:g}",
        "KillMode=control-group",
        "KillSignal=SIGTERM",
        "SendSIGKILL=yes",
        "StandardOutput=journal",
        "StandardError=journal",
        "",
    ]
    return "\n".join(lines)


def _check_env_name(name: str) -> None:
    if not name or name[0] not in _ENV_NAME_FIRST or not name.replace("_", "a").isalnum():
        raise ValueError(f"invalid environment variable name {name!r}")


def _plain(value: str, setting: str) -> str:
    """A path or name setting: systemd does not unquote these, so refuse what would need it."""
    if not value or any(ch.isspace() or ord(ch) < 0x20 or ch in "\"'\\" for ch in value):
        raise ValueError(f"{setting}= value {value!r} must have no spaces, quotes or controls")
    return value.replace("%", "%%")


def _one_line(text: str) -> str:
    # Description= is not a quoted word; keep it to one line without specifiers.
    return " ".join(text.split()).replace("%", "%%")
