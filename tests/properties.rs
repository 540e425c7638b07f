//! Properties that must hold for every policy and request (issue 9, part 3), each its own
//! proptest over generated policies (`tests/generate/`) and, where it applies, finance.warden.

mod generate;
mod reference;

use generate::{args, policy_text, request, Req, QUERY_NAMES, ROLES};
use proptest::prelude::*;
use reference::RefPolicy;
use toolwarden::{Decision, Intent, Policy, Request, Stage, Turn};

fn load(text: &str) -> Option<Policy> {
    Policy::parse(text, "gen.warden").ok()
}

fn finance() -> Policy {
    Policy::from_file("policies/finance.warden").expect("finance.warden loads")
}

/// The decision for every query name, or `None` when the request does not fit the policy.
fn decisions(policy: &Policy, request: &Request, intent: &Intent) -> Option<Vec<Decision>> {
    let offer = policy
        .offer(request, intent, QUERY_NAMES.iter().copied())
        .ok()?;
    Some(offer.entries().iter().map(|(_, d)| d.decision).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, .. ProptestConfig::default() })]

    /// Adding a permission or a role never turns an allow (or confirm) into a deny.
    #[test]
    fn more_permissions_or_roles_never_deny_more(
        text in policy_text(),
        req in request(),
        extra_role in proptest::sample::select(ROLES.to_vec()),
        extra_perm in proptest::sample::select(generate::PERMS.to_vec()),
    ) {
        let Some(policy) = load(&text) else { return Ok(()) };
        let (request, intent) = req.compiled();
        let Some(before) = decisions(&policy, &request, &intent) else { return Ok(()) };
        let mut more = req.clone();
        more.roles.push(extra_role);
        more.perms.push(extra_perm);
        let (request, intent) = more.compiled();
        let after = decisions(&policy, &request, &intent).expect("same request shape");
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            prop_assert!(
                !(*b != Decision::Deny && *a == Decision::Deny),
                "`{}` went from {} to deny after adding role {} and permission {}\n{}",
                QUERY_NAMES[i], b, extra_role, extra_perm, text
            );
        }
    }

    /// A mode that copies `supervised` (here: `mode0`) and adds a `restrict` ceiling, as
    /// finance's `analyzer` does, never offers a tool `supervised` denies.
    #[test]
    fn analyzer_never_allows_what_supervised_denies(
        text in policy_text(),
        req in request(),
        ceiling in proptest::sample::subsequence(generate::EFFECTS.to_vec(), 1..=3),
    ) {
        let r = RefPolicy::from_text(&text);
        let Some(sup) = r.modes.iter().find(|m| m.name == "mode0") else { return Ok(()) };
        let ceiling: Vec<&str> = ceiling
            .into_iter()
            .filter(|e| r.effects.iter().any(|x| x == e))
            .filter(|e| sup.restrict.as_ref().is_none_or(|c| c.iter().any(|x| x == e)))
            .collect();
        if ceiling.is_empty() {
            return Ok(());
        }
        let mut analyzer = String::from("mode analyzer {");
        if let Some(m) = &sup.matrix {
            analyzer += &format!(" matrix {m}");
        }
        analyzer += &format!(" restrict {}", ceiling.join(", "));
        if !sup.confirm.is_empty() {
            analyzer += &format!(" confirm {}", sup.confirm.join(", "));
        }
        analyzer += " }\n";
        let text = format!("{text}{analyzer}");
        let policy = load(&text).expect("adding a mode keeps the policy loadable");
        let mut s = req.clone();
        s.mode = Some("mode0".into());
        let mut a = req.clone();
        a.mode = Some("analyzer".into());
        let (sr, si) = s.compiled();
        let (ar, ai) = a.compiled();
        let (Some(sd), Some(ad)) = (decisions(&policy, &sr, &si), decisions(&policy, &ar, &ai)) else {
            return Ok(());
        };
        for (i, (s, a)) in sd.iter().zip(&ad).enumerate() {
            prop_assert!(
                !(*s == Decision::Deny && *a != Decision::Deny),
                "analyzer offers `{}` which supervised denies\n{}", QUERY_NAMES[i], text
            );
        }
    }

    /// finance.warden's own analyzer against its supervised mode, for every intent and role.
    #[test]
    fn finance_analyzer_never_allows_what_supervised_denies(
        intent in proptest::sample::select(vec!["read", "write", "destructive", "export", "execute"]),
        roles in proptest::sample::subsequence(vec!["admin", "accountant", "viewer", "nobody"], 0..=2),
        perms in proptest::sample::subsequence(vec!["invoices.manage", "invoices.view", "invoices.add"], 0..=2),
        tenant in proptest::option::of(Just("b-42")),
        forced in proptest::sample::subsequence(vec!["delete_invoice", "create_invoice", "execute_workflow"], 0..=2),
    ) {
        let policy = finance();
        let names: Vec<&str> = policy.tools().chain(["mcp__github__get_issue", "mcp__x__delete_y"]).collect();
        let intent = Intent::named(intent);
        let build = |mode: &str| {
            let mut r = Request::new(mode).roles(roles.clone()).permissions(perms.clone()).forced(forced.clone());
            if let Some(t) = tenant {
                r = r.tenant(t);
            }
            r
        };
        let s = policy.offer(&build("supervised"), &intent, names.iter().copied()).expect("offer");
        let a = policy.offer(&build("analyzer"), &intent, names.iter().copied()).expect("offer");
        for ((n, sd), (_, ad)) in s.entries().iter().zip(a.entries()) {
            prop_assert!(!(sd.decision == Decision::Deny && ad.decision != Decision::Deny), "analyzer offers `{}`", n);
        }
    }

    /// Forcing a name only changes its outcome when, unforced, it is denied at stage 7.
    #[test]
    fn forced_only_changes_intent_stage_outcomes(text in policy_text(), req in request()) {
        let Some(policy) = load(&text) else { return Ok(()) };
        let mut plain = req.clone();
        plain.forced.clear();
        let (pr, pi) = plain.compiled();
        let Ok(unforced) = policy.offer(&pr, &pi, QUERY_NAMES.iter().copied()) else { return Ok(()) };
        let mut all = req.clone();
        all.forced = QUERY_NAMES.to_vec();
        let (ar, ai) = all.compiled();
        let forced = policy.offer(&ar, &ai, QUERY_NAMES.iter().copied()).expect("same shape");
        for ((n, u), (_, f)) in unforced.entries().iter().zip(forced.entries()) {
            if u.stage == Some(Stage::Intent) {
                prop_assert_ne!(f.decision, Decision::Deny, "forced `{}` still denied", n);
            } else {
                prop_assert_eq!((u.decision, u.stage), (f.decision, f.stage), "forcing `{}` changed a non-intent outcome\n{}", n, text);
            }
        }
    }

    /// Narrowing a connector tier's list to a subset only removes tools from the offer.
    #[test]
    fn narrower_connector_tier_only_removes_tools(
        text in policy_text(),
        req in request(),
        keep in proptest::collection::vec(any::<bool>(), 3),
    ) {
        let Some(policy) = load(&text) else { return Ok(()) };
        let Some(tier) = policy.tiers().next().map(str::to_string) else { return Ok(()) };
        let tier: &'static str = generate::TIERS.iter().copied().find(|t| *t == tier).expect("generated tier");
        let mut wide = req.clone();
        wide.connectors = vec![(tier, generate::SERVERS.to_vec())];
        let mut narrow = req.clone();
        narrow.connectors = vec![(
            tier,
            generate::SERVERS.iter().zip(&keep).filter(|(_, k)| **k).map(|(s, _)| *s).collect(),
        )];
        let (wr, wi) = wide.compiled();
        let (nr, ni) = narrow.compiled();
        let (Ok(w), Ok(n)) = (
            policy.offer(&wr, &wi, QUERY_NAMES.iter().copied()),
            policy.offer(&nr, &ni, QUERY_NAMES.iter().copied()),
        ) else { return Ok(()) };
        let wide_visible: Vec<&str> = w.visible().collect();
        for name in n.visible() {
            prop_assert!(wide_visible.contains(&name), "`{}` appeared when the tier narrowed", name);
        }
    }

    /// `offer(tools)` is a subsequence of `tools`: same order, nothing added, duplicates kept
    /// apart.
    #[test]
    fn offer_is_an_ordered_subset_of_its_input(
        text in policy_text(),
        req in request(),
        names in proptest::collection::vec(
            prop_oneof![proptest::sample::select(QUERY_NAMES.to_vec()).prop_map(String::from), "\\PC{0,12}"],
            0..30,
        ),
    ) {
        let Some(policy) = load(&text) else { return Ok(()) };
        let (r, i) = req.compiled();
        let Ok(offer) = policy.offer(&r, &i, names.iter().map(String::as_str)) else { return Ok(()) };
        prop_assert_eq!(offer.entries().len(), names.len());
        let mut last = None;
        for ix in offer.visible_indices() {
            prop_assert!(last.is_none_or(|l| ix > l));
            last = Some(ix);
        }
        let visible: Vec<&str> = offer.visible().collect();
        let by_index: Vec<&str> = offer.visible_indices().map(|i| names[i].as_str()).collect();
        prop_assert_eq!(visible, by_index);
    }

    /// Under `unknown deny`, a name neither declared nor matched by a pattern is never offered.
    #[test]
    fn unknown_deny_never_offers_an_undeclared_name(
        text in policy_text(),
        req in request(),
        names in proptest::collection::vec("[a-z_]{0,6}(__[a-z]{0,4}){0,3}|\\PC{0,10}", 1..20),
    ) {
        let Some(policy) = load(&text) else { return Ok(()) };
        if text.contains("unknown allow") {
            return Ok(());
        }
        let r = RefPolicy::from_text(&text);
        let (rq, i) = req.compiled();
        let Ok(offer) = policy.offer(&rq, &i, names.iter().map(String::as_str)) else { return Ok(()) };
        for (name, d) in offer.entries() {
            let declared = r.tools.iter().any(|(n, _)| n == name)
                || r.patterns.iter().any(|(g, _)| reference::glob_matches(g, name));
            if !declared {
                prop_assert_eq!((d.decision, d.stage), (Decision::Deny, Some(Stage::Identity)), "`{}`", name);
            }
        }
    }

    /// An empty allowed set offers nothing: no tool list offers no tool, and a deciding tier set
    /// to `[]` offers no connector tool.
    #[test]
    fn empty_allowed_set_offers_nothing(text in policy_text(), req in request()) {
        let Some(policy) = load(&text) else { return Ok(()) };
        let (r, i) = req.compiled();
        if let Ok(offer) = policy.offer(&r, &i, std::iter::empty()) {
            prop_assert_eq!(offer.visible().count(), 0);
        }
        let Some(top) = policy.tiers().next().map(str::to_string) else { return Ok(()) };
        let r = r.connectors(top, Vec::<String>::new());
        let Ok(offer) = policy.offer(&r, &i, QUERY_NAMES.iter().copied()) else { return Ok(()) };
        for name in offer.visible() {
            prop_assert!(policy.connector_server(name).is_none(), "connector tool `{}` offered with an empty allowlist", name);
        }
    }

    /// `check_call` never allows (or asks to confirm) what `offer` denies at stages 1–6, and
    /// denies it at the same stage.
    #[test]
    fn check_call_never_allows_what_offer_denies(
        text in policy_text(),
        req in request(),
        calls in proptest::collection::vec((0..QUERY_NAMES.len(), args()), 1..8),
    ) {
        let Some(policy) = load(&text) else { return Ok(()) };
        let (r, i) = req.compiled();
        let Ok(offer) = policy.offer(&r, &i, QUERY_NAMES.iter().copied()) else { return Ok(()) };
        let mut turn = Turn::new();
        for (ix, args) in &calls {
            let d = offer.entries()[*ix].1;
            let v = policy.check_call(&r, &i, &mut turn, QUERY_NAMES[*ix], args).expect("same request");
            if d.decision == Decision::Deny && d.stage.is_some_and(|s| s.number() <= 6) {
                prop_assert_eq!((v.decision, v.stage), (Decision::Deny, d.stage), "`{}`", QUERY_NAMES[*ix]);
            }
            if d.decision == Decision::Deny {
                prop_assert_eq!(v.decision, Decision::Deny);
            }
        }
    }
}

/// The request strategy is used directly by the properties above; this keeps one plain test of
/// a hand-written request so a change in `Req::compiled` shows up as a clear failure.
#[test]
fn generated_request_maps_to_the_compiled_request() {
    let req = Req {
        mode: Some("mode0".into()),
        roles: vec!["admin"],
        perms: vec!["p.view"],
        tenant: Some("b-42"),
        connectors: vec![("task", vec!["github"])],
        forced: vec!["search"],
        intents: vec!["write", "read"],
    };
    let (r, i) = req.compiled();
    assert_eq!(r.mode(), Some("mode0"));
    assert_eq!(r.role_names(), ["admin"]);
    assert_eq!(r.permission_names(), ["p.view"]);
    assert_eq!(r.tenant_id(), Some("b-42"));
    assert_eq!(
        r.connector_tiers(),
        [("task".to_string(), vec!["github".to_string()])]
    );
    assert_eq!(r.forced_names(), ["search"]);
    assert_eq!(i.intents, ["write", "read"]);
}
