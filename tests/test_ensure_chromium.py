"""scripts/ensure-chromium.sh, which make test runs before the browser tests: it finds
what is installed, and fails (not skips) on what is not, naming it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from scripts.serving import ROOT

SCRIPT = ROOT / "scripts" / "ensure-chromium.sh"


def _run(tmp_path: Path, fonts: str) -> subprocess.CompletedProcess[str]:
    """Run the script as a user who is not root, with ``chromium`` present and ``fc-list``
    printing ``fonts`` followed by far more than a pipe holds (as on a machine with many
    fonts), so that a reader that stops early kills it with SIGPIPE."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    commands = {
        "chromium": "#!/bin/sh\nexit 0\n",
        "id": "#!/bin/sh\necho 1000\n",
        "fc-list": f"#!/bin/sh\nprintf '%s\\n' '{fonts}'\n"
        'i=0; while [ $i -lt 4000 ]; do echo "/usr/share/fonts/other-$i.ttf: Other:style=Regular"; '
        "i=$((i+1)); done\n",
    }
    for name, body in commands.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def test_installed_fonts_are_found_however_long_the_font_list_is(tmp_path):
    result = _run(
        tmp_path, "/usr/share/fonts/NotoSansCJK-Regular.ttc: Noto Sans CJK SC:style=Regular"
    )

    assert result.returncode == 0, result.stderr


def test_missing_fonts_fail_naming_the_package(tmp_path):
    result = _run(tmp_path, "/usr/share/fonts/DejaVuSans.ttf: DejaVu Sans:style=Book")

    assert result.returncode == 1
    assert "fonts-noto-cjk" in result.stderr
