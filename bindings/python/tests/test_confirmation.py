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
    v = retail.check_call(request, "alterar_plano", '{"new_plan_id": "X", "confirmation": true}', turn=turn)
    assert v.decision == "allow" and v.args_for_execution == {"new_plan_id": "X"}
    assert turn.transactional_calls == 1
    v = retail.check_call(
        request, "devolver_pedido", {"order_id": 1, "reason": "r", "confirmed": True}, turn=turn
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
