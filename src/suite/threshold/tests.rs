use super::*;

fn key(s: &str) -> MetricKey {
    s.parse().unwrap()
}

/// A percentile of the server's histogram is known only as at most
/// its bucket's bound: `<`/`<=` judge it, `>`, `>=` and `==` cannot;
/// its mean is exact and takes any comparison.
#[test]
fn a_histograms_percentile_is_judged_only_from_above() {
    assert!(parse_comparison(key("server.ttft.p99"), "<= 2s").is_ok());
    assert!(parse_comparison(key("server.queue_time.mean"), "< baseline * 2").is_ok());
    for relative in [
        "baseline * 1.1",
        "variant(fast)",
        "history.median(5)",
        "no_regression",
    ] {
        let why =
            parse_comparison(key("server.queue_time.p99"), &format!("<= {relative}")).unwrap_err();
        assert!(
            why.contains("would hide any change within a bucket"),
            "{why}"
        );
    }
    assert!(parse_comparison(key("server.e2e.mean"), ">= 1s").is_ok());
    for op in [">=", ">", "=="] {
        let why = parse_comparison(key("server.itl.p50"), &format!("{op} 5ms")).unwrap_err();
        assert!(
            why.contains("gives a percentile only as the upper bound of the bucket that holds it")
                && why.ends_with("or gate `server.itl.mean` (exact)"),
            "{why}"
        );
    }
    for stat in ["min", "stddev"] {
        let err = format!("server.tpot.{stat}")
            .parse::<MetricKey>()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "`server.tpot` is read from the server's histogram buckets, which keep no `{stat}`: name `.mean` or a percentile (`.p99`)"
            )
        );
    }
}

#[test]
fn parses_comparisons_with_units() {
    let t = parse_comparison(key("ttft.p99"), "<= 2s").unwrap();
    assert_eq!((t.op, &t.bound), (Op::Le, &Bound::Value(2.0)));
    let t = parse_comparison(key("itl.p50"), "<250ms").unwrap();
    assert_eq!(t.op, Op::Lt);
    assert!(matches!(t.bound, Bound::Value(v) if (v - 0.25).abs() < 1e-12));
    let t = parse_comparison(key("decode_tok_s.mean"), ">= 12.5").unwrap();
    assert_eq!((t.op, &t.bound), (Op::Ge, &Bound::Value(12.5)));
    let t = parse_comparison(key("errors"), "== 0").unwrap();
    assert_eq!((t.op, &t.bound), (Op::Eq, &Bound::Value(0.0)));
    assert_eq!(t.to_string(), "errors == 0");
}

#[test]
fn parses_variant_comparisons() {
    let t = parse_comparison(key("decode_tok_s.mean"), ">= variant(baseline) * 1.05").unwrap();
    assert_eq!(
        t.bound,
        Bound::Variant("baseline".into(), Relative::Times(1.05))
    );
    assert_eq!(
        t.to_string(),
        "decode_tok_s.mean >= variant(baseline) * 1.05"
    );
    let t = parse_comparison(key("ttft.p99"), "<= variant(a)").unwrap();
    assert_eq!(t.bound, Bound::Variant("a".into(), Relative::Same));
    assert!(parse_comparison(key("ttft.p99"), "<= variant() * 2").is_err());
    assert!(parse_comparison(key("ttft.p99"), "<= variant(a * 2").is_err());
    assert!(parse_comparison(key("ttft.p99"), "<= variant(a) / 2").is_err());
}

#[test]
fn parses_baseline_comparisons() {
    let rel = |k: &str, text: &str| parse_comparison(key(k), text).unwrap();
    let t = rel("decode_tok_s.mean", ">= baseline * 0.95");
    assert_eq!(t.bound, Bound::Baseline(Relative::Times(0.95)));
    assert!((Relative::Times(0.95).apply(200.0) - 190.0).abs() < 1e-9);
    assert_eq!(t.to_string(), "decode_tok_s.mean >= baseline * 0.95");
    let t = rel("ttft.p99", "<= baseline + 10%");
    assert_eq!(t.bound, Bound::Baseline(Relative::Percent(10.0)));
    assert!((Relative::Percent(10.0).apply(0.2) - 0.22).abs() < 1e-9);
    assert_eq!(t.to_string(), "ttft.p99 <= baseline + 10%");
    let t = rel("itl.p99", "<= baseline + 500us");
    assert_eq!(t.bound, Bound::Baseline(Relative::Plus(0.0005)));
    assert!((Relative::Plus(0.0005).apply(0.01) - 0.0105).abs() < 1e-12);
    assert_eq!(t.to_string(), "itl.p99 <= baseline + 500us");
    assert_eq!(
        rel("output_tok_s", ">= baseline - 5%").bound,
        Bound::Baseline(Relative::Percent(-5.0))
    );
    assert_eq!(
        rel("errors", "<= baseline").bound,
        Bound::Baseline(Relative::Same)
    );
    for bad in [
        ">= baseline * 0",
        ">= baseline / 2",
        "<= baseline + 10",
        ">= baseline + lots%",
    ] {
        let k = if bad.starts_with("<=") {
            "ttft.p99"
        } else {
            "output_tok_s"
        };
        assert!(parse_comparison(key(k), bad).is_err(), "{bad}");
    }
}

#[test]
fn rejects_bad_comparisons() {
    assert!(
        parse_comparison(key("ttft.p99"), "<= 2")
            .unwrap_err()
            .contains("no unit")
    );
    assert!(
        parse_comparison(key("ttft.p99"), "<= 2d")
            .unwrap_err()
            .contains("unknown unit")
    );
    assert!(
        parse_comparison(key("errors"), "0")
            .unwrap_err()
            .contains("operator")
    );
    assert!(parse_comparison(key("errors"), "== zero").is_err());
    assert!(parse_comparison(key("output_tok_s"), ">= inf").is_err());
}

/// `token_drift_chunks <= 1.00%` as the output prints it, and a rate
/// with its unit, are read as written.
#[test]
fn units_as_printed_are_accepted() {
    let t = parse_comparison(key("token_drift_chunks"), "<= 1%").unwrap();
    assert_eq!(t.bound, Bound::Value(1.0));
    let t = parse_comparison(key("token_drift_metrics"), "<= 1.00 %").unwrap();
    assert_eq!(t.bound, Bound::Value(1.0));
    let t = parse_comparison(key("decode_tok_s.mean"), ">= 12.5 tok/s").unwrap();
    assert_eq!(t.bound, Bound::Value(12.5));
    let t = parse_comparison(key("requests_per_s"), ">= 2 req/s").unwrap();
    assert_eq!(t.bound, Bound::Value(2.0));
    let err = parse_comparison(key("decode_tok_s.mean"), ">= 12.5 req/s").unwrap_err();
    assert!(err.contains("decode_tok_s.mean is in tok/s"), "{err}");
    assert!(parse_comparison(key("errors"), "== 0%").is_err());
}

/// Every threshold as the output prints it is accepted back and prints
/// the same again: every key, every operator, every kind of bound.
#[test]
fn every_threshold_as_printed_is_accepted_back() {
    let relatives = [
        Relative::Same,
        Relative::Times(0.95),
        Relative::Percent(10.0),
        Relative::Percent(-5.0),
        Relative::Plus(0.05),
        Relative::Plus(-0.5),
    ];
    let mut checked = 0;
    for k in crate::suite::metric::all_keys() {
        let key = key(&k);
        let mut bounds = vec![Bound::Value(1.5), Bound::Value(0.0), Bound::Value(0.0004)];
        for r in relatives {
            bounds.push(Bound::Baseline(r));
            bounds.push(Bound::Variant("fast".into(), r));
            bounds.push(Bound::History(Recent::Median(10), r));
            bounds.push(Bound::History(Recent::Mean(3), r));
        }
        bounds.push(Bound::NoRegression);
        for op in [Op::Ge, Op::Gt, Op::Le, Op::Lt, Op::Eq] {
            for bound in &bounds {
                if (op == Op::Eq && *bound == Bound::NoRegression)
                    || (key.is_bucket_bound()
                        && (!matches!(op, Op::Le | Op::Lt) || !matches!(bound, Bound::Value(_))))
                {
                    continue;
                }
                let t = Threshold {
                    key,
                    op,
                    bound: bound.clone(),
                };
                let printed = t.to_string();
                let side = printed
                    .strip_prefix(&format!("{k} "))
                    .expect("the key first");
                let back = parse_comparison(key, side)
                    .unwrap_or_else(|e| panic!("`{printed}` is not accepted back: {e}"));
                assert_eq!(back.to_string(), printed);
                // The kind of bound survives (a `+ 1.00%` offset is not
                // read back as a relative percentage).
                assert_eq!(
                    std::mem::discriminant(&back.bound),
                    std::mem::discriminant(&t.bound),
                    "{printed}"
                );
                if let (Bound::Baseline(a), Bound::Baseline(b)) = (&back.bound, &t.bound) {
                    assert_eq!(
                        std::mem::discriminant(a),
                        std::mem::discriminant(b),
                        "{printed}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

#[test]
fn parses_history_comparisons() {
    let t = parse_comparison(key("decode_tok_s.mean"), ">= history.median(10) * 0.97").unwrap();
    assert_eq!(
        t.bound,
        Bound::History(Recent::Median(10), Relative::Times(0.97))
    );
    assert_eq!(
        t.to_string(),
        "decode_tok_s.mean >= history.median(10) * 0.97"
    );
    let t = parse_comparison(key("ttft.p99"), "<= history.mean(5) + 10%").unwrap();
    assert_eq!(
        t.bound,
        Bound::History(Recent::Mean(5), Relative::Percent(10.0))
    );
    let t = parse_comparison(key("ttft.p99"), "<= no_regression").unwrap();
    assert_eq!((t.op, &t.bound), (Op::Le, &Bound::NoRegression));
    for bad in [
        ">= history.median(1)",
        ">= history.median(x)",
        ">= history.p99(10)",
        ">= history.median",
        "== no_regression",
        "!= no_regression",
    ] {
        assert!(
            parse_comparison(key("decode_tok_s.mean"), bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn comparisons_hold() {
    assert!(Op::Ge.holds(12.5, 12.5));
    assert!(!Op::Gt.holds(12.5, 12.5));
    assert!(Op::Eq.holds(0.0, 0.0));
    assert!(!Op::Eq.holds(1.0, 0.0));
    assert!(Op::Ne.holds(1.0, 0.0) && !Op::Ne.holds(0.0, 0.0));
    assert!(Op::Le.holds(1.9, 2.0));
    let t = parse_comparison("errors".parse().unwrap(), "!= 0").unwrap();
    assert_eq!((t.op, &t.bound), (Op::Ne, &Bound::Value(0.0)));
    assert_eq!(t.to_string(), "errors != 0");
}
