"""`orch init`'s files loaded as `orch plan` would load them, before they are put in place: a
loader's complaint about a value from the command line becomes a `BadValue` naming the
InitSpec attribute (and so the flag) that gave it; one about orch init's own text is a bug,
said as such."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import InventoryError, OrchError, PlanError
from orchestrator.init.spec import BadValue, InitSpec


def validate(spec: InitSpec, plan_file: Path, inventory_file: Path) -> None:
    """Load both files as `orch plan` would: a complaint about a value from the command line
    becomes a BadValue naming it; one about our own text is a bug, said as such."""
    from orchestrator.apply.compile import check  # the compile: only once files are written
    from orchestrator.inventory import load_inventory
    from orchestrator.plan.loader import load_plan

    try:
        loaded = load_plan(plan_file)
        check(loaded)  # what `orch validate` also compiles: the launch command, the steps
    except PlanError as error:
        raise _blame(error, plan_field_attr(error.field), "plan") from None
    try:
        inventory = load_inventory(inventory_file)
    except InventoryError as error:
        # load_inventory re-raises the located PlanError as text; that error is its context.
        located = error.__context__
        if not isinstance(located, PlanError):
            raise _bug(error) from None
        raise _blame(located, inventory_field_attr(spec, located.field), "inventory") from None
    try:
        inventory.select(loaded.plan.hosts)
    except InventoryError as error:
        raise _bug(error) from None


def _blame(error: PlanError, attr: str | None, document: str) -> Exception:
    if attr is None:
        return _bug(error)
    message = error.message
    if error.field and message.startswith(f"{error.field}: "):
        message = message[len(error.field) + 2:]
    if error.hint:
        message += f"; {error.hint}"
    where = f" ({error.field} in the {document})" if error.field else ""
    return BadValue(attr, message + where)


def _bug(error: Exception) -> Exception:
    return OrchError(f"orch init wrote a file orch cannot load (a bug in orch init): {error}")


# --- which value a loader's complaint is about ------------------------------------------------

_PLAN_FIELDS: dict[str, str] = {
    "name": "name", "description": "model", "hosts": "host", "vars.vllm_version": "vllm_version",
    "python.venv": "vllm_version", "install.packages": "vllm_version",
    "service.sim.vllm_version": "vllm_version", "service.model": "model",
    "service.served_model_name": "served_model_name",
    "service.args.tensor-parallel-size": "tensor_parallel_size",
}
_HOST_FIELDS = {"address": "host", "port": "port", "user": "user",
                "identity_file": "identity_file", "jump": "jump"}


def _under(field_path: str, prefix: str) -> bool:
    return field_path == prefix or field_path.startswith(prefix + ".")


def plan_field_attr(field_path: str | None) -> str | None:
    """The InitSpec attribute whose value a plan field holds (None: a constant of ours)."""
    return next((attr for prefix, attr in _PLAN_FIELDS.items()
                 if field_path and _under(field_path, prefix)), None)


def inventory_field_attr(spec: InitSpec, field_path: str | None) -> str | None:
    """The same for an inventory field (`hosts.NAME.port`)."""
    prefix = f"hosts.{spec.host}"
    if not field_path or not _under(field_path, prefix):
        return None
    rest = field_path[len(prefix) + 1:].split(".", 1)[0]
    return _HOST_FIELDS.get(rest, "host" if not rest else None)
