"""The Python surface: loading and PolicyError diagnostics, YAML import, schemas in and out,
Request validation, TypeError/ValueError on bad input, and sharing a policy across threads."""

import concurrent.futures
import gc
import sys
from pathlib import Path

import pytest

import toolwarden

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"

DEMO = """
policy "demo" version 1
effects none, write
intents write > read
fallback read
keywords write { en "create", "add" }
matrix standard {
        none   write
  read  allow  deny
  write allow  confirm
}
mode supervised { matrix standard }
confirm fields "confirmed"
tool list_notes  { effect none }
tool create_note { effect write }
"""


def test_the_crate_doc_example_reads_the_same_in_python():
    policy = toolwarden.Policy.parse(DEMO, name="demo.warden")
    request = toolwarden.Request(mode="supervised")
    intent = policy.classify("please create a note")
    assert intent.name == "write"
    assert intent.intents == ["write"]
    assert intent.hits == [{"keyword": "create", "intent": "write", "lang": "en", "span": [7, 13]}]
    assert not intent.fallback
    assert policy.offer(request, ["list_notes", "create_note", "rm_rf"], intent=intent) == [
        "list_notes",
        "create_note",
    ]
    v = policy.check_call(request, "create_note", {"text": "hi"}, turn=toolwarden.Turn(), intent=intent)
    assert v.decision == "confirm"
    ok = policy.check_call(request, "list_notes", {}, intent=intent)
    assert (ok.decision, ok.stage, ok.reason, ok.source) == ("allow", None, "`list_notes` may run", "demo.warden:14:1")
    assert policy.explain(request, "list_notes", intent=intent) == {
        "tool": "list_notes",
        "decision": "allow",
        "stage": None,
        "reason": "`list_notes` (none) is allowed",
        "source": "demo.warden:14:1",
    }
    assert (policy.name, policy.version) == ("demo", 1)
    assert repr(policy) == '<Policy "demo" version 1>'


def test_a_policy_with_errors_raises_policy_error_with_every_diagnostic():
    path = FIXTURES / "check" / "undefined_effect.warden"
    with pytest.raises(toolwarden.PolicyError) as e:
        toolwarden.Policy.from_file(path)
    diags = e.value.diagnostics
    assert [(d.file, d.line, d.column, d.code, d.severity) for d in diags] == [
        (str(path), 6, 30, "undefined-effect", "error"),
        (str(path), 7, 30, "undefined-effect", "error"),
    ]
    assert diags[0].message == "undefined effect `wirte`"
    assert diags[0].help == "did you mean `write`?"
    assert diags[0].text == "wirte"
    assert diags[1].help == (
        "declared effects are `none`, `write`, `delete`; add `execute` to `effects` to declare it"
    )
    report = str(e.value)
    assert report.startswith("  × undefined effect `wirte`\n")
    assert f"╭─[{path}:6:30]" in report
    assert "help: did you mean `write`?" in report
    assert report.endswith("2 errors, 0 warnings")
    assert str(diags[0]) in report
    assert diags[0].to_dict()["line"] == 6


def test_parse_errors_point_into_the_named_text():
    with pytest.raises(toolwarden.PolicyError) as e:
        toolwarden.Policy.parse(
            'policy "x" version 1\neffects none\nmode chat { }\ntool t { effect wirte }\n', name="inline.warden"
        )
    (d,) = e.value.diagnostics
    assert (d.file, d.line, d.column, d.code) == ("inline.warden", 4, 17, "undefined-effect")
    assert d.text == "wirte"
    assert d.help == "declared effects are `none`; add `wirte` to `effects` to declare it"


def test_a_diagnostic_past_column_65535_is_a_policy_error_not_a_panic():
    text = 'policy "p" version 1\neffects none\nmode m { }\n' + " " * 70000 + "tool t { effect wrte }\n"
    with pytest.raises(toolwarden.PolicyError) as e:
        toolwarden.Policy.parse(text, name="wide.warden")
    (d,) = e.value.diagnostics
    assert (d.file, d.line, d.column, d.code) == ("wide.warden", 4, 70017, "undefined-effect")
    assert "╭─[wide.warden:4:70017]" in str(e.value)


def test_an_unreadable_file_is_a_diagnostic_without_a_place(tmp_path):
    missing = tmp_path / "nope.warden"
    with pytest.raises(toolwarden.PolicyError) as e:
        toolwarden.Policy.from_file(missing)
    (d,) = e.value.diagnostics
    assert (d.code, d.file, d.line, d.column) == ("unreadable", None, None, None)
    assert d.message.startswith(f"cannot read `{missing}`")
    assert isinstance(e.value, Exception)


def test_from_yaml_loads_seed_004s_tool_policies_with_the_legacy_catalog():
    yaml_dir = FIXTURES / "yaml"
    p = toolwarden.Policy.from_yaml(yaml_dir / "tool_policies.yaml", legacy=yaml_dir / "tools.yaml")
    assert p.name == "tool_policies"
    assert p.version == 1
    assert p.tool_names == [
        "consultar_plano",
        "alterar_plano",
        "devolver_pedido",
        "consultar_pedido",
        "cancelar_pedido",
        "reembolsar",
        "apagar_cliente",
        "sincronizar",
    ]
    v = p.check_call(toolwarden.Request(), "alterar_plano", {"new_plan_id": "CONTROLE_100"})
    assert (v.decision, v.stage, v.source) == (
        "confirm",
        "confirmation",
        f"{yaml_dir / 'tool_policies.yaml'}:14:27",
    )
    with pytest.raises(toolwarden.PolicyError) as e:
        toolwarden.Policy.from_yaml(yaml_dir / "duplicate_key.yaml")
    assert all(d.file == str(yaml_dir / "duplicate_key.yaml") for d in e.value.diagnostics if d.file)


def test_offer_keeps_the_shape_of_openai_anthropic_and_mcp_schemas(finance):
    request = toolwarden.Request(mode="supervised", roles=["accountant"], permissions=["invoices.manage"], tenant="b-42")
    openai = {"type": "function", "function": {"name": "search_invoices", "parameters": {"type": "object"}}}
    responses = {"type": "function", "name": "get_invoice", "parameters": {}}
    anthropic = {"name": "delete_invoice", "description": "Delete", "input_schema": {"type": "object"}}
    mcp = {"name": "create_invoice", "inputSchema": {}, "annotations": {"readOnlyHint": False}}
    unknown = {"name": "rm_rf", "input_schema": {}}
    tools = [openai, responses, anthropic, mcp, unknown, "get_invoice"]
    shown = finance.offer(request, tools, query="delete invoice 7")
    assert shown == [openai, responses, anthropic, "get_invoice"]
    assert shown[0] is openai and shown[2] is anthropic
    # An MCP tool whose annotations claim read-only is still judged by the policy (stricter only).
    liar = {"name": "delete_invoice", "inputSchema": {}, "annotations": {"readOnlyHint": True}}
    assert finance.offer(request, [liar], query="delete invoice 7") == [liar]
    assert finance.offer(request, [liar], query="show invoice 7") == []
    # Annotations that imply `delete` hide a write tool under a write query.
    destructive = {"name": "create_invoice", "inputSchema": {}, "annotations": {"destructiveHint": True}}
    assert finance.offer(request, [destructive], query="create an invoice") == []


def test_only_the_keys_a_decision_reads_must_be_json(finance):
    request = toolwarden.Request(mode="supervised", roles=["accountant"], permissions=["invoices.manage"], tenant="b-42")
    # Framework tool dicts may carry Python objects (a model class, a callable) beside the schema.
    tool = {"name": "get_invoice", "input_schema": {"type": "object"}, "handler": object()}
    assert finance.offer(request, [tool]) == [tool]
    with pytest.raises(TypeError, match=r'^tools\[0\]\["annotations"\] must be a JSON value'):
        finance.offer(request, [{"name": "get_invoice", "annotations": object()}])
    with pytest.raises(ValueError, match=r"^tools\[0\]: function.name is not a string$"):
        finance.offer(request, [{"type": "function", "function": {"name": 3}}])


def test_a_tool_dict_without_a_name_is_a_value_error(finance):
    request = toolwarden.Request(mode="supervised")
    with pytest.raises(ValueError, match=r"^tools\[1\]: the schema has no name"):
        finance.offer(request, ["get_invoice", {"description": "x"}])
    with pytest.raises(ValueError, match=r"^tools\[0\]: the OpenAI tool has no function.name$"):
        finance.offer(request, [{"type": "function", "function": {}}])
    with pytest.raises(ValueError, match=r"^tools\[0\]: name is empty$"):
        finance.offer(request, [{"name": ""}])
    with pytest.raises(ValueError, match=r"^tools\[0\]: annotations"):
        finance.offer(request, [{"name": "get_invoice", "annotations": {"readOnlyHint": "yes"}}])


def test_wrong_argument_types_raise_type_error_naming_the_parameter(finance):
    request = toolwarden.Request(mode="supervised")
    cases = [
        (lambda: finance.offer(request, "get_invoice"), "tools must be a list of tool names or tool schema dicts, not str"),
        (lambda: finance.offer(request, [1]), "tools[0] must be a tool name (str) or a tool schema dict, not int"),
        (lambda: finance.offer(request, 5), "tools must be a list of tool names or tool schema dicts, not int"),
        (lambda: finance.offer(request, [], query=3), "query must be str, not int"),
        (lambda: finance.offer(request, [], intent=3), "intent must be an Intent, a str or a list of str, not int"),
        (lambda: finance.check_call(request, 3, {}), "tool must be str, not int"),
        (lambda: finance.check_call(request, "get_invoice", [1]), "args must be a dict or JSON text (str), not list"),
        (lambda: finance.check_call(request, "get_invoice", {1: 2}), "args keys must be str, not int"),
        (lambda: finance.check_call(request, "get_invoice", {"a": object()}), 'args["a"] must be a JSON value'),
        (lambda: finance.check_call(request, "get_invoice", {}, turn=1), "turn must be a Turn, not int"),
        (lambda: finance.check_call(request, "get_invoice", {}, pending="x"), "pending must be a PendingCall or its dict, not str"),
        (lambda: finance.classify(b"bytes"), "text must be str, not bytes"),
        (lambda: toolwarden.Policy.parse(None), "text must be str, not NoneType"),
        (lambda: toolwarden.Request(mode=1), "mode must be str, not int"),
        (lambda: toolwarden.Request(roles="admin"), 'roles must be a list of str, not a single str (write ["admin"])'),
        (lambda: toolwarden.Request(permissions=[1]), "permissions[0] must be str, not int"),
        (lambda: toolwarden.Request(tenant=42), "tenant must be str, not int"),
        (lambda: toolwarden.Request(connectors=["task"]), "connectors must be a dict of tier -> list of servers or None, not list"),
        (lambda: toolwarden.Request(connectors={"task": "github"}), 'connectors["task"] must be a list of str, not a single str'),
        (lambda: toolwarden.Request(forced=5), "forced must be a list of str, not int"),
        (lambda: toolwarden.PendingCall.from_dict([]), "data must be dict, not list"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError) as e:
            call()
        assert str(e.value).startswith(message), (str(e.value), message)
    with pytest.raises(TypeError, match="request"):
        finance.offer("supervised", [])
    with pytest.raises(TypeError):
        toolwarden.Request("supervised")  # keyword-only


def test_bad_values_raise_value_error_and_never_crash(finance):
    request = toolwarden.Request(mode="supervised", tenant="b-42")
    with pytest.raises(ValueError, match="duplicate"):
        finance.check_call(request, "get_invoice", '{"a": 1, "a": 2}')
    with pytest.raises(ValueError, match="not a finite number"):
        finance.check_call(request, "get_invoice", {"x": float("nan")})
    with pytest.raises(ValueError, match="64-bit"):
        finance.check_call(request, "get_invoice", {"x": 2**70})
    cyclic: dict = {}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match="nested deeper"):
        finance.check_call(request, "get_invoice", cyclic)
    with pytest.raises(ValueError, match="give query or intent, not both"):
        finance.offer(request, [], query="x", intent="read")
    with pytest.raises(toolwarden.RequestError, match="unknown mode `chaos`"):
        finance.offer(toolwarden.Request(mode="chaos"), ["get_invoice"])
    with pytest.raises(toolwarden.RequestError, match="unknown intent `nope`"):
        finance.check_call(request, "get_invoice", {}, intent="nope")
    # A lone surrogate cannot be a UTF-8 tool name: UnicodeEncodeError (a ValueError), no crash.
    with pytest.raises(UnicodeEncodeError):
        finance.offer(request, ["get_invoice", "\ud800"])
    with pytest.raises(UnicodeEncodeError):
        finance.offer(request, [{"name": "get_invoice"}, "\ud800"])
    # Odd but well-typed input is simply decided.
    assert finance.offer(request, ["", "\x00", "é" * 10_000]) == []
    v = finance.check_call(request, "", {})
    assert (v.decision, v.stage) == ("deny", "identity")
    assert finance.classify("x" * 2_000_000).truncated
    assert not finance.classify("x" * 1000).truncated


def test_request_round_trips_its_fields():
    r = toolwarden.Request(
        mode="supervised",
        roles=("admin",),
        permissions=["invoices.view"],
        tenant="b-42",
        connectors={"session": ["github"], "task": None},
        forced=["delete_invoice"],
    )
    assert (r.mode, r.roles, r.permissions, r.tenant, r.connectors, r.forced) == (
        "supervised",
        ["admin"],
        ["invoices.view"],
        "b-42",
        {"session": ["github"]},
        ["delete_invoice"],
    )
    assert toolwarden.Request().mode is None
    assert r.with_forced([]).forced == []
    assert r.forced == ["delete_invoice"]


def test_one_policy_is_shared_by_many_threads(finance):
    request = toolwarden.Request(mode="autonomous", roles=["admin"], permissions=["invoices.manage"], tenant="b-42")
    tools = ["search_invoices", "get_invoice", "create_invoice", "delete_invoice", "rm_rf"] * 40
    expected = finance.offer(request, tools, query="delete invoice 7")

    def work(i: int):
        query = "delete invoice 7" if i % 2 == 0 else "show invoices"
        shown = finance.offer(request, tools, query=query)
        v = finance.check_call(request, "delete_invoice", {"invoice_id": i}, query=query)
        return i, shown, v.decision

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for i, shown, decision in pool.map(work, range(400)):
            if i % 2 == 0:
                assert shown == expected
                assert decision == "allow"
            else:
                assert shown == ["search_invoices", "get_invoice"] * 40
                assert decision == "deny"


def test_policies_and_verdicts_are_immutable(finance):
    with pytest.raises(AttributeError):
        finance.name = "other"  # type: ignore[misc]
    v = finance.check_call(toolwarden.Request(mode="supervised"), "get_invoice", {})
    with pytest.raises(AttributeError):
        v.decision = "allow"  # type: ignore[misc]


def test_the_package_ships_type_stubs_and_docstrings():
    pkg = Path(toolwarden.__file__).parent
    assert (pkg / "py.typed").is_file()
    assert (pkg / "_toolwarden.pyi").is_file()
    for name in toolwarden.__all__:
        obj = getattr(toolwarden, name)
        if name != "__version__":
            assert obj.__doc__, name
    for method in ["from_file", "parse", "from_yaml", "classify", "offer", "check_call", "explain"]:
        assert getattr(toolwarden.Policy, method).__doc__, method
    assert toolwarden.__version__ == "0.1.0"


def test_a_prepared_tool_set_decides_exactly_as_offer_over_the_same_objects(finance):
    request = toolwarden.Request(mode="supervised", roles=["accountant"], permissions=["invoices.manage"], tenant="b-42")
    names = finance.tool_names + ["rm_rf", "mcp__x__y"]
    prepared = finance.tools(names)
    assert isinstance(prepared, toolwarden.ToolSet)
    assert len(prepared) == len(names)
    assert prepared.names == names
    assert prepared.items == tuple(names)
    for query in ["delete invoice 7", "show invoices", "create an invoice", "export the data", "yes"]:
        assert finance.offer(request, prepared, query=query) == finance.offer(request, names, query=query), query
    assert finance.offer(request, prepared, query="delete invoice 7") == ["search_invoices", "get_invoice", "delete_invoice"]
    # A set of schemas returns the very dicts, and their annotations still only tighten.
    schemas = [
        {"name": "get_invoice", "inputSchema": {}},
        {"name": "create_invoice", "inputSchema": {}, "annotations": {"destructiveHint": True}},
        {"type": "function", "function": {"name": "create_invoice"}},
    ]
    shown = finance.offer(request, finance.tools(schemas), query="create an invoice")
    assert shown == [schemas[0], schemas[2]]
    assert shown[0] is schemas[0]
    assert shown == finance.offer(request, schemas, query="create an invoice")
    # The set keeps its own copy: changing the list afterwards changes nothing.
    mutable = ["get_invoice"]
    copy = finance.tools(mutable)
    mutable.append("search_invoices")
    assert finance.offer(request, copy) == ["get_invoice"]
    with pytest.raises(ValueError, match=r"^tools\[0\]: the schema has no name"):
        finance.tools([{"description": "x"}])
    with pytest.raises(TypeError, match=r"^tools must be a list of tool names or tool schema dicts, not str"):
        finance.tools("get_invoice")
    with pytest.raises(TypeError, match=r"^tools\[1\] must be a tool name \(str\) or a tool schema dict, not int"):
        finance.tools(["get_invoice", 1])
