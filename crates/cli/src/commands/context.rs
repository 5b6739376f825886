//! `tpctl context …`: named sets of variables and files that stacks share by attaching
//! them, and the `KEY VALUE` input `stack env set` reads the same way.

use std::io::{IsTerminal, Read};

use anyhow::{Context as _, Result};
use terraplane_client::{ContextCreateInput, Variable, VariableInput, VariableKind};

use super::App;
use crate::cli::{ContextCommand, ContextCreateArgs, VariableArgs, VariableKindArg};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn context(&mut self, cmd: ContextCommand) -> Result<()> {
        match cmd {
            ContextCommand::Create(a) => {
                let c = self.client.context_create(&create_input(a)).await?;
                self.show(&c, |c| format!("Created context {}\n\n{}", c.id, output::context(c)))
            }
            ContextCommand::Set { context, variable } => {
                let input = self.variable_input(variable)?;
                let v = self.client.context_set_variable(&context, &input).await?;
                self.show(&v, |v| set_message(v, &format!("context {context}")))
            }
            ContextCommand::Unset { context, key } => {
                let v = self.client.context_unset_variable(&context, &key).await?;
                self.show(&v, |v| {
                    format!("Removed {} from context {context}\n", output::variable_label(v))
                })
            }
            ContextCommand::List => {
                let contexts = self.client.contexts().await?;
                if contexts.is_empty() && !self.json_mode() {
                    return self.remark("No contexts.\n");
                }
                self.show(&contexts, |c| output::contexts_table(c))
            }
            ContextCommand::Show { context } => {
                let c = self.client.context(&context).await?;
                self.show(&c, output::context)
            }
            ContextCommand::Attach {
                context,
                stack,
                priority,
            } => {
                let a = self.client.context_attach(&context, &stack, priority).await?;
                self.show(&a, |a| {
                    format!(
                        "Attached context {} to stack {} (priority {})\n",
                        a.context, a.stack, a.priority
                    )
                })
            }
            ContextCommand::Detach { context, stack } => {
                let a = self.client.context_detach(&context, &stack).await?;
                self.show(&a, |a| {
                    format!("Detached context {} from stack {}\n", a.context, a.stack)
                })
            }
            ContextCommand::Delete { context } => {
                let c = self.client.context_delete(&context).await?;
                self.show(&c, |c| format!("Deleted context {}\n", c.id))
            }
        }
    }

    /// The API input for `KEY VALUE`; VALUE `-` is read from stdin.
    pub(super) fn variable_input(&mut self, a: VariableArgs) -> Result<VariableInput> {
        let kind = kind_of(a.kind);
        let value = if a.value == "-" {
            self.stdin_value(kind == VariableKind::File)?
        } else {
            a.value
        };
        Ok(VariableInput {
            name: a.key,
            value,
            kind,
            secret: a.secret,
            apply_only: a.apply_only,
        })
    }

    /// A value given as `-`, read from stdin; `verbatim` keeps its final line break.
    pub(super) fn stdin_value(&mut self, verbatim: bool) -> Result<String> {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            self.remark("Reading the value from stdin; end it with Ctrl-D.\n")?;
        }
        read_value(&mut stdin.lock(), verbatim)
    }
}

/// What `set` reports: `Set secret environment variable TOKEN in context aws (checksum 1a2b)`.
pub(super) fn set_message(v: &Variable, place: &str) -> String {
    let secret = if v.secret { "secret " } else { "" };
    format!(
        "Set {secret}{} in {place} (checksum {})\n",
        output::variable_label(v),
        v.checksum
    )
}

fn kind_of(k: VariableKindArg) -> VariableKind {
    match k {
        VariableKindArg::Env => VariableKind::Env,
        VariableKindArg::Terraform => VariableKind::Terraform,
        VariableKindArg::File => VariableKind::File,
    }
}

/// A value from stdin. `verbatim` (a file's content) keeps it byte for byte; otherwise it
/// loses the line break `echo` adds (only that: spaces may be part of the value).
fn read_value(r: &mut impl Read, verbatim: bool) -> Result<String> {
    let mut s = String::new();
    r.read_to_string(&mut s).context("cannot read the value from stdin")?;
    if !verbatim {
        s.truncate(s.trim_end_matches(['\r', '\n']).len());
    }
    Ok(s)
}

fn create_input(a: ContextCreateArgs) -> ContextCreateInput {
    ContextCreateInput {
        id: a.id,
        name: a.name,
        description: a.description,
        labels: (!a.labels.is_empty()).then_some(a.labels),
        space: a.space,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_from_stdin_is_kept_verbatim_and_other_values_lose_their_line_break() -> Result<()> {
        let input = b"  two words \r\n";
        assert_eq!(read_value(&mut &input[..], false)?, "  two words ");
        assert_eq!(read_value(&mut &input[..], true)?, "  two words \r\n");
        assert_eq!(read_value(&mut &b"a = 1\nb = 2\n"[..], true)?, "a = 1\nb = 2\n");
        assert_eq!(read_value(&mut &b"\n"[..], false)?, "");
        assert!(read_value(&mut &b"\xff\xfe"[..], true).is_err());
        Ok(())
    }

    #[test]
    fn kinds_are_the_apis() {
        assert_eq!(kind_of(VariableKindArg::Env), VariableKind::Env);
        assert_eq!(kind_of(VariableKindArg::Terraform), VariableKind::Terraform);
        assert_eq!(kind_of(VariableKindArg::File), VariableKind::File);
    }

    #[test]
    fn create_leaves_unset_fields_to_the_server() {
        let a = ContextCreateArgs {
            name: "AWS prod".into(),
            id: None,
            labels: vec![],
            description: None,
            space: None,
        };
        assert_eq!(
            create_input(a),
            ContextCreateInput {
                name: "AWS prod".into(),
                ..Default::default()
            }
        );
    }
}
