//! toolwarden, Cedar and Rego give the same visibility on 1,200 random (request, tool) pairs
//! over the generated 180-tool policy, and on the benches' fixed request for every tool.

use std::collections::BTreeSet;

use peers::{gen, Cedar, PeerRequest, Rego, REPO};
use toolwarden::{Decision, Intent};

/// xorshift64*: a fixed-seed generator, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_request(rng: &mut Rng) -> PeerRequest {
    let perms = peers::all_permissions();
    PeerRequest {
        mode: gen::MODES[rng.below(3)],
        intent: gen::INTENTS[rng.below(5)],
        roles: (0..rng.below(3))
            .map(|_| gen::ROLES[rng.below(8)])
            .collect(),
        // Per area: its `manage` (which implies the rest), one random permission, or none.
        permissions: (0..8)
            .filter_map(|g| match rng.below(3) {
                0 => Some(format!("area{g}.manage")),
                1 => Some(perms[g * 5 + rng.below(5)].clone()),
                _ => None,
            })
            .collect(),
        tenant: rng.below(5) != 0,
        connectors: (rng.below(2) == 0).then(|| {
            gen::SERVERS
                .iter()
                .copied()
                .filter(|_| rng.below(2) == 0)
                .collect()
        }),
    }
}

#[test]
fn the_three_engines_agree_on_random_requests() {
    const N: usize = 180;
    let (policy, names) = gen::load(N, REPO);
    let tools: Vec<gen::ToolSpec> = (0..N).map(gen::tool).collect();
    assert_eq!(
        names.iter().collect::<BTreeSet<_>>(),
        tools.iter().map(|t| &t.name).collect::<BTreeSet<_>>()
    );
    let mut rego = Rego::new(&tools);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut visible, mut hidden) = (0, 0);
    for _ in 0..1_200 {
        let req = random_request(&mut rng);
        let tool = &tools[rng.below(N)];
        let tw_request = req.to_toolwarden();
        let tw = policy
            .decide_tool(&tw_request, &Intent::named(req.intent), &tool.name)
            .expect("decides")
            .decision
            != Decision::Deny;
        let cedar = Cedar::new(&tools, &req);
        let ce = cedar.decide(&cedar.request(&tool.name));
        let re = rego.decide(&Rego::input(&req, Some(&tool.name), &[]));
        assert_eq!((tw, ce, re), (tw, tw, tw), "{req:?} on {}", tool.name);
        if tw {
            visible += 1;
        } else {
            hidden += 1;
        }
    }
    // The sample exercises both answers, not one.
    assert!(
        visible >= 50 && hidden >= 50,
        "{visible} visible, {hidden} hidden"
    );
}

#[test]
fn the_three_offers_agree_on_the_bench_request() {
    const N: usize = 180;
    let (policy, names) = gen::load(N, REPO);
    let tools: Vec<gen::ToolSpec> = (0..N).map(gen::tool).collect();
    let req = PeerRequest::bench();
    let tw_request = req.to_toolwarden();
    let offer = policy
        .offer(
            &tw_request,
            &Intent::named(req.intent),
            names.iter().map(String::as_str),
        )
        .expect("offers");
    let tw: BTreeSet<String> = offer.visible().map(str::to_string).collect();
    let cedar = Cedar::new(&tools, &req);
    let requests: Vec<_> = names.iter().map(|n| cedar.request(n)).collect();
    let ce: BTreeSet<String> = names
        .iter()
        .zip(cedar.offer(&requests))
        .filter(|(_, v)| *v)
        .map(|(n, _)| n.clone())
        .collect();
    let mut rego = Rego::new(&tools);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let re = rego.offer(&Rego::input(&req, None, &refs));
    assert_eq!(ce, tw);
    assert_eq!(re, tw);
    // write intent, supervised: only none/write tools with held permissions and allowed
    // connectors are visible; a fixed, non-trivial count.
    assert!(!tw.is_empty() && tw.len() < N, "{}", tw.len());
}
