"""timeit figures for the Python binding, on the same generated policy as the Rust bench
(benches/evaluator.rs: `evaluate/offer_all/180`, `evaluate/decide_one/180`, `check_call/180`).

Run from the repository root after `pip install ./bindings/python`:

    python bindings/python/benches/bench_offer.py

and compare with `cargo bench --bench evaluator -- 'evaluate/(offer_all|decide_one)/180|check_call'`.
The prepared rows (`policy.tools(names)`, read once) are the ones to hold against `offer_all/180`.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

import toolwarden

REPO = Path(__file__).resolve().parents[3]
EFFECTS = ["none", "write", "delete", "export", "execute"]
SERVERS = ["github", "slack", "drive", "jira"]


def policy_text(n: int) -> str:
    """The text benches/evaluator.rs generates, line for line."""
    s = ['policy "bench" version 1\n', "effects none, write, delete, export, execute\n"]
    s.append("intents destructive > execute > export > write > read\nfallback read\n")
    s.append('include "lexicon/standard.warden"\n')
    s.append(
        "matrix standard {\n              none   write  delete export execute\n"
        "  read        allow  deny   deny   deny   deny\n  write       allow  allow  deny   deny   deny\n"
        "  destructive allow  deny   allow  deny   deny\n  export      allow  deny   deny   allow  deny\n"
        "  execute     allow  deny   deny   deny   allow\n}\n"
    )
    s.append("mode analyzer { matrix standard restrict none }\n")
    s.append("mode supervised { matrix standard confirm write, delete, export, execute }\n")
    s.append("mode autonomous { matrix standard confirm export, execute }\n")
    s.append("default mode supervised\n")
    s.append(
        "roles { owner > admin > manager > accountant > clerk > viewer, auditor > viewer, support > viewer }\n"
    )
    for g in range(8):
        s.append(
            f'permission "area{g}.manage" implies "area{g}.add", "area{g}.delete", "area{g}.view", "area{g}.export"\n'
        )
    s.append('tiers task > session > project\nconnectors prefix "mcp__"\nunknown deny\n')
    s.append('confirm fields "confirmed"\ntenant arg "business_id"\nlimit transactional 1 per turn\n')
    for i in range(n):
        effect = EFFECTS[i % 5]
        area = i % 8
        perm = {"none": "view", "write": "add", "delete": "delete"}.get(effect, "export")
        name = f"mcp__{SERVERS[i % 4]}__tool_{i}" if i % 3 == 0 else f"tool_{i}"
        roles = " roles accountant" if i % 7 == 0 else ""
        s.append(
            f'tool {name} {{ effect {effect} permissions "area{area}.{perm}" tenant required{roles} }}\n'
        )
    return "".join(s)


def timings_us(stmt, number: int, repeat: int = 15) -> "tuple[float, float]":
    """(best, median) of `repeat` runs of `number` calls, in microseconds per call."""
    runs = sorted(t / number * 1e6 for t in timeit.repeat(stmt, number=number, repeat=repeat))
    return runs[0], runs[len(runs) // 2]


def main() -> None:
    policy = toolwarden.Policy.parse(policy_text(180), name=str(REPO / "policies" / "bench.warden"))
    names = policy.tool_names
    assert len(names) == 180
    request = toolwarden.Request(
        mode="supervised",
        roles=["accountant"],
        permissions=["area0.manage", "area1.manage", "area2.view", "area3.manage"],
        tenant="b-42",
        connectors={"session": ["github", "drive"]},
    )
    intent = toolwarden.Intent.named("write")
    schemas = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]
    args = {"business_id": "b-42", "amount": 120.5, "lines": [{"sku": "A-1", "qty": 2}], "confirmed": True}
    visible = policy.offer(request, names, intent=intent)
    prepared = policy.tools(names)
    prepared_schemas = policy.tools(schemas)

    rows = [
        ("offer, 180 names, prepared", lambda: policy.offer(request, prepared, intent=intent), 20_000),
        ("offer, 180 schemas, prepared", lambda: policy.offer(request, prepared_schemas, intent=intent), 20_000),
        ("offer, 180 names", lambda: policy.offer(request, names, intent=intent), 5_000),
        ("offer, 180 OpenAI schemas", lambda: policy.offer(request, schemas, intent=intent), 1_000),
        ("offer, 1 name", lambda: policy.offer(request, ["tool_1"], intent=intent), 20_000),
        ("check_call", lambda: policy.check_call(request, "tool_1", args, intent=intent), 10_000),
        ("classify (short query)", lambda: policy.classify("please create a new invoice"), 10_000),
    ]
    print(f"python {sys.version.split()[0]}, toolwarden {toolwarden.__version__}; {len(visible)} of 180 visible")
    print(f"{'':28s} {'best':>10s} {'median':>10s}")
    for label, stmt, number in rows:
        best, median = timings_us(stmt, number)
        print(f"{label:28s} {best:8.2f} µs {median:8.2f} µs")


if __name__ == "__main__":
    main()
