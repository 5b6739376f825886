//! How results look to a person: aligned tables for lists, `Key: value` blocks for single
//! objects. Pure functions from API objects to text, so they are tested without a server.

use chrono::{DateTime, Utc};
use terraplane_client::{
    ApiKey, ApiKeyCreated, AuditEvent, AuditVerification, AwsIntegration, Context, ContextAttachment, DriftRecord,
    DriftSchedule, DriftedResource, EffectiveVariable, Member, NotificationDelivery, NotificationEndpoint,
    NotificationEvent, Organization, Policy, PolicyEvaluation, PolicySimulation, PolicyVersion, RoleBinding, Run,
    RunEvent, RunReview, Space, Stack, StackDrift, StateLockInfo, StateVersion, Team, Variable, VariableKind, Viewer,
};

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
        "DRIFT",
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
            s.drift_status.to_string(),
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
        ("Drift", drift_line(&s.drift_status, s.drift_checked_at.as_ref())),
        ("On drift", s.drift_reaction.to_string()),
    ];
    if let Some(l) = &s.state_lock {
        pairs.push(("State lock", state_lock_line(l)));
    }
    pairs.push(("Created", time(&s.created_at)));
    pairs.push(("Updated", time(&s.updated_at)));
    details(&pairs)
}

/// `DRIFTED (checked 2026-03-01 12:00:00)`, `UNKNOWN (never checked)`.
fn drift_line(status: &impl std::fmt::Display, checked: Option<&DateTime<Utc>>) -> String {
    match checked {
        Some(t) => format!("{status} (checked {})", time(t)),
        None => format!("{status} (never checked)"),
    }
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

pub fn orgs_table(orgs: &[Organization]) -> String {
    let mut t = Table::new(["SLUG", "NAME", "ID"]);
    for o in orgs {
        t.row([o.slug.clone(), o.name.clone(), o.id.clone()]);
    }
    t.render()
}

pub fn spaces_table(spaces: &[Space]) -> String {
    let mut t = Table::new(["ID", "NAME", "PARENT", "INHERIT", "DESCRIPTION"]);
    for s in spaces {
        t.row([
            s.id.clone(),
            s.name.clone(),
            or_dash(s.parent.as_deref()),
            yes_no(s.inherit),
            or_dash(Some(&s.description)),
        ]);
    }
    t.render()
}

pub fn space(s: &Space) -> String {
    details(&[
        ("ID", s.id.clone()),
        ("Name", s.name.clone()),
        ("Description", or_dash(Some(&s.description))),
        ("Parent", or_dash(s.parent.as_deref())),
        ("Inherit", yes_no(s.inherit)),
        ("Created", time(&s.created_at)),
    ])
}

pub fn members_table(members: &[Member]) -> String {
    let mut t = Table::new(["EMAIL", "NAME", "ROLE", "ID"]);
    for m in members {
        t.row([m.email.clone(), or_dash(Some(&m.name)), m.role.clone(), m.id.clone()]);
    }
    t.render()
}

pub fn teams_table(teams: &[Team]) -> String {
    let mut t = Table::new(["ID", "NAME", "MEMBERS"]);
    for team in teams {
        t.row([
            team.id.clone(),
            team.name.clone(),
            or_dash(Some(&team.members.join(","))),
        ]);
    }
    t.render()
}

pub fn bindings_table(bindings: &[RoleBinding]) -> String {
    let mut t = Table::new(["SPACE", "KIND", "SUBJECT", "ROLE", "CREATED"]);
    for b in bindings {
        t.row([
            b.space.clone(),
            b.subject_kind.clone(),
            b.subject.clone(),
            b.role.clone(),
            time(&b.created_at),
        ]);
    }
    t.render()
}

/// `active`, `revoked` or `expired` at `now`.
fn key_status(k: &ApiKey, now: DateTime<Utc>) -> &'static str {
    if k.revoked_at.is_some() {
        "revoked"
    } else if k.is_active(now) {
        "active"
    } else {
        "expired"
    }
}

fn opt_time(t: Option<&DateTime<Utc>>) -> String {
    t.map(time).unwrap_or_else(|| "-".into())
}

pub fn api_keys_table(keys: &[ApiKey], now: DateTime<Utc>) -> String {
    let mut t = Table::new([
        "ID",
        "NAME",
        "KIND",
        "ROLE",
        "OWNER",
        "STATUS",
        "EXPIRES",
        "LAST USED",
        "CREATED",
    ]);
    for k in keys {
        t.row([
            k.id.clone(),
            k.name.clone(),
            k.kind.to_string(),
            or_dash(Some(&k.role)),
            or_dash(k.owner.as_deref()),
            key_status(k, now).to_owned(),
            opt_time(k.expires_at.as_ref()),
            opt_time(k.last_used_at.as_ref()),
            time(&k.created_at),
        ]);
    }
    t.render()
}

pub fn api_key(k: &ApiKey, now: DateTime<Utc>) -> String {
    let mut pairs = vec![
        ("ID", k.id.clone()),
        ("Name", k.name.clone()),
        ("Kind", k.kind.to_string()),
        // An empty role means the key's rights come from space bindings only.
        (
            "Role",
            if k.role.is_empty() {
                "(space bindings)".into()
            } else {
                k.role.clone()
            },
        ),
    ];
    if let Some(o) = &k.owner {
        pairs.push(("Owner", o.clone()));
    }
    pairs.push(("Status", key_status(k, now).to_owned()));
    pairs.push((
        "Expires",
        k.expires_at.as_ref().map(time).unwrap_or_else(|| "never".into()),
    ));
    if let Some(t) = &k.revoked_at {
        pairs.push(("Revoked", time(t)));
    }
    pairs.push(("Created", time(&k.created_at)));
    details(&pairs)
}

/// A new key for people: its details, then the secret set apart so it is hard to miss.
pub fn api_key_created(c: &ApiKeyCreated, now: DateTime<Utc>) -> String {
    format!(
        "Created API key {}\n\n{}\nSecret:\n\n    {}\n\n\
         Store it now: it is shown only this once and cannot be retrieved later.\n",
        c.key.name,
        api_key(&c.key, now),
        c.secret
    )
}

/// A member's new organization role, as `user set-role` reports it.
pub fn member_role(m: &Member) -> String {
    match m.role.as_str() {
        "owner" => format!("{} is now an owner of the organization\n", m.email),
        "member" => format!("{} is now a member of the organization\n", m.email),
        role => format!("{} now has the role {role} in the organization\n", m.email),
    }
}

/// The audit trail: `TARGET` is `kind:target` (`stack:net`, `user:bob@example.com`).
pub fn audit_events_table(events: &[AuditEvent]) -> String {
    let mut t = Table::new(["SEQ", "TIME", "ACTOR", "ACTION", "TARGET", "IP"]);
    for e in events {
        let target = if e.target_kind.is_empty() {
            or_dash(Some(&e.target))
        } else {
            format!("{}:{}", e.target_kind, e.target)
        };
        t.row([
            e.seq.to_string(),
            time(&e.at),
            or_dash(Some(&e.actor)),
            e.action.clone(),
            target,
            or_dash(e.client_ip.as_deref()),
        ]);
    }
    t.render()
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// An intact chain.
pub fn audit_intact(v: &AuditVerification) -> String {
    format!("audit chain intact: {}\n", plural(v.events, "event", "events"))
}

/// What is wrong with a broken chain, in the server's words when it gave some.
pub fn audit_problem(v: &AuditVerification) -> String {
    let problem = match (&v.problem, v.seq, &v.event_id) {
        (Some(p), _, _) if !p.is_empty() => p.clone(),
        (_, Some(seq), Some(id)) => format!("event {seq} ({id}) was altered or removed"),
        (_, Some(seq), None) => format!("event {seq} was altered or removed"),
        _ => format!(
            "the first problem follows {}",
            plural(v.events, "intact event", "intact events")
        ),
    };
    format!("audit chain broken: {problem}")
}

/// A secret's value in tables: the API never returns it, and a fixed mask says nothing
/// about its length.
pub const MASKED: &str = "*****";

/// The most characters of a value a table shows; `-o json` has all of it.
const VALUE_WIDTH: usize = 40;

/// A variable's value as one table cell: secrets masked, control characters escaped (a
/// file's lines stay on one row), long values cut, an empty value `""` so it isn't
/// mistaken for a missing one.
fn value_cell(secret: bool, value: Option<&str>) -> String {
    if secret {
        return MASKED.to_owned();
    }
    let Some(v) = value else {
        return "-".to_owned();
    };
    if v.is_empty() {
        return "\"\"".to_owned();
    }
    let escaped = escape_controls(v);
    if escaped.chars().count() > VALUE_WIDTH {
        let cut: String = escaped.chars().take(VALUE_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        escaped
    }
}

/// `s` on one line: control characters (line breaks, tabs, …) as Rust escapes.
fn escape_controls(s: &str) -> String {
    let mut escaped = String::new();
    for c in s.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// A context's or stack's own variables.
pub fn variables_table(vars: &[Variable]) -> String {
    let mut t = Table::new(["KIND", "NAME", "VALUE", "SECRET", "APPLY-ONLY", "CHECKSUM"]);
    for v in vars {
        t.row([
            v.kind.to_string(),
            v.name.clone(),
            value_cell(v.secret, v.value.as_deref()),
            yes_no(v.secret),
            yes_no(v.apply_only),
            v.checksum.clone(),
        ]);
    }
    t.render()
}

/// What a stack's runs get. `PRIORITY` is the attachment's, `auto` for a context attached
/// by label, `-` for the stack's own values.
pub fn environment_table(vars: &[EffectiveVariable]) -> String {
    let mut t = Table::new(["KIND", "NAME", "VALUE", "SOURCE", "PRIORITY", "CHECKSUM"]);
    for v in vars {
        let priority = if v.auto_attached {
            "auto".to_owned()
        } else {
            v.priority.map(|p| p.to_string()).unwrap_or_else(|| "-".into())
        };
        t.row([
            v.kind.to_string(),
            v.name.clone(),
            value_cell(v.secret, v.value.as_deref()),
            v.source.clone(),
            priority,
            v.checksum.clone(),
        ]);
    }
    t.render()
}

pub fn contexts_table(contexts: &[Context]) -> String {
    let mut t = Table::new(["ID", "NAME", "SPACE", "LABELS", "VARIABLES"]);
    for c in contexts {
        t.row([
            c.id.clone(),
            c.name.clone(),
            c.space.clone(),
            or_dash(Some(&c.labels.join(","))),
            c.variables.len().to_string(),
        ]);
    }
    t.render()
}

fn attachments_table(attachments: &[ContextAttachment]) -> String {
    let mut t = Table::new(["STACK", "PRIORITY", "AUTO"]);
    for a in attachments {
        t.row([a.stack.clone(), a.priority.to_string(), yes_no(a.auto_attached)]);
    }
    t.render()
}

/// A context's fields, then its variables (secrets masked), then the stacks it is
/// attached to.
pub fn context(c: &Context) -> String {
    let mut out = details(&[
        ("ID", c.id.clone()),
        ("Name", c.name.clone()),
        ("Description", or_dash(Some(&c.description))),
        ("Space", c.space.clone()),
        ("Labels", or_dash(Some(&c.labels.join(", ")))),
        ("Created", time(&c.created_at)),
    ]);
    out.push('\n');
    if c.variables.is_empty() {
        out.push_str("No variables.\n");
    } else {
        out.push_str(&variables_table(&c.variables));
    }
    out.push('\n');
    if c.attachments.is_empty() {
        out.push_str("Not attached to any stack.\n");
    } else {
        out.push_str(&attachments_table(&c.attachments));
    }
    out
}

/// How people call a variable of this kind: `environment variable AWS_REGION`.
pub fn variable_label(v: &Variable) -> String {
    let what = match &v.kind {
        VariableKind::Env => "environment variable",
        VariableKind::Terraform => "Terraform variable",
        VariableKind::File => "file",
        VariableKind::Other(_) => "variable",
    };
    format!("{what} {}", v.name)
}

pub fn aws_integrations_table(integrations: &[AwsIntegration]) -> String {
    let mut t = Table::new([
        "ID",
        "NAME",
        "SPACE",
        "ROLE ARN",
        "READ ROLE ARN",
        "AUDIENCE",
        "DURATION",
        "STACKS",
    ]);
    for i in integrations {
        t.row([
            i.id.clone(),
            i.name.clone(),
            i.space.clone(),
            i.role_arn.clone(),
            or_dash(i.read_role_arn.as_deref()),
            or_dash(i.audience.as_deref()),
            format!("{}s", i.duration_seconds),
            or_dash(Some(&i.stacks.join(","))),
        ]);
    }
    t.render()
}

pub fn aws_integration(i: &AwsIntegration) -> String {
    details(&[
        ("ID", i.id.clone()),
        ("Name", i.name.clone()),
        ("Space", i.space.clone()),
        ("Role ARN", i.role_arn.clone()),
        ("Read role ARN", or_dash(i.read_role_arn.as_deref())),
        ("Audience", or_dash(i.audience.as_deref())),
        ("Duration", format!("{}s", i.duration_seconds)),
        ("Stacks", or_dash(Some(&i.stacks.join(", ")))),
    ])
}

/// A stack's drift: status, reaction and last check, then each open drift record with
/// the resources and attributes that drifted.
pub fn stack_drift(d: &StackDrift) -> String {
    let mut out = details(&[
        ("Stack", d.stack.clone()),
        ("Drift", drift_line(&d.drift_status, d.drift_checked_at.as_ref())),
        ("On drift", d.drift_reaction.to_string()),
    ]);
    if d.records.is_empty() {
        out.push_str("\nNo open drift.\n");
    }
    for r in &d.records {
        out.push_str(&format!(
            "\nDrift {}: first seen {}, last seen {} by run {}\n",
            r.id,
            time(&r.first_seen_at),
            time(&r.last_seen_at),
            r.last_run_id
        ));
        out.push_str(&drifted_resources_table(&r.resources));
    }
    out
}

pub fn drifted_resources_table(resources: &[DriftedResource]) -> String {
    let mut t = Table::new(["ADDRESS", "ACTION", "ATTRIBUTES"]);
    for r in resources {
        t.row([
            r.address.clone(),
            r.action.clone(),
            or_dash(Some(&r.attributes.join(", "))),
        ]);
    }
    t.render()
}

/// The drift inbox. `RESOURCES` counts the drifted resources; `stack drift` lists them.
pub fn drift_records_table(records: &[DriftRecord]) -> String {
    let mut t = Table::new(["STACK", "OPEN", "FIRST-SEEN", "LAST-SEEN", "RESOURCES"]);
    for r in records {
        t.row([
            r.stack.clone(),
            yes_no(r.open),
            time(&r.first_seen_at),
            time(&r.last_seen_at),
            r.resources.len().to_string(),
        ]);
    }
    t.render()
}

pub fn drift_schedules_table(schedules: &[DriftSchedule]) -> String {
    let mut t = Table::new(["ID", "CRON", "TIMEZONE", "NEXT-RUN"]);
    for s in schedules {
        t.row([s.id.clone(), s.cron.clone(), s.timezone.clone(), time(&s.next_run_at)]);
    }
    t.render()
}

/// The next run is spelled out in UTC: the cron expression may be in another zone.
pub fn drift_schedule(s: &DriftSchedule) -> String {
    details(&[
        ("ID", s.id.clone()),
        ("Stack", s.stack.clone()),
        ("Cron", s.cron.clone()),
        ("Time zone", s.timezone.clone()),
        ("Next run", format!("{} UTC", time(&s.next_run_at))),
    ])
}

fn events_list(events: &[NotificationEvent], sep: &str) -> String {
    let names: Vec<&str> = events.iter().map(NotificationEvent::as_str).collect();
    or_dash(Some(&names.join(sep)))
}

pub fn notification_endpoints_table(endpoints: &[NotificationEndpoint]) -> String {
    let mut t = Table::new(["ID", "NAME", "KIND", "SPACE", "SECRET", "LABELS", "EVENTS", "URL"]);
    for e in endpoints {
        t.row([
            e.id.clone(),
            e.name.clone(),
            e.kind.to_string(),
            e.space.clone(),
            yes_no(e.has_secret),
            or_dash(Some(&e.stack_labels.join(","))),
            events_list(&e.events, ","),
            e.url.clone(),
        ]);
    }
    t.render()
}

pub fn notification_endpoint(e: &NotificationEndpoint) -> String {
    let labels = if e.stack_labels.is_empty() {
        "(every stack)".to_owned()
    } else {
        e.stack_labels.join(", ")
    };
    details(&[
        ("ID", e.id.clone()),
        ("Name", e.name.clone()),
        ("Kind", e.kind.to_string()),
        ("URL", e.url.clone()),
        ("Space", e.space.clone()),
        ("Events", events_list(&e.events, ", ")),
        ("Stack labels", labels),
        ("Secret", if e.has_secret { "set" } else { "none" }.to_owned()),
        ("Created", time(&e.created_at)),
    ])
}

/// Deliveries; a long or multi-line error is cut to one short cell (`-o json` has it all).
pub fn notification_deliveries_table(deliveries: &[NotificationDelivery]) -> String {
    let mut t = Table::new([
        "CREATED",
        "ENDPOINT",
        "EVENT",
        "STACK",
        "STATUS",
        "ATTEMPTS",
        "LAST-CODE",
        "LAST-ERROR",
    ]);
    for d in deliveries {
        let error = match d.last_error.as_deref() {
            Some(e) if !e.is_empty() => value_cell(false, Some(e)),
            _ => "-".to_owned(),
        };
        t.row([
            time(&d.created_at),
            d.endpoint.clone(),
            d.event.to_string(),
            or_dash(d.stack.as_deref()),
            d.status.clone(),
            d.attempts.to_string(),
            d.last_status_code.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            error,
        ]);
    }
    t.render()
}

pub fn policies_table(policies: &[Policy]) -> String {
    let mut t = Table::new(["ID", "NAME", "TYPE", "SPACE", "VERSION", "LABELS"]);
    for p in policies {
        t.row([
            p.id.clone(),
            p.name.clone(),
            p.policy_type.to_string(),
            p.space.clone(),
            p.version.to_string(),
            or_dash(Some(&p.labels.join(","))),
        ]);
    }
    t.render()
}

/// A policy's fields, then (when they were read) its versions and latest evaluations. The
/// Rego source is left to `-o json`.
pub fn policy(p: &Policy) -> String {
    let mut pairs = vec![
        ("ID", p.id.clone()),
        ("Name", p.name.clone()),
        ("Type", p.policy_type.to_string()),
        ("Description", or_dash(Some(&p.description))),
        ("Space", p.space.clone()),
        ("Labels", or_dash(Some(&p.labels.join(", ")))),
        ("Version", p.version.to_string()),
    ];
    if let Some(stacks) = &p.attached_stacks {
        pairs.push(("Attached to", or_dash(Some(&stacks.join(", ")))));
    }
    if let Some(samples) = &p.samples {
        pairs.push(("Samples", samples.len().to_string()));
    }
    pairs.push(("Created", time(&p.created_at)));
    pairs.push(("Updated", time(&p.updated_at)));
    let mut out = details(&pairs);
    if let Some(versions) = &p.versions {
        out.push_str("\nVersions:\n");
        out.push_str(&policy_versions_table(versions));
    }
    if let Some(evaluations) = &p.evaluations {
        if evaluations.is_empty() {
            out.push_str("\nNo evaluations yet.\n");
        } else {
            out.push_str("\nLatest evaluations:\n");
            out.push_str(&policy_evaluations_table(evaluations));
        }
    }
    out
}

fn policy_versions_table(versions: &[PolicyVersion]) -> String {
    let mut t = Table::new(["VERSION", "LABELS", "CREATED BY", "CREATED"]);
    for v in versions {
        t.row([
            v.version.to_string(),
            or_dash(Some(&v.labels.join(","))),
            v.created_by.clone(),
            time(&v.created_at),
        ]);
    }
    t.render()
}

/// A policy's evaluations: what each judged, with which version, and the verdict.
fn policy_evaluations_table(evaluations: &[PolicyEvaluation]) -> String {
    let mut t = Table::new(["CREATED", "SUBJECT", "VERSION", "OUTCOME", "MESSAGES"]);
    for e in evaluations {
        t.row([
            time(&e.created_at),
            e.subject.clone(),
            e.policy_version.to_string(),
            e.outcome.clone(),
            messages_cell(&e.messages),
        ]);
    }
    t.render()
}

/// The "Reviews" section of `run show`, oldest first; a note stays on one line.
pub fn run_reviews(reviews: &[RunReview]) -> String {
    if reviews.is_empty() {
        return "Reviews: none\n".to_owned();
    }
    let mut t = Table::new(["AT", "REVIEWER", "TEAMS", "STAGE", "DECISION", "NOTE"]);
    for r in reviews {
        t.row([
            time(&r.created_at),
            r.reviewer.clone(),
            or_dash(Some(&r.teams.join(","))),
            r.stage.to_string(),
            r.decision.to_string(),
            or_dash(Some(&escape_controls(&r.note))),
        ]);
    }
    format!("Reviews:\n{}", t.render())
}

/// The "Policy evaluations" section of `run show`.
pub fn run_policy_evaluations(evaluations: &[PolicyEvaluation]) -> String {
    if evaluations.is_empty() {
        return "Policy evaluations: none\n".to_owned();
    }
    let mut t = Table::new(["POLICY", "VERSION", "TYPE", "OUTCOME", "MESSAGES"]);
    for e in evaluations {
        t.row([
            e.policy.clone(),
            e.policy_version.to_string(),
            e.policy_type.to_string(),
            e.outcome.clone(),
            messages_cell(&e.messages),
        ]);
    }
    format!("Policy evaluations:\n{}", t.render())
}

/// Messages on one line, in full (they say why a run was denied); control characters escaped.
fn messages_cell(messages: &[String]) -> String {
    let joined = messages.join("; ");
    if joined.is_empty() {
        return "-".to_owned();
    }
    escape_controls(&joined)
}

/// What a policy decided: each rule's value as JSON (or `none` when no rule has one), a line
/// per message labelled with its rule (`deny: …`), and `Verdict: <OUTCOME>`.
pub fn policy_verdict(
    rules: &serde_json::Map<String, serde_json::Value>,
    none: &str,
    messages: &[(&str, &str)],
    outcome: &str,
) -> String {
    let mut out = if rules.is_empty() {
        none.to_owned()
    } else {
        let mut t = Table::new(["RULE", "VALUE"]);
        for (rule, value) in rules {
            t.row([rule.clone(), value.to_string()]);
        }
        t.render()
    };
    if !messages.is_empty() {
        out.push('\n');
        for (rule, message) in messages {
            out.push_str(&format!("{rule}: {message}\n"));
        }
    }
    out.push_str(&format!("\nVerdict: {}\n", outcome.to_uppercase()));
    out
}

/// A simulation: as [`policy_verdict`], each message labelled with the rule whose value holds
/// it (`message` when none does, e.g. a boolean `deny`).
pub fn policy_simulation(s: &PolicySimulation) -> String {
    let empty = serde_json::Map::new();
    let rules = s.result.as_object().unwrap_or(&empty);
    let holds = |rule: &str, m: &str| {
        rules
            .get(rule)
            .and_then(serde_json::Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(m)))
    };
    let messages: Vec<(&str, &str)> = s
        .messages
        .iter()
        .map(|m| {
            let rule = ["deny", "warn", "trigger"]
                .into_iter()
                .find(|r| holds(r, m))
                .unwrap_or("message");
            (rule, m.as_str())
        })
        .collect();
    policy_verdict(rules, "No rule has a value.\n", &messages, &s.outcome)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use terraplane_client::{
        ApiKeyKind, DriftReaction, DriftStatus, NotificationKind, PlanSummary, ReviewDecision, RunState, RunType,
        StackLock,
    };

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
            drift_status: if locked {
                DriftStatus::Drifted
            } else {
                DriftStatus::Unknown
            },
            drift_reaction: DriftReaction::Alert,
            drift_checked_at: locked.then(|| at(7)),
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
            a_run("r-22", RunState::PendingReview, None),
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
ID    NAME        REPOSITORY                          BRANCH   AUTODEPLOY   LOCKED BY   DRIFT     LABELS
net   Stack net   https://git.example.com/infra.git   main     yes          bob         DRIFTED   prod,net
app   Stack app   https://git.example.com/infra.git   main     no           -           UNKNOWN   -
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
        assert!(
            out.contains("\nDrift:        DRIFTED (checked 2026-03-01 12:00:07)\nOn drift:     ALERT\n"),
            "{out}"
        );
        let out = stack(&a_stack("app", false));
        assert!(out.contains("\nDrift:        UNKNOWN (never checked)\n"), "{out}");
    }

    fn a_record(id: &str, stack: &str, open: bool, resources: Vec<DriftedResource>) -> DriftRecord {
        DriftRecord {
            id: id.into(),
            stack: stack.into(),
            open,
            resources,
            last_run_id: "run-9".into(),
            first_seen_at: at(3),
            last_seen_at: at(9),
            resolved_at: (!open).then(|| at(12)),
            resolved_by_run_id: (!open).then(|| "run-12".to_owned()),
        }
    }

    fn a_drifted(address: &str, action: &str, attributes: &[&str]) -> DriftedResource {
        DriftedResource {
            address: address.into(),
            action: action.into(),
            attributes: attributes.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn stack_drift_lists_the_drifted_resources_and_attributes() {
        let d = StackDrift {
            stack: "net".into(),
            drift_status: DriftStatus::Drifted,
            drift_reaction: DriftReaction::Reconcile,
            drift_checked_at: Some(at(9)),
            records: vec![a_record(
                "dr-1",
                "net",
                true,
                vec![
                    a_drifted("sandbox_file.motd", "update", &["content", "mode"]),
                    a_drifted("sandbox_file.old", "delete", &[]),
                ],
            )],
        };
        let expected = "\
Stack:    net
Drift:    DRIFTED (checked 2026-03-01 12:00:09)
On drift: RECONCILE

Drift dr-1: first seen 2026-03-01 12:00:03, last seen 2026-03-01 12:00:09 by run run-9
ADDRESS             ACTION   ATTRIBUTES
sandbox_file.motd   update   content, mode
sandbox_file.old    delete   -
";
        assert_eq!(stack_drift(&d), expected);

        let in_sync = StackDrift {
            drift_status: DriftStatus::InSync,
            records: vec![],
            ..d
        };
        assert!(
            stack_drift(&in_sync).ends_with("On drift: RECONCILE\n\nNo open drift.\n"),
            "{}",
            stack_drift(&in_sync)
        );
    }

    #[test]
    fn drift_inbox_and_schedules() {
        let records = [
            a_record("dr-2", "net", true, vec![a_drifted("a.b", "update", &["x"])]),
            a_record("dr-1", "app", false, vec![]),
        ];
        assert_eq!(
            drift_records_table(&records),
            "\
STACK   OPEN   FIRST-SEEN            LAST-SEEN             RESOURCES
net     yes    2026-03-01 12:00:03   2026-03-01 12:00:09   1
app     no     2026-03-01 12:00:03   2026-03-01 12:00:09   0
"
        );
        let s = DriftSchedule {
            id: "ds-1".into(),
            stack: "net".into(),
            cron: "0 */6 * * *".into(),
            timezone: "Europe/Berlin".into(),
            next_run_at: at(30),
        };
        assert_eq!(
            drift_schedules_table(std::slice::from_ref(&s)),
            "ID     CRON          TIMEZONE        NEXT-RUN\nds-1   0 */6 * * *   Europe/Berlin   2026-03-01 12:00:30\n"
        );
        assert_eq!(
            drift_schedule(&s),
            "ID:        ds-1\nStack:     net\nCron:      0 */6 * * *\nTime zone: Europe/Berlin\nNext run:  2026-03-01 12:00:30 UTC\n"
        );
    }

    fn an_endpoint(secret: bool, labels: &[&str]) -> NotificationEndpoint {
        NotificationEndpoint {
            id: "ops".into(),
            name: "Ops".into(),
            kind: if secret {
                NotificationKind::Pagerduty
            } else {
                NotificationKind::Slack
            },
            url: "https://hooks.example.com/x".into(),
            space: "root".into(),
            events: vec![NotificationEvent::DriftDetected, NotificationEvent::RunFailed],
            stack_labels: labels.iter().map(|l| l.to_string()).collect(),
            has_secret: secret,
            created_at: at(0),
        }
    }

    #[test]
    fn notification_endpoints_table_and_details() {
        assert_eq!(
            notification_endpoints_table(&[an_endpoint(true, &["prod", "net"]), an_endpoint(false, &[])]),
            "\
ID    NAME   KIND        SPACE   SECRET   LABELS     EVENTS                      URL
ops   Ops    PAGERDUTY   root    yes      prod,net   DRIFT_DETECTED,RUN_FAILED   https://hooks.example.com/x
ops   Ops    SLACK       root    no       -          DRIFT_DETECTED,RUN_FAILED   https://hooks.example.com/x
"
        );
        let out = notification_endpoint(&an_endpoint(false, &[]));
        assert!(out.contains("Events:       DRIFT_DETECTED, RUN_FAILED\n"), "{out}");
        assert!(
            out.contains("Stack labels: (every stack)\nSecret:       none\n"),
            "{out}"
        );
        let out = notification_endpoint(&an_endpoint(true, &["prod"]));
        assert!(out.contains("Stack labels: prod\nSecret:       set\n"), "{out}");
    }

    #[test]
    fn deliveries_table_cuts_errors_to_one_line() {
        let d = |status: &str, code: Option<i32>, error: Option<&str>| NotificationDelivery {
            id: "d1".into(),
            endpoint: "ops".into(),
            event: NotificationEvent::DriftDetected,
            stack: Some("net".into()),
            run_id: Some("run-9".into()),
            status: status.into(),
            attempts: 3,
            last_status_code: code,
            last_error: error.map(str::to_owned),
            next_attempt_at: None,
            created_at: at(1),
            delivered_at: None,
        };
        let mut pending = d("PENDING", None, None);
        pending.stack = None;
        pending.event = NotificationEvent::Other("RUN_STARTED".into());
        let long = format!("connection refused\n{}", "x".repeat(60));
        let out = notification_deliveries_table(&[d("FAILED", Some(502), Some(&long)), pending]);
        let expected = "\
CREATED               ENDPOINT   EVENT            STACK   STATUS    ATTEMPTS   LAST-CODE   LAST-ERROR
2026-03-01 12:00:01   ops        DRIFT_DETECTED   net     FAILED    3          502         connection refused\\nxxxxxxxxxxxxxxxxxxx…
2026-03-01 12:00:01   ops        RUN_STARTED      -       PENDING   3          -           -
";
        assert_eq!(out, expected);
    }

    fn a_key(id: &str, kind: ApiKeyKind, role: &str, expires: Option<u32>, revoked: bool) -> ApiKey {
        ApiKey {
            id: id.into(),
            name: format!("key {id}"),
            kind,
            role: role.into(),
            owner: (role == "owner").then(|| "ada@example.com".to_owned()),
            created_at: at(0),
            expires_at: expires.map(at),
            last_used_at: revoked.then(|| at(4)),
            revoked_at: revoked.then(|| at(5)),
        }
    }

    #[test]
    fn spaces_table_shows_parent_and_inherit() {
        let spaces = [
            Space {
                id: "root".into(),
                name: "Root".into(),
                description: String::new(),
                parent: None,
                inherit: false,
                created_at: at(0),
            },
            Space {
                id: "prod".into(),
                name: "Production".into(),
                description: "live".into(),
                parent: Some("root".into()),
                inherit: true,
                created_at: at(0),
            },
        ];
        let expected = "\
ID     NAME         PARENT   INHERIT   DESCRIPTION
root   Root         -        no        -
prod   Production   root     yes       live
";
        assert_eq!(spaces_table(&spaces), expected);
    }

    #[test]
    fn api_keys_table_tells_active_expired_and_revoked_apart() {
        let keys = [
            a_key("k1", ApiKeyKind::Personal, "owner", Some(30), false),
            a_key("k2", ApiKeyKind::Service, "", Some(10), false),
            a_key("k3", ApiKeyKind::Service, "reader", None, true),
        ];
        let expected = "\
ID   NAME     KIND       ROLE     OWNER             STATUS    EXPIRES               LAST USED             CREATED
k1   key k1   personal   owner    ada@example.com   active    2026-03-01 12:00:30   -                     2026-03-01 12:00:00
k2   key k2   service    -        -                 expired   2026-03-01 12:00:10   -                     2026-03-01 12:00:00
k3   key k3   service    reader   -                 revoked   -                     2026-03-01 12:00:04   2026-03-01 12:00:00
";
        assert_eq!(api_keys_table(&keys, at(20)), expected);
    }

    #[test]
    fn a_new_key_shows_its_secret_once_with_a_warning() {
        let c = ApiKeyCreated {
            key: a_key("k2", ApiKeyKind::Service, "", Some(30), false),
            secret: "tpk_0123456789".into(),
        };
        let out = api_key_created(&c, at(20));
        assert!(out.starts_with("Created API key key k2\n\nID:      k2\n"), "{out}");
        assert!(out.contains("Role:    (space bindings)\n"), "{out}");
        assert!(
            out.ends_with(
                "\nSecret:\n\n    tpk_0123456789\n\nStore it now: it is shown only this once and cannot be retrieved later.\n"
            ),
            "{out}"
        );
        assert_eq!(out.matches("tpk_0123456789").count(), 1);
    }

    fn an_event(seq: i64, actor: &str, action: &str, kind: &str, target: &str, ip: Option<&str>) -> AuditEvent {
        AuditEvent {
            id: format!("ev-{seq}"),
            seq,
            actor: actor.into(),
            action: action.into(),
            target_kind: kind.into(),
            target: target.into(),
            before: None,
            after: None,
            request_id: None,
            client_ip: ip.map(str::to_owned),
            at: at(seq as u32),
            hash: String::new(),
            prev_hash: String::new(),
        }
    }

    #[test]
    fn audit_table_shows_kind_and_target_and_dashes_for_no_ip() {
        let events = [
            an_event(12, "ada@example.com", "role.grant", "space", "prod", Some("10.0.0.7")),
            an_event(9, "bob@example.com", "login.failure", "", "", None),
        ];
        let expected = "\
SEQ   TIME                  ACTOR             ACTION          TARGET       IP
12    2026-03-01 12:00:12   ada@example.com   role.grant      space:prod   10.0.0.7
9     2026-03-01 12:00:09   bob@example.com   login.failure   -            -
";
        assert_eq!(audit_events_table(&events), expected);
    }

    #[test]
    fn audit_verification_texts() {
        let v = |ok, events, problem: Option<&str>, seq, id: Option<&str>| AuditVerification {
            ok,
            events,
            problem: problem.map(str::to_owned),
            seq,
            event_id: id.map(str::to_owned),
        };
        assert_eq!(
            audit_intact(&v(true, 14, None, None, None)),
            "audit chain intact: 14 events\n"
        );
        assert_eq!(
            audit_intact(&v(true, 1, None, None, None)),
            "audit chain intact: 1 event\n"
        );
        assert_eq!(
            audit_problem(&v(false, 6, Some("event 7 (ev-7) was altered"), Some(7), Some("ev-7"))),
            "audit chain broken: event 7 (ev-7) was altered"
        );
        assert_eq!(
            audit_problem(&v(false, 6, None, Some(7), None)),
            "audit chain broken: event 7 was altered or removed"
        );
        assert_eq!(
            audit_problem(&v(false, 0, None, None, None)),
            "audit chain broken: the first problem follows 0 intact events"
        );
    }

    #[test]
    fn membership_tables() {
        let members = [Member {
            id: "u1".into(),
            email: "ada@example.com".into(),
            name: String::new(),
            role: "owner".into(),
        }];
        assert_eq!(
            members_table(&members),
            "EMAIL             NAME   ROLE    ID\nada@example.com   -      owner   u1\n"
        );
        assert_eq!(
            member_role(&members[0]),
            "ada@example.com is now an owner of the organization\n"
        );
        let teams = [
            Team {
                id: "ops".into(),
                name: "Ops".into(),
                members: vec!["a@x".into(), "b@x".into()],
            },
            Team {
                id: "dev".into(),
                name: "Dev".into(),
                members: vec![],
            },
        ];
        assert_eq!(
            teams_table(&teams),
            "ID    NAME   MEMBERS\nops   Ops    a@x,b@x\ndev   Dev    -\n"
        );
        let bindings = [RoleBinding {
            space: "prod".into(),
            subject_kind: "api_key".into(),
            subject: "k1".into(),
            role: "writer".into(),
            created_at: at(1),
        }];
        assert_eq!(
            bindings_table(&bindings),
            "SPACE   KIND      SUBJECT   ROLE     CREATED\nprod    api_key   k1        writer   2026-03-01 12:00:01\n"
        );
    }

    fn a_variable(name: &str, kind: VariableKind, secret: bool, value: Option<&str>) -> Variable {
        Variable {
            name: name.into(),
            kind,
            secret,
            apply_only: secret,
            value: value.map(str::to_owned),
            checksum: format!("c-{name}"),
            updated_at: at(0),
        }
    }

    fn a_context(variables: Vec<Variable>, attachments: Vec<ContextAttachment>) -> Context {
        Context {
            id: "aws-prod".into(),
            name: "AWS prod".into(),
            description: String::new(),
            labels: vec!["autoattach:prod".into()],
            space: "root".into(),
            variables,
            attachments,
            created_at: at(0),
        }
    }

    #[test]
    fn a_secret_is_masked_in_tables() {
        // Even if a server sent a secret's value, a table would not show it.
        let vars = [
            a_variable("AWS_REGION", VariableKind::Env, false, Some("eu-west-1")),
            a_variable("db_password", VariableKind::Terraform, true, None),
            a_variable("LEAKED", VariableKind::Env, true, Some("hunter2")),
        ];
        let expected = "\
KIND        NAME          VALUE       SECRET   APPLY-ONLY   CHECKSUM
ENV         AWS_REGION    eu-west-1   no       no           c-AWS_REGION
TERRAFORM   db_password   *****       yes      yes          c-db_password
ENV         LEAKED        *****       yes      yes          c-LEAKED
";
        assert_eq!(variables_table(&vars), expected);

        let effective = [
            EffectiveVariable {
                name: "TOKEN".into(),
                kind: VariableKind::Env,
                secret: true,
                apply_only: false,
                value: Some("hunter2".into()),
                checksum: "9f86".into(),
                source: "context:aws-prod".into(),
                priority: Some(3),
                auto_attached: false,
            },
            EffectiveVariable {
                name: "region".into(),
                kind: VariableKind::Terraform,
                secret: false,
                apply_only: false,
                value: Some("eu-west-1".into()),
                checksum: "a1b2".into(),
                source: "context:base".into(),
                priority: None,
                auto_attached: true,
            },
            EffectiveVariable {
                name: "backend.hcl".into(),
                kind: VariableKind::File,
                secret: false,
                apply_only: true,
                value: Some("bucket = \"x\"\nkey = \"y\"\n".into()),
                checksum: "c3d4".into(),
                source: "stack".into(),
                priority: None,
                auto_attached: false,
            },
        ];
        let expected = "\
KIND        NAME          VALUE                       SOURCE             PRIORITY   CHECKSUM
ENV         TOKEN         *****                       context:aws-prod   3          9f86
TERRAFORM   region        eu-west-1                   context:base       auto       a1b2
FILE        backend.hcl   bucket = \"x\"\\nkey = \"y\"\\n   stack              -          c3d4
";
        let out = environment_table(&effective);
        assert_eq!(out, expected);
        assert!(!out.contains("hunter2"));
    }

    #[test]
    fn values_in_tables_stay_on_one_short_line() {
        assert_eq!(value_cell(false, Some("")), "\"\"");
        assert_eq!(value_cell(false, None), "-");
        assert_eq!(value_cell(true, Some("")), MASKED);
        assert_eq!(value_cell(false, Some("a\tb\r\n")), "a\\tb\\r\\n");
        let long = "x".repeat(100);
        let cell = value_cell(false, Some(&long));
        assert_eq!(cell.chars().count(), VALUE_WIDTH);
        assert!(cell.ends_with("x…"), "{cell}");
        assert_eq!(value_cell(false, Some(&long[..VALUE_WIDTH])), long[..VALUE_WIDTH]);
    }

    #[test]
    fn context_details_list_variables_then_attachments() {
        let c = a_context(
            vec![
                a_variable("AWS_REGION", VariableKind::Env, false, Some("eu-west-1")),
                a_variable("token", VariableKind::Terraform, true, None),
            ],
            vec![
                ContextAttachment {
                    context: "aws-prod".into(),
                    stack: "net".into(),
                    priority: 2,
                    auto_attached: false,
                },
                ContextAttachment {
                    context: "aws-prod".into(),
                    stack: "app".into(),
                    priority: 0,
                    auto_attached: true,
                },
            ],
        );
        let expected = "\
ID:          aws-prod
Name:        AWS prod
Description: -
Space:       root
Labels:      autoattach:prod
Created:     2026-03-01 12:00:00

KIND        NAME         VALUE       SECRET   APPLY-ONLY   CHECKSUM
ENV         AWS_REGION   eu-west-1   no       no           c-AWS_REGION
TERRAFORM   token        *****       yes      yes          c-token

STACK   PRIORITY   AUTO
net     2          no
app     0          yes
";
        assert_eq!(context(&c), expected);

        let empty = context(&a_context(vec![], vec![]));
        assert!(
            empty.ends_with("\nNo variables.\n\nNot attached to any stack.\n"),
            "{empty}"
        );
        assert_eq!(
            contexts_table(&[c, a_context(vec![], vec![])]),
            "\
ID         NAME       SPACE   LABELS            VARIABLES
aws-prod   AWS prod   root    autoattach:prod   2
aws-prod   AWS prod   root    autoattach:prod   0
"
        );
    }

    #[test]
    fn variable_labels_name_the_kind() {
        let label = |kind| variable_label(&a_variable("x", kind, false, None));
        assert_eq!(label(VariableKind::Env), "environment variable x");
        assert_eq!(label(VariableKind::Terraform), "Terraform variable x");
        assert_eq!(label(VariableKind::File), "file x");
        assert_eq!(label(VariableKind::Other("NEW".into())), "variable x");
    }

    #[test]
    fn aws_integrations_table_and_details() {
        let i = AwsIntegration {
            id: "aws-prod".into(),
            name: "Prod".into(),
            space: "root".into(),
            role_arn: "arn:aws:iam::1:role/tp".into(),
            read_role_arn: None,
            audience: Some("sts.amazonaws.com".into()),
            duration_seconds: 3600,
            stacks: vec!["net".into(), "app".into()],
        };
        assert_eq!(
            aws_integrations_table(std::slice::from_ref(&i)),
            "\
ID         NAME   SPACE   ROLE ARN                 READ ROLE ARN   AUDIENCE            DURATION   STACKS
aws-prod   Prod   root    arn:aws:iam::1:role/tp   -               sts.amazonaws.com   3600s      net,app
"
        );
        let out = aws_integration(&i);
        assert!(out.contains("Read role ARN: -\n"), "{out}");
        assert!(out.ends_with("Stacks:        net, app\n"), "{out}");
    }

    #[test]
    fn policy_verdict_lists_rules_messages_and_the_outcome() {
        let rules: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"deny": ["too big"], "sample": true}"#).unwrap_or_default();
        assert_eq!(
            policy_verdict(&rules, "none\n", &[("deny", "too big")], "deny"),
            "RULE     VALUE\ndeny     [\"too big\"]\nsample   true\n\ndeny: too big\n\nVerdict: DENY\n"
        );
        assert_eq!(
            policy_verdict(&serde_json::Map::new(), "No rule has a value.\n", &[], "undecided"),
            "No rule has a value.\n\nVerdict: UNDECIDED\n"
        );
    }

    #[test]
    fn simulation_messages_are_labelled_with_their_rule() {
        let s = PolicySimulation {
            outcome: "deny".into(),
            messages: vec!["d".into(), "w".into(), "deny in policy p".into()],
            result: serde_json::json!({"deny": ["d"], "warn": ["w"]}),
        };
        assert!(
            policy_simulation(&s).ends_with("\ndeny: d\nwarn: w\nmessage: deny in policy p\n\nVerdict: DENY\n"),
            "{}",
            policy_simulation(&s)
        );
    }

    #[test]
    fn run_reviews_list_who_decided_what_and_where() {
        let review = |reviewer: &str, teams: &[&str], stage, decision, note: &str| RunReview {
            reviewer: reviewer.into(),
            teams: teams.iter().map(|t| (*t).to_owned()).collect(),
            stage,
            decision,
            note: note.into(),
            created_at: at(5),
        };
        assert_eq!(run_reviews(&[]), "Reviews: none\n");
        let out = run_reviews(&[
            review(
                "ada@example.com",
                &["infra-leads", "ops"],
                RunState::Queued,
                ReviewDecision::Approve,
                "",
            ),
            review(
                "bob@example.com",
                &[],
                RunState::Unconfirmed,
                ReviewDecision::Reject,
                "too big\nsplit it",
            ),
        ]);
        assert_eq!(
            out,
            "\
Reviews:
AT                    REVIEWER          TEAMS             STAGE         DECISION   NOTE
2026-03-01 12:00:05   ada@example.com   infra-leads,ops   QUEUED        APPROVE    -
2026-03-01 12:00:05   bob@example.com   -                 UNCONFIRMED   REJECT     too big\\nsplit it
"
        );
    }

    #[test]
    fn evaluation_messages_stay_on_one_line_in_full() {
        assert_eq!(messages_cell(&[]), "-");
        let long = "x".repeat(100);
        assert_eq!(messages_cell(&["a\nb".into(), long.clone()]), format!("a\\nb; {long}"));
    }
}
