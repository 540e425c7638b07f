"""toolwarden: which tools an AI agent may see and call, decided by a policy.

The policy is text in the warden language (``*.warden``), loaded once and shared::

    import toolwarden

    policy = toolwarden.Policy.from_file("policies/finance.warden")
    request = toolwarden.Request(mode="supervised", roles=["accountant"],
                                 permissions=["invoices.manage"], tenant="b-42")
    tools = policy.offer(request, all_tools, query="delete invoice 7")   # what the model sees
    verdict = policy.check_call(request, "delete_invoice", {"invoice_id": 7, "business_id": "b-42"},
                                query="delete invoice 7")               # what it may run
    if verdict.decision == "allow":
        run(verdict.tool, verdict.args_for_execution)
    else:
        result = verdict.to_dict()   # seed 004's blocked shape, handed back to the model

Everything is implemented by the Rust core (``toolwarden._toolwarden``); this module only
re-exports it. Policies are immutable and may be shared across threads; evaluation releases
the GIL.
"""

from ._toolwarden import (
    Diagnostic,
    Intent,
    PendingCall,
    Policy,
    PolicyError,
    PolicyWatcher,
    Request,
    RequestError,
    Session,
    ToolSet,
    Turn,
    Verdict,
    __version__,
)

__all__ = [
    "Diagnostic",
    "Intent",
    "PendingCall",
    "Policy",
    "PolicyWatcher",
    "PolicyError",
    "Request",
    "RequestError",
    "Session",
    "ToolSet",
    "Turn",
    "Verdict",
    "__version__",
]
