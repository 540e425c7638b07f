"""Seed 000's connector allowlists on policies/connectors.warden, as in the Rust test
tests/connectors.rs: tier precedence task > session > project, `None` (tier unset) vs `[]` (zero
connectors), the exact blocked message, and enforcement at execution for names never offered."""

import pytest

import toolwarden

from conftest import CONNECTORS

NONE = None
EMPTY: list = []
GITHUB = ["github"]
MAIL = ["mail"]
BOTH = ["github", "mail"]

# (task, session, project, deciding tier or None for unrestricted, github allowed?, mail allowed?)
RESOLUTION = [
    (NONE, NONE, NONE, None, True, True),
    (GITHUB, NONE, NONE, "task", True, False),
    (NONE, GITHUB, NONE, "session", True, False),
    (NONE, NONE, GITHUB, "project", True, False),
    (EMPTY, NONE, NONE, "task", False, False),
    (NONE, EMPTY, NONE, "session", False, False),
    (NONE, NONE, EMPTY, "project", False, False),
    (MAIL, GITHUB, NONE, "task", False, True),
    (GITHUB, MAIL, BOTH, "task", True, False),
    (NONE, MAIL, GITHUB, "session", False, True),
    (NONE, GITHUB, BOTH, "session", True, False),
    (NONE, BOTH, EMPTY, "session", True, True),
    (EMPTY, BOTH, BOTH, "task", False, False),
    (NONE, EMPTY, BOTH, "session", False, False),
    (NONE, NONE, BOTH, "project", True, True),
]


def request(task, session, project) -> toolwarden.Request:
    return toolwarden.Request(
        mode="chat", connectors={"task": task, "session": session, "project": project}
    )


@pytest.mark.parametrize("task,session,project,tier,github,mail", RESOLUTION)
def test_the_first_tier_set_decides_and_an_empty_list_allows_zero_connectors(
    connectors, task, session, project, tier, github, mail
):
    req = request(task, session, project)
    tools = ["mcp__github__create_issue", "mcp__mail__send", "read_file"]
    expected = [t for t, ok in zip(tools, [github, mail, True]) if ok]
    assert connectors.offer(req, tools) == expected
    for tool, server, allowed in [
        ("mcp__github__create_issue", "github", github),
        ("mcp__mail__send", "mail", mail),
    ]:
        got = connectors.explain(req, tool)
        if allowed:
            assert (got["decision"], got["stage"]) == ("allow", None)
        else:
            assert (got["decision"], got["stage"]) == ("deny", "connector")
            assert got["reason"] == f"Connector {server} is not enabled for this {tier}"


def test_request_keeps_only_the_tiers_set(connectors):
    req = request(NONE, EMPTY, BOTH)
    assert req.connectors == {"session": [], "project": ["github", "mail"]}
    assert req == toolwarden.Request(mode="chat", connectors={"session": [], "project": BOTH})


def test_check_call_blocks_a_connector_tool_that_was_never_offered(connectors):
    req = request(["mail"], NONE, NONE)
    assert connectors.offer(req, ["read_file", "send_email"]) == ["read_file", "send_email"]
    turn = toolwarden.Turn()
    v = connectors.check_call(req, "mcp__github__delete_repo", {"repo": "x"}, turn=turn)
    assert (v.decision, v.stage) == ("deny", "connector")
    assert v.reason == "Connector github is not enabled for this task"
    assert v.args_for_execution is None
    assert v.to_dict() == {
        "ok": False,
        "decision": "deny",
        "tool": "mcp__github__delete_repo",
        "error": "Connector github is not enabled for this task",
        "metadata": {
            "blocked_by_policy": True,
            "stage": "connector",
            "operation_type": "transactional",
            "effect": "write",
            "policy_source": f"{CONNECTORS}:11:1",
        },
    }
    v = connectors.check_call(req, "mcp__mail__send", {"to": "a@b.c"}, turn=turn)
    assert (v.decision, v.stage) == ("allow", None)
    assert v.args_for_execution == {"to": "a@b.c"}


def test_an_undeclared_tier_is_a_request_error(connectors):
    req = toolwarden.Request(mode="chat", connectors={"team": ["github"]})
    with pytest.raises(toolwarden.RequestError) as e:
        connectors.offer(req, ["read_file"])
    assert str(e.value) == "unknown connector tier `team`; the policy declares `task`, `session`, `project`"
    assert isinstance(e.value, ValueError)
