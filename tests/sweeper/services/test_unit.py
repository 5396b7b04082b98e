"""systemd unit rendering: quoting by systemd's rules, the settings the sweeper relies on.

Pure tests; `test_systemd.py` checks on a real systemd that the quoted words arrive literally.
"""

from __future__ import annotations

import pytest

from sweeper.engines.launch import Launch
from sweeper.services.unit import (
    UnitOptions,
    environment_file_text,
    quote_word,
    render_unit,
)

PWNED = '"; touch /tmp/pwned #'


def test_quote_word_escapes_what_systemd_would_interpret() -> None:
    assert quote_word(PWNED, expand_dollar=True) == '"\\"; touch /tmp/pwned #"'
    assert quote_word("$HOME ${X}", expand_dollar=True) == '"$$HOME $${X}"'
    assert quote_word("$HOME", expand_dollar=False) == '"$HOME"'
    assert quote_word("%h 100%", expand_dollar=True) == '"%%h 100%%"'
    assert quote_word("a\\b", expand_dollar=True) == '"a\\\\b"'
    assert quote_word("line1\nline2\t\x01", expand_dollar=True) == '"line1\\nline2\\t\\x01"'
    assert quote_word("", expand_dollar=True) == '""'


def test_unit_has_every_setting_the_sweeper_relies_on() -> None:
    launch = Launch(
        argv=("/usr/bin/python3", "-m", "ddtree_runtime", "serve", "--served-model-name", PWNED),
        port=8000,
        launch_id="abc123",
        env={"TOKENIZERS_PARALLELISM": "false", "NOTE": "50% $off"},
        secret_env={"HF_TOKEN": "hf_secret_value"},
        workdir="/opt/ddtree-sweeper/releases/0123456789abcdef",
    )
    text = render_unit(
        launch,
        UnitOptions(
            environment_file="/opt/ddtree-sweeper/secrets/ddtree-x.env",
            timeout_start_s=960,
            timeout_stop_s=20,
        ),
    )
    lines = text.splitlines()
    assert (
        'ExecStart="/usr/bin/python3" "-m" "ddtree_runtime" "serve" "--served-model-name" '
        '"\\"; touch /tmp/pwned #"'
    ) in lines
    assert 'Environment="TOKENIZERS_PARALLELISM=false"' in lines
    assert 'Environment="NOTE=50%% $off"' in lines
    assert 'Environment="SWEEPER_LAUNCH_ID=abc123"' in lines
    assert "EnvironmentFile=/opt/ddtree-sweeper/secrets/ddtree-x.env" in lines
    assert "WorkingDirectory=/opt/ddtree-sweeper/releases/0123456789abcdef" in lines
    for setting in (
        "Restart=no",
        "TimeoutStartSec=960",
        "TimeoutStopSec=20",
        "KillMode=control-group",
        "Type=exec",
    ):
        assert setting in lines
    assert "hf_secret_value" not in text  # secrets only in the 0600 EnvironmentFile
    assert text.index("[Unit]") < text.index("[Service]")


def test_environment_file_escapes_like_systemd_reads() -> None:
    text = environment_file_text({"HF_TOKEN": 'a"b$c`d\\e', "PLAIN": "x y"})
    assert text == 'HF_TOKEN="a\\"b\\$c\\`d\\\\e"\nPLAIN="x y"\n'
    with pytest.raises(ValueError, match="newline"):
        environment_file_text({"X": "a\nb"})


@pytest.mark.parametrize("name", ["1ABC", "A-B", "", "A B", "A=B"])
def test_bad_environment_names_are_refused(name: str) -> None:
    launch = Launch(argv=("x",), port=1, launch_id="l", env={name: "v"})
    with pytest.raises(ValueError, match="environment variable name"):
        render_unit(launch, UnitOptions())


def test_paths_systemd_does_not_unquote_are_checked() -> None:
    launch = Launch(argv=("x",), port=1, launch_id="l", workdir="/opt/with space")
    with pytest.raises(ValueError, match="WorkingDirectory"):
        render_unit(launch, UnitOptions())
    with pytest.raises(ValueError, match="empty argv"):
        render_unit(Launch(argv=(), port=1, launch_id="l"), UnitOptions())
