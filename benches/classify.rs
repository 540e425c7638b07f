//! Criterion benches for query classification (issue 3): `classify` of short and ~200-byte
//! queries in en/es/pt/fa against `policies/finance.warden` (which includes the standard
//! lexicon), and loading (parse + check + compile) of that policy.
//!
//! Run: `cargo bench --bench classify`. On a machine shared with other work, wall time counts the
//! time other processes hold the CPU; `TOOLWARDEN_BENCH_CPU=1 cargo bench --bench classify`
//! measures this thread's CPU time instead (`CLOCK_THREAD_CPUTIME_ID`).

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{black_box, Criterion};
use toolwarden::Policy;

/// This thread's CPU time, as a criterion measurement.
struct ThreadCpu;

fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpu {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_now().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, v: &Duration) -> f64 {
        v.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

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
         and then export the mismatched lines to a spreadsheet so I can review them tomorrow morning? Thanks a lot!",
    ),
    (
        "es_200",
        "Revisa los pagos pendientes de los proveedores del trimestre pasado, compáralos con el \
         libro mayor y después envíame un resumen por correo con las diferencias que encuentres, muchas gracias!!",
    ),
    (
        "pt_200",
        "Você pode verificar as notas fiscais emitidas na semana passada, conferir os valores com o \
         extrato do banco e depois cadastrar um novo fornecedor com os dados que mandei ontem à tarde? Obrigado!",
    ),
    (
        "en_context_200",
        "Do not, under any circumstances, delete the March invoices; instead of exporting \
         \"all_rows.csv\", show me which ones were cancelled and summarize this: \"remove the old vendors\". Thank you so much!",
    ),
    // One construct each, as a user writes it: a prohibition, a quotation, an "instead of".
    (
        "en_negated_200",
        "Please don't delete anything yet; just list the invoices from March that are still \
         unpaid and show me their totals and due dates, sorted by vendor name, so I can review them later today, thanks.",
    ),
    (
        "en_quoted_200",
        "Can you summarize this email from our supplier for me: \"Hi team, please remove the old \
         vendors from the list before Friday and send us the updated file.\" Thanks a lot, it really helps us all!",
    ),
    (
        "en_instead_200",
        "Instead of deleting the duplicate invoices from last quarter, could you please export them \
         to a spreadsheet and mark them as duplicates so that the accounting team can check them all next week?",
    ),
    (
        "fa_200",
        "لطفاً فاکتورهای ماه گذشته را با صورت‌حساب بانک مقایسه کن و اگر مغایرتی دیدی یک گزارش کوتاه برای من بفرست، ممنون",
    ),
];

fn bench_classify<M: Measurement + 'static>(c: &mut Criterion<M>) {
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

fn bench_compile<M: Measurement + 'static>(c: &mut Criterion<M>) {
    let text = match std::fs::read_to_string("policies/finance.warden") {
        Ok(t) => t,
        Err(e) => panic!("policies/finance.warden must be readable: {e}"),
    };
    c.bench_function("compile finance.warden + standard lexicon", |b| {
        b.iter(|| Policy::parse(black_box(&text), "policies/finance.warden"))
    });
}

fn main() {
    if std::env::var_os("TOOLWARDEN_BENCH_CPU").is_some() {
        let mut c = Criterion::default()
            .with_measurement(ThreadCpu)
            .configure_from_args();
        bench_classify(&mut c);
        bench_compile(&mut c);
        c.final_summary();
    } else {
        let mut c = Criterion::default().configure_from_args();
        bench_classify(&mut c);
        bench_compile(&mut c);
        c.final_summary();
    }
}
