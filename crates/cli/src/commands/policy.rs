//! `tpctl policy …`: Rego policies on the server (create, new versions, attach, simulate on a
//! run's recorded input), and `policy test`, which evaluates a file here with the same engine.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use serde::Serialize;
use serde_json::Value;
use terraplane_client::{PolicyCreateInput, PolicyUpdateInput};
use terraplane_policy::{Evaluation, Limits, PolicyType};

use super::App;
use crate::Context;
use crate::cli::{OutputFormat, PolicyCommand, PolicyCreateArgs, PolicyTestArgs, PolicyTypeArg, PolicyUpdateArgs};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn policy(&mut self, cmd: PolicyCommand) -> Result<()> {
        match cmd {
            PolicyCommand::Create(a) => {
                let body = self.policy_source(&a.file)?;
                let p = self.client.policy_create(&create_input(a, body)).await?;
                self.show(&p, |p| {
                    format!(
                        "Created policy {} (version {})\n\n{}",
                        p.id,
                        p.version,
                        output::policy(p)
                    )
                })
            }
            PolicyCommand::Update(a) => {
                let body = match &a.file {
                    Some(f) => Some(self.policy_source(f)?),
                    None => None,
                };
                let policy = a.policy.clone();
                let p = self.client.policy_update(&policy, &update_input(a, body)).await?;
                self.show(&p, |p| {
                    format!(
                        "Updated policy {} (version {})\n\n{}",
                        p.id,
                        p.version,
                        output::policy(p)
                    )
                })
            }
            PolicyCommand::List => {
                let policies = self.client.policies().await?;
                if policies.is_empty() && !self.json_mode() {
                    return self.remark("No policies.\n");
                }
                self.show(&policies, |p| output::policies_table(p))
            }
            PolicyCommand::Show { policy } => {
                let p = self.client.policy(&policy).await?;
                self.show(&p, output::policy)
            }
            PolicyCommand::Delete { policy } => {
                let p = self.client.policy_delete(&policy).await?;
                self.show(&p, |p| format!("Deleted policy {}\n", p.id))
            }
            PolicyCommand::Attach { policy, stack } => {
                let a = self.client.policy_attach(&policy, &stack).await?;
                self.show(&a, |a| format!("Attached policy {} to stack {}\n", a.policy, a.stack))
            }
            PolicyCommand::Detach { policy, stack } => {
                let a = self.client.policy_detach(&policy, &stack).await?;
                self.show(&a, |a| format!("Detached policy {} from stack {}\n", a.policy, a.stack))
            }
            // `dispatch` runs it before looking for a server; kept here so the match is whole.
            PolicyCommand::Test(a) => test(a, self.format, self.ctx),
            PolicyCommand::Simulate { policy, run } => {
                let s = self.client.policy_simulate(&policy, &run).await?;
                if s.outcome == OUTCOME_ERROR {
                    if self.json_mode() {
                        self.json(&s)?;
                    }
                    bail!(
                        "policy {policy} failed on the input of run {run}: {}",
                        s.messages.join("; ")
                    );
                }
                self.show(&s, |s| {
                    format!(
                        "Policy {policy}, as it is now, on the input of run {run}:\n\n{}",
                        output::policy_simulation(s)
                    )
                })
            }
        }
    }

    /// The Rego source in `path`; `-` reads it from stdin.
    fn policy_source(&mut self, path: &Path) -> Result<String> {
        if path == Path::new("-") {
            return self.stdin_value(true);
        }
        read_file(path)
    }
}

/// The outcome of an evaluation that failed, as the server stores it.
const OUTCOME_ERROR: &str = "error";

/// What `policy test -o json` prints.
#[derive(Debug, Serialize)]
struct TestReport<'a> {
    #[serde(rename = "type")]
    policy_type: &'static str,
    outcome: &'static str,
    deny: &'a [String],
    warn: &'a [String],
    rules: &'a BTreeMap<String, Value>,
}

/// `tpctl policy test`: compiles and evaluates the file here, under the server's default
/// limits. Any verdict is a success; a file that does not compile, an input that is not JSON
/// or an evaluation that fails or runs out of its limits is an error.
pub(super) fn test(a: PolicyTestArgs, format: OutputFormat, ctx: &mut Context<'_>) -> Result<()> {
    let kind = policy_kind(a.policy_type);
    // The name appears in run-time error positions and in the message of a boolean `deny`.
    let name = a.file.display().to_string();
    let source = read_file(&a.file)?;
    let policy =
        terraplane_policy::Policy::compile(&name, &source).map_err(|e| anyhow!("{name} does not compile: {e}"))?;
    let input = read_input(&a.input)?;
    let e = policy.evaluate(kind, &input, &Limits::default())?;
    let outcome = outcome(kind, &e);
    let text = match format {
        OutputFormat::Json => {
            let report = TestReport {
                policy_type: kind.as_str(),
                outcome,
                deny: &e.deny,
                warn: &e.warn,
                rules: &e.rules,
            };
            let mut s = serde_json::to_string_pretty(&report).context("cannot encode JSON")?;
            s.push('\n');
            s
        }
        OutputFormat::Table => {
            let rules: serde_json::Map<String, Value> = e.rules.clone().into_iter().collect();
            let none = format!(
                "No rule of the {kind} type has a value ({}).\n",
                kind.rules().join(", ")
            );
            output::policy_verdict(&rules, &none, &messages(kind, &e), outcome)
        }
    };
    ctx.out.write_all(text.as_bytes()).context("cannot write to stdout")
}

/// The messages worth a line of their own, labelled with their rule.
fn messages(kind: PolicyType, e: &Evaluation) -> Vec<(&'static str, &str)> {
    match kind {
        PolicyType::Plan => e
            .deny
            .iter()
            .map(|m| ("deny", m.as_str()))
            .chain(e.warn.iter().map(|m| ("warn", m.as_str())))
            .collect(),
        PolicyType::Trigger => e.trigger.iter().map(|s| ("trigger", s.as_str())).collect(),
        _ => Vec::new(),
    }
}

/// The word the server stores as an evaluation's outcome (the api's `Verdict::outcome_word`).
fn outcome(kind: PolicyType, e: &Evaluation) -> &'static str {
    match kind {
        PolicyType::Plan if !e.deny.is_empty() => "deny",
        PolicyType::Plan if !e.warn.is_empty() => "warn",
        PolicyType::Plan => "allow",
        PolicyType::Approval if e.reject => "reject",
        PolicyType::Approval if e.approve => "approve",
        PolicyType::Approval => "undecided",
        PolicyType::Trigger if !e.trigger.is_empty() => "trigger",
        PolicyType::Trigger => "none",
        PolicyType::Login if e.login_deny => "deny",
        PolicyType::Login if e.admin => "admin",
        PolicyType::Login if e.allow => "allow",
        PolicyType::Login => "undecided",
        PolicyType::Push | PolicyType::Notification if e.rules.is_empty() => "none",
        PolicyType::Push | PolicyType::Notification => "decided",
    }
}

fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The input document in `path` (`-`: stdin).
fn read_input(path: &Path) -> Result<Value> {
    let (name, text) = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the input from stdin")?;
        ("the input on stdin".to_owned(), s)
    } else {
        (path.display().to_string(), read_file(path)?)
    };
    serde_json::from_str(&text).map_err(|e| anyhow!("{name} is not valid JSON: {e}"))
}

fn policy_kind(t: PolicyTypeArg) -> PolicyType {
    match t {
        PolicyTypeArg::Plan => PolicyType::Plan,
        PolicyTypeArg::Approval => PolicyType::Approval,
        PolicyTypeArg::Trigger => PolicyType::Trigger,
        PolicyTypeArg::Push => PolicyType::Push,
        PolicyTypeArg::Notification => PolicyType::Notification,
        PolicyTypeArg::Login => PolicyType::Login,
    }
}

fn api_type(t: PolicyTypeArg) -> terraplane_client::PolicyType {
    use terraplane_client::PolicyType as Api;
    match t {
        PolicyTypeArg::Plan => Api::Plan,
        PolicyTypeArg::Approval => Api::Approval,
        PolicyTypeArg::Trigger => Api::Trigger,
        PolicyTypeArg::Push => Api::Push,
        PolicyTypeArg::Notification => Api::Notification,
        PolicyTypeArg::Login => Api::Login,
    }
}

fn create_input(a: PolicyCreateArgs, body: String) -> PolicyCreateInput {
    PolicyCreateInput {
        id: a.id,
        name: a.name,
        policy_type: api_type(a.policy_type),
        body,
        labels: (!a.labels.is_empty()).then_some(a.labels),
        description: a.description,
        space: a.space,
    }
}

fn update_input(a: PolicyUpdateArgs, body: Option<String>) -> PolicyUpdateInput {
    let labels = if a.clear_labels {
        Some(Vec::new())
    } else {
        (!a.labels.is_empty()).then_some(a.labels)
    };
    PolicyUpdateInput {
        name: a.name,
        body,
        labels,
        description: a.description,
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn types_are_the_engines_and_the_apis() {
        for t in PolicyTypeArg::value_variants() {
            let flag = t.to_possible_value().map(|v| v.get_name().to_uppercase());
            assert_eq!(flag.as_deref(), Some(policy_kind(*t).as_str()));
            assert_eq!(api_type(*t).as_str(), policy_kind(*t).as_str());
        }
        assert_eq!(PolicyTypeArg::value_variants().len(), PolicyType::ALL.len());
    }

    #[test]
    fn outcomes_are_the_servers_words() {
        let e = |f: fn(&mut Evaluation)| {
            let mut e = Evaluation::default();
            f(&mut e);
            e
        };
        let plan = PolicyType::Plan;
        assert_eq!(outcome(plan, &Evaluation::default()), "allow");
        assert_eq!(outcome(plan, &e(|e| e.warn = vec!["w".into()])), "warn");
        let both = e(|e| {
            e.warn = vec!["w".into()];
            e.deny = vec!["d".into()];
        });
        assert_eq!(outcome(plan, &both), "deny");
        let approval = PolicyType::Approval;
        assert_eq!(outcome(approval, &Evaluation::default()), "undecided");
        assert_eq!(outcome(approval, &e(|e| e.approve = true)), "approve");
        let split = e(|e| {
            e.approve = true;
            e.reject = true;
        });
        assert_eq!(outcome(approval, &split), "reject");
        assert_eq!(
            outcome(PolicyType::Trigger, &e(|e| e.trigger = vec!["app".into()])),
            "trigger"
        );
        assert_eq!(outcome(PolicyType::Trigger, &Evaluation::default()), "none");
        let login = e(|e| {
            e.allow = true;
            e.admin = true;
        });
        assert_eq!(outcome(PolicyType::Login, &login), "admin");
        assert_eq!(outcome(PolicyType::Login, &e(|e| e.login_deny = true)), "deny");
        let push = e(|e| {
            e.rules.insert("track".into(), Value::Bool(true));
        });
        assert_eq!(outcome(PolicyType::Push, &push), "decided");
        assert_eq!(outcome(PolicyType::Notification, &Evaluation::default()), "none");
    }

    #[test]
    fn plan_messages_are_denies_then_warnings() {
        let e = Evaluation {
            deny: vec!["d1".into(), "d2".into()],
            warn: vec!["w1".into()],
            ..Default::default()
        };
        assert_eq!(
            messages(PolicyType::Plan, &e),
            [("deny", "d1"), ("deny", "d2"), ("warn", "w1")]
        );
        assert!(messages(PolicyType::Approval, &e).is_empty());
    }

    #[test]
    fn update_sends_only_what_was_given_and_can_clear_the_labels() {
        let args = |labels: Vec<String>, clear_labels: bool| PolicyUpdateArgs {
            policy: "p".into(),
            file: None,
            labels,
            clear_labels,
            name: Some("New".into()),
            description: None,
        };
        assert_eq!(
            update_input(args(vec![], false), None),
            PolicyUpdateInput {
                name: Some("New".into()),
                ..Default::default()
            }
        );
        assert_eq!(update_input(args(vec![], true), None).labels, Some(vec![]));
        assert_eq!(
            update_input(args(vec!["a".into()], false), Some("package spacelift".into())).labels,
            Some(vec!["a".to_owned()])
        );
    }

    #[test]
    fn create_leaves_unset_fields_to_the_server() {
        let input = create_input(
            PolicyCreateArgs {
                name: "Deny big".into(),
                policy_type: PolicyTypeArg::Approval,
                file: "p.rego".into(),
                labels: vec![],
                id: None,
                space: None,
                description: None,
            },
            "package spacelift".into(),
        );
        assert_eq!(
            input,
            PolicyCreateInput {
                name: "Deny big".into(),
                policy_type: terraplane_client::PolicyType::Approval,
                body: "package spacelift".into(),
                ..Default::default()
            }
        );
    }
}
