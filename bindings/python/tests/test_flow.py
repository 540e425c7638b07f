"""Flow labels through the Python binding: a `Session` passed to `check_call`, labels added by
allowed calls and by `record`, `after` blocks that deny or ask, `declassify`, `next_turn`, the
JSON form with its refusals, and pickling."""

import pickle

import pytest

import toolwarden

POLICY = """policy "flow" version 1
effects none, write, export, execute
mode agent { }
confirm fields "confirmed"
labels untrusted, private
tool get_webpage  { effect none   taints untrusted }
tool read_inbox   { effect none   taints untrusted, private }
tool send_money   { effect write }
tool post_webpage { effect export }
tool run_shell    { effect execute }
after untrusted { confirm write  deny execute }
after untrusted, private { deny export }
"""


@pytest.fixture()
def policy() -> toolwarden.Policy:
    return toolwarden.Policy.parse(POLICY, "flow.warden")


def call(policy, session, tool, args=None):
    return policy.check_call(toolwarden.Request(mode="agent"), tool, args or {}, session=session)


def test_an_allowed_call_taints_and_the_after_blocks_apply(policy):
    s = toolwarden.Session()
    assert (call(policy, s, "run_shell").decision) == "allow"
    assert call(policy, s, "get_webpage").decision == "allow"
    assert [(l["label"], l["tool"], l["turn"]) for l in s.labels] == [("untrusted", "get_webpage", 1)]
    v = call(policy, s, "run_shell")
    assert (v.decision, v.stage) == ("deny", "flow")
    assert v.reason == (
        "`run_shell` is denied: the session read untrusted content from get_webpage in turn 1, "
        "and `after untrusted` denies effect `execute`"
    )
    v = call(policy, s, "send_money", {"to": "bob"})
    assert (v.decision, v.stage) == ("confirm", "flow")
    assert s.pending is not None and s.pending.tool == "send_money"
    v = call(policy, s, "send_money", {"to": "bob", "confirmed": True})
    assert v.decision == "allow"
    assert s.pending is None
    assert s.transactional_calls == 2  # run_shell (execute), then send_money (write)


def test_record_declassify_and_next_turn(policy):
    s = toolwarden.Session()
    assert s.record(policy, "read_inbox") == ["untrusted", "private"]
    assert call(policy, s, "post_webpage").stage == "flow"
    removed = s.declassify("private")
    assert (removed["label"], removed["tool"], removed["turn"]) == ("private", "read_inbox", 1)
    assert s.declassify("private") is None
    assert call(policy, s, "post_webpage").decision == "allow"
    s.next_turn()
    assert (s.turn, s.transactional_calls) == (2, 0)
    assert s.has_label("untrusted")


def test_json_round_trip_refusals_and_pickle(policy):
    s = toolwarden.Session()
    call(policy, s, "get_webpage")
    back = toolwarden.Session.from_json(s.to_json(), policy)
    assert back == s
    assert pickle.loads(pickle.dumps(s)) == s
    other = toolwarden.Policy.parse(POLICY.replace("version 1", "version 2"), "flow.warden")
    with pytest.raises(ValueError, match="belongs to policy `flow` version 1, not `flow` version 2"):
        toolwarden.Session.from_json(s.to_json(), other)
    with pytest.raises(ValueError, match="the session is corrupt"):
        toolwarden.Session.from_json("{", policy)
    with pytest.raises(ValueError, match="label `tainted`, which the policy does not declare"):
        toolwarden.Session.from_json(s.to_json().replace('"untrusted"', '"tainted"'), policy)
    with pytest.raises(toolwarden.RequestError, match="belongs to policy"):
        call(other, s, "get_webpage")
    with pytest.raises(TypeError, match="not both"):
        policy.check_call(toolwarden.Request(mode="agent"), "get_webpage", {}, turn=toolwarden.Turn(), session=s)
