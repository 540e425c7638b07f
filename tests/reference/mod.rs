//! A deliberately simple reference interpreter for the warden language.
//!
//! It reads the syntax tree (`toolwarden::syntax::parse_file`) directly and answers `offer`
//! (stages 1–7 plus confirmation) and `check_call` (stages 8–12) from the text of DESIGN.md,
//! "Semantics of offer" and "Semantics of check_call": no graph, no tables, no bit sets, only
//! strings, vectors and loops. It trusts its input to be a policy that loaded (the differential
//! test only hands it text `Policy::parse` accepted), so it does no checking of its own.
//!
//! Two points DESIGN.md leaves to the implementation, taken here as the checker documents them:
//! a `defaults` block fills the attributes a tool or pattern leaves out (not only unknown tools
//! under `unknown allow`), and with several intents (`combine union`) an effect is offered when
//! any of their cells offers it and needs confirmation when any of their cells says `confirm`.
//!
//! Argument rules (stage 10) are in `rules.rs`: a tool's or pattern's own rules, then those of
//! the `rules` blocks and the `defaults` blocks, in that order.

#![allow(dead_code)]

pub mod rules;

use serde_json::Value;
use toolwarden::syntax::ast::{Condition, Decl, ModeItem, RuleDecl, ToolAttr};
use toolwarden::syntax::{ast::FileId, parse_file};

/// One argument rule: its outcome, condition and where it starts (`line`, `column`, both from
/// 1, counted in characters).
#[derive(Clone, Debug)]
pub struct RefRule {
    pub outcome: &'static str,
    pub condition: Condition,
    pub line: usize,
    pub column: usize,
}

impl RefRule {
    fn from_ast(text: &str, r: &RuleDecl) -> RefRule {
        let before = &text[..r.span.start as usize];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        RefRule {
            outcome: r.outcome.as_str(),
            condition: r.condition.clone(),
            line,
            column,
        }
    }
}

/// A tool's, pattern's or `defaults` block's attributes as written.
#[derive(Clone, Debug, Default)]
pub struct Attrs {
    pub effect: Option<String>,
    pub permissions: Option<Vec<String>>,
    pub roles: Option<Vec<String>>,
    pub tenant_required: bool,
    pub requires: Option<Vec<String>>,
    pub confirm_always: bool,
    pub enabled: Option<bool>,
    /// The tool's or pattern's own argument rules (a `defaults` block's apply to every tool and
    /// are kept in [`RefPolicy::global_rules`]).
    pub rules: Vec<RefRule>,
}

impl Attrs {
    fn from_ast(attrs: &[ToolAttr]) -> Attrs {
        let mut a = Attrs::default();
        for attr in attrs {
            match attr {
                ToolAttr::Effect { name, .. } => a.effect = Some(name.text.clone()),
                ToolAttr::Permissions { names, .. } => {
                    a.permissions = Some(names.iter().map(|n| n.text.clone()).collect())
                }
                ToolAttr::Roles { names, .. } => {
                    a.roles = Some(names.iter().map(|n| n.text.clone()).collect())
                }
                ToolAttr::TenantRequired { .. } => a.tenant_required = true,
                ToolAttr::Requires { names, .. } => {
                    a.requires = Some(names.iter().map(|n| n.text.clone()).collect())
                }
                ToolAttr::ConfirmAlways { .. } => a.confirm_always = true,
                ToolAttr::Enabled { value, .. } => a.enabled = Some(*value),
                // Labels matter only to a session, which this interpreter does not model.
                ToolAttr::Taints { .. } => {}
            }
        }
        a
    }

    /// `self`, each attribute it leaves out taken from `defaults`.
    fn or(&self, d: &Attrs) -> Attrs {
        Attrs {
            effect: self.effect.clone().or_else(|| d.effect.clone()),
            permissions: self.permissions.clone().or_else(|| d.permissions.clone()),
            roles: self.roles.clone().or_else(|| d.roles.clone()),
            tenant_required: self.tenant_required || d.tenant_required,
            requires: self.requires.clone().or_else(|| d.requires.clone()),
            confirm_always: self.confirm_always || d.confirm_always,
            enabled: self.enabled.or(d.enabled),
            rules: self.rules.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Mode {
    pub name: String,
    pub matrix: Option<String>,
    pub restrict: Option<Vec<String>>,
    pub confirm: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Matrix {
    pub name: String,
    /// (intent, effect, cell word)
    pub cells: Vec<(String, String, String)>,
}

/// A policy as the reference reads it.
#[derive(Clone, Debug, Default)]
pub struct RefPolicy {
    pub effects: Vec<String>,
    pub intents: Vec<String>,
    pub matrices: Vec<Matrix>,
    pub modes: Vec<Mode>,
    pub default_mode: Option<String>,
    /// `(a, b)`: role `a` includes role `b`.
    pub role_edges: Vec<(String, String)>,
    /// `(p, q)`: permission `p` implies `q`.
    pub implies: Vec<(String, String)>,
    pub tiers: Vec<String>,
    pub prefix: Option<String>,
    pub unknown_allow: bool,
    pub defaults: Attrs,
    pub tools: Vec<(String, Attrs)>,
    pub patterns: Vec<(String, Attrs)>,
    pub confirm_fields: Vec<String>,
    pub tenant_arg: Option<String>,
    pub limit: Option<u64>,
    /// The declared `context` sets.
    pub contexts: Vec<String>,
    /// The rules of the `rules` blocks, then those of the `defaults` blocks.
    pub global_rules: Vec<RefRule>,
}

/// A request as the reference reads it.
#[derive(Clone, Debug, Default)]
pub struct RefRequest {
    pub mode: Option<String>,
    pub roles: Vec<String>,
    pub permissions: Vec<String>,
    pub tenant: Option<String>,
    pub connectors: Vec<(String, Vec<String>)>,
    pub forced: Vec<String>,
    /// The intents that count (one under `combine priority`).
    pub intents: Vec<String>,
    /// The user's query as typed, when known (`in query` reads it).
    pub query: Option<String>,
    /// The `context` sets supplied: name and values.
    pub contexts: Vec<(String, Vec<String>)>,
}

/// `Ok((decision, stage))` with decision `"allow" | "confirm" | "deny"` and stage the name of
/// the deciding stage (`None` for allow); `Err` names the kind of request error.
pub type Outcome = Result<(&'static str, Option<&'static str>), &'static str>;

impl RefPolicy {
    /// Reads a single-file policy's syntax tree.
    pub fn from_text(text: &str) -> RefPolicy {
        let (file, _) = parse_file(text, FileId(0));
        let mut p = RefPolicy::default();
        for decl in &file.decls {
            match decl {
                Decl::Effects { names, .. } => {
                    p.effects.extend(names.iter().map(|n| n.text.clone()))
                }
                Decl::Intents { names, .. } => {
                    p.intents.extend(names.iter().map(|n| n.text.clone()))
                }
                Decl::Matrix(m) => {
                    let mut cells = Vec::new();
                    for row in &m.rows {
                        for (col, cell) in row.cells.iter().enumerate() {
                            cells.push((
                                row.intent.text.clone(),
                                m.header[col].text.clone(),
                                cell.text.clone(),
                            ));
                        }
                    }
                    p.matrices.push(Matrix {
                        name: m.name.text.clone(),
                        cells,
                    });
                }
                Decl::Mode(m) => {
                    let mut mode = Mode {
                        name: m.name.text.clone(),
                        matrix: None,
                        restrict: None,
                        confirm: Vec::new(),
                    };
                    for item in &m.items {
                        match item {
                            ModeItem::Matrix { name, .. } => mode.matrix = Some(name.text.clone()),
                            ModeItem::Restrict { effects, .. } => {
                                mode.restrict =
                                    Some(effects.iter().map(|e| e.text.clone()).collect())
                            }
                            ModeItem::Confirm { effects, .. } => {
                                mode.confirm = effects.iter().map(|e| e.text.clone()).collect()
                            }
                            // `after` blocks apply only within a session (not modelled here).
                            ModeItem::After(_) => {}
                        }
                    }
                    p.modes.push(mode);
                }
                Decl::DefaultMode { name, .. } => p.default_mode = Some(name.text.clone()),
                Decl::Roles { chains, .. } => {
                    for chain in chains {
                        for w in chain.windows(2) {
                            p.role_edges.push((w[0].text.clone(), w[1].text.clone()));
                        }
                    }
                }
                Decl::Permission { name, implies, .. } => {
                    for q in implies {
                        p.implies.push((name.text.clone(), q.text.clone()));
                    }
                }
                Decl::Tiers { names, .. } => p.tiers.extend(names.iter().map(|n| n.text.clone())),
                Decl::ConnectorsPrefix { prefix, .. } => p.prefix = Some(prefix.text.clone()),
                Decl::Unknown { allow, .. } => p.unknown_allow = *allow,
                Decl::Defaults { attrs, .. } => p.defaults = Attrs::from_ast(attrs),
                Decl::ConfirmFields { names, .. } => {
                    p.confirm_fields = names.iter().map(|n| n.text.clone()).collect()
                }
                Decl::TenantArg { name, .. } => p.tenant_arg = Some(name.text.clone()),
                Decl::Limit { max, .. } => p.limit = Some(max.value),
                Decl::Tool(t) => {
                    let mut a = Attrs::from_ast(&t.attrs);
                    a.rules = t.rules.iter().map(|r| RefRule::from_ast(text, r)).collect();
                    p.tools.push((t.name.text.clone(), a))
                }
                Decl::Match(m) => {
                    let mut a = Attrs::from_ast(&m.attrs);
                    a.rules = m.rules.iter().map(|r| RefRule::from_ast(text, r)).collect();
                    p.patterns.push((m.pattern.text.clone(), a))
                }
                Decl::Context { names, .. } => {
                    p.contexts.extend(names.iter().map(|n| n.text.clone()))
                }
                Decl::Rules(r) => p
                    .global_rules
                    .extend(r.rules.iter().map(|r| RefRule::from_ast(text, r))),
                _ => {}
            }
        }
        p.global_rules.extend(
            file.defaults_rules
                .iter()
                .map(|r| RefRule::from_ast(text, r)),
        );
        p
    }

    /// Everything reachable from `start` along `edges` (including `start`).
    fn closure(start: &[String], edges: &[(String, String)]) -> Vec<String> {
        let mut out: Vec<String> = start.to_vec();
        let mut i = 0;
        while i < out.len() {
            let from = out[i].clone();
            for (a, b) in edges {
                if *a == from && !out.contains(b) {
                    out.push(b.clone());
                }
            }
            i += 1;
        }
        out
    }

    /// The attributes a name resolves to: the declared tool, else the matching pattern with the
    /// longest literal text (then the earliest), else `defaults` under `unknown allow`.
    pub fn resolve(&self, name: &str) -> Option<Attrs> {
        if let Some((_, a)) = self.tools.iter().find(|(n, _)| n == name) {
            return Some(a.or(&self.defaults));
        }
        let mut best: Option<(usize, &Attrs)> = None;
        for (glob, attrs) in &self.patterns {
            if glob_matches(glob, name) {
                let lit = glob.chars().filter(|c| *c != '*').count();
                if best.is_none_or(|(l, _)| lit > l) {
                    best = Some((lit, attrs));
                }
            }
        }
        if let Some((_, a)) = best {
            return Some(a.or(&self.defaults));
        }
        if self.unknown_allow {
            return Some(self.defaults.clone());
        }
        None
    }

    fn cell(&self, matrix: &str, intent: &str, effect: &str) -> &str {
        let m = self
            .matrices
            .iter()
            .find(|m| m.name == matrix)
            .expect("matrix");
        m.cells
            .iter()
            .find(|(i, e, _)| i == intent && e == effect)
            .map(|(_, _, c)| c.as_str())
            .unwrap_or("deny")
    }

    fn mode(&self, r: &RefRequest) -> Result<&Mode, &'static str> {
        let name = match &r.mode {
            Some(m) => m.clone(),
            None => self.default_mode.clone().ok_or("no_mode")?,
        };
        self.modes
            .iter()
            .find(|m| m.name == name)
            .ok_or("unknown_mode")
    }

    fn validate(&self, r: &RefRequest) -> Result<(), &'static str> {
        self.mode(r)?;
        for (tier, _) in &r.connectors {
            if !self.tiers.contains(tier) {
                return Err("unknown_tier");
            }
        }
        for i in &r.intents {
            if !self.intents.contains(i) {
                return Err("unknown_intent");
            }
        }
        Ok(())
    }

    /// `offer` for one name: stages 1–7, then confirmation.
    pub fn offer(&self, r: &RefRequest, name: &str) -> Outcome {
        self.validate(r)?;
        let mode = self.mode(r)?;
        let deny = |stage| Ok(("deny", Some(stage)));
        // 1. identity
        let Some(a) = self.resolve(name) else {
            return deny("identity");
        };
        if a.enabled == Some(false) {
            return deny("identity");
        }
        // 2. connector
        if let Some(server) = self.server(name) {
            let decided = self
                .tiers
                .iter()
                .find_map(|tier| r.connectors.iter().find(|(t, _)| t == tier));
            if let Some((_, servers)) = decided {
                if !servers.iter().any(|s| s == server) {
                    return deny("connector");
                }
            }
        }
        // 3. tenant
        if a.tenant_required && r.tenant.is_none() {
            return deny("tenant");
        }
        // 4. role
        if let Some(roles) = &a.roles {
            let held = Self::closure(&r.roles, &self.role_edges);
            if !roles.iter().any(|x| held.contains(x)) {
                return deny("role");
            }
        }
        // 5. permission
        if let Some(perms) = &a.permissions {
            let held = Self::closure(&r.permissions, &self.implies);
            if !perms.iter().all(|x| held.contains(x)) {
                return deny("permission");
            }
        }
        // 6. mode ceiling
        let effect = a.effect.clone().unwrap_or_default();
        if let Some(ceiling) = &mode.restrict {
            if !ceiling.contains(&effect) {
                return deny("mode");
            }
        }
        // 7. intent
        let forced = r.forced.iter().any(|f| f == name);
        let mut cell_confirm = false;
        if let Some(matrix) = &mode.matrix {
            let cells: Vec<&str> = r
                .intents
                .iter()
                .map(|i| self.cell(matrix, i, &effect))
                .collect();
            let offered = cells.iter().any(|c| *c != "deny");
            if !offered && !forced {
                return deny("intent");
            }
            // A forced tool whose cells all deny passes stage 7 but must still be confirmed:
            // `forced` exempts from hiding, never from asking.
            cell_confirm = !offered || cells.contains(&"confirm");
        }
        if cell_confirm || mode.confirm.contains(&effect) || a.confirm_always {
            Ok(("confirm", Some("confirmation")))
        } else {
            Ok(("allow", None))
        }
    }

    /// The `<server>` of a `<prefix><server>__<tool>` name.
    pub fn server<'n>(&self, name: &'n str) -> Option<&'n str> {
        let rest = name.strip_prefix(self.prefix.as_deref()?)?;
        let (server, tool) = rest.split_once("__")?;
        (!server.is_empty() && !tool.is_empty()).then_some(server)
    }

    /// `check_call`: stages 1–7 as `offer`, then 8–12. `turn` is the number of transactional
    /// calls the turn already ran; on allow the new count is returned alongside.
    pub fn check_call(&self, r: &RefRequest, turn: &mut u64, name: &str, args: &Value) -> Outcome {
        self.check_call_judged(r, turn, name, args).0
    }

    /// [`RefPolicy::check_call`] and the argument rules that fired (empty unless stage 10 ran).
    pub fn check_call_judged(
        &self,
        r: &RefRequest,
        turn: &mut u64,
        name: &str,
        args: &Value,
    ) -> (Outcome, Fired) {
        let mut fired = Fired::default();
        let outcome = self.judge_call(r, turn, name, args, &mut fired);
        (outcome, fired)
    }

    fn judge_call(
        &self,
        r: &RefRequest,
        turn: &mut u64,
        name: &str,
        args: &Value,
        fired: &mut Fired,
    ) -> Outcome {
        let offered = self.offer(r, name)?;
        if offered.0 == "deny" {
            return Ok(offered);
        }
        let a = self.resolve(name).expect("resolved");
        let deny = |stage| Ok(("deny", Some(stage)));
        let Some(obj) = args.as_object() else {
            return deny("requires");
        };
        // 8. tenant argument
        if let Some(arg) = &self.tenant_arg {
            if let Some(v) = obj.get(arg) {
                // Present: the tenant's id as a string, or denied (null and other types too).
                if v.as_str()
                    .is_none_or(|given| r.tenant.as_deref() != Some(given))
                {
                    return deny("tenant_arg");
                }
            }
        }
        // 9. requires
        for req in a.requires.iter().flatten() {
            if obj.get(req).is_none_or(Value::is_null) {
                return deny("requires");
            }
        }
        // 10. arguments: every rule runs on the arguments without the confirmation fields.
        if r.contexts.iter().any(|(n, _)| !self.contexts.contains(n)) {
            return Err("unknown_context");
        }
        let mut judged = obj.clone();
        for f in &self.confirm_fields {
            judged.remove(f);
        }
        let judged = Value::Object(judged);
        let given = rules::Given {
            query: r.query.as_deref(),
            contexts: &r.contexts,
        };
        for rule in a.rules.iter().chain(&self.global_rules) {
            if rules::eval(&rule.condition, &judged, &given) != rules::Truth::False {
                fired.rules.push((rule.line, rule.column, rule.outcome));
            }
        }
        let first = |outcome: Option<&str>| {
            fired
                .rules
                .iter()
                .find(|(_, _, o)| outcome.is_none_or(|x| x == *o))
                .map(|(l, c, _)| (*l, *c))
        };
        if let Some(at) = first(Some("deny")) {
            fired.decisive = Some(at);
            return deny("arguments");
        }
        let rule_confirm = first(None);
        // 11. confirmation: the matrix, the mode or `confirm always`, or a fired `confirm` rule.
        if offered.0 == "confirm" || rule_confirm.is_some() {
            let confirmed = self
                .confirm_fields
                .iter()
                .any(|f| obj.get(f) == Some(&Value::Bool(true)));
            if !confirmed {
                if offered.0 == "confirm" {
                    return Ok(("confirm", Some("confirmation")));
                }
                fired.decisive = rule_confirm;
                return Ok(("confirm", Some("arguments")));
            }
        }
        // 12. turn limit
        if a.effect.as_deref() != Some("none") {
            if let Some(limit) = self.limit {
                if *turn >= limit {
                    return deny("turn_limit");
                }
            }
            *turn += 1;
        }
        Ok(("allow", None))
    }
}

/// The argument rules a call fired, as `(line, column, outcome)` in evaluation order, and the
/// rule that decided when a rule did (the first `deny`, else the first `confirm` when nothing
/// else asked for confirmation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fired {
    pub rules: Vec<(usize, usize, &'static str)>,
    pub decisive: Option<(usize, usize)>,
}

/// `*` matches any run of characters (possibly empty); a dynamic program over characters.
pub fn glob_matches(glob: &str, name: &str) -> bool {
    let p: Vec<char> = glob.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // m[j] = the pattern prefix read so far matches name[..j]
    let mut m = vec![false; n.len() + 1];
    m[0] = true;
    for &pc in &p {
        let mut next = vec![false; n.len() + 1];
        if pc == '*' {
            let mut any = false;
            for j in 0..=n.len() {
                any |= m[j];
                next[j] = any;
            }
        } else {
            for j in 1..=n.len() {
                next[j] = m[j - 1] && n[j - 1] == pc;
            }
        }
        m = next;
    }
    m[n.len()]
}
