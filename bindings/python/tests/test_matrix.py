"""Seed 001's permission matrix on policies/finance.warden, the same 75 rows as the Rust
integration test tests/matrix.rs: 3 modes x 5 query intents x 5 tool effects, each with the exact
decision and deciding stage, through `offer` and again through `check_call`."""

import pytest

import toolwarden

from conftest import FINANCE

TOOL_OF = {
    "none": "search_invoices",
    "write": "create_invoice",
    "delete": "delete_invoice",
    "export": "export_business_data",
    "execute": "execute_workflow",
}

# (mode, query intent, tool effect, decision, deciding stage)
MATRIX = [
    ("analyzer", "read", "none", "allow", None),
    ("analyzer", "read", "write", "deny", "mode"),
    ("analyzer", "read", "delete", "deny", "mode"),
    ("analyzer", "read", "export", "deny", "mode"),
    ("analyzer", "read", "execute", "deny", "mode"),
    ("analyzer", "write", "none", "allow", None),
    ("analyzer", "write", "write", "deny", "mode"),
    ("analyzer", "write", "delete", "deny", "mode"),
    ("analyzer", "write", "export", "deny", "mode"),
    ("analyzer", "write", "execute", "deny", "mode"),
    ("analyzer", "destructive", "none", "allow", None),
    ("analyzer", "destructive", "write", "deny", "mode"),
    ("analyzer", "destructive", "delete", "deny", "mode"),
    ("analyzer", "destructive", "export", "deny", "mode"),
    ("analyzer", "destructive", "execute", "deny", "mode"),
    ("analyzer", "export", "none", "allow", None),
    ("analyzer", "export", "write", "deny", "mode"),
    ("analyzer", "export", "delete", "deny", "mode"),
    ("analyzer", "export", "export", "deny", "mode"),
    ("analyzer", "export", "execute", "deny", "mode"),
    ("analyzer", "execute", "none", "allow", None),
    ("analyzer", "execute", "write", "deny", "mode"),
    ("analyzer", "execute", "delete", "deny", "mode"),
    ("analyzer", "execute", "export", "deny", "mode"),
    ("analyzer", "execute", "execute", "deny", "mode"),
    ("supervised", "read", "none", "allow", None),
    ("supervised", "read", "write", "deny", "intent"),
    ("supervised", "read", "delete", "deny", "intent"),
    ("supervised", "read", "export", "deny", "intent"),
    ("supervised", "read", "execute", "deny", "intent"),
    ("supervised", "write", "none", "allow", None),
    ("supervised", "write", "write", "confirm", "confirmation"),
    ("supervised", "write", "delete", "deny", "intent"),
    ("supervised", "write", "export", "deny", "intent"),
    ("supervised", "write", "execute", "deny", "intent"),
    ("supervised", "destructive", "none", "allow", None),
    ("supervised", "destructive", "write", "deny", "intent"),
    ("supervised", "destructive", "delete", "confirm", "confirmation"),
    ("supervised", "destructive", "export", "deny", "intent"),
    ("supervised", "destructive", "execute", "deny", "intent"),
    ("supervised", "export", "none", "allow", None),
    ("supervised", "export", "write", "deny", "intent"),
    ("supervised", "export", "delete", "deny", "intent"),
    ("supervised", "export", "export", "confirm", "confirmation"),
    ("supervised", "export", "execute", "deny", "intent"),
    ("supervised", "execute", "none", "allow", None),
    ("supervised", "execute", "write", "deny", "intent"),
    ("supervised", "execute", "delete", "deny", "intent"),
    ("supervised", "execute", "export", "deny", "intent"),
    ("supervised", "execute", "execute", "confirm", "confirmation"),
    ("autonomous", "read", "none", "allow", None),
    ("autonomous", "read", "write", "deny", "intent"),
    ("autonomous", "read", "delete", "deny", "intent"),
    ("autonomous", "read", "export", "deny", "intent"),
    ("autonomous", "read", "execute", "deny", "intent"),
    ("autonomous", "write", "none", "allow", None),
    ("autonomous", "write", "write", "allow", None),
    ("autonomous", "write", "delete", "deny", "intent"),
    ("autonomous", "write", "export", "deny", "intent"),
    ("autonomous", "write", "execute", "deny", "intent"),
    ("autonomous", "destructive", "none", "allow", None),
    ("autonomous", "destructive", "write", "deny", "intent"),
    ("autonomous", "destructive", "delete", "allow", None),
    ("autonomous", "destructive", "export", "deny", "intent"),
    ("autonomous", "destructive", "execute", "deny", "intent"),
    ("autonomous", "export", "none", "allow", None),
    ("autonomous", "export", "write", "deny", "intent"),
    ("autonomous", "export", "delete", "deny", "intent"),
    ("autonomous", "export", "export", "confirm", "confirmation"),
    ("autonomous", "export", "execute", "deny", "intent"),
    ("autonomous", "execute", "none", "allow", None),
    ("autonomous", "execute", "write", "deny", "intent"),
    ("autonomous", "execute", "delete", "deny", "intent"),
    ("autonomous", "execute", "export", "deny", "intent"),
    ("autonomous", "execute", "execute", "confirm", "confirmation"),
]


def request(mode: str) -> toolwarden.Request:
    """Passes tenant, role and permission for every tool, isolating stages 6, 7 and confirmation."""
    return toolwarden.Request(
        mode=mode,
        roles=["admin"],
        permissions=["invoices.manage", "reports.export", "workflows.manage"],
        tenant="b-42",
    )


def test_the_table_covers_every_cell_once(finance):
    assert finance.modes == ["analyzer", "supervised", "autonomous"]
    assert finance.intents == ["destructive", "execute", "export", "write", "read"]
    assert finance.effects == ["none", "write", "delete", "export", "execute"]
    assert len({row[:3] for row in MATRIX}) == 75


@pytest.mark.parametrize("mode,intent,effect,decision,stage", MATRIX)
def test_explain_decides_each_cell(finance, mode, intent, effect, decision, stage):
    tool = TOOL_OF[effect]
    got = finance.explain(request(mode), tool, intent=intent)
    assert (got["decision"], got["stage"]) == (decision, stage)


@pytest.mark.parametrize("mode", ["analyzer", "supervised", "autonomous"])
@pytest.mark.parametrize("intent", ["read", "write", "destructive", "export", "execute"])
def test_offer_of_all_five_tools_matches_the_rows(finance, mode, intent):
    tools = list(TOOL_OF.values())
    expected = [TOOL_OF[r[2]] for r in MATRIX if r[0] == mode and r[1] == intent and r[3] != "deny"]
    assert finance.offer(request(mode), tools, intent=intent) == expected
    # The same through an Intent object and through schemas, which come back unchanged.
    assert finance.offer(request(mode), tools, intent=toolwarden.Intent.named(intent)) == expected
    schemas = [{"type": "function", "function": {"name": t, "parameters": {}}} for t in tools]
    shown = finance.offer(request(mode), schemas, intent=intent)
    assert [s["function"]["name"] for s in shown] == expected
    assert all(any(s is t for t in schemas) for s in shown)


@pytest.mark.parametrize("mode,intent,effect,decision,stage", MATRIX)
def test_check_call_decides_each_cell(finance, mode, intent, effect, decision, stage):
    tool = TOOL_OF[effect]
    args = {"business_id": "b-42", "customer_id": "c-1", "invoice_id": 7}
    v = finance.check_call(request(mode), tool, args, intent=intent)
    assert (v.decision, v.stage) == (decision, stage)
    if decision == "allow":
        assert v.args_for_execution == args
        assert v.pending is None
    elif decision == "confirm":
        assert v.args_for_execution is None
        assert v.pending is not None and v.pending.tool == tool
    else:
        assert v.args_for_execution is None and v.pending is None
        out = v.to_dict()
        assert out["ok"] is False
        assert out["metadata"]["blocked_by_policy"] is True
        assert out["metadata"]["stage"] == stage
        assert out["metadata"]["effect"] == effect
        assert out["metadata"]["policy_source"].startswith(f"{FINANCE}:")
