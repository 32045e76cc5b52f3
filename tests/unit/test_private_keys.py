"""The private keys the development tools write (``tls dev-certs``, ``token
keygen``): mode 0600 whatever was there before, and where git ignores them."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from vehicle_middleware.server.__main__ import main

ROOT = Path(__file__).parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_token_keygen_writes_its_private_key_0600_even_over_a_readable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "vmw-dev.key"
    old.write_bytes(b"an old key")
    old.chmod(0o644)
    assert main(["token", "keygen", "--out", str(tmp_path)]) == 0
    assert _mode(old) == 0o600
    assert old.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert _mode(tmp_path / "vmw-dev.pub") == 0o644
    assert "(private, keep it secret)" in capsys.readouterr().out


def test_tls_dev_certs_writes_every_private_key_0600_even_over_readable_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    out.mkdir()
    (out / "server.key").write_bytes(b"old")
    (out / "server.key").chmod(0o644)
    argv = ["tls", "dev-certs", "--out", str(out), "--client", "dash", "--force"]
    assert main(argv) == 0
    keys = sorted(p.name for p in out.glob("*.key"))
    assert keys == ["ca.key", "dash.key", "server.key"]
    assert {name: _mode(out / name) for name in keys} == dict.fromkeys(keys, 0o600)
    capsys.readouterr()


def _documented_key_paths() -> set[str]:
    """Where the docs' commands, and the tools by default, put private keys."""
    paths = {"vmw-dev.key"}  # token keygen's default: --out . --name vmw-dev
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        for out in re.findall(r"tls dev-certs --out (\S+)", text):
            paths |= {f"{out}/ca.key", f"{out}/server.key", f"{out}/dashboard.key"}
        for out in re.findall(r"token keygen --out (\S+)", text):
            paths.add(f"{out}/vmw-dev.key")
    return paths


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_ignores_the_private_keys_where_the_docs_and_the_tools_put_them() -> None:
    paths = sorted(_documented_key_paths())
    assert {"certs/server.key", "keys/vmw-dev.key"} <= set(paths)
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    not_ignored = [line.split("\t")[-1] for line in result.stdout.splitlines() if line[:2] == "::"]
    assert not_ignored == [], f"git would commit these private keys: {not_ignored}"
