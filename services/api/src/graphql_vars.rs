//! GraphQL for contexts, stack values and AWS integrations (merged into the root query and
//! mutation types). A secret's `value` is always null: secrets are write-only.

use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};
use terraplane_domain::vars::Source;

use crate::graphql::{principal, state};
use crate::vars::{self, AwsInput, ContextInput, VarInput};

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "VariableKind", remote = "terraplane_domain::vars::VarKind")]
pub enum GqlVarKind {
    /// An environment variable.
    Env,
    /// A Terraform input variable (the name is the variable's).
    Terraform,
    /// A file mounted at this path relative to the project root.
    File,
}

#[derive(SimpleObject)]
#[graphql(name = "Variable")]
pub struct Variable {
    name: String,
    kind: GqlVarKind,
    secret: bool,
    apply_only: bool,
    /// Null for a secret: secrets are write-only.
    value: Option<String>,
    /// A short hash that tells versions of the value apart without revealing it.
    checksum: String,
    updated_at: DateTime<Utc>,
}

impl From<terraplane_store::ConfigValue> for Variable {
    fn from(v: terraplane_store::ConfigValue) -> Self {
        Self {
            name: v.name,
            kind: v.kind.into(),
            secret: v.secret,
            apply_only: v.apply_only,
            value: if v.secret { None } else { v.value },
            checksum: v.checksum,
            updated_at: v.updated_at,
        }
    }
}

#[derive(SimpleObject)]
pub struct EffectiveVariable {
    name: String,
    kind: GqlVarKind,
    secret: bool,
    apply_only: bool,
    /// Null for a secret.
    value: Option<String>,
    checksum: String,
    /// `stack`, or `context:<context id>`.
    source: String,
    /// The attachment's priority; null for stack values and contexts attached by label.
    priority: Option<i32>,
    auto_attached: bool,
}

impl From<vars::Effective> for EffectiveVariable {
    fn from(e: vars::Effective) -> Self {
        let priority = match &e.source {
            Source::Context { priority, .. } => *priority,
            Source::Stack => None,
        };
        let v = Variable::from(e.value);
        Self {
            name: v.name,
            kind: v.kind,
            secret: v.secret,
            apply_only: v.apply_only,
            value: v.value,
            checksum: v.checksum,
            source: e.source.label(),
            priority,
            auto_attached: e.auto_attached,
        }
    }
}

#[derive(SimpleObject)]
pub struct ContextAttachment {
    /// The context's id.
    context: String,
    /// The stack's id.
    stack: String,
    priority: i32,
    /// Attached through an `autoattach:<label>` label rather than explicitly.
    auto_attached: bool,
}

pub struct ContextGql {
    c: terraplane_store::Context,
    space: String,
}

#[Object(name = "Context")]
impl ContextGql {
    /// The context's slug.
    async fn id(&self) -> ID {
        ID(self.c.slug.clone())
    }
    async fn name(&self) -> &str {
        &self.c.name
    }
    async fn description(&self) -> &str {
        &self.c.description
    }
    /// `autoattach:<label>` attaches the context to every stack labelled `<label>`
    /// (`autoattach:*`: every stack) in its space and the spaces inheriting from it.
    async fn labels(&self) -> &[String] {
        &self.c.labels
    }
    /// Slug of the context's space.
    async fn space(&self) -> &str {
        &self.space
    }
    async fn variables(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Variable>> {
        let p = principal(ctx)?;
        Ok(vars::context_values(state(ctx), &self.c, p)
            .await?
            .into_iter()
            .map(Variable::from)
            .collect())
    }
    /// Stacks (that you can see) using the context.
    async fn attachments(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<ContextAttachment>> {
        let p = principal(ctx)?;
        Ok(vars::context_attachments(state(ctx), p, &self.c)
            .await?
            .into_iter()
            .map(|(stack, priority, auto_attached)| ContextAttachment {
                context: self.c.slug.clone(),
                stack,
                priority,
                auto_attached,
            })
            .collect())
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.c.created_at
    }
}

#[derive(SimpleObject)]
pub struct AwsIntegration {
    id: ID,
    name: String,
    /// Slug of the integration's space.
    space: String,
    /// Assumed for applies, and for plans when there is no read role.
    role_arn: String,
    /// Assumed for plans and proposed runs.
    read_role_arn: Option<String>,
    /// `aud` of the identity token given to STS (default: `identity.audience`).
    audience: Option<String>,
    duration_seconds: i32,
    /// Stacks (that you can see) using the integration.
    stacks: Vec<String>,
}

#[derive(InputObject)]
pub struct VariableInput {
    /// Environment variable name, Terraform variable name, or relative file path.
    name: String,
    value: String,
    #[graphql(default_with = "GqlVarKind::Env")]
    kind: GqlVarKind,
    #[graphql(default = false)]
    secret: bool,
    /// Given to apply phases only (never to plans or proposed runs).
    #[graphql(default = false)]
    apply_only: bool,
}

impl From<VariableInput> for VarInput {
    fn from(i: VariableInput) -> Self {
        VarInput {
            name: i.name,
            value: i.value,
            kind: i.kind.into(),
            secret: i.secret,
            apply_only: i.apply_only,
        }
    }
}

#[derive(InputObject)]
pub struct ContextCreateInput {
    /// The slug; derived from the name when absent.
    id: Option<String>,
    name: String,
    description: Option<String>,
    labels: Option<Vec<String>>,
    /// Slug of the space (root when absent).
    space: Option<String>,
}

#[derive(InputObject)]
pub struct AwsIntegrationInput {
    id: Option<String>,
    name: String,
    role_arn: String,
    read_role_arn: Option<String>,
    audience: Option<String>,
    /// 900 to 43200 (default 900).
    duration_seconds: Option<i32>,
    space: Option<String>,
}

async fn space_slug(ctx: &Context<'_>, id: terraplane_domain::SpaceId) -> async_graphql::Result<String> {
    let p = principal(ctx)?;
    let s = state(ctx)
        .store
        .scope(p.org)
        .get_space(id)
        .await
        .map_err(crate::error::ApiError::from)?;
    Ok(s.slug)
}

async fn context_gql(ctx: &Context<'_>, c: terraplane_store::Context) -> async_graphql::Result<ContextGql> {
    Ok(ContextGql {
        space: space_slug(ctx, c.space_id).await?,
        c,
    })
}

async fn aws_gql(ctx: &Context<'_>, i: terraplane_store::AwsIntegration) -> async_graphql::Result<AwsIntegration> {
    let p = principal(ctx)?;
    Ok(AwsIntegration {
        stacks: vars::aws_stacks(state(ctx), p, &i).await?,
        space: space_slug(ctx, i.space_id).await?,
        id: ID(i.slug),
        name: i.name,
        role_arn: i.role_arn,
        read_role_arn: i.read_role_arn,
        audience: i.audience,
        duration_seconds: i.duration_secs,
    })
}

#[derive(Default)]
pub struct VarsQuery;

#[Object]
impl VarsQuery {
    /// Contexts you can see.
    async fn contexts(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<ContextGql>> {
        let p = principal(ctx)?;
        let mut out = Vec::new();
        for c in vars::list_contexts(state(ctx), p).await? {
            out.push(context_gql(ctx, c).await?);
        }
        Ok(out)
    }

    async fn context(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<ContextGql> {
        let p = principal(ctx)?;
        let c = vars::get_context(state(ctx), p, &id, crate::auth::Action::Read).await?;
        context_gql(ctx, c).await
    }

    /// The stack's own values.
    async fn stack_variables(&self, ctx: &Context<'_>, stack_id: ID) -> async_graphql::Result<Vec<Variable>> {
        let p = principal(ctx)?;
        Ok(vars::stack_values(state(ctx), p, &stack_id)
            .await?
            .into_iter()
            .map(Variable::from)
            .collect())
    }

    /// What the stack's runs receive: stack values over attached contexts (by ascending
    /// priority, then context id) over contexts attached by label (by context id).
    async fn stack_environment(
        &self,
        ctx: &Context<'_>,
        stack_id: ID,
    ) -> async_graphql::Result<Vec<EffectiveVariable>> {
        let p = principal(ctx)?;
        Ok(vars::stack_environment(state(ctx), p, &stack_id)
            .await?
            .into_iter()
            .map(EffectiveVariable::from)
            .collect())
    }

    async fn aws_integrations(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<AwsIntegration>> {
        let p = principal(ctx)?;
        let mut out = Vec::new();
        for i in vars::list_aws(state(ctx), p).await? {
            out.push(aws_gql(ctx, i).await?);
        }
        Ok(out)
    }
}

#[derive(Default)]
pub struct VarsMutation;

#[Object]
impl VarsMutation {
    /// Creates a context; needs admin on its space.
    async fn context_create(&self, ctx: &Context<'_>, input: ContextCreateInput) -> async_graphql::Result<ContextGql> {
        let p = principal(ctx)?;
        let c = vars::create_context(
            state(ctx),
            p,
            ContextInput {
                slug: input.id,
                name: input.name,
                description: input.description,
                labels: input.labels.unwrap_or_default(),
                space: input.space,
            },
        )
        .await?;
        context_gql(ctx, c).await
    }

    /// Deletes a context with its values and attachments.
    async fn context_delete(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<ContextGql> {
        let p = principal(ctx)?;
        let c = vars::delete_context(state(ctx), p, &id).await?;
        context_gql(ctx, c).await
    }

    /// Sets (or replaces) a context's value.
    async fn context_set_variable(
        &self,
        ctx: &Context<'_>,
        context: ID,
        input: VariableInput,
    ) -> async_graphql::Result<Variable> {
        let p = principal(ctx)?;
        Ok(vars::set_context_value(state(ctx), p, &context, input.into())
            .await?
            .into())
    }

    async fn context_unset_variable(
        &self,
        ctx: &Context<'_>,
        context: ID,
        name: String,
    ) -> async_graphql::Result<Variable> {
        let p = principal(ctx)?;
        Ok(vars::unset_context_value(state(ctx), p, &context, &name).await?.into())
    }

    /// Attaches a context to a stack (or changes its priority: lower numbers win).
    async fn context_attach(
        &self,
        ctx: &Context<'_>,
        context: ID,
        stack_id: ID,
        #[graphql(default = 0)] priority: i32,
    ) -> async_graphql::Result<ContextAttachment> {
        let p = principal(ctx)?;
        let (a, c, s) = vars::attach_context(state(ctx), p, &context, &stack_id, priority).await?;
        Ok(ContextAttachment {
            context: c.slug,
            stack: s.slug,
            priority: a.priority,
            auto_attached: false,
        })
    }

    async fn context_detach(
        &self,
        ctx: &Context<'_>,
        context: ID,
        stack_id: ID,
    ) -> async_graphql::Result<ContextAttachment> {
        let p = principal(ctx)?;
        let (a, c, s) = vars::detach_context(state(ctx), p, &context, &stack_id).await?;
        Ok(ContextAttachment {
            context: c.slug,
            stack: s.slug,
            priority: a.priority,
            auto_attached: false,
        })
    }

    /// Sets (or replaces) a stack's own value; needs the writer role.
    async fn stack_set_variable(
        &self,
        ctx: &Context<'_>,
        stack_id: ID,
        input: VariableInput,
    ) -> async_graphql::Result<Variable> {
        let p = principal(ctx)?;
        Ok(vars::set_stack_value(state(ctx), p, &stack_id, input.into())
            .await?
            .into())
    }

    async fn stack_unset_variable(
        &self,
        ctx: &Context<'_>,
        stack_id: ID,
        name: String,
    ) -> async_graphql::Result<Variable> {
        let p = principal(ctx)?;
        Ok(vars::unset_stack_value(state(ctx), p, &stack_id, &name).await?.into())
    }

    async fn aws_integration_create(
        &self,
        ctx: &Context<'_>,
        input: AwsIntegrationInput,
    ) -> async_graphql::Result<AwsIntegration> {
        let p = principal(ctx)?;
        let i = vars::create_aws(
            state(ctx),
            p,
            AwsInput {
                slug: input.id,
                name: input.name,
                role_arn: input.role_arn,
                read_role_arn: input.read_role_arn,
                audience: input.audience,
                duration_secs: input.duration_seconds,
                space: input.space,
            },
        )
        .await?;
        aws_gql(ctx, i).await
    }

    async fn aws_integration_delete(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<AwsIntegration> {
        let p = principal(ctx)?;
        let i = vars::delete_aws(state(ctx), p, &id).await?;
        aws_gql(ctx, i).await
    }

    /// Gives the stack's runs credentials of this integration's roles.
    async fn aws_integration_attach(
        &self,
        ctx: &Context<'_>,
        id: ID,
        stack_id: ID,
    ) -> async_graphql::Result<AwsIntegration> {
        let p = principal(ctx)?;
        let i = vars::attach_aws(state(ctx), p, &id, &stack_id).await?;
        aws_gql(ctx, i).await
    }

    async fn aws_integration_detach(&self, ctx: &Context<'_>, stack_id: ID) -> async_graphql::Result<AwsIntegration> {
        let p = principal(ctx)?;
        let i = vars::detach_aws(state(ctx), p, &stack_id).await?;
        aws_gql(ctx, i).await
    }
}
