//! Classification tests of our own (issue 3): each query here was written for this file.

use std::sync::OnceLock;

use toolwarden::limits::MAX_QUERY_OCCURRENCES;
use toolwarden::{Intent, Policy};

/// `policies/finance.warden`, which includes the standard lexicon.
fn finance() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/finance.warden");
        match Policy::from_file(path) {
            Ok(p) => p,
            Err(e) => panic!("finance.warden must load:\n{}", e.render()),
        }
    })
}

fn classify(q: &str) -> Intent {
    finance().classify(q)
}

/// `(keyword, intent)` of the hits that counted.
fn hits(i: &Intent) -> Vec<(&str, &str)> {
    i.hits
        .iter()
        .map(|h| (h.keyword.as_str(), h.intent.as_str()))
        .collect()
}

/// `(keyword, negator)` of the dropped hits.
fn dropped(i: &Intent) -> Vec<(&str, &str)> {
    i.dropped
        .iter()
        .map(|h| (h.keyword.as_str(), h.negated_by.as_deref().unwrap_or("")))
        .collect()
}

fn small(src: &str) -> Policy {
    match Policy::parse(src, "test.warden") {
        Ok(p) => p,
        Err(e) => panic!("test policy must load:\n{}", e.render()),
    }
}

const SMALL_HEAD: &str = r#"
policy "t" version 1
effects none, write, delete
intents destructive > write > read
fallback read
matrix m {
              none   write  delete
  read        allow  deny   deny
  write       allow  allow  deny
  destructive allow  allow  confirm
}
mode supervised { matrix m }
confirm fields "confirmed"
tool list_things { effect none }
"#;

#[test]
fn the_lexicon_is_large_enough() {
    assert!(
        finance().keyword_count() >= 500,
        "{}",
        finance().keyword_count()
    );
}

#[test]
fn whole_words_do_not_hit_inside_longer_words() {
    // "add" is a write keyword; "address" is not.
    let i = classify("what is the billing address of this vendor");
    assert_eq!(i.name, "read");
    assert!(hits(&i).iter().all(|(k, _)| *k != "add"), "{:?}", hits(&i));
    // "new" is a write keyword; "newsletter" is not.
    let i = classify("which newsletter did the vendor receive");
    assert_eq!(i.name, "read");
    assert!(hits(&i).iter().all(|(k, _)| *k != "new"), "{:?}", hits(&i));
    // The whole words still hit.
    assert_eq!(classify("add a vendor").name, "write");
    assert_eq!(classify("open a new ledger").name, "write");
}

#[test]
fn borrador_is_a_draft_not_a_deletion() {
    let i = classify("muéstrame el borrador del contrato");
    assert_eq!(i.name, "read");
    assert!(
        hits(&i).iter().all(|(_, intent)| *intent != "destructive"),
        "{:?}",
        hits(&i)
    );
    assert_eq!(classify("borra el contrato").name, "destructive");
}

#[test]
fn stems_hit_every_inflection() {
    let p = small(&format!(
        "{SMALL_HEAD}keywords destructive {{ es \"elimin*\" }}\n"
    ));
    for q in [
        "elimina la factura",
        "quiero eliminar la factura",
        "eliminá la factura",
        "eliminando facturas viejas",
    ] {
        let i = p.classify(q);
        assert_eq!(i.name, "destructive", "{q}");
        assert_eq!(hits(&i)[0], ("elimin*", "destructive"), "{q}");
    }
}

#[test]
fn the_lexicon_reads_participles_as_questions_not_requests() {
    // The shipped lexicon lists imperative, infinitive and present forms, not participles.
    expect_intent(
        "read",
        &[
            "¿cuántas facturas se eliminaron?",
            "muestra las facturas eliminadas",
            "quantas faturas foram apagadas?",
            "چند فاکتور حذف شد؟",
            "فاکتورهای حذف شده را نشان بده",
            "muestra el resumen ejecutivo",
            "who is the editor of this report",
            "show total exports for 2023",
            "mostre a última atualização",
        ],
    );
    expect_intent(
        "destructive",
        &["elimina la factura 7", "apague a fatura 7"],
    );
    expect_intent("execute", &["ejecuta el flujo de cierre"]);
    expect_intent(
        "write",
        &["edita la factura 7", "atualize o cadastro do fornecedor"],
    );
    expect_intent("export", &["EXPORTA LAS FACTURAS"]);
}

/// Asserts that every query classifies as `intent` against the shipped lexicon.
fn expect_intent(intent: &str, queries: &[&str]) {
    for q in queries {
        let i = classify(q);
        assert_eq!(
            i.name,
            intent,
            "{q}: hits {:?}, dropped {:?}",
            hits(&i),
            dropped(&i)
        );
    }
}

#[test]
fn hits_carry_language_and_original_byte_span() {
    let q = "Please ÉLIMINE it";
    let i = classify(q);
    assert_eq!(i.name, "destructive");
    let h = &i.hits[0];
    assert_eq!(h.keyword, "elimine");
    assert_eq!(h.lang, "es");
    // "ÉLIMINE" starts at byte 7 and is 8 bytes long (É is two bytes).
    assert_eq!(h.span, (7, 15));
    assert_eq!(&q[h.span.0..h.span.1], "ÉLIMINE");
}

#[test]
fn english_negation_drops_the_hit() {
    let i = classify("don't delete the invoice, just show it");
    assert_eq!(i.name, "read");
    assert_eq!(dropped(&i), [("delete", "don't")]);
    // A phone keyboard's apostrophe.
    let i = classify("don\u{2019}t delete the invoice");
    assert_eq!(i.name, "read");
    assert_eq!(dropped(&i), [("delete", "don't")]);
    let i = classify("do not remove anything");
    assert_eq!(i.name, "read");
    assert_eq!(dropped(&i), [("remove", "do not")]);
}

#[test]
fn spanish_negation_drops_the_hit() {
    let i = classify("no borres la factura");
    assert_eq!(i.name, "read");
    assert_eq!(dropped(&i), [("borres", "no")]);
    // Beyond the window of 3 words, the negator does not reach.
    let i = classify("no, por favor ahora mismo borra la factura");
    assert_eq!(i.name, "destructive");
}

#[test]
fn portuguese_negation_with_and_without_accents() {
    for q in [
        "não apague o arquivo",
        "nao apague o arquivo",
        "NÃO APAGUE o arquivo",
    ] {
        let i = classify(q);
        assert_eq!(i.name, "read", "{q}");
        assert_eq!(i.dropped.len(), 1, "{q}");
        assert_eq!(i.dropped[0].keyword, "apag*", "{q}");
        assert!(i.hits.iter().all(|h| h.intent != "destructive"), "{q}");
    }
    // Portuguese "no" means "in the": it does not negate.
    assert_eq!(classify("apague o arquivo no servidor").name, "destructive");
}

#[test]
fn persian_negation_follows_the_verb() {
    let i = classify("این فاکتور را حذف نکن");
    assert_eq!(i.name, "read");
    assert_eq!(dropped(&i), [("حذف", "نکن")]);
    assert_eq!(classify("این فاکتور را حذف کن").name, "destructive");
}

#[test]
fn negation_stops_at_the_end_of_a_clause() {
    for q in [
        "Don't worry. Cancel it",
        "don't worry! cancel it",
        "don't wait; cancel it",
        "don't worry… cancel it",
        "don't worry？ cancel it",
        "don't worry: cancel it",
        "don't worry - cancel it",
        "don't worry — cancel it",
        "(don't worry) cancel it",
    ] {
        let i = classify(q);
        assert_eq!(i.name, "destructive", "{q}");
        assert_eq!(hits(&i), [("cancel", "destructive")], "{q}");
        assert_eq!(dropped(&i), [], "{q}");
    }
    // A comma ends the clause too; inside one clause the negator reaches.
    assert_eq!(dropped(&classify("don't, cancel it")), []);
    assert_eq!(dropped(&classify("no problem, delete invoice 7")), []);
    assert_eq!(dropped(&classify("don't cancel it")), [("cancel", "don't")]);
    // A hyphen inside a compound is no dash.
    assert_eq!(
        dropped(&classify("don't co-op cancel it")),
        [("cancel", "don't")]
    );
    // Persian: the negator after the verb, with the Arabic question mark or a full stop between.
    let i = classify("حذف کن؟ نکن");
    assert_eq!((i.name.as_str(), i.dropped.len()), ("destructive", 0));
    let i = classify("حذف کن. نکن");
    assert_eq!((i.name.as_str(), i.dropped.len()), ("destructive", 0));
    assert_eq!(dropped(&classify("حذف نکن")), [("حذف", "نکن")]);
}

#[test]
fn arabic_letters_match_persian_keywords() {
    // "پاک کن" written with Arabic kaf (ك) and the Persian one.
    assert_eq!(classify("فایل را پاك كن").name, "destructive");
    assert_eq!(classify("فایل را پاک کن").name, "destructive");
    // Arabic yeh (ي) in a Persian keyword.
    assert_eq!(
        classify("گزارش را حذف كنيد").hits[0].keyword,
        classify("گزارش را حذف کنید").hits[0].keyword
    );
}

#[test]
fn arabic_where_does_not_fire_on_persian_this() {
    // Persian "این" (this) is written like Arabic "اين" (where) once yeh is unified.
    let p = small(&format!(
        r#"policy "u" version 1
effects none
intents destructive > execute > export > write > read
fallback read
combine union
matrix m {{
              none
  read        allow
  write       allow
  export      allow
  execute     allow
  destructive allow
}}
mode supervised {{ matrix m }}
include "{}/policies/lexicon/standard.warden"
"#,
        env!("CARGO_MANIFEST_DIR")
    ));
    let i = p.classify("این گزارش");
    assert!(i.fallback, "{:?}", i.hits);
}

#[test]
fn zero_width_characters_inside_words_are_ignored() {
    for q in [
        "de\u{200B}lete the row",
        "del\u{2060}ete the row",
        "\u{FEFF}delete the row",
        "dele\u{00AD}te the row",
    ] {
        let i = classify(q);
        assert_eq!(i.name, "destructive", "{q:?}");
        assert_eq!(hits(&i)[0], ("delete", "destructive"), "{q:?}");
    }
}

#[test]
fn zwnj_matches_a_space_and_nothing() {
    // The keyword "پاک‌سازی" is written with ZWNJ: spaced, joined and ZWNJ spellings all hit.
    for q in ["پاک‌سازی فایل‌ها", "پاک سازی فایل‌ها", "پاکسازی فایل‌ها"]
    {
        let i = classify(q);
        assert_eq!(i.name, "destructive", "{q}");
    }
    // A ZWNJ in the query also matches a keyword written joined or spaced.
    let p = small(&format!(
        "{SMALL_HEAD}\nkeywords write {{ fa \"میخواهم بسازم\" }}\nkeywords destructive {{ fa \"پاک کن\" }}\n"
    ));
    assert_eq!(p.classify("می\u{200C}خواهم بسازم").name, "write");
    assert_eq!(p.classify("پاک\u{200C}کن").name, "destructive");
    assert_eq!(p.classify("پاک \u{200C}  کن").name, "destructive");
}

#[test]
fn fullwidth_letters_read_as_ascii() {
    let i = classify("ＤＥＬＥＴＥ the old rows");
    assert_eq!(i.name, "destructive");
    assert_eq!(i.hits[0].span, (0, 18));
}

#[test]
fn missing_and_extra_accents() {
    // Missing accents.
    assert_eq!(classify("exclusao do cadastro").name, "destructive");
    assert_eq!(classify("borralo ya").name, "destructive");
    // Extra accents.
    assert_eq!(classify("délete this").name, "destructive");
    assert_eq!(classify("bórra la factura").name, "destructive");
    // With `accents keep`, accents are significant.
    let p = small(&format!(
        "{SMALL_HEAD}\naccents keep\nkeywords destructive {{ pt \"devolução\" }}\n"
    ));
    assert_eq!(p.classify("devolução").name, "destructive");
    assert_eq!(p.classify("devolucao").name, "read");
    let p = small(&format!(
        "{SMALL_HEAD}\nkeywords destructive {{ pt \"devolução\" }}\n"
    ));
    assert_eq!(p.classify("devolucao").name, "destructive");
}

#[test]
fn persian_and_arabic_indic_digits_read_as_ascii() {
    let p = small(&format!(
        "{SMALL_HEAD}\nkeywords destructive {{ fa \"drop 42\" }}\n"
    ));
    assert_eq!(p.classify("drop ۴۲").name, "destructive");
    assert_eq!(p.classify("drop ٤٢").name, "destructive");
    assert_eq!(p.classify("drop 42").name, "destructive");
    assert_eq!(p.classify("drop 421").name, "read");
    assert_eq!(toolwarden::normalize("فاکتور ۱۲۳", true).text, "فاکتور 123");
}

#[test]
fn upper_case_queries() {
    assert_eq!(classify("DELETE ALL DRAFTS").name, "destructive");
    assert_eq!(classify("EXPORTA LAS FACTURAS").name, "export");
    assert_eq!(classify("Straße").name, "read");
    assert_eq!(
        toolwarden::normalize("STRASSE Straße", true).text,
        "strasse strasse"
    );
}

#[test]
fn a_query_mixing_two_languages() {
    let i = classify("please borra el invoice de ayer");
    assert_eq!(i.name, "destructive");
    assert_eq!(hits(&i), [("borra", "destructive")]);
    let i = classify("export the فاکتور list");
    assert_eq!(i.name, "export");
}

#[test]
fn empty_and_blank_queries_fall_back() {
    for q in ["", " ", "\t\n  \r\n", "\u{200B}\u{200C}\u{FEFF}", "？！"] {
        let i = classify(q);
        assert!(i.fallback, "{q:?}");
        assert_eq!(i.name, "read", "{q:?}");
        assert_eq!(i.intents, ["read"], "{q:?}");
        assert!(i.hits.is_empty() && i.dropped.is_empty(), "{q:?}");
    }
}

#[test]
fn combine_union_gives_every_intent_hit() {
    let p = small(&format!(
        "{SMALL_HEAD}\ncombine union\nkeywords write {{ en \"create\" }}\nkeywords destructive {{ en \"delete\" }}\nkeywords read {{ en \"show\" }}\n"
    ));
    let i = p.classify("create a folder, delete the old one and show me both");
    assert_eq!(i.name, "destructive");
    assert_eq!(i.intents, ["destructive", "write", "read"]);
    let i = p.classify("show and create");
    assert_eq!(i.intents, ["write", "read"]);
    // Under priority, only the deciding intent.
    let p = small(&format!(
        "{SMALL_HEAD}\nkeywords write {{ en \"create\" }}\nkeywords destructive {{ en \"delete\" }}\n"
    ));
    assert_eq!(p.classify("create then delete").intents, ["destructive"]);
}

#[test]
fn phrases_match_across_runs_of_space() {
    let p = small(&format!(
        "{SMALL_HEAD}\nkeywords destructive {{ en \"drop table\" }}\n"
    ));
    for q in [
        "drop table x",
        "drop   table x",
        "drop\t\ntable x",
        "DROP\u{00A0}TABLE x",
    ] {
        assert_eq!(p.classify(q).name, "destructive", "{q:?}");
    }
    assert_eq!(p.classify("drop tables").name, "read");
    assert_eq!(p.classify("drop the table").name, "read");
}

#[test]
fn a_one_mebibyte_query_classifies() {
    let mut q = "look at the ledger ".repeat((1024 * 1024 - 6) / 19);
    q.push_str("delete");
    assert!(q.len() <= 1024 * 1024);
    let i = classify(&q);
    assert_eq!(i.name, "destructive");
    assert!(!i.truncated);
    assert_eq!(i.hits.last().map(|h| h.span), Some((q.len() - 6, q.len())));

    // Many negated hits: every one dropped, none counted. Two occurrences a repetition (the
    // negator and the keyword): reading stops at the occurrence cap.
    let q = "no borres ".repeat(100_000);
    let i = classify(&q);
    assert!(i.fallback);
    assert_eq!(i.dropped.len(), MAX_QUERY_OCCURRENCES / 2);
    assert!(i.hits.is_empty());
    assert!(i.truncated);
    let q = "no borres ".repeat(MAX_QUERY_OCCURRENCES / 2);
    let i = classify(&q);
    assert_eq!(
        (i.dropped.len(), i.truncated),
        (MAX_QUERY_OCCURRENCES / 2, false)
    );

    // Many ZWNJs: each word is read spaced and joined, and counted once.
    let q = "پاک\u{200C}سازی ".repeat(2_000);
    let i = classify(&q);
    assert_eq!(i.name, "destructive");
    assert_eq!(i.hits.len(), 2_000);
    assert!(i.hits.iter().all(|h| h.keyword == "پاک\u{200C}سازی"));

    // Past the cap, the rest is not read and the result says so.
    let mut q = "a".repeat(1024 * 1024);
    q.push_str(" delete");
    let i = classify(&q);
    assert!(i.truncated);
    assert!(i.fallback);
}

#[test]
fn spans_stay_on_character_boundaries_when_one_character_becomes_several() {
    // U+2100 (account of) decomposes to "a/c": the hit for "cancel" starts inside it, so its
    // span in the query must cover the whole character.
    for (q, keyword, span) in [
        ("\u{2100}ancel my order", "cancel", (0, 8)),
        ("\u{2100}opy the file", "copy", (0, 6)),
        ("apague\u{2100}", "apag*", (0, 9)),
    ] {
        let i = classify(q);
        let h = i
            .hits
            .iter()
            .find(|h| h.keyword == keyword)
            .unwrap_or_else(|| panic!("{q:?}: no hit for {keyword}: {:?}", i.hits));
        assert_eq!(h.span, span, "{q:?}");
        assert!(q.get(h.span.0..h.span.1).is_some(), "{q:?}");
    }
}

#[test]
fn a_span_does_not_reach_over_trailing_white_space() {
    assert_eq!(classify("delete ").hits[0].span, (0, 6));
    assert_eq!(classify("delete  \t").hits[0].span, (0, 6));
    assert_eq!(classify("Délete\u{3000}").hits[0].span, (0, 7));
}

#[test]
fn a_space_inside_a_compatibility_character_is_white_space() {
    // U+00A8 (diaeresis) is a space and a combining diaeresis: the phrase "wipe out" still
    // reads across it.
    let i = classify("wipe \u{a8} out the table");
    assert!(
        i.hits.iter().any(|h| h.keyword == "wipe out"),
        "{:?}",
        i.hits
    );
    assert_eq!(
        toolwarden::normalize("wipe \u{a8} out", true).text,
        "wipe out"
    );
    // The acute accent is the exception: typed for an apostrophe ("don´t"), it reads as one.
    assert_eq!(toolwarden::normalize("don\u{b4}t", true).text, "don't");
    assert_eq!(
        dropped(&classify("don\u{b4}t delete it")),
        [("delete", "don't")]
    );
}

#[test]
fn a_negator_read_across_many_zwnj_still_negates() {
    let q = "w\u{200C}i\u{200C}t\u{200C}h\u{200C}o\u{200C}u\u{200C}t deleting";
    let i = classify(q);
    assert_eq!(i.name, "read", "{:?}", i.dropped);
    assert_eq!(i.dropped[0].negated_by.as_deref(), Some("without"));
}

#[test]
fn no_needle_begins_at_a_zwnj_before_a_mark() {
    // After ZWNJ, a mark that Unicode counts as a letter (here the Devanagari vowel sign
    // U+093E) begins a word at the ZWNJ itself. No keyword, negator or `except` entry is read
    // from there, even one that begins with that mark.
    let head = "policy \"m\" version 1\nmode m { }\neffects none\nintents w > r\nfallback r\n";
    let q = "x\u{200C}\u{093E} delete";
    let keyword = small(&format!("{head}keywords w {{ hi \"\u{093E}\" }}\n"));
    let i = keyword.classify("x\u{200C}\u{093E}");
    assert_eq!((i.name.as_str(), i.fallback, i.hits.len()), ("r", true, 0));
    let stem = small(&format!("{head}keywords w {{ hi \"\u{093E}*\" }}\n"));
    let i = stem.classify("x\u{200C}\u{093E}abc");
    assert_eq!((i.name.as_str(), i.fallback, i.hits.len()), ("r", true, 0));
    for entry in [
        "negation before 3 { hi \"\u{093E}\" }",
        "except { hi \"\u{093E} delete\" }",
    ] {
        let p = small(&format!("{head}keywords w {{ en \"delete\" }}\n{entry}\n"));
        let i = p.classify(q);
        assert_eq!(
            (i.name.as_str(), hits(&i), dropped(&i)),
            ("w", vec![("delete", "w")], vec![]),
            "{entry}"
        );
    }
}

#[test]
fn zwnj_spaces_are_read_all_spaced_or_all_joined() {
    // Every spacing of "aaaa" is a keyword; the query's spaces all stand for ZWNJ. A walk reads
    // them all as spaces or all as nothing, never a mix: from each of the three starts with
    // four letters left, "a a a a" and "aaaa" hit, and nothing else.
    let variants = [
        "aaaa", "a aaa", "aa aa", "aaa a", "a a aa", "a aa a", "aa a a", "a a a a",
    ];
    let list: Vec<String> = variants.iter().map(|v| format!("\"{v}\"")).collect();
    let p = small(&format!(
        "{SMALL_HEAD}\nkeywords write {{ en {} }}\n",
        list.join(", ")
    ));
    let q = "a\u{200C}".repeat(6);
    let i = p.classify(&q);
    let mut got: Vec<(&str, usize)> = i
        .hits
        .iter()
        .map(|h| (h.keyword.as_str(), h.span.0))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("a a a a", 0),
            ("a a a a", 4),
            ("a a a a", 8),
            ("aaaa", 0),
            ("aaaa", 4),
            ("aaaa", 8)
        ]
    );
}

#[test]
fn separators_and_hyphens_read_as_their_ascii_forms() {
    assert_eq!(
        toolwarden::normalize("۳٫۵ و ۱٬۰۰۰", true).text,
        "3.5 و 1,000"
    );
    assert_eq!(
        toolwarden::normalize("gpt\u{2011}3.5", true).text,
        "gpt-3.5"
    );
    assert_eq!(toolwarden::normalize("don\u{2032}t", true).text, "don't");
}

#[test]
fn the_lexicon_negates_wishes_and_nothing() {
    for (q, keyword, negator) in [
        ("I do not want you to delete invoice 7", "delete", "do not"),
        ("نمی‌خواهم فاکتور را حذف کنم", "حذف", "نمی‌خواهم"),
        ("delete nothing", "delete", "nothing"),
    ] {
        let i = classify(q);
        assert_eq!(i.name, "read", "{q}");
        assert_eq!(dropped(&i), [(keyword, negator)], "{q}");
    }
}

#[test]
fn negation_reaches_its_window_and_not_a_past_auxiliary_of_the_present() {
    expect_intent(
        "destructive",
        &[
            "Not needed anymore so delete it",
            "Don't worry about any of it and delete it",
            "Não preciso mais disso apague",
            "Ya está cancela el pedido",
            "نمی‌خوام اینو نگه دارم حذفش کن",
        ],
    );
}
