"""toolwarden wired into the OpenAI Agents SDK's human-in-the-loop approval, runnable offline.

- ``offer``: before each user turn, the agent is cloned with only the tools the policy shows for
  this request and this message (``Agent.clone(tools=...)``).
- ``needs_approval``: every tool's approval hook asks ``policy.check_call`` about the call with
  the model's own confirmation fields stripped (``policy.strip_confirmation``), so a model that
  sends ``"confirmed": true`` itself still reaches the human; a ``confirm`` verdict makes the SDK
  interrupt the run (``result.interruptions``) and the held call is remembered by its
  ``call_id`` as a ``PendingCall``.
- The tool body runs ``check_call`` again at execution, as the guard must: a call the user approved
  (``RunState.approve``) is judged with the confirmation field set by the runtime and the
  pending call's digest, so only the very call the user saw runs, and a confirmation with no
  pending call is denied (``check_call`` is strict by default); a denied call returns seed 004's
  blocked result to the model instead of running.

The model is the SDK's own ``agents.testing.ScriptedModel`` and tracing is disabled, so nothing
leaves the machine. Needs ``pip install openai-agents`` (tested with 0.24.0).

Run from the repository root::

    python bindings/python/examples/openai_agents_approval.py
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List

from agents import Agent, FunctionTool, RunContextWrapper, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

import toolwarden

REPO = Path(__file__).resolve().parents[3]
set_tracing_disabled(True)


@dataclass
class WardenContext:
    """The run context the SDK hands to hooks and tools: who asks, the user's message, the turn."""

    policy: toolwarden.Policy
    request: toolwarden.Request
    query: str = ""
    turn: toolwarden.Turn = field(default_factory=toolwarden.Turn)
    held: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # call_id -> PendingCall dict
    log: List[str] = field(default_factory=list)


def guarded(fn: Callable[..., Any]) -> FunctionTool:
    """``fn`` as an SDK function tool whose approval hook and body are judged by the policy."""
    base = function_tool(fn)  # the JSON schema from the signature and docstring
    name = base.name

    async def needs_approval(ctx: RunContextWrapper[WardenContext], params: Dict[str, Any], call_id: str) -> bool:
        w = ctx.context
        # The model's own confirmation fields never count: a model that sends "confirmed": true
        # is judged as if it had not, so the call still reaches the human. A preview: a fresh
        # Turn, so the hook never counts a call that has not run.
        args = w.policy.strip_confirmation(params)
        verdict = w.policy.check_call(w.request, name, args, query=w.query)
        if verdict.decision == "confirm":
            w.held[call_id] = verdict.pending.to_dict()
            w.log.append(f"hook {name}{json.dumps(params)}: confirm -> run interrupted")
            return True
        return False  # allow, or deny: the body refuses a denied call with the blocked result

    async def invoke(ctx: ToolContext[WardenContext], arguments: str) -> str:
        w = ctx.context
        try:
            args = w.policy.strip_confirmation(arguments or "{}")  # never the model's confirmation
        except ValueError as err:  # duplicate keys, deep nesting, not an object: refused
            return json.dumps({"ok": False, "error": str(err), "metadata": {"blocked_by_policy": True}})
        pending = w.held.pop(ctx.tool_call_id, None)
        if pending is not None:
            # The SDK runs a held call only after RunState.approve(): that is the user's "yes".
            args = {**args, "confirmed": True}
        # Strict (the default): a confirmation counts only against the pending call.
        verdict = w.policy.check_call(w.request, name, args, turn=w.turn, pending=pending, query=w.query)
        w.log.append(f"tool {name}{arguments}: {verdict.decision}" + (f" at {verdict.stage}" if verdict.stage else ""))
        if verdict.decision != "allow":
            return verdict.to_json()
        return json.dumps(fn(**verdict.args_for_execution))

    return FunctionTool(
        name=name,
        description=base.description,
        params_json_schema=base.params_json_schema,
        on_invoke_tool=invoke,
        strict_json_schema=base.strict_json_schema,
        needs_approval=needs_approval,
    )


INVOICES: Dict[int, Dict[str, Any]] = {7: {"invoice_id": 7, "customer": "Ali", "amount": 120.5}}


def get_invoice(invoice_id: int) -> Any:
    """Read one invoice."""
    return INVOICES.get(invoice_id)


def create_invoice(customer_id: str, amount: float, business_id: str) -> Any:
    """Create an invoice."""
    INVOICES[8] = {"invoice_id": 8, "customer": customer_id, "amount": amount}
    return INVOICES[8]


def delete_invoice(invoice_id: int) -> Any:
    """Delete an invoice."""
    return {"deleted": INVOICES.pop(invoice_id, None) is not None}


def export_business_data(format: str) -> Any:
    """Export all business data."""
    return {"exported": len(INVOICES), "format": format}


TOOLS = [guarded(f) for f in [get_invoice, create_invoice, delete_invoice, export_business_data]]


async def user_turn(agent: Agent[WardenContext], ctx: WardenContext, message: str, approve: Callable[[Any], bool]) -> str:
    """One user message: offer, run, and answer each approval interruption with ``approve``."""
    ctx.query, ctx.turn = message, toolwarden.Turn()
    shown = set(ctx.policy.offer(ctx.request, [t.name for t in TOOLS], query=message))
    turn_agent = agent.clone(tools=[t for t in TOOLS if t.name in shown])
    ctx.log.append(f"user {message!r}: offered {sorted(shown)}")
    result = await Runner.run(turn_agent, message, context=ctx)
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            if approve(item):
                state.approve(item)
            else:
                state.reject(item, rejection_message="The user declined.")
        result = await Runner.run(turn_agent, state)
    return str(result.final_output)


async def main() -> WardenContext:
    policy = toolwarden.Policy.from_file(REPO / "policies" / "finance.warden")
    ctx = WardenContext(
        policy,
        toolwarden.Request(mode="supervised", roles=["accountant"], permissions=["invoices.manage"], tenant="b-42"),
    )
    model = ScriptedModel(
        [
            # "delete invoice 7": the delete is offered; supervised mode holds it for approval.
            [function_call("delete_invoice", {"invoice_id": 7}, call_id="call_1")],
            [assistant_message("Invoice 7 is deleted.")],
            # "create an invoice for Ali": offered, but the call names another tenant: refused.
            [function_call("create_invoice", {"customer_id": "ali", "amount": 10, "business_id": "b-99"}, call_id="call_2")],
            [assistant_message("I cannot create invoices for another business.")],
        ]
    )
    agent = Agent[WardenContext](name="finance", instructions="Help with invoices.", model=model, tools=TOOLS)

    answer = await user_turn(agent, ctx, "delete invoice 7", approve=lambda item: True)
    ctx.log.append(f"agent: {answer}")
    assert answer == "Invoice 7 is deleted." and 7 not in INVOICES
    assert [t.name for t in model.calls[0].tools] == ["get_invoice", "delete_invoice"]

    answer = await user_turn(agent, ctx, "create an invoice for Ali", approve=lambda item: True)
    ctx.log.append(f"agent: {answer}")
    assert [t.name for t in model.calls[2].tools] == ["get_invoice", "create_invoice"]
    blocked = json.loads(model.calls[3].input[-1]["output"])
    assert blocked["metadata"]["stage"] == "tenant_arg" and 8 not in INVOICES
    model.assert_complete()
    return ctx


if __name__ == "__main__":
    for line in asyncio.run(main()).log:
        print(line)
