"""Confirmation across turns (seed 001's approve_writes on finance.warden, seed 004's pending call
and blocked shape on retail.warden), as in the Rust tests tests/failure_modes.rs and
tests/retail.rs: only a literal True confirms, the held call is bound to its arguments by a
digest, the pending call survives a round trip through a dict or JSON, and one transactional call
runs per turn."""

import json

import pytest

import toolwarden

from conftest import RETAIL

ADMIN = dict(
    roles=["admin"],
    permissions=["invoices.manage", "reports.export", "workflows.manage"],
    tenant="b-42",
)


def test_a_write_call_without_approval_is_held_then_runs_once_approved(finance):
    request = toolwarden.Request(mode="supervised", **ADMIN)
    intent = finance.classify("create a new invoice for customer 12")
    assert intent.name == "write"
    turn = toolwarden.Turn()
    args = {"customer_id": "c-12", "amount": 100}
    v = finance.check_call(request, "create_invoice", args, turn=turn, intent=intent)
    assert (v.decision, v.stage) == ("confirm", "confirmation")
    assert v.needs_confirmation and not v.is_allowed and not v.is_denied
    assert v.reason == (
        "`create_invoice` needs confirmation: ask the user, then repeat the call with "
        "`approve_writes` or `confirmed` set to true (mode `supervised` confirms effect `write`)"
    )
    pending = v.pending
    assert pending.tool == "create_invoice"
    assert pending.args == args
    assert pending.transaction_status == "AWAITING_CONFIRMATION"
    assert pending.policy == "finance-assistant"
    assert pending.policy_version == 1
    assert len(pending.digest) == 64
    out = v.to_dict()
    assert out["ok"] is False
    assert out["confirmation_required"] is True
    assert out["confirmation_fields"] == ["approve_writes", "confirmed"]
    assert out["metadata"]["stage"] == "confirmation"
    assert out["pending_call"] == pending.to_dict()
    assert turn.transactional_calls == 0

    # Only the literal True approves; the held call never carries the approval field.
    for not_true in ["true", 1, False, None, "yes"]:
        held = finance.check_call(
            request, "create_invoice", {**args, "approve_writes": not_true}, turn=turn, intent=intent
        )
        assert (held.decision, held.stage) == ("confirm", "confirmation"), not_true
        assert held.pending.digest == pending.digest

    # The pending call is persisted between turns as plain JSON...
    stored = json.dumps(pending.to_dict())
    restored = toolwarden.PendingCall.from_dict(json.loads(stored))
    assert restored == pending
    assert toolwarden.PendingCall.from_json(pending.to_json()) == pending

    # ...and the next turn ("yes") is classified `read`: the forced name keeps the tool reachable.
    yes = finance.classify("yes")
    assert yes.name == "read" and yes.fallback
    next_request = request.with_forced([restored.tool])
    assert finance.offer(next_request, ["create_invoice", "delete_invoice"], intent=yes) == ["create_invoice"]
    turn = toolwarden.Turn()
    v = finance.check_call(
        next_request, "create_invoice", {**args, "approve_writes": True},
        turn=turn, pending=restored, intent=yes,
    )
    assert (v.decision, v.stage) == ("allow", None)
    assert v.args_for_execution == args
    assert v.confirmation_received is True
    assert turn.transactional_calls == 1
    assert v.to_dict()["ok"] is True


def test_a_confirmed_call_with_other_arguments_is_denied(finance):
    request = toolwarden.Request(mode="supervised", **ADMIN)
    v = finance.check_call(request, "create_invoice", {"customer_id": "c-12", "amount": 100}, intent="write")
    pending = v.pending.to_dict()
    v = finance.check_call(
        request, "create_invoice", {"customer_id": "c-12", "amount": 100000, "approve_writes": True},
        pending=pending, intent="write",
    )
    assert (v.decision, v.stage) == ("deny", "confirmation")
    assert v.reason == "the arguments of `create_invoice` differ from the call the user confirmed"
    tampered = dict(pending, args={"customer_id": "c-12", "amount": 1})
    v = finance.check_call(
        request, "create_invoice", {"customer_id": "c-12", "amount": 1, "approve_writes": True},
        pending=tampered, intent="write",
    )
    assert (v.decision, v.stage) == ("deny", "confirmation")
    assert v.reason == "the pending call is corrupt: its digest does not match its own tool and arguments"


def test_the_retail_confirm_result_has_seed_004s_shape(retail):
    request = toolwarden.Request()
    v = retail.check_call(request, "alterar_plano", {"new_plan_id": "CONTROLE_100", "confirmed": "true"})
    digest = v.pending.digest
    assert v.to_dict() == {
        "ok": False,
        "decision": "confirm",
        "tool": "alterar_plano",
        "error": "`alterar_plano` needs confirmation: ask the user, then repeat the call with "
        "`confirmed` or `confirmation` set to true (`alterar_plano` says `confirm always`)",
        "metadata": {
            "blocked_by_policy": True,
            "stage": "confirmation",
            "operation_type": "transactional",
            "effect": "write",
            "policy_source": f"{RETAIL}:19:66",  # `confirm always` on line 19
        },
        "confirmation_required": True,
        "confirmation_fields": ["confirmed", "confirmation"],
        "transaction_status": "AWAITING_CONFIRMATION",
        "pending_call": {
            "tool": "alterar_plano",
            "args": {"new_plan_id": "CONTROLE_100"},
            "digest": digest,
            "transaction_status": "AWAITING_CONFIRMATION",
            "policy": "retail-agent",
            "policy_version": 1,
        },
    }
    assert json.loads(v.to_json()) == v.to_dict()


def test_one_transactional_call_per_turn_and_reads_never_count(retail):
    request = toolwarden.Request(mode="agent")
    turn = toolwarden.Turn()
    v = retail.check_call(request, "consultar_plano", {}, turn=turn)
    assert v.decision == "allow" and turn.transactional_calls == 0
    held = retail.check_call(request, "alterar_plano", '{"new_plan_id": "X"}', turn=turn).pending
    v = retail.check_call(
        request, "alterar_plano", '{"new_plan_id": "X", "confirmation": true}', turn=turn, pending=held
    )
    assert v.decision == "allow" and v.args_for_execution == {"new_plan_id": "X"}
    assert turn.transactional_calls == 1
    v = retail.check_call(
        request, "devolver_pedido", {"order_id": 1, "reason": "r", "confirmed": True}, turn=turn, strict=False
    )
    assert (v.decision, v.stage) == ("deny", "turn_limit")
    assert turn.transactional_calls == 1
    assert retail.check_call(request, "consultar_plano", {}, turn=turn).decision == "allow"


def test_missing_required_arguments_are_listed(retail):
    v = retail.check_call(toolwarden.Request(), "devolver_pedido", {"confirmed": True})
    assert (v.decision, v.stage) == ("deny", "requires")
    assert v.missing == ["order_id", "reason"]
    assert v.to_dict()["metadata"]["missing"] == ["order_id", "reason"]


def test_a_malformed_pending_call_is_a_value_error(retail):
    with pytest.raises(ValueError, match="pending is not a pending call"):
        retail.check_call(toolwarden.Request(), "alterar_plano", {}, pending={"tool": "x"})
    with pytest.raises(ValueError, match="data is not a pending call"):
        toolwarden.PendingCall.from_dict({"tool": "x", "extra": 1})


NO_PENDING = (
    "`devolver_pedido` carries a confirmation, but no call is awaiting confirmation: only the user "
    "confirms, so call it without the confirmation field, ask the user, then repeat it with the "
    "pending call"
)


def test_a_confirmation_with_no_pending_call_is_denied_by_default(retail):
    request = toolwarden.Request()
    args = {"order_id": "123", "reason": "r", "confirmed": True}
    turn = toolwarden.Turn()
    v = retail.check_call(request, "devolver_pedido", args, turn=turn)
    assert (v.decision, v.stage, v.reason) == ("deny", "confirmation", NO_PENDING)
    assert turn.transactional_calls == 0
    # The runtime's way: ask (no confirmation field), keep the pending call, confirm against it.
    held = retail.check_call(request, "devolver_pedido", retail.strip_confirmation(args), turn=turn)
    assert held.decision == "confirm"
    v = retail.check_call(request, "devolver_pedido", args, turn=turn, pending=held.pending)
    assert (v.decision, v.args_for_execution) == ("allow", {"order_id": "123", "reason": "r"})
    assert turn.transactional_calls == 1
    # Opting out trusts the literal True (for callers with no model in the loop).
    v = retail.check_call(request, "devolver_pedido", args, strict=False)
    assert v.decision == "allow"


def test_strip_confirmation_removes_only_the_confirm_fields(finance, retail):
    assert finance.strip_confirmation(
        {"invoice_id": 7, "approve_writes": True, "confirmed": "true", "confirmation": True}
    ) == {"invoice_id": 7, "confirmation": True}
    assert retail.strip_confirmation('{"order_id": 1, "confirmation": true}') == {"order_id": 1}
    original = {"order_id": 1, "confirmed": True}
    retail.strip_confirmation(original)
    assert original == {"order_id": 1, "confirmed": True}, "a new dict; the input is untouched"
    with pytest.raises(ValueError, match="args must be a JSON object, not an array"):
        retail.strip_confirmation("[1]")
    with pytest.raises(TypeError, match="args must be a dict or JSON text"):
        retail.strip_confirmation([1])
    with pytest.raises(ValueError, match="duplicate key"):
        retail.strip_confirmation('{"confirmed": false, "confirmed": true}')


def test_a_pending_call_reaches_its_tool_when_yes_classifies_as_read(finance):
    request = toolwarden.Request(mode="supervised", **ADMIN)
    args = {"customer_id": "c-12", "amount": 100}
    held = finance.check_call(request, "create_invoice", args, query="create a new invoice").pending
    confirmed = {**args, "approve_writes": True}
    # "yes" is a read: without the pending call, the write is denied at the intent stage...
    v = finance.check_call(request, "create_invoice", confirmed, query="yes")
    assert (v.decision, v.stage) == ("deny", "intent")
    # ...with it, and no `forced` names, the very call reaches the confirmation and runs.
    turn = toolwarden.Turn()
    v = finance.check_call(request, "create_invoice", confirmed, turn=turn, pending=held, query="yes")
    assert (v.decision, v.args_for_execution) == ("allow", args)
    assert turn.transactional_calls == 1
    # Other arguments are another call: stage 7 still denies them.
    v = finance.check_call(
        request, "create_invoice", {**confirmed, "amount": 1}, pending=held, query="yes"
    )
    assert (v.decision, v.stage) == ("deny", "intent")
    # Stages 1-6 still apply: analyzer mode's ceiling.
    analyzer = toolwarden.Request(mode="analyzer", **ADMIN)
    v = finance.check_call(analyzer, "create_invoice", confirmed, pending=held, query="yes")
    assert (v.decision, v.stage) == ("deny", "mode")


def test_every_verdict_dict_carries_decision_and_tool(retail):
    request = toolwarden.Request()
    for tool, args, decision in [
        ("consultar_plano", {}, "allow"),
        ("alterar_plano", {"new_plan_id": "X"}, "confirm"),
        ("devolver_pedido", {}, "deny"),
        ("cancelar_conta", {}, "deny"),
    ]:
        out = retail.check_call(request, tool, args).to_dict()
        assert (out["decision"], out["tool"]) == (decision, tool)
        assert json.loads(retail.check_call(request, tool, args).to_json())["decision"] == decision
