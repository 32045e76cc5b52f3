"""The committed code generated from proto/ is what `make proto` would write now."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generate(out: Path) -> list[Path]:
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written: list[Path] = module.generate(out)
    return written


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    fresh = _generate(tmp_path)
    assert fresh, "nothing generated"
    committed = sorted(
        p.relative_to(ROOT)
        for p in (ROOT / "proto" / "vehicle_middleware" / "proto").rglob("*.py*")
        if p.suffix in {".py", ".pyi"}
    )
    assert sorted(fresh) == committed, "generated files differ: run `make proto`"
    for rel in fresh:
        assert (tmp_path / rel).read_text() == (ROOT / rel).read_text(), (
            f"{rel} is stale: run `make proto` and commit the result"
        )
