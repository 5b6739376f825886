//! Configuration values that reach a run: environment variables, Terraform variables and
//! mounted files, set on a stack or on a context (a named, reusable set attached to
//! stacks). Validation of their names, the precedence that picks one value per name, and
//! the phase rules that decide which values a run phase receives.
//!
//! Precedence, highest first:
//! 1. values set on the stack itself;
//! 2. contexts attached explicitly, by ascending priority number (0 beats 1), ties broken
//!    by context id, then by the context's internal id;
//! 3. contexts attached through an `autoattach:<label>` label, by context id.
//!
//! A context attached both ways counts as attached explicitly. Values are identified by
//! kind and name, so an environment variable `region` and a Terraform variable `region`
//! are two values.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::run::{RunPhase, RunType};

/// What a value becomes in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VarKind {
    /// An environment variable of every terraform command of the phase.
    Env,
    /// A Terraform input variable, passed in a generated `.tfvars.json` at plan time.
    Terraform,
    /// A file written at this path relative to the project root before terraform runs.
    File,
}

impl VarKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VarKind::Env => "env",
            VarKind::Terraform => "terraform",
            VarKind::File => "file",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "env" => Some(VarKind::Env),
            "terraform" => Some(VarKind::Terraform),
            "file" => Some(VarKind::File),
            _ => None,
        }
    }
}

/// Names the runner sets itself; a value may not replace them.
const RESERVED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TF_CLI_CONFIG_FILE",
    "TF_IN_AUTOMATION",
    "TF_INPUT",
    "TF_DATA_DIR",
    "CHECKPOINT_DISABLE",
];
const RESERVED_ENV_PREFIXES: &[&str] = &["TERRAPLANE_", "TF_HTTP_"];
/// Identifiers Terraform reserves as variable names.
const RESERVED_TF_VARS: &[&str] = &[
    "source",
    "version",
    "providers",
    "count",
    "for_each",
    "lifecycle",
    "depends_on",
    "locals",
];
/// Files the runner writes into the project root.
const RESERVED_FILES: &[&str] = &["terraplane_backend_override.tf", "terraplane.tfplan"];

pub const MAX_NAME_LEN: usize = 512;

/// Checks a value's name for its kind; the error says what is wrong.
pub fn validate_name(kind: VarKind, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name must not be empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("the name is longer than {MAX_NAME_LEN} bytes"));
    }
    match kind {
        VarKind::Env => {
            if !is_identifier(name, false) {
                return Err(format!(
                    "{name:?} is not a valid environment variable name (letters, digits and underscores, not starting with a digit)"
                ));
            }
            if RESERVED_ENV.contains(&name) || RESERVED_ENV_PREFIXES.iter().any(|p| name.starts_with(p)) {
                return Err(format!("{name:?} is set by the runner and cannot be overridden"));
            }
        }
        VarKind::Terraform => {
            if !is_identifier(name, true) {
                return Err(format!(
                    "{name:?} is not a valid Terraform variable name (letters, digits, underscores and hyphens, starting with a letter or underscore)"
                ));
            }
            if RESERVED_TF_VARS.contains(&name) {
                return Err(format!("{name:?} is reserved by Terraform and cannot name a variable"));
            }
        }
        VarKind::File => validate_file_path(name)?,
    }
    Ok(())
}

fn is_identifier(s: &str, hyphens: bool) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else { return false };
    (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (hyphens && c == '-'))
}

/// A mounted file's path: relative, inside the work directory, no `.`/`..` components.
fn validate_file_path(p: &str) -> Result<(), String> {
    let escape = || {
        Err(format!(
            "file path {p:?} must be relative and stay inside the work directory"
        ))
    };
    if p.starts_with('/') || p.starts_with('~') || p.contains('\\') || p.contains('\0') {
        return escape();
    }
    for part in p.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return escape();
        }
    }
    if RESERVED_FILES.contains(&p) || p.starts_with(".terraform/") || p == ".terraform" {
        return Err(format!("{p:?} is written by the runner and cannot be mounted"));
    }
    Ok(())
}

/// Whether a value goes to this phase of this run. Terraform variables are read at plan
/// time only (the saved plan carries them into the apply); apply-only values never reach a
/// plan, so proposed runs never see them.
pub fn delivered(kind: VarKind, apply_only: bool, run_type: RunType, phase: RunPhase) -> bool {
    match phase {
        RunPhase::Plan => !apply_only,
        RunPhase::Apply => run_type == RunType::Tracked && kind != VarKind::Terraform,
    }
}

/// A value with its identity, whatever else it carries.
pub trait Keyed {
    fn kind(&self) -> VarKind;
    fn name(&self) -> &str;
}

/// Where a context's values come from for one stack.
#[derive(Clone, Debug)]
pub struct Attached<V> {
    /// The context's id (slug), shown as the source.
    pub context: String,
    /// The context's internal id: the last tie-breaker.
    pub internal_id: String,
    /// The attachment's priority; `None` when the context is attached only by label.
    pub priority: Option<i32>,
    pub values: Vec<V>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Stack,
    Context { context: String, priority: Option<i32> },
}

impl Source {
    pub fn label(&self) -> String {
        match self {
            Source::Stack => "stack".into(),
            Source::Context { context, .. } => format!("context:{context}"),
        }
    }
}

/// The effective values of a stack: one per kind and name, by the precedence above,
/// ordered by kind then name.
pub fn resolve<V: Keyed + Clone>(stack: &[V], contexts: &[Attached<V>]) -> Vec<(V, Source)> {
    let mut ordered: Vec<&Attached<V>> = contexts.iter().collect();
    ordered.sort_by(|a, b| {
        let rank = |c: &Attached<V>| (c.priority.is_none(), c.priority.unwrap_or(0));
        rank(a)
            .cmp(&rank(b))
            .then_with(|| a.context.cmp(&b.context))
            .then_with(|| a.internal_id.cmp(&b.internal_id))
    });
    let mut seen: HashSet<(VarKind, String)> = HashSet::new();
    let mut out = Vec::new();
    for v in stack {
        if seen.insert((v.kind(), v.name().to_owned())) {
            out.push((v.clone(), Source::Stack));
        }
    }
    for c in ordered {
        for v in &c.values {
            if seen.insert((v.kind(), v.name().to_owned())) {
                out.push((
                    v.clone(),
                    Source::Context {
                        context: c.context.clone(),
                        priority: c.priority,
                    },
                ));
            }
        }
    }
    out.sort_by(|(a, _), (b, _)| (a.kind(), a.name()).cmp(&(b.kind(), b.name())));
    out
}

/// The label a stack must carry for a context with `labels` to attach itself, if any:
/// `autoattach:<label>` (and `autoattach:*` for every stack).
pub fn autoattaches(context_labels: &[String], stack_labels: &[String]) -> bool {
    context_labels.iter().any(|l| match l.strip_prefix("autoattach:") {
        Some("*") => true,
        Some(want) => stack_labels.iter().any(|s| s == want),
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct V(VarKind, &'static str, &'static str);
    impl Keyed for V {
        fn kind(&self) -> VarKind {
            self.0
        }
        fn name(&self) -> &str {
            self.1
        }
    }

    fn ctx(name: &str, priority: Option<i32>, values: Vec<V>) -> Attached<V> {
        Attached {
            context: name.into(),
            internal_id: format!("id-{name}"),
            priority,
            values,
        }
    }

    #[test]
    fn names_are_checked_per_kind() {
        assert!(validate_name(VarKind::Env, "AWS_REGION").is_ok());
        assert!(validate_name(VarKind::Env, "1ABC").is_err());
        assert!(validate_name(VarKind::Env, "A-B").is_err());
        assert!(validate_name(VarKind::Env, "TF_HTTP_PASSWORD").is_err());
        assert!(validate_name(VarKind::Env, "TERRAPLANE_OIDC_TOKEN").is_err());
        assert!(validate_name(VarKind::Env, "PATH").is_err());
        assert!(validate_name(VarKind::Terraform, "instance-type").is_ok());
        assert!(validate_name(VarKind::Terraform, "_x").is_ok());
        assert!(validate_name(VarKind::Terraform, "9lives").is_err());
        assert!(validate_name(VarKind::Terraform, "a.b").is_err());
        assert!(validate_name(VarKind::Terraform, "count").is_err());
        assert!(validate_name(VarKind::Terraform, "").is_err());
        assert!(validate_name(VarKind::File, "certs/ca.pem").is_ok());
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\\b",
            "~/x",
            "terraplane.tfplan",
        ] {
            assert!(validate_name(VarKind::File, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn stack_beats_contexts_priority_then_id_then_labels() {
        use VarKind::*;
        let stack = vec![V(Env, "A", "stack")];
        let contexts = vec![
            ctx(
                "zeta",
                Some(1),
                vec![V(Env, "A", "zeta"), V(Env, "B", "zeta"), V(Env, "C", "zeta")],
            ),
            ctx("alpha", Some(1), vec![V(Env, "C", "alpha")]),
            ctx("first", Some(0), vec![V(Env, "B", "first"), V(Terraform, "A", "first")]),
            ctx(
                "auto",
                None,
                vec![V(Env, "B", "auto"), V(Env, "D", "auto"), V(File, "A", "auto")],
            ),
        ];
        let got: Vec<(String, String, &str)> = resolve(&stack, &contexts)
            .into_iter()
            .map(|(v, s)| (format!("{}:{}", v.0.as_str(), v.1), s.label(), v.2))
            .collect();
        assert_eq!(
            got,
            vec![
                ("env:A".into(), "stack".into(), "stack"),
                ("env:B".into(), "context:first".into(), "first"),
                ("env:C".into(), "context:alpha".into(), "alpha"),
                ("env:D".into(), "context:auto".into(), "auto"),
                ("terraform:A".into(), "context:first".into(), "first"),
                ("file:A".into(), "context:auto".into(), "auto"),
            ]
        );
    }

    #[test]
    fn phases_get_what_they_should() {
        use RunPhase::*;
        use RunType::*;
        assert!(delivered(VarKind::Terraform, false, Tracked, Plan));
        assert!(!delivered(VarKind::Terraform, false, Tracked, Apply));
        assert!(!delivered(VarKind::Env, true, Tracked, Plan));
        assert!(delivered(VarKind::Env, true, Tracked, Apply));
        assert!(!delivered(VarKind::Env, true, Proposed, Plan));
        assert!(!delivered(VarKind::File, true, Proposed, Apply));
    }

    #[test]
    fn autoattach_labels() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(autoattaches(&s(&["autoattach:prod"]), &s(&["prod", "x"])));
        assert!(!autoattaches(&s(&["autoattach:prod"]), &s(&["dev"])));
        assert!(!autoattaches(&s(&["prod"]), &s(&["prod"])));
        assert!(autoattaches(&s(&["autoattach:*"]), &s(&[])));
    }
}
