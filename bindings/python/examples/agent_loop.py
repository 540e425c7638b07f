"""A complete agent loop guarded by toolwarden, runnable offline.

Every user turn:

1. ``policy.offer`` filters the agent's tool schemas (OpenAI shape) by who is asking, the mode and
   what the user's message intends; the model only ever sees the result.
2. Every tool call the model makes goes through ``policy.check_call``: ``allow`` runs the tool
   with ``verdict.args_for_execution``; ``deny`` hands ``verdict.to_dict()`` (seed 004's blocked
   shape) back to the model as the tool result; ``confirm`` stores ``verdict.pending`` in the
   session and asks the user.
3. Only the user confirms: the model's own confirmation fields are always stripped
   (``policy.strip_confirmation``), so a model that sends ``"approve_writes": true`` is still
   held for the user. On the next turn, a pending confirmation is reloaded from the session
   (plain JSON); when the user said yes, the runtime sets the confirmation on the model's call
   of that tool, and the call is judged against the pending call (``check_call`` is strict: a
   confirmation counts only against it, and a matching pending call keeps its tool reachable
   although "yes" classifies as a read): the user approved *this* call, not another one.

The model is scripted (``ScriptedModel``) so the example runs without network or API key; swap in
a real chat-completions client with the same ``respond(messages, tools)`` shape.

Run from the repository root after ``pip install ./bindings/python``::

    python bindings/python/examples/agent_loop.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import toolwarden

REPO = Path(__file__).resolve().parents[3]
POLICY_PATH = REPO / "policies" / "finance.warden"


# --------------------------------------------------------------------------------------------
# The agent's tools: plain functions plus their OpenAI function schemas.
# --------------------------------------------------------------------------------------------

INVOICES: Dict[int, Dict[str, Any]] = {
    7: {"invoice_id": 7, "customer": "Ali", "amount": 120.5},
    8: {"invoice_id": 8, "customer": "Bea", "amount": 80.0},
}


def search_invoices(query: str = "", business_id: str = "") -> List[Dict[str, Any]]:
    return [inv for inv in INVOICES.values() if query.lower() in inv["customer"].lower()]


def get_invoice(invoice_id: int, business_id: str = "") -> Optional[Dict[str, Any]]:
    return INVOICES.get(invoice_id)


def create_invoice(customer_id: str, amount: float, business_id: str = "") -> Dict[str, Any]:
    new_id = max(INVOICES) + 1
    INVOICES[new_id] = {"invoice_id": new_id, "customer": customer_id, "amount": amount}
    return INVOICES[new_id]


def delete_invoice(invoice_id: int, business_id: str = "") -> Dict[str, Any]:
    return {"deleted": INVOICES.pop(invoice_id, None) is not None, "invoice_id": invoice_id}


def export_business_data(format: str = "csv", business_id: str = "") -> Dict[str, Any]:
    return {"exported": len(INVOICES), "format": format}


FUNCTIONS: Dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in [search_invoices, get_invoice, create_invoice, delete_invoice, export_business_data]
}


def schema(name: str, description: str, properties: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties},
        },
    }


TOOLS = [
    schema("search_invoices", "Search invoices by customer", {"query": {"type": "string"}}),
    schema("get_invoice", "Read one invoice", {"invoice_id": {"type": "integer"}}),
    schema("create_invoice", "Create an invoice", {"customer_id": {"type": "string"}, "amount": {"type": "number"}}),
    schema("delete_invoice", "Delete an invoice", {"invoice_id": {"type": "integer"}}),
    schema("export_business_data", "Export all business data", {"format": {"type": "string"}}),
]


def names(tools: List[Dict[str, Any]]) -> List[str]:
    return [t["function"]["name"] for t in tools]


# --------------------------------------------------------------------------------------------
# A scripted stand-in for the model.
# --------------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as chat-completions models return it


@dataclass
class ScriptedModel:
    """Replays one list of tool calls per user turn, then a text reply. Records what it was shown."""

    script: List[List[ToolCall]]
    seen_tools: List[List[str]] = field(default_factory=list)
    turn: int = 0

    def respond(self, messages: List[Dict[str, Any]], tools: List[Dict[str, Any]]) -> Dict[str, Any]:
        if messages[-1]["role"] == "user":
            self.seen_tools.append(names(tools))
            calls = self.script[self.turn]
            self.turn += 1
            if calls:
                return {"role": "assistant", "tool_calls": calls}
        return {"role": "assistant", "content": f"(done: {len(messages)} messages)"}


# --------------------------------------------------------------------------------------------
# The guarded agent loop.
# --------------------------------------------------------------------------------------------


@dataclass
class Session:
    """What an app keeps between turns (e.g. in a database): plain JSON only."""

    pending: Optional[Dict[str, Any]] = None
    log: List[str] = field(default_factory=list)


class GuardedAgent:
    def __init__(self, policy: toolwarden.Policy, request: toolwarden.Request, model: ScriptedModel):
        self.policy = policy
        self.request = request
        self.model = model

    def run_turn(self, session: Session, user_message: str) -> str:
        pending = toolwarden.PendingCall.from_dict(session.pending) if session.pending else None
        # The user's answer to "Shall I run ...? (yes/no)" (an app would use buttons).
        user_said_yes = pending is not None and user_message.strip().lower() == "yes"
        # A confirmation in flight: its tool stays offered whatever "yes" classifies as.
        request = self.request.with_forced([pending.tool]) if pending else self.request
        intent = self.policy.classify(user_message)
        offered = self.policy.offer(request, TOOLS, intent=intent)
        session.log.append(f"user: {user_message!r} -> intent {intent.name}; offered {names(offered)}")

        turn = toolwarden.Turn()  # counts this turn's transactional calls
        messages: List[Dict[str, Any]] = [{"role": "user", "content": user_message}]
        while True:
            reply = self.model.respond(messages, offered)
            messages.append(reply)
            if "tool_calls" not in reply:
                return reply["content"]
            for call in reply["tool_calls"]:
                try:
                    args = self.policy.strip_confirmation(call.arguments)  # never the model's own
                except ValueError as err:  # duplicate keys, deep nesting, not an object
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"ok": False, "error": str(err)})})
                    continue
                if user_said_yes and pending is not None and call.name == pending.tool:
                    args["approve_writes"] = True  # the user's yes, set by the runtime
                verdict = self.policy.check_call(request, call.name, args, turn=turn, pending=pending, intent=intent)
                if verdict.decision == "allow":
                    result = FUNCTIONS[call.name](**verdict.args_for_execution)
                    if pending is not None and verdict.confirmation_received:
                        session.pending = None  # the confirmation was used
                        pending = None
                    session.log.append(f"  {call.name}{call.arguments}: allow -> {result}")
                    content = json.dumps({"ok": True, "result": result})
                elif verdict.decision == "confirm":
                    session.pending = verdict.pending.to_dict()
                    session.log.append(f"  {call.name}{call.arguments}: confirm -> asking the user")
                    return f"Shall I run {call.name} with {json.dumps(verdict.pending.args)}? (yes/no)"
                else:
                    session.log.append(f"  {call.name}{call.arguments}: deny at {verdict.stage}: {verdict.reason}")
                    content = verdict.to_json()
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


def main() -> Session:
    policy = toolwarden.Policy.from_file(POLICY_PATH)
    request = toolwarden.Request(
        mode="supervised", roles=["accountant"], permissions=["invoices.manage"], tenant="b-42"
    )
    model = ScriptedModel(
        script=[
            # Turn 1, "show me Ali's invoice": a read, then an injected delete the model was never shown.
            [
                ToolCall("c1", "get_invoice", '{"invoice_id": 7}'),
                ToolCall("c2", "delete_invoice", '{"invoice_id": 8}'),
            ],
            # Turn 2, "delete invoice 7": the delete is offered, but supervised mode holds it, even
            # though the model approves its own call (the field is stripped).
            [ToolCall("c3", "delete_invoice", '{"invoice_id": 7, "approve_writes": true}')],
            # Turn 3, "yes": first the delete with other arguments (refused), then the held one.
            [
                ToolCall("c4", "delete_invoice", '{"invoice_id": 8}'),
                ToolCall("c5", "delete_invoice", '{"invoice_id": 7}'),
            ],
            # Turn 4, "thanks": nothing pending any more, no delete offered.
            [],
        ]
    )
    agent = GuardedAgent(policy, request, model)
    session = Session()
    for message in ["show me Ali's invoice", "delete invoice 7", "yes", "thanks"]:
        answer = agent.run_turn(session, message)
        session.log.append(f"agent: {answer}")
        session = Session(**json.loads(json.dumps(session.__dict__)))  # survives a JSON store

    assert model.seen_tools == [
        ["search_invoices", "get_invoice"],
        ["search_invoices", "get_invoice", "delete_invoice"],
        ["search_invoices", "get_invoice", "delete_invoice"],
        ["search_invoices", "get_invoice"],
    ], model.seen_tools
    assert 7 not in INVOICES and 8 in INVOICES
    assert session.pending is None
    return session


if __name__ == "__main__":
    for line in main().log:
        print(line)
