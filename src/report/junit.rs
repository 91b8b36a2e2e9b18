//! JUnit XML: one `<testsuite>` per suite run, one `<testcase>` per trial,
//! the whole failure message in each failure, the suite file and line of
//! each item as the `file` and `line` attributes of its testcase.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::record::RunRecord;
use crate::text::for_xml;

/// The record as JUnit XML.
pub fn render(record: &RunRecord) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new(format!("servegate {}", record.run_id));
    let skipped = record.skipped_notes();
    let mut labels: Vec<&str> = Vec::new();
    for t in &record.trials {
        if !labels.contains(&t.id.suite.as_str()) {
            labels.push(&t.id.suite);
        }
    }
    for label in labels {
        let mut suite = TestSuite::new(for_xml(label));
        for t in record.trials.iter().filter(|t| t.id.suite == label) {
            let status = match &t.message {
                None => TestCaseStatus::success(),
                Some(message) => {
                    let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    s.set_message(for_xml(message.lines().next().unwrap_or("")));
                    s.set_description(for_xml(message));
                    s
                }
            };
            // Within its suite's test suite: `<stage>::<item>` (`load`).
            let short = t.id.within_suite();
            let mut case = TestCase::new(for_xml(&short), status);
            case.set_classname(for_xml(label));
            case.set_time(Duration::from_secs_f64(t.duration_s.max(0.0)));
            // `file` and `line` as attributes are what GitHub's and GitLab's
            // test reporters read; the properties stay for older readers.
            case.extra
                .insert("file".into(), for_xml(&t.file).as_ref().into());
            case.extra.insert("line".into(), t.line.to_string().into());
            case.add_property(("file", for_xml(&t.file).as_ref()));
            case.add_property(("line", t.line.to_string().as_str()));
            if let Some((_, note)) = skipped.iter().find(|(name, _)| *name == t.name) {
                case.set_system_out(for_xml(note).as_ref());
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string()
}
