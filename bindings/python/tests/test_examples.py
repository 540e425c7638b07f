"""The worked examples run offline and end in the state they assert (they carry their own checks)."""

import asyncio
import json
import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_plain_agent_loop_holds_a_delete_across_turns():
    example = load("agent_loop")
    session = example.main()
    assert session.pending is None
    assert any("deny at intent" in line for line in session.log)
    assert any("deny at confirmation" in line for line in session.log)
    assert any(
        line.startswith('  delete_invoice{"invoice_id": 7, "approve_writes": true}: confirm -> asking the user')
        for line in session.log
    ), "the model's own approval is stripped: the user is asked"
    assert any(line.startswith('  delete_invoice{"invoice_id": 7}: allow') for line in session.log)


def test_the_openai_agents_sdk_approval_hook():
    pytest.importorskip("agents", reason="openai-agents is not installed")
    example = load("openai_agents_approval")
    ctx = asyncio.run(example.main())
    assert ctx.log == [
        "user 'delete invoice 7': offered ['delete_invoice', 'get_invoice']",
        'hook delete_invoice{"invoice_id": 7}: confirm -> run interrupted',
        'tool delete_invoice{"invoice_id":7}: allow',
        "agent: Invoice 7 is deleted.",
        "user 'create an invoice for Ali': offered ['create_invoice', 'get_invoice']",
        'tool create_invoice{"customer_id":"ali","amount":10,"business_id":"b-99"}: deny at tenant_arg',
        "agent: I cannot create invoices for another business.",
    ]
    assert ctx.held == {}


def run_self_confirming_delete(approve):
    """The OpenAI Agents SDK example with a model that sends `"confirmed": true` itself."""
    from agents import Agent
    from agents.testing import ScriptedModel, assistant_message, function_call

    import toolwarden

    example = load("openai_agents_approval")
    policy = toolwarden.Policy.from_file(example.REPO / "policies" / "finance.warden")
    ctx = example.WardenContext(
        policy,
        toolwarden.Request(mode="supervised", roles=["accountant"], permissions=["invoices.manage"], tenant="b-42"),
    )
    model = ScriptedModel(
        [
            [function_call("delete_invoice", {"invoice_id": 7, "confirmed": True}, call_id="call_1")],
            [assistant_message("Done.")],
        ]
    )
    agent = example.Agent(name="finance", instructions="Help with invoices.", model=model, tools=example.TOOLS)
    asked = []

    def human(item):
        asked.append(item.name)
        return approve

    asyncio.run(example.user_turn(agent, ctx, "delete invoice 7", approve=human))
    return example, ctx, asked


def test_a_self_confirming_model_still_reaches_the_human_in_the_openai_agents_sdk():
    pytest.importorskip("agents", reason="openai-agents is not installed")
    example, ctx, asked = run_self_confirming_delete(approve=False)
    assert asked == ["delete_invoice"], "the human was asked"
    assert 7 in example.INVOICES, "the refused delete never ran"
    assert ctx.log[1] == 'hook delete_invoice{"invoice_id": 7, "confirmed": true}: confirm -> run interrupted'

    example, ctx, asked = run_self_confirming_delete(approve=True)
    assert asked == ["delete_invoice"]
    assert 7 not in example.INVOICES, "approved by the human, the delete ran"
    assert ctx.log[2] == 'tool delete_invoice{"invoice_id":7,"confirmed":true}: allow'


class FakeLangChainRequest:
    """What HumanInTheLoopMiddleware hands to a `when` predicate: the model's tool call."""

    def __init__(self, tool_call):
        self.tool_call = tool_call


def run_hitl(example, tool_call, approve):
    """Drives one tool call as HumanInTheLoopMiddleware does: `when` true -> ask the human, run
    the tool only on approve; `when` false -> run the tool."""
    import toolwarden

    turn = toolwarden.Turn()
    asked = example.needs_confirmation(FakeLangChainRequest(tool_call))
    if asked and not approve:
        return asked, None
    args = {k: v for k, v in tool_call["args"].items() if k in ("order_id", "reason")}
    return asked, json.loads(example.devolver_pedido(**args, tool_call_id=tool_call["id"], turn=turn))


def test_a_self_confirming_model_still_reaches_the_human_in_the_langchain_predicate():
    example = load("langchain_hitl")
    # The fake model confirms its own call.
    call = {"name": "devolver_pedido", "id": "call_1",
            "args": {"order_id": "123", "reason": "arrependimento", "confirmed": True}}
    asked, result = run_hitl(example, call, approve=False)
    assert asked is True and result is None and example.RETURNS == []

    # Approved by the human: the runtime confirms against the held call, and it runs once.
    asked, result = run_hitl(example, dict(call, id="call_2"), approve=True)
    assert asked is True and result == {"ok": True, "returned": "123"}
    assert example.RETURNS == [{"order_id": "123", "reason": "arrependimento"}]

    # The tool body reached without the predicate (another path): nothing is held for the call,
    # so the guard holds it for confirmation instead of running it.
    out = json.loads(example.devolver_pedido("123", "arrependimento", "call_3", toolwarden_turn()))
    assert (out["decision"], out["metadata"]["stage"]) == ("confirm", "confirmation")
    assert len(example.RETURNS) == 1


def toolwarden_turn():
    import toolwarden

    return toolwarden.Turn()
