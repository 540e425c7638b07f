//! The syntax of argument rules: every example of the language's description parses as
//! written, into the tree the canonical text below spells out, and the parse of one rule never
//! runs into the next line.

use toolwarden::syntax::ast::*;
use toolwarden::syntax::parse_file;

/// The language's own example, exactly as written there.
const EXAMPLE: &str = include_str!("fixtures/rules/language_example.warden");

fn parse(text: &str) -> PolicyFile {
    let (tree, diagnostics) = parse_file(text, FileId(0));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    tree
}

/// Every rule of `tree` as `owner: canonical text`, in source order.
fn rules_of(tree: &PolicyFile) -> Vec<String> {
    let mut out = Vec::new();
    for d in &tree.decls {
        let (owner, rules) = match d {
            Decl::Tool(t) => (t.name.text.clone(), &t.rules),
            Decl::Match(m) => (format!("match {}", m.pattern.text), &m.rules),
            Decl::Rules(r) => ("rules".to_string(), &r.rules),
            _ => continue,
        };
        out.extend(rules.iter().map(|r| format!("{owner}: {r}")));
    }
    out.extend(tree.defaults_rules.iter().map(|r| format!("defaults: {r}")));
    out
}

fn text_of(text: &str, span: Span) -> &str {
    &text[span.range()]
}

#[test]
fn the_example_parses_as_written() {
    let tree = parse(EXAMPLE);
    assert_eq!(
        rules_of(&tree),
        [
            r#"write_file: deny when path not under "/workspace", "/tmp/scratch""#,
            r#"write_file: deny when path matches "**/.env", "**/*.pem", "**/.git/**""#,
            "send_money: confirm when recipient not in context.contacts, query",
            "send_money: confirm when amount > 100",
            "send_money: deny when amount > 10000",
            r#"send_email: confirm when recipients[*] not matches "*@example.com""#,
            r#"fetch_url: deny when host(url) not in "github.com", "docs.rs""#,
            r#"run_sql: deny when query =~ "(?i)\\b(drop|truncate)\\b""#,
            r#"match mcp__github__*: deny when owner not in "acme""#,
            r#"rules: deny when any =~ "AKIA[0-9A-Z]{16}""#,
        ]
    );
    let Decl::Context { names, .. } = &tree.decls[0] else {
        panic!("the first declaration is `context`: {:?}", tree.decls[0]);
    };
    let names: Vec<&str> = names.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(names, ["contacts", "own_accounts"]);
    // The attributes are still there beside the rules.
    let Decl::Tool(run_sql) = &tree.decls[5] else {
        panic!("run_sql is the sixth declaration");
    };
    assert_eq!(run_sql.attrs.len(), 1);
    assert_eq!(run_sql.attrs[0].keyword(), "effect");
    // The regex is the string with its escapes resolved.
    let Condition::Compare(c) = &run_sql.rules[0].condition else {
        panic!("a comparison");
    };
    assert_eq!(c.values, [Value::Str(name(r"(?i)\b(drop|truncate)\b"))]);
    // `query` on the left is an argument named `query`; on the right it is the user's query.
    assert_eq!(
        c.operand,
        Operand::Arg(ArgRef {
            steps: vec![RefStep::Field("query".into())],
            span: Span::default(),
        })
    );
}

fn name(text: &str) -> Name {
    Name {
        text: text.to_string(),
        span: Span::default(),
        quoted: true,
    }
}

#[test]
fn every_node_carries_its_span() {
    let tree = parse(EXAMPLE);
    let Decl::Tool(send_money) = &tree.decls[2] else {
        panic!("send_money is the third declaration");
    };
    let rule = &send_money.rules[0];
    assert_eq!(
        text_of(EXAMPLE, rule.span),
        "confirm when recipient not in context.contacts, query"
    );
    let Condition::Compare(c) = &rule.condition else {
        panic!("a comparison");
    };
    assert_eq!(
        text_of(EXAMPLE, c.span),
        "recipient not in context.contacts, query"
    );
    assert_eq!(text_of(EXAMPLE, c.operand.span()), "recipient");
    assert_eq!(text_of(EXAMPLE, c.op_span), "not in");
    assert_eq!(c.op, CompareOp::NotIn);
    let spans: Vec<&str> = c
        .values
        .iter()
        .map(|v| text_of(EXAMPLE, v.span()))
        .collect();
    assert_eq!(spans, ["context.contacts", "query"]);
    let Value::Context { name, .. } = &c.values[0] else {
        panic!("a context set");
    };
    assert_eq!(
        (name.text.as_str(), text_of(EXAMPLE, name.span)),
        ("contacts", "contacts")
    );
    assert!(matches!(c.values[1], Value::Query(_)));

    let Decl::Tool(fetch) = &tree.decls[4] else {
        panic!("fetch_url is the fifth declaration");
    };
    let Condition::Compare(c) = &fetch.rules[0].condition else {
        panic!("a comparison");
    };
    let Operand::Host { of, span } = &c.operand else {
        panic!("host(url)");
    };
    assert_eq!(text_of(EXAMPLE, *span), "host(url)");
    assert_eq!(text_of(EXAMPLE, of.span()), "url");
    // The rules block ends at its brace, its rule before the comment.
    let Decl::Rules(block) = &tree.decls[7] else {
        panic!("the rules block is last");
    };
    assert_eq!(
        text_of(EXAMPLE, block.rules[0].span),
        r#"deny when any =~ "AKIA[0-9A-Z]{16}""#
    );
    assert!(text_of(EXAMPLE, block.span).ends_with('}'));
}

#[test]
fn a_rule_does_not_run_into_the_next_line() {
    let text = "tool t {\n  deny when path not under \"/workspace\", \"/tmp/scratch\"\n  deny when amount > 5\n  confirm always\n  confirm when present(x)\n  requires path\n}\n";
    let tree = parse(text);
    let Decl::Tool(t) = &tree.decls[0] else {
        panic!("a tool");
    };
    let rules: Vec<String> = t.rules.iter().map(ToString::to_string).collect();
    assert_eq!(
        rules,
        [
            r#"deny when path not under "/workspace", "/tmp/scratch""#,
            "deny when amount > 5",
            "confirm when present(x)",
        ]
    );
    let attrs: Vec<&str> = t.attrs.iter().map(ToolAttr::keyword).collect();
    assert_eq!(attrs, ["confirm always", "requires"]);
    // A list that goes on after a comma goes on across lines.
    let tree =
        parse("tool t {\n  deny when path not under \"/a\",\n    \"/b\"\n  deny when x > 1\n}\n");
    assert_eq!(
        rules_of(&tree),
        [
            r#"t: deny when path not under "/a", "/b""#,
            "t: deny when x > 1"
        ]
    );
}

#[test]
fn rules_in_a_defaults_block() {
    let text = "defaults { effect none  deny when any =~ \"secret\" }\ntool t { effect none }\n";
    let tree = parse(text);
    assert_eq!(rules_of(&tree), [r#"defaults: deny when any =~ "secret""#]);
    let Decl::Defaults { attrs, span } = &tree.decls[0] else {
        panic!("defaults");
    };
    assert_eq!(attrs.len(), 1);
    let rule = &tree.defaults_rules[0];
    assert!(span.start <= rule.span.start && rule.span.end <= span.end);
}

#[test]
fn precedence_or_and_not_and_parentheses() {
    let one = |cond: &str| {
        let text = format!("rules {{ deny when {cond} }}");
        let tree = parse(&text);
        let Decl::Rules(r) = &tree.decls[0] else {
            panic!("rules");
        };
        r.rules[0].condition.clone()
    };
    let c = one("a > 1 or b > 2 and not c > 3");
    let Condition::Or { items, .. } = &c else {
        panic!("or at the top: {c:?}");
    };
    assert_eq!(items.len(), 2);
    let Condition::And { items: and, .. } = &items[1] else {
        panic!("and under or");
    };
    assert!(matches!(and[1], Condition::Not { .. }));
    assert_eq!(c.to_string(), "a > 1 or b > 2 and not c > 3");
    // Parentheses that change the grouping are kept in the canonical text, others dropped.
    assert_eq!(
        one("(a > 1 or b > 2) and not (c > 3 or present(d))").to_string(),
        "(a > 1 or b > 2) and not (c > 3 or present(d))"
    );
    assert_eq!(one("((a > 1)) and (b > 2)").to_string(), "a > 1 and b > 2");
    assert_eq!(
        one("not not x in 1, -2, 0.5").to_string(),
        "not not x in 1, -2, 0.5"
    );
    // Every operator, both forms.
    for cond in [
        r#"x in "a", 1"#,
        r#"x not in "a""#,
        r#"x under "/a""#,
        r#"x not under "/a""#,
        r#"x matches "*""#,
        r#"x not matches "*""#,
        r#"x =~ "a""#,
        r#"x !~ "a""#,
        "x < 1",
        "x <= 1",
        "x > 1",
        "x >= 1",
        "x == 1",
        "x != 1",
        r#"x == "5000""#,
        r#"attachments[*].name matches "*.exe""#,
        r#"options.mode in "rw""#,
        r#"host("github.com") in "a""#,
        r#"host(any) in "a""#,
        r#"any.thing in "a""#,
        r#"any_x in "a""#,
        r#"and[*] in "a""#,
        "present > 1",
        r#"host in "a""#,
        r#"context in "a""#,
        r#"query in query"#,
        "not_x > 1",
    ] {
        assert_eq!(one(cond).to_string(), cond);
    }
    let Condition::Compare(c) = one(r#"x == "5000""#) else {
        panic!("a comparison");
    };
    assert_eq!(c.op, CompareOp::Eq);
    assert!(matches!(&c.values[0], Value::Str(n) if n.text == "5000"));
    let Condition::Compare(c) = one(r#"attachments[*].name matches "*.exe""#) else {
        panic!("a comparison");
    };
    let Operand::Arg(a) = &c.operand else {
        panic!("a reference");
    };
    assert_eq!(
        a.steps,
        [
            RefStep::Field("attachments".into()),
            RefStep::Each,
            RefStep::Field("name".into())
        ]
    );
    let Condition::Compare(c) = one(r#"any =~ "k""#) else {
        panic!("a comparison");
    };
    assert!(matches!(c.operand, Operand::Any(_)));
    let Condition::Compare(c) = one(r#"host("github.com") in "a""#) else {
        panic!("a comparison");
    };
    assert!(matches!(&c.operand, Operand::Host { of, .. } if matches!(**of, Operand::Literal(_))));
}

#[test]
fn malformed_rules_are_syntax_errors() {
    for text in [
        "tool t { deny when }",
        "tool t { deny path > 1 }",
        "tool t { deny when x in }",
        "tool t { deny when x in \"a\", }",
        "tool t { deny when x > }",
        "tool t { deny when x =~ \"a\", \"b\" }",
        "tool t { deny when x under 5 }",
        "tool t { deny when x in y }",
        "tool t { deny when x in context }",
        "tool t { deny when (x > 1 }",
        "tool t { deny when x > 1 and }",
        "tool t { deny when present(\"x\") }",
        "tool t { allow when x > 1 }",
        "tool t { deny when and > 1 }",
        "rules { effect none }",
    ] {
        let (_, diagnostics) = parse_file(text, FileId(0));
        assert_eq!(diagnostics.len(), 1, "{text}: {diagnostics:?}");
        assert_eq!(diagnostics[0].code(), "syntax", "{text}");
    }
}

#[test]
fn parentheses_nest_at_most_the_limit() {
    let depth = toolwarden::limits::MAX_CONDITION_DEPTH;
    let nested = |n: usize| {
        format!(
            "tool t {{ deny when {}x > 1{} }}",
            "(".repeat(n),
            ")".repeat(n)
        )
    };
    let tree = parse(&nested(depth));
    assert_eq!(rules_of(&tree), ["t: deny when x > 1"]);
    // One more, and a hundred thousand more, are refused before the grammar runs.
    for n in [depth + 1, 100_000] {
        let text = nested(n);
        let (tree, diagnostics) = parse_file(&text, FileId(0));
        assert!(tree.decls.is_empty());
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].code(), "too-deep");
        assert_eq!(
            diagnostics[0].message(),
            format!("parentheses nest more than {depth} deep")
        );
    }
    // Parentheses inside strings and comments do not count.
    let text = format!(
        "# {}\ntool t {{ deny when x =~ \"{}\" }}",
        "(".repeat(100),
        "\\\\(".repeat(100)
    );
    parse(&text);
}

/// pest runs without its native-stack probe (see `Cargo.toml`), so the depth cap is what keeps
/// the grammar's recursion bounded: the deepest text it lets through, parentheses and `host(…)`
/// at the cap, parses, checks and formats on a thread with a small stack (debug build).
#[test]
fn the_deepest_condition_fits_a_small_stack() {
    let depth = toolwarden::limits::MAX_CONDITION_DEPTH;
    let text = format!(
        "tool t {{ effect none\n  deny when {}x > 1{}\n  deny when {}u{} in \"a.b\"\n}}\n",
        "(".repeat(depth),
        ")".repeat(depth),
        "host(".repeat(depth),
        ")".repeat(depth)
    );
    let result = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            let (tree, diagnostics) = parse_file(&text, FileId(0));
            let formatted = toolwarden::fmt::format_source(&text, "deep.warden").map(|_| ());
            (tree.decls.len(), diagnostics.len(), formatted.is_ok())
        })
        .expect("spawns")
        .join()
        .expect("no stack overflow");
    assert_eq!(result, (1, 0, true));
}

/// A backslash before a line feed does not carry a string onto the next line (the escape is
/// refused there), so parentheses on that line count towards the depth cap: a parse resumed
/// at that line after the syntax error cannot recurse past the cap.
#[test]
fn a_string_does_not_hide_the_next_lines_parentheses() {
    let depth = toolwarden::limits::MAX_CONDITION_DEPTH;
    let deep = |n: usize| {
        format!(
            "policy \"x\\\ntool t {{ deny when {}x > 1{} }}\n",
            "(".repeat(n),
            ")".repeat(n)
        )
    };
    let result = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            let (_, too_deep) = parse_file(&deep(100_000), FileId(0));
            let (tree, at_the_cap) = parse_file(&deep(depth), FileId(0));
            let codes =
                |d: &[toolwarden::Diagnostic]| d.iter().map(|d| d.code()).collect::<Vec<_>>();
            (codes(&too_deep), codes(&at_the_cap), tree.decls.len())
        })
        .expect("spawns")
        .join()
        .expect("no stack overflow");
    // Within the cap, the string's line is a syntax error and the tool after it still parses.
    assert_eq!(result, (vec!["too-deep"], vec!["syntax"], 1));
}

#[test]
fn a_chain_of_not_is_capped() {
    let depth = toolwarden::limits::MAX_CONDITION_DEPTH;
    let chain = |n: usize| format!("tool t {{ deny when {}x > 1 }}", "not ".repeat(n));
    let tree = parse(&chain(depth));
    let Decl::Tool(t) = &tree.decls[0] else {
        panic!("a tool");
    };
    let mut c = &t.rules[0].condition;
    let mut nots = 0;
    while let Condition::Not { inner, .. } = c {
        nots += 1;
        c = inner;
    }
    assert_eq!(nots, depth);
    for n in [depth + 1, 10_000] {
        let (_, diagnostics) = parse_file(&chain(n), FileId(0));
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].code(), "too-deep");
        assert_eq!(
            diagnostics[0].message(),
            format!("more than {depth} `not` in a row")
        );
    }
}

#[test]
fn fmt_keeps_rules_and_is_idempotent() {
    let once = toolwarden::fmt::format_source(EXAMPLE, "example.warden").expect("formats");
    let twice = toolwarden::fmt::format_source(&once, "example.warden").expect("formats");
    assert_eq!(once, twice);
    assert_eq!(parse(&once).decls, parse(EXAMPLE).decls);
    assert_eq!(rules_of(&parse(&once)), rules_of(&parse(EXAMPLE)));
    insta::assert_snapshot!(once);
    let defaults = "defaults {\n  effect none  # the effect\n  deny when x > 1\n}\n";
    let formatted = toolwarden::fmt::format_source(defaults, "d.warden").expect("formats");
    assert_eq!(
        formatted,
        "defaults {\n  effect none  # the effect\n  deny when x > 1\n}\n"
    );
}

#[test]
fn a_policy_with_the_example_rules_loads() {
    let text = format!(
        "policy \"p\" version 1\neffects none, write, export, execute\nintents read\nfallback read\nmatrix m {{\n  none write export execute\n  read allow allow allow allow\n}}\nmode m {{ matrix m }}\n{EXAMPLE}"
    );
    let policy = toolwarden::Policy::parse(&text, "p.warden").expect("rules load");
    assert_eq!(policy.name(), "p");
}

#[test]
fn an_unclosed_string_says_where_strings_end() {
    let help = |text: &str| {
        let (_, d) = parse_file(text, FileId(0));
        assert_eq!(d.len(), 1, "{text}: {d:?}");
        assert_eq!(d[0].code(), "syntax", "{text}");
        d[0].help_text().map(str::to_string)
    };
    assert_eq!(
        help("tool t { deny when x in \"a\\\n\" }\n").as_deref(),
        Some("a string ends on its line: a backslash at the line's end does not continue it; close it with `\"` (write `\\\\` for a backslash)")
    );
    assert_eq!(
        help("tool t { deny when x in \"a\\\r\n\" }\r\n").as_deref(),
        Some("a string ends on its line: a backslash at the line's end does not continue it; close it with `\"` (write `\\\\` for a backslash)")
    );
    assert_eq!(
        help("tool t { deny when x in \"a\\\\\n\" }\n").as_deref(),
        Some("this string is not closed on its line: end it with `\"`")
    );
}
