//! How results look to a person: aligned tables for lists, `Key: value` blocks for single
//! objects. Pure functions from API objects to text, so they are tested without a server.

use chrono::{DateTime, Utc};
use terraplane_client::{Run, RunEvent, Stack, StateLockInfo, StateVersion, Viewer};

/// Columns separated by three spaces, each as wide as its widest cell; the last column is
/// not padded so lines carry no trailing blanks.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<I, S>(headers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn render(&self) -> String {
        let cols = self
            .headers
            .len()
            .max(self.rows.iter().map(Vec::len).max().unwrap_or(0));
        let mut widths = vec![0usize; cols];
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = r.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    line.push_str("   ");
                }
                line.push_str(cell);
                if i + 1 < cols {
                    line.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `Key:` labels aligned, then the values.
pub fn details(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, v) in pairs {
        let label = format!("{k}:");
        out.push_str(format!("{label:<w$} {v}").trim_end());
        out.push('\n');
    }
    out
}

pub fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn or_dash(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_owned(),
        _ => "-".to_owned(),
    }
}

fn short_sha(s: Option<&str>) -> String {
    or_dash(s.map(|s| s.get(..10).unwrap_or(s)))
}

fn yes_no(b: bool) -> String {
    if b { "yes".into() } else { "no".into() }
}

pub fn viewer(v: &Viewer, endpoint: &str) -> String {
    details(&[
        ("Name", v.name.clone()),
        ("ID", v.id.clone()),
        ("Role", v.role.clone()),
        (
            "Organization",
            format!("{} ({})", v.organization.slug, v.organization.name),
        ),
        ("Endpoint", endpoint.to_owned()),
    ])
}

pub fn stacks_table(stacks: &[Stack]) -> String {
    let mut t = Table::new([
        "ID",
        "NAME",
        "REPOSITORY",
        "BRANCH",
        "AUTODEPLOY",
        "LOCKED BY",
        "LABELS",
    ]);
    for s in stacks {
        t.row([
            s.id.clone(),
            s.name.clone(),
            s.repository.clone(),
            s.branch.clone(),
            yes_no(s.autodeploy),
            or_dash(s.lock.as_ref().map(|l| l.holder.as_str())),
            or_dash(Some(&s.labels.join(","))),
        ]);
    }
    t.render()
}

fn state_lock_line(l: &StateLockInfo) -> String {
    let mut s = format!("{} since {}", l.holder, time(&l.created_at));
    if let Some(r) = &l.run_id {
        s.push_str(&format!(" (run {r})"));
    }
    if l.needs_recovery {
        s.push_str(" NEEDS RECOVERY");
    }
    s
}

pub fn stack(s: &Stack) -> String {
    let lock = match &s.lock {
        Some(l) => match &l.note {
            Some(n) if !n.is_empty() => format!("{} since {} ({n})", l.holder, time(&l.locked_at)),
            _ => format!("{} since {}", l.holder, time(&l.locked_at)),
        },
        None => "-".into(),
    };
    let mut pairs = vec![
        ("ID", s.id.clone()),
        ("Name", s.name.clone()),
        ("Description", or_dash(Some(&s.description))),
        ("Repository", s.repository.clone()),
        ("Branch", s.branch.clone()),
        ("Project root", or_dash(Some(&s.project_root))),
        (
            "Tool",
            match &s.tool_version {
                Some(v) if !v.is_empty() => format!("{} {v}", s.tool),
                _ => s.tool.clone(),
            },
        ),
        ("Autodeploy", yes_no(s.autodeploy)),
        ("Labels", or_dash(Some(&s.labels.join(", ")))),
        ("Worker pool", s.worker_pool.clone()),
        ("Locked by", lock),
    ];
    if let Some(l) = &s.state_lock {
        pairs.push(("State lock", state_lock_line(l)));
    }
    pairs.push(("Created", time(&s.created_at)));
    pairs.push(("Updated", time(&s.updated_at)));
    details(&pairs)
}

pub fn runs_table(runs: &[Run]) -> String {
    let mut t = Table::new(["ID", "TYPE", "STATE", "COMMIT", "PLAN", "TRIGGERED BY", "CREATED"]);
    for r in runs {
        t.row([
            r.id.clone(),
            r.run_type.to_string(),
            r.state.to_string(),
            short_sha(r.commit_sha.as_deref()),
            r.plan_summary.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            r.triggered_by.clone(),
            time(&r.created_at),
        ]);
    }
    t.render()
}

pub fn run(r: &Run) -> String {
    let mut pairs = vec![
        ("ID", r.id.clone()),
        ("Stack", r.stack_id.clone()),
        (
            "Type",
            if r.drift_detection {
                format!("{} (drift detection)", r.run_type)
            } else {
                r.run_type.to_string()
            },
        ),
        ("State", r.state.to_string()),
        ("Commit", or_dash(r.commit_sha.as_deref())),
        ("Triggered by", r.triggered_by.clone()),
        (
            "Plan",
            r.plan_summary.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
        ),
    ];
    if let Some(e) = &r.error {
        pairs.push(("Error", e.clone()));
    }
    if let Some(id) = &r.runner_id {
        pairs.push(("Runner", id.clone()));
    }
    pairs.push(("Created", time(&r.created_at)));
    pairs.push(("Updated", time(&r.updated_at)));
    let mut out = details(&pairs);
    if !r.events.is_empty() {
        out.push('\n');
        out.push_str(&events_table(&r.events));
    }
    out
}

pub fn events_table(events: &[RunEvent]) -> String {
    let mut t = Table::new(["AT", "STATE", "NOTE"]);
    for e in events {
        t.row([time(&e.at), e.state.to_string(), or_dash(e.note.as_deref())]);
    }
    t.render()
}

/// One line of `--wait` progress.
pub fn transition(at: &DateTime<Utc>, state: &str, note: Option<&str>) -> String {
    match note {
        Some(n) if !n.is_empty() => format!("{}  {state}  {n}\n", time(at)),
        _ => format!("{}  {state}\n", time(at)),
    }
}

pub fn versions_table(versions: &[StateVersion]) -> String {
    let mut t = Table::new(["SERIAL", "VERSION", "LINEAGE", "SIZE", "RUN", "CREATED BY", "CREATED"]);
    for v in versions {
        t.row([
            v.serial.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            v.version.to_string(),
            or_dash(v.lineage.as_deref()),
            v.size.to_string(),
            or_dash(v.run_id.as_deref()),
            v.created_by.clone(),
            time(&v.created_at),
        ]);
    }
    t.render()
}

pub fn state_lock(l: &StateLockInfo) -> String {
    details(&[
        ("Lock ID", l.id.clone()),
        ("Holder", l.holder.clone()),
        ("Run", or_dash(l.run_id.as_deref())),
        ("Needs recovery", yes_no(l.needs_recovery)),
        ("Locked at", time(&l.created_at)),
    ])
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use terraplane_client::{PlanSummary, RunState, RunType, StackLock};

    use super::*;

    fn at(sec: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, sec)
            .single()
            .unwrap_or_default()
    }

    fn a_run(id: &str, state: RunState, plan: Option<PlanSummary>) -> Run {
        Run {
            id: id.into(),
            stack_id: "net".into(),
            run_type: RunType::Tracked,
            state,
            terminal: false,
            commit_sha: Some("0123456789abcdef".into()),
            triggered_by: "ada@example.com".into(),
            drift_detection: false,
            plan_summary: plan,
            has_changes: None,
            error: None,
            outputs: None,
            runner_id: None,
            created_at: at(1),
            updated_at: at(2),
            events: vec![],
        }
    }

    fn a_stack(id: &str, locked: bool) -> Stack {
        Stack {
            id: id.into(),
            name: format!("Stack {id}"),
            description: String::new(),
            repository: "https://git.example.com/infra.git".into(),
            branch: "main".into(),
            project_root: String::new(),
            tool: "terraform".into(),
            tool_version: None,
            autodeploy: locked,
            labels: if locked {
                vec!["prod".into(), "net".into()]
            } else {
                vec![]
            },
            worker_pool: "default".into(),
            lock: locked.then(|| StackLock {
                holder: "bob".into(),
                note: Some("migrating".into()),
                locked_at: at(3),
            }),
            state_lock: None,
            created_at: at(0),
            updated_at: at(0),
        }
    }

    #[test]
    fn table_aligns_columns_without_trailing_blanks() {
        let mut t = Table::new(["A", "LONG HEADER", "C"]);
        t.row(["wide cell", "x", ""]);
        t.row(["é", "", "last"]);
        assert_eq!(
            t.render(),
            "A           LONG HEADER   C\nwide cell   x\né                         last\n"
        );
    }

    #[test]
    fn runs_table_shows_state_plan_and_short_commit() {
        let runs = [
            a_run(
                "r-1",
                RunState::Unconfirmed,
                Some(PlanSummary {
                    add: 2,
                    change: 1,
                    destroy: 0,
                }),
            ),
            a_run("r-22", RunState::Other("PENDING_REVIEW".into()), None),
        ];
        let expected = "\
ID     TYPE      STATE            COMMIT       PLAN       TRIGGERED BY      CREATED
r-1    TRACKED   UNCONFIRMED      0123456789   +2 ~1 -0   ada@example.com   2026-03-01 12:00:01
r-22   TRACKED   PENDING_REVIEW   0123456789   -          ada@example.com   2026-03-01 12:00:01
";
        assert_eq!(runs_table(&runs), expected);
    }

    #[test]
    fn stacks_table_shows_lock_holder_and_labels() {
        let expected = "\
ID    NAME        REPOSITORY                          BRANCH   AUTODEPLOY   LOCKED BY   LABELS
net   Stack net   https://git.example.com/infra.git   main     yes          bob         prod,net
app   Stack app   https://git.example.com/infra.git   main     no           -           -
";
        assert_eq!(stacks_table(&[a_stack("net", true), a_stack("app", false)]), expected);
    }

    #[test]
    fn run_details_list_error_and_events() {
        let mut r = a_run("r-1", RunState::Failed, None);
        r.error = Some("terraform plan exited 1".into());
        r.events = vec![
            RunEvent {
                state: RunState::Queued,
                note: None,
                at: at(1),
            },
            RunEvent {
                state: RunState::Failed,
                note: Some("plan failed".into()),
                at: at(9),
            },
        ];
        let out = run(&r);
        assert!(
            out.starts_with("ID:           r-1\nStack:        net\nType:         TRACKED\nState:        FAILED\n"),
            "{out}"
        );
        assert!(out.contains("Error:        terraform plan exited 1\n"), "{out}");
        assert!(out.ends_with(
            "\nAT                    STATE    NOTE\n2026-03-01 12:00:01   QUEUED   -\n2026-03-01 12:00:09   FAILED   plan failed\n"
        ), "{out}");
    }

    #[test]
    fn stack_details_show_the_lock_note() {
        let out = stack(&a_stack("net", true));
        assert!(
            out.contains("Locked by:    bob since 2026-03-01 12:00:03 (migrating)\n"),
            "{out}"
        );
        assert!(out.contains("Description:  -\n"), "{out}");
    }
}
