"""toolwarden as the predicate of LangChain's human-in-the-loop middleware (docs/guard.md).

``HumanInTheLoopMiddleware(interrupt_on={tool: {"when": predicate, ...}})`` pauses a tool call
when ``predicate(request)`` is true, and runs the tool only after the human approves. Here:

- ``needs_confirmation(request)``: the policy judges the model's call with the model's own
  confirmation fields stripped (``policy.strip_confirmation``), so a model that writes
  ``"confirmed": true`` itself is still paused for the human. A ``confirm`` verdict keeps the
  ``PendingCall`` under the call's id and interrupts; ``deny`` and ``allow`` do not ask anyone.
- ``devolver_pedido``: the tool body judges the call again, the boundary. The runtime, not the
  model, adds ``confirmed: True``, and only when a pending call is held for this call id: the
  middleware runs a paused call only after the human approved it. ``check_call`` is strict by
  default, so a confirmation without a pending call is denied.

``build_agent(model)`` wires it into ``langchain.agents.create_agent`` (needs ``pip install
langchain langgraph``); the predicate and the tool body need only ``toolwarden`` and are tested
by ``tests/test_examples.py`` with a model that confirms its own calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import toolwarden

REPO = Path(__file__).resolve().parents[3]
POLICY = toolwarden.Policy.from_file(REPO / "policies" / "retail.warden")
REQUEST = toolwarden.Request()  # retail.warden's default mode

HELD: Dict[str, toolwarden.PendingCall] = {}  # tool_call_id -> the call the human is asked about
RETURNS: List[Dict[str, Any]] = []  # what the back end executed


def needs_confirmation(request: Any) -> bool:
    """The ``when`` predicate: pause the call when the policy says ``confirm``."""
    call = request.tool_call  # {"name", "args", "id"}
    args = POLICY.strip_confirmation(call["args"])  # the model never confirms for the user
    verdict = POLICY.check_call(REQUEST, call["name"], args)
    if verdict.decision == "confirm":
        HELD[call["id"]] = verdict.pending
        return True
    return False  # allow runs; deny reaches the tool body, which returns the blocked result


def devolver_pedido(order_id: str, reason: str, tool_call_id: str, turn: toolwarden.Turn) -> str:
    """The tool body (in LangChain, ``tool_call_id`` is an ``InjectedToolCallId``)."""
    args: Dict[str, Any] = {"order_id": order_id, "reason": reason}
    pending = HELD.pop(tool_call_id, None)
    if pending is not None:
        args["confirmed"] = True  # the middleware ran a paused call: the human approved it
    verdict = POLICY.check_call(REQUEST, "devolver_pedido", args, turn=turn, pending=pending)
    if verdict.decision != "allow":
        return verdict.to_json()  # seed 004's blocked result, for the model
    RETURNS.append(verdict.args_for_execution)
    return json.dumps({"ok": True, "returned": verdict.args_for_execution["order_id"]})


def build_agent(model: Any) -> Any:
    """The agent, with the middleware pausing ``devolver_pedido`` when the policy says so."""
    from typing import Annotated

    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import InjectedToolCallId, tool
    from langgraph.checkpoint.memory import InMemorySaver

    turn = toolwarden.Turn()  # per user turn in a real app

    @tool("devolver_pedido")
    def devolver(order_id: str, reason: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Return an order."""
        return devolver_pedido(order_id, reason, tool_call_id, turn)

    return create_agent(
        model=model,
        tools=[devolver],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={
                    # `edit` is left out: edited arguments are another call, the digest differs.
                    "devolver_pedido": {"allowed_decisions": ["approve", "reject"], "when": needs_confirmation},
                }
            )
        ],
        checkpointer=InMemorySaver(),
    )
