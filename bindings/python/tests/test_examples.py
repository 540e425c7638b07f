"""The worked examples run offline and end in the state they assert (they carry their own checks)."""

import asyncio
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
    assert any(line.startswith("  delete_invoice{\"invoice_id\": 7, \"approve_writes\": true}: allow") for line in session.log)


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
