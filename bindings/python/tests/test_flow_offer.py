"""Flow labels in `offer` (a `Session` passed as `session=`), `Request(context=...)` read by
argument rules, and the `Session`'s JSON and pickled forms keeping labels, sources, turn and
the pending call."""

import json
import pickle

import pytest

import toolwarden

POLICY = """policy "flow-offer" version 1
effects none, write, export, execute
mode agent { }
confirm fields "confirmed"
context contacts
labels untrusted, private
tool get_webpage  { effect none   taints untrusted }
tool read_inbox   { effect none   taints untrusted, private }
tool send_money   { effect write  confirm when recipient not in context.contacts }
tool post_webpage { effect export }
tool run_shell    { effect execute }
after untrusted { confirm write  deny execute }
after untrusted, private { deny export }
"""

TOOLS = ["get_webpage", "read_inbox", "send_money", "post_webpage", "run_shell"]


@pytest.fixture()
def policy() -> toolwarden.Policy:
    return toolwarden.Policy.parse(POLICY, "flow-offer.warden")


def test_offer_with_a_session_hides_what_an_after_block_denies(policy):
    request = toolwarden.Request(mode="agent")
    s = toolwarden.Session()
    assert policy.offer(request, TOOLS, session=s) == TOOLS
    s.record(policy, "get_webpage")
    # `after untrusted` denies execute (hidden) and confirms write (still shown).
    assert policy.offer(request, TOOLS, session=s) == [
        "get_webpage",
        "read_inbox",
        "send_money",
        "post_webpage",
    ]
    s.record(policy, "read_inbox")
    assert policy.offer(request, TOOLS, session=s) == ["get_webpage", "read_inbox", "send_money"]
    # The same through a ToolSet and through schemas, and the offer changes no session.
    before = s.to_json()
    assert policy.offer(request, policy.tools(TOOLS), session=s) == [
        "get_webpage",
        "read_inbox",
        "send_money",
    ]
    schemas = [{"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]
    assert [t["name"] for t in policy.offer(request, schemas, session=s)] == [
        "get_webpage",
        "read_inbox",
        "send_money",
    ]
    assert s.to_json() == before
    # Without a session the offer is unchanged.
    assert policy.offer(request, TOOLS) == TOOLS
    assert policy.offer(request, TOOLS, session=None) == TOOLS


def test_offer_refuses_another_policys_session_and_a_wrong_type(policy):
    request = toolwarden.Request(mode="agent")
    s = toolwarden.Session()
    s.record(policy, "get_webpage")
    other = toolwarden.Policy.parse(POLICY.replace("version 1", "version 2"), "flow-offer.warden")
    with pytest.raises(toolwarden.RequestError, match="belongs to policy `flow-offer` version 1"):
        other.offer(request, TOOLS, session=s)
    with pytest.raises(TypeError, match="session"):
        policy.offer(request, TOOLS, session="not a session")


def test_request_context_is_read_by_argument_rules(policy):
    request = toolwarden.Request(mode="agent", context={"contacts": ["alice", "bob"]})
    assert request.context_names == ["contacts"]
    assert policy.check_call(request, "send_money", {"recipient": "alice"}).decision == "allow"
    v = policy.check_call(request, "send_money", {"recipient": "mallory"})
    assert (v.decision, v.stage) == ("confirm", "arguments")
    with pytest.raises(TypeError, match="context"):
        toolwarden.Request(mode="agent", context=["contacts"])
    with pytest.raises(TypeError):
        toolwarden.Request(mode="agent", context={"contacts": "alice"})


def test_session_json_and_pickle_keep_labels_sources_turn_and_pending(policy):
    request = toolwarden.Request(mode="agent", context={"contacts": []})
    s = toolwarden.Session()
    policy.check_call(request, "get_webpage", {}, session=s)
    s.next_turn()
    v = policy.check_call(request, "send_money", {"recipient": "bob"}, session=s)
    assert (v.decision, v.stage) == ("confirm", "arguments")
    # JSON-serializable: the text is JSON, and the labels are plain dicts.
    doc = json.loads(s.to_json())
    assert doc["turn"] == 2
    assert [(l["label"], l["tool"], l["turn"]) for l in doc["labels"]] == [("untrusted", "get_webpage", 1)]
    assert json.loads(json.dumps(s.labels)) == s.labels
    for back in (toolwarden.Session.from_json(s.to_json(), policy), pickle.loads(pickle.dumps(s))):
        assert back == s
        assert (back.turn, back.transactional_calls) == (2, 0)
        assert back.pending is not None and back.pending.tool == "send_money"
        assert back.labels == s.labels
    # The pickled copy confirms the held call on its own, the original keeps it.
    copy = pickle.loads(pickle.dumps(s))
    v = policy.check_call(request, "send_money", {"recipient": "bob", "confirmed": True}, session=copy)
    assert v.decision == "allow"
    assert copy.pending is None and s.pending is not None
