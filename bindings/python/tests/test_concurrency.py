"""The turn limit holds when threads share one Turn: check_call checks the limit and counts the
call under the Turn's lock, with the GIL released (retail.warden: `limit transactional 1 per
turn`)."""

import threading

import toolwarden

THREADS = 8
TRIALS = 200


def test_eight_threads_sharing_one_turn_run_exactly_one_transactional_call(retail):
    request = toolwarden.Request()
    # The runtime confirms against the pending call, as in an agent (strict, the default).
    held = retail.check_call(request, "alterar_plano", {"new_plan_id": "P"}).pending
    args = {"new_plan_id": "P", "confirmed": True}
    expected = [("allow", None)] + [("deny", "turn_limit")] * (THREADS - 1)
    over_limit = []
    for trial in range(TRIALS):
        turn = toolwarden.Turn()
        start = threading.Barrier(THREADS)
        decisions = []

        def call() -> None:
            start.wait()
            v = retail.check_call(request, "alterar_plano", args, turn=turn, pending=held)
            decisions.append((v.decision, v.stage))

        threads = [threading.Thread(target=call) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if sorted(decisions, key=repr) != expected or turn.transactional_calls != 1:
            over_limit.append((trial, turn.transactional_calls, decisions))
    assert over_limit == []


def test_a_turn_compares_and_updates_by_value():
    turn = toolwarden.Turn(2)
    assert turn == toolwarden.Turn(transactional_calls=2) and turn == turn
    turn.transactional_calls = 0
    assert turn.transactional_calls == 0 and repr(turn) == "Turn(transactional_calls=0)"
