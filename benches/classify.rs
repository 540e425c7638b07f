//! Criterion benches for query classification (issue 3): `classify` of short and ~200-byte
//! queries in en/es/pt/fa against `policies/finance.warden` (which includes the standard
//! lexicon), and loading (parse + check + compile) of that policy.
//!
//! Run: `cargo bench --bench classify`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use toolwarden::Policy;

/// Queries written for this bench (not taken from any corpus). The long ones are padded to about
/// 200 bytes of UTF-8 with more of the same sentence.
const QUERIES: &[(&str, &str)] = &[
    ("en_short", "please delete invoice 7"),
    ("es_short", "borra la factura de ayer"),
    ("pt_short", "não apague o relatório"),
    ("fa_short", "فاکتور شماره ۷ را حذف کن"),
    (
        "en_200",
        "Could you look through last month's supplier statements, compare them against the ledger \
         and then export the mismatched lines to a spreadsheet so I can review them tomorrow morning?",
    ),
    (
        "es_200",
        "Revisa los pagos pendientes de los proveedores del trimestre pasado, compáralos con el \
         libro mayor y después envíame un resumen por correo con las diferencias que encuentres, gracias",
    ),
    (
        "pt_200",
        "Você pode verificar as notas fiscais emitidas na semana passada, conferir os valores com o \
         extrato do banco e depois cadastrar um novo fornecedor com os dados que mandei ontem à tarde?",
    ),
    (
        "fa_200",
        "لطفاً فاکتورهای ماه گذشته را با صورت‌حساب بانک مقایسه کن و اگر مغایرتی دیدی یک گزارش کوتاه برای من بفرست",
    ),
];

fn bench_classify(c: &mut Criterion) {
    let policy = match Policy::from_file("policies/finance.warden") {
        Ok(p) => p,
        Err(e) => panic!("policies/finance.warden must load: {e}"),
    };
    assert!(policy.keyword_count() >= 500);
    let mut group = c.benchmark_group("classify");
    for (name, q) in QUERIES {
        group.bench_function(format!("{name} ({} bytes)", q.len()), |b| {
            b.iter(|| policy.classify(black_box(q)))
        });
    }
    group.finish();
}

fn bench_compile(c: &mut Criterion) {
    let text = match std::fs::read_to_string("policies/finance.warden") {
        Ok(t) => t,
        Err(e) => panic!("policies/finance.warden must be readable: {e}"),
    };
    c.bench_function("compile finance.warden + standard lexicon", |b| {
        b.iter(|| Policy::parse(black_box(&text), "policies/finance.warden"))
    });
}

criterion_group!(benches, bench_classify, bench_compile);
criterion_main!(benches);
