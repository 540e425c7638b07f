//! `toolwarden fmt`: the canonical layout, idempotence and semantics preservation, over the
//! shipped policies and generated ones (proptest).

use std::process::Command;

use proptest::prelude::*;
use toolwarden::fmt::format_source;
use toolwarden::syntax::ast::FileId;
use toolwarden::syntax::parse_file;
use toolwarden::{Intent, Policy, Request};

const REFERENCE: &[&str] = &[
    "policies/finance.warden",
    "policies/retail.warden",
    "policies/connectors.warden",
    "policies/lexicon/standard.warden",
];

/// The syntax trees (spans ignored) and the comment texts are equal.
fn assert_same_syntax(a: &str, b: &str) {
    let (ta, da) = parse_file(a, FileId(0));
    let (tb, db) = parse_file(b, FileId(0));
    assert!(da.is_empty() && db.is_empty(), "{da:?} {db:?}");
    assert_eq!(ta.decls, tb.decls);
    let ca: Vec<&str> = ta.comments.iter().map(|(_, c)| c.trim_end()).collect();
    let cb: Vec<&str> = tb.comments.iter().map(|(_, c)| c.trim_end()).collect();
    assert_eq!(ca, cb);
}

/// Every decision of `a` equals that of `b`: each mode x intent x (roles, permissions,
/// tenant) x tool (declared, pattern-matched and unknown names).
fn assert_same_decisions(a: &Policy, b: &Policy) {
    assert_eq!(a.tools().collect::<Vec<_>>(), b.tools().collect::<Vec<_>>());
    assert_eq!(a.modes().collect::<Vec<_>>(), b.modes().collect::<Vec<_>>());
    assert_eq!(
        a.intents().collect::<Vec<_>>(),
        b.intents().collect::<Vec<_>>()
    );
    let mut names: Vec<String> = a.tools().map(str::to_string).collect();
    names.extend(a.patterns().iter().map(|p| p.replace('*', "x")));
    names.push("mcp__github__get_me".into());
    names.push("no_such_tool".into());
    let mut intents: Vec<Intent> = a.intents().map(Intent::named).collect();
    if intents.is_empty() {
        intents.push(a.fallback_intent());
    }
    let roles: Vec<String> = a.roles().map(str::to_string).collect();
    let perms: Vec<String> = a.permissions().map(str::to_string).collect();
    for mode in a.modes() {
        for intent in &intents {
            for (r, p, t) in [
                (false, false, false),
                (true, true, true),
                (true, false, true),
            ] {
                let mut req = Request::new(mode);
                if r {
                    req = req.roles(roles.clone());
                }
                if p {
                    req = req.permissions(perms.clone());
                }
                if t {
                    req = req.tenant("t1");
                }
                let da = a
                    .offer(&req, intent, names.iter().map(String::as_str))
                    .unwrap();
                let db = b
                    .offer(&req, intent, names.iter().map(String::as_str))
                    .unwrap();
                let key = |o: &toolwarden::Offer<'_>| {
                    o.entries()
                        .iter()
                        .map(|(n, d)| (n.to_string(), d.decision, d.stage, d.matched))
                        .collect::<Vec<_>>()
                };
                assert_eq!(
                    key(&da),
                    key(&db),
                    "mode {mode} intent {:?}",
                    intent.intents
                );
            }
        }
    }
    for q in [
        "delete invoice 7",
        "borrar la factura",
        "export to excel",
        "",
        "run the workflow",
    ] {
        assert_eq!(a.classify(q).intents, b.classify(q).intents, "{q}");
    }
}

#[test]
fn reference_policies_format_idempotently_and_keep_their_meaning() {
    for path in REFERENCE {
        let src = std::fs::read_to_string(path).unwrap();
        let once = format_source(&src, path).unwrap();
        let twice = format_source(&once, path).unwrap();
        assert_eq!(once, twice, "{path} is not idempotent");
        assert_same_syntax(&src, &once);
        if !path.contains("lexicon") {
            let a = Policy::parse(&src, path).unwrap();
            let b = Policy::parse(&once, path).unwrap();
            assert_same_decisions(&a, &b);
        }
    }
}

#[test]
fn shipped_policies_are_formatted() {
    for path in REFERENCE {
        let src = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            format_source(&src, path).unwrap(),
            src,
            "run `toolwarden fmt {path}`"
        );
    }
}

const MESSY: &str = "# head comment
policy   \"p\"    version 2
effects none,write ,  delete   # effects


intents   write>read
fallback read
keywords write { en \"create\",\"add\"   fa \"ایجاد\" }
keywords read {
    en \"show\", \"list\",
        \"find\"
  # Spanish
  es \"mostrar\" }
matrix m {
  none write delete
 read allow deny deny
   write allow confirm deny    # writes confirm
}
mode a {matrix m restrict none}
mode bb   { matrix m
   confirm delete }
roles{admin>user ,auditor>user}
permission \"x.all\" implies \"x.read\",\"x.write\"
tool t1 {effect none permissions \"x.read\"}
tool long_tool_name { effect write  tenant required   confirm always }
# a comment between tools
tool t3 {
  effect delete   # why
  enabled false
}
match \"mcp__*\" { effect write }
unknown deny
";

const TIDY: &str = "# head comment
policy \"p\" version 2
effects none, write, delete  # effects

intents write > read
fallback read
keywords write { en \"create\", \"add\"  fa \"ایجاد\" }
keywords read {
  en \"show\", \"list\",
     \"find\"
  # Spanish
  es \"mostrar\"
}
matrix m {
         none   write    delete
  read   allow  deny     deny
  write  allow  confirm  deny  # writes confirm
}
mode a  { matrix m  restrict none }
mode bb { matrix m  confirm delete }
roles { admin > user, auditor > user }
permission \"x.all\" implies \"x.read\", \"x.write\"
tool t1             { effect none   permissions \"x.read\" }
tool long_tool_name { effect write  tenant required  confirm always }
# a comment between tools
tool t3 {
  effect delete  # why
  enabled false
}
match \"mcp__*\" { effect write }
unknown deny
";

#[test]
fn messy_text_gets_the_canonical_layout() {
    let out = format_source(MESSY, "messy.warden").unwrap();
    assert_eq!(out, TIDY);
    assert_eq!(format_source(&out, "x").unwrap(), out);
    assert_same_syntax(MESSY, &out);
    let a = Policy::parse(MESSY, "messy.warden").unwrap();
    let b = Policy::parse(&out, "messy.warden").unwrap();
    assert_same_decisions(&a, &b);
}

#[test]
fn quoted_names_keep_their_spelling_and_escapes() {
    let src = "policy \"q\\\"uote\\\\d\"\neffects \"none\", write\nmode m { }\ntool \"a b\" { effect \"none\" }\ntool ab { effect write }\n";
    let out = format_source(src, "q.warden").unwrap();
    assert_eq!(
        out,
        "policy \"q\\\"uote\\\\d\"\neffects \"none\", write\nmode m { }\ntool \"a b\" { effect \"none\" }\ntool ab    { effect write }\n"
    );
    assert_same_syntax(src, &out);
}

#[test]
fn syntax_errors_stop_formatting() {
    let e = format_source("policy \"p\"\neffects none,\n", "bad.warden").unwrap_err();
    assert_eq!(e.diagnostics()[0].code(), "syntax");
}

#[test]
fn trailing_comment_on_a_short_declaration_stays_on_its_line() {
    let src = "policy \"p\"   # name\npermission \"a\"  # perm\n\n\n\nunknown deny\n";
    let out = format_source(src, "c.warden").unwrap();
    assert_eq!(
        out,
        "policy \"p\"      # name\npermission \"a\"  # perm\n\nunknown deny\n"
    );
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

#[test]
fn cli_check_prints_a_diff_and_exits_1_then_fmt_fixes() {
    let dir = std::env::temp_dir().join(format!("tw-fmt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("p.warden");
    std::fs::write(&f, "policy   \"p\"\neffects none\nmode m { }\n").unwrap();
    let out = bin().args(["fmt", "--check"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let name = f.display().to_string();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "--- {name}\n+++ {name} (formatted)\n@@ -1,3 +1,3 @@\n-policy   \"p\"\n+policy \"p\"\n effects none\n mode m {{ }}\n"
        )
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "1 file is not formatted; run `toolwarden fmt` on it\n"
    );
    let out = bin().arg("fmt").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "policy \"p\"\neffects none\nmode m { }\n"
    );
    let out = bin().args(["fmt", "--check"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    std::fs::write(&f, "policy \"p\n").unwrap();
    let out = bin().args(["fmt", "--check"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not parse, nothing formatted"));
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------------------------------------------
// Generated policies: random structure, random layout noise, random comments.

const EFFECTS: &[&str] = &["none", "write", "delete", "export", "execute"];
const INTENTS: &[&str] = &["destructive", "write", "export", "read"];
const CELLS: &[&str] = &["allow", "deny", "confirm"];

#[derive(Debug, Clone)]
struct Gen {
    n_effects: usize,
    n_intents: usize,
    cells: Vec<u8>,
    modes: Vec<(bool, u8, u8)>,
    tools: Vec<(u8, u8, bool, bool, bool)>,
    keywords: Vec<(u8, Vec<u8>)>,
    noise: Vec<u8>,
}

fn gen() -> impl Strategy<Value = Gen> {
    (
        1usize..=5,
        1usize..=4,
        proptest::collection::vec(0u8..3, 20),
        proptest::collection::vec((any::<bool>(), any::<u8>(), any::<u8>()), 1..4),
        proptest::collection::vec(
            (
                any::<u8>(),
                any::<u8>(),
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
            ),
            0..7,
        ),
        proptest::collection::vec(
            (any::<u8>(), proptest::collection::vec(any::<u8>(), 1..5)),
            0..4,
        ),
        proptest::collection::vec(any::<u8>(), 64..256),
    )
        .prop_map(
            |(n_effects, n_intents, cells, modes, tools, keywords, noise)| Gen {
                n_effects,
                n_intents,
                cells,
                modes,
                tools,
                keywords,
                noise,
            },
        )
}

struct Noise<'a> {
    bytes: &'a [u8],
    i: usize,
}

impl Noise<'_> {
    fn next(&mut self) -> u8 {
        let b = self.bytes[self.i % self.bytes.len()];
        self.i += 1;
        b
    }
    /// Horizontal space.
    fn sp(&mut self) -> &'static str {
        [" ", " ", "  ", "\t", "    "][self.next() as usize % 5]
    }
    /// Space that may break the line (outside matrices).
    fn br(&mut self) -> &'static str {
        [" ", " ", "  ", "\n  ", " \n\t"][self.next() as usize % 5]
    }
    /// Line end: maybe a trailing comment, maybe a blank line, maybe an own-line comment.
    fn eol(&mut self) -> String {
        let k = self.next();
        match k % 7 {
            0 => format!("{}# trailing {k}\n", self.sp()),
            1 => "\n\n".to_string(),
            2 => format!("\n# own line {k}\n"),
            3 => "\n\n\n".to_string(),
            _ => "\n".to_string(),
        }
    }
}

fn render(g: &Gen) -> String {
    let mut n = Noise {
        bytes: &g.noise,
        i: 0,
    };
    let effects = &EFFECTS[..g.n_effects];
    let intents = &INTENTS[..g.n_intents];
    let mut s = String::new();
    s.push_str(&format!(
        "policy{}\"gen\"{}version{}1",
        n.sp(),
        n.sp(),
        n.sp()
    ));
    s.push_str(&n.eol());
    s.push_str(&format!(
        "effects{}{}",
        n.sp(),
        effects.join(&format!(",{}", n.br()))
    ));
    s.push_str(&n.eol());
    s.push_str(&format!(
        "intents {}",
        intents.join(&format!("{}>{}", n.sp(), n.br()))
    ));
    s.push_str(&n.eol());
    s.push_str(&format!("fallback{}{}", n.sp(), intents[intents.len() - 1]));
    s.push_str(&n.eol());
    for (k, (intent, words)) in g.keywords.iter().enumerate() {
        let intent = intents[*intent as usize % intents.len()];
        s.push_str(&format!("keywords {intent}{}{{{}", n.sp(), n.br()));
        let entries: Vec<String> = (0..words.len()).map(|j| format!("\"kw{k}w{j}\"")).collect();
        s.push_str(&format!(
            "en{}{}",
            n.sp(),
            entries.join(&format!(",{}", n.br()))
        ));
        if n.next().is_multiple_of(2) {
            s.push_str(&format!("{}# inside\n", n.sp()));
        }
        s.push_str(&format!("{}es \"x{k}\"{}}}", n.br(), n.br()));
        s.push_str(&n.eol());
    }
    // The matrix: header line, one line per intent.
    s.push_str(&format!("matrix{}m{}{{\n{}", n.sp(), n.sp(), n.sp()));
    s.push_str(&effects.join(n.sp()));
    if n.next().is_multiple_of(3) {
        s.push_str("   # header");
    }
    s.push('\n');
    for (i, intent) in intents.iter().enumerate() {
        s.push_str(&format!("{}{intent}", n.sp()));
        for e in 0..effects.len() {
            let c = CELLS[g.cells[(i * 5 + e) % g.cells.len()] as usize];
            s.push_str(&format!("{}{c}", n.sp()));
        }
        s.push('\n');
    }
    s.push('}');
    s.push_str(&n.eol());
    for (k, (with_matrix, restrict, confirm)) in g.modes.iter().enumerate() {
        s.push_str(&format!("mode{}m{k}{}{{", n.sp(), n.sp()));
        if *with_matrix {
            s.push_str(&format!("{}matrix m", n.br()));
        }
        let pick = |mask: u8| -> Vec<&str> {
            effects
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, e)| *e)
                .collect()
        };
        let r = pick(*restrict);
        if !r.is_empty() && restrict.is_multiple_of(3) {
            s.push_str(&format!("{}restrict {}", n.br(), r.join(", ")));
        }
        let c = pick(*confirm);
        if !c.is_empty() {
            s.push_str(&format!("{}confirm{}{}", n.br(), n.sp(), c.join(",")));
        }
        s.push_str(&format!("{}}}", n.br()));
        s.push_str(&n.eol());
    }
    s.push_str("default mode m0");
    s.push_str(&n.eol());
    s.push_str(&format!(
        "roles{}{{ admin > user{}, auditor >{}user }}",
        n.sp(),
        n.br(),
        n.sp()
    ));
    s.push_str(&n.eol());
    s.push_str("permission \"p.all\" implies \"p.a\", \"p.b\"");
    s.push_str(&n.eol());
    s.push_str("tenant arg \"tid\"\nconfirm fields \"ok\"");
    s.push_str(&n.eol());
    for (k, (effect, perm, tenant, confirm, roles)) in g.tools.iter().enumerate() {
        let mut attrs = vec![format!(
            "effect {}",
            effects[*effect as usize % effects.len()]
        )];
        if perm % 3 == 1 {
            attrs.push("permissions \"p.a\"".into());
        }
        if *tenant {
            attrs.push("tenant required".into());
        }
        if *confirm {
            attrs.push("confirm always".into());
        }
        if *roles {
            attrs.push("roles user".into());
        }
        if perm.is_multiple_of(5) {
            attrs.push("requires id, \"other id\"".into());
        }
        let name = if perm % 7 == 3 {
            format!("\"tool {k}\"")
        } else {
            format!("tool_{}{k}", "x".repeat(*perm as usize % 6))
        };
        let sep = if n.next().is_multiple_of(5) {
            format!("{}# attr comment\n  ", n.sp())
        } else {
            n.br().to_string()
        };
        s.push_str(&format!(
            "tool {name}{}{{{}{}{}}}",
            n.sp(),
            n.br(),
            attrs.join(&sep),
            n.br()
        ));
        s.push_str(&n.eol());
    }
    s.push_str("match \"mcp__*__get_*\" { effect none }");
    s.push_str(&n.eol());
    s.push_str("unknown deny\n");
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn generated_policies_format_idempotently_and_keep_their_meaning(g in gen()) {
        let src = render(&g);
        let once = format_source(&src, "gen.warden").unwrap();
        let twice = format_source(&once, "gen.warden").unwrap();
        prop_assert_eq!(&once, &twice, "source:\n{}", src);
        assert_same_syntax(&src, &once);
        let a = Policy::parse(&src, "gen.warden");
        let b = Policy::parse(&once, "gen.warden");
        // The generator only writes valid policies, so the meaning is always compared.
        prop_assert!(a.is_ok(), "{}", a.as_ref().err().map(|e| e.render()).unwrap_or_default());
        prop_assert!(b.is_ok());
        if let (Ok(a), Ok(b)) = (a, b) {
            assert_same_decisions(&a, &b);
        }
    }
}

/// Re-spaces `src` at random outside strings and comments: every run of blanks becomes another
/// non-empty run, and a blank may appear after a comma. Line breaks are untouched (a matrix
/// reads one row a line).
fn perturb(src: &str, noise: &[u8]) -> String {
    let mut n = Noise { bytes: noise, i: 0 };
    let mut out = String::with_capacity(src.len() + 64);
    let (mut in_string, mut escaped, mut in_comment) = (false, false, false);
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if in_comment {
            out.push(c);
            in_comment = c != '\n';
            continue;
        }
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '#' => {
                in_comment = true;
                out.push(c);
            }
            ' ' | '\t' => {
                while matches!(chars.peek(), Some(' ' | '\t')) {
                    chars.next();
                }
                out.push_str(n.sp());
            }
            ',' => {
                out.push(',');
                if n.next().is_multiple_of(3) && !matches!(chars.peek(), Some(' ' | '\t' | '\n')) {
                    out.push(' ');
                }
            }
            _ => out.push(c),
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// The shipped policies, re-spaced at random, format back to the same canonical text.
    #[test]
    fn respaced_reference_policies_format_to_the_same_text(
        noise in proptest::collection::vec(any::<u8>(), 16..128)
    ) {
        for path in REFERENCE {
            let src = std::fs::read_to_string(path).unwrap();
            let messy = perturb(&src, &noise);
            assert_same_syntax(&src, &messy);
            let out = format_source(&messy, path).unwrap();
            prop_assert_eq!(&out, &format_source(&src, path).unwrap(), "{}", path);
        }
    }
}

#[test]
fn blank_lines_inside_commented_blocks_are_kept() {
    let src = "policy \"p\"\neffects none, write\nmode m {\n  restrict none, write   # c\n\n\n  confirm write\n}\ntool t {\n  permissions \"a\", \"b\"   # c\n\n  effect none\n}\n";
    let out = format_source(src, "b.warden").unwrap();
    assert_eq!(
        out,
        "policy \"p\"\neffects none, write\nmode m {\n  restrict none, write  # c\n\n  confirm write\n}\ntool t {\n  permissions \"a\", \"b\"  # c\n\n  effect none\n}\n"
    );
}
