//! Issue 5: the table and the diff against `decide` on generated policies (roles hierarchies,
//! `implies` chains, patterns, connectors, confirmation rules, modes with and without matrix).

use toolwarden::analysis::table::SubjectKind;
use toolwarden::analysis::{PolicyDiff, Table};
use toolwarden::{Decision, Intent, Policy, Request, Stage};

/// A small deterministic generator (64-bit LCG).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() as usize) % v.len()]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const CELLS: [&str; 3] = ["allow", "deny", "confirm"];
const ROLES: [&str; 4] = ["r0", "r1", "r2", "r3"];
const PERMS: [&str; 4] = ["p0", "p1", "p2", "p3"];

fn generate(seed: u64) -> String {
    let mut r = Rng(seed);
    let mut s = String::from(
        "policy \"g\" version 1\neffects none, write, delete\nintents destructive > write > read\nfallback read\n",
    );
    s.push_str(&format!(
        "matrix m {{\n  none write delete\n  read allow {} deny\n  write allow {} {}\n  destructive {} deny {}\n}}\n",
        r.pick(&CELLS),
        r.pick(&CELLS),
        r.pick(&CELLS),
        r.pick(&CELLS),
        r.pick(&CELLS)
    ));
    s.push_str(&format!(
        "mode a {{ matrix m restrict none{} }}\nmode b {{ matrix m{} }}\nmode c {{ }}\ndefault mode b\n",
        if r.chance(50) { ", write" } else { "" },
        if r.chance(50) { " confirm delete" } else { "" }
    ));
    s.push_str(if r.chance(50) {
        "roles { r0 > r1 > r2, r3 }\n"
    } else {
        "roles { r0 > r2, r3 > r1 }\n"
    });
    s.push_str(if r.chance(50) {
        "permission \"p0\" implies \"p1\", \"p2\"\npermission \"p3\" implies \"p2\"\n"
    } else {
        "permission \"p0\" implies \"p1\"\npermission \"p1\" implies \"p3\"\npermission \"p2\"\n"
    });
    s.push_str("tiers task > session\nconnectors prefix \"mcp__\"\n");
    s.push_str(if r.chance(80) {
        "unknown deny\n"
    } else {
        "unknown allow\ndefaults { effect none }\n"
    });
    for i in 0..12u32 {
        let name = if i.is_multiple_of(3) {
            format!("mcp__{}__t{i}", r.pick(&["github", "slack"]))
        } else {
            format!("t{i}")
        };
        let mut attrs = format!("effect {}", r.pick(&["none", "write", "delete"]));
        if r.chance(40) {
            attrs.push_str(&format!(" roles {}", r.pick(&ROLES)));
        }
        if r.chance(50) {
            attrs.push_str(&format!(" permissions \"{}\"", r.pick(&PERMS)));
        }
        if r.chance(30) {
            attrs.push_str(" tenant required");
        }
        if r.chance(20) {
            attrs.push_str(" confirm always");
        }
        if r.chance(10) {
            attrs.push_str(" enabled false");
        }
        s.push_str(&format!("tool \"{name}\" {{ {attrs} }}\n"));
    }
    s.push_str(&format!(
        "match \"mcp__*__get_*\" {{ effect none{} }}\n",
        if r.chance(50) { " roles r2" } else { "" }
    ));
    s
}

fn requests(mode: &str, tool: &str) -> Vec<Request> {
    let mut out = Vec::new();
    let role_sets: [&[&str]; 5] = [&[], &["r0"], &["r1"], &["r2"], &["r3"]];
    let perm_sets: [&[&str]; 6] = [&[], &["p0"], &["p1"], &["p2"], &["p3"], &["p1", "p2"]];
    for roles in role_sets {
        for perms in perm_sets {
            for tenant in [false, true] {
                for forced in [false, true] {
                    for conn in 0..3 {
                        let mut q = Request::new(mode)
                            .roles(roles.iter().copied())
                            .permissions(perms.iter().copied());
                        if tenant {
                            q = q.tenant("t");
                        }
                        if forced {
                            q = q.forced([tool]);
                        }
                        q = match conn {
                            1 => q.connectors("task", ["github"]),
                            2 => q.connectors("session", Vec::<String>::new()),
                            _ => q,
                        };
                        out.push(q);
                    }
                }
            }
        }
    }
    out
}

fn names(p: &Policy) -> Vec<String> {
    let mut v: Vec<String> = p.tools().map(str::to_string).collect();
    for extra in ["mcp__github__get_x", "mcp__slack__get_y", "other"] {
        v.push(extra.to_string());
    }
    for i in 0..12 {
        for srv in ["github", "slack"] {
            v.push(format!("mcp__{srv}__t{i}"));
        }
        v.push(format!("t{i}"));
    }
    v.sort();
    v.dedup();
    v
}

#[test]
fn generated_tables_agree_with_decide() {
    for seed in 1..=8u64 {
        let p = Policy::parse(&generate(seed), "g.warden").expect("generated policy loads");
        let table = Table::build(&p, None).expect("table");
        for row in table.rows.iter().filter(|r| r.kind == SubjectKind::Tool) {
            for cell in &row.cells {
                let intent = Intent::named(cell.intent.clone());
                for q in requests(&cell.mode, &row.name) {
                    let actual = p
                        .decide_tool(&q, &intent, &row.name)
                        .expect("valid")
                        .decision;
                    let o = &cell.outcome;
                    let c = &o.conditions;
                    let conn_ok = match &c.connector {
                        None => true,
                        Some(s) => match q
                            .connector_tiers()
                            .iter()
                            .find(|(t, _)| t == "task")
                            .or_else(|| q.connector_tiers().iter().find(|(t, _)| t == "session"))
                        {
                            None => true,
                            Some((_, list)) => list.contains(s),
                        },
                    };
                    let ok = conn_ok
                        && (!c.tenant || q.tenant_id().is_some())
                        && c.roles
                            .as_ref()
                            .is_none_or(|rs| q.role_names().iter().any(|x| rs.contains(x)))
                        && c.permissions
                            .iter()
                            .all(|g| q.permission_names().iter().any(|x| g.contains(x)));
                    let forced = q.forced_names().contains(&row.name);
                    let expected = match (o.decision, o.stage) {
                        (Decision::Deny, Some(Stage::Intent)) if ok && forced => {
                            o.forced.expect("forced")
                        }
                        (Decision::Deny, _) => Decision::Deny,
                        (d, _) if ok => d,
                        _ => Decision::Deny,
                    };
                    assert_eq!(
                        expected, actual,
                        "seed {seed} {} {} {} {q:?}",
                        row.name, cell.mode, cell.intent
                    );
                }
            }
        }
    }
}

#[test]
fn generated_diffs_miss_no_moved_decision() {
    let mut total_moved = 0;
    for seed in 1..=6u64 {
        let old = Policy::parse(&generate(seed), "old.warden").expect("loads");
        let new = Policy::parse(&generate(seed + 100), "new.warden").expect("loads");
        let d = PolicyDiff::compute(&old, &new);
        let changed: std::collections::BTreeSet<(String, String, String)> = d
            .cells
            .iter()
            .filter(|c| c.kind == SubjectKind::Tool || c.kind == SubjectKind::Unknown)
            .map(|c| (c.name.clone(), c.mode.clone(), c.intent.clone()))
            .collect();
        let mut moved = 0;
        for name in names(&old).into_iter().chain(names(&new)) {
            let declared = old.tools().any(|t| t == name) || new.tools().any(|t| t == name);
            for mode in ["a", "b", "c"] {
                for intent in ["destructive", "write", "read"] {
                    let i = Intent::named(intent);
                    let differs = requests(mode, &name).iter().any(|q| {
                        old.decide_tool(q, &i, &name).expect("valid").decision
                            != new.decide_tool(q, &i, &name).expect("valid").decision
                    });
                    if differs && declared {
                        moved += 1;
                        assert!(
                            changed.contains(&(name.clone(), mode.to_string(), intent.to_string())),
                            "seed {seed}: {name} {mode} {intent} moved but the diff does not say so"
                        );
                    }
                }
            }
        }
        total_moved += moved;
    }
    // The generated pairs do move decisions, so the check above is exercised.
    assert!(total_moved > 50, "only {total_moved} moved cells");
}
