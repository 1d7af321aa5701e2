"""What to say when a plan names a host the inventory does not have."""

from __future__ import annotations

from pathlib import Path

# The source of the inventory orch uses when none is given: this machine only. A plan naming
# any other host then most likely means `-i` was forgotten.
BUILT_IN = "the built-in inventory (this machine only: no -i was given)"
INVENTORY_DIR = Path("inventory")  # where `orch init` writes one, under the current directory
_SUFFIXES = (".yaml", ".yml", ".ini")


def unknown_host_hint(known: list[str], source: str) -> str:
    """The known names; for the built-in inventory, that `-i` was likely forgotten, naming
    the inventory files under ./inventory."""
    listed = f"known: {', '.join(known)}" if known else "the inventory is empty"
    if source != BUILT_IN:
        return listed
    files = sorted(str(p) for p in INVENTORY_DIR.glob("*") if p.suffix in _SUFFIXES)
    if not files:
        return f"{listed}; pass the inventory with -i FILE (`orch init` writes one under inventory/)"
    which = files[0] if len(files) == 1 else f"one of {', '.join(files)}"
    return f"{listed}; pass the inventory with -i {which}"
