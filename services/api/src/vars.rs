//! Contexts, stack values and AWS integrations: the operations behind GraphQL, and the
//! effective set of values a stack's run receives (see `terraplane_domain::vars` for the
//! precedence). Secrets are write-only here: nothing in this module returns one, except
//! [`run_values`], which only the claim of a run calls.

use terraplane_domain::SpaceId;
use terraplane_domain::vars::{self, Attached, Keyed, Source, VarKind};
use terraplane_store::{
    AwsIntegration, ConfigValue, Context, ContextAttachment, NewAwsIntegration, NewContext, NewValue, Owner, Stack,
    TenantScope,
};

use crate::AppState;
use crate::auth::{Action, Principal};
use crate::error::{ApiError, ApiResult};
use crate::service::{admin_space, event, get_stack, slug_or_name, store_err};

pub struct VarInput {
    pub name: String,
    pub value: String,
    pub kind: VarKind,
    pub secret: bool,
    pub apply_only: bool,
}

pub struct ContextInput {
    pub slug: Option<String>,
    pub name: String,
    pub description: Option<String>,
    pub labels: Vec<String>,
    pub space: Option<String>,
}

pub struct AwsInput {
    pub slug: Option<String>,
    pub name: String,
    pub role_arn: String,
    pub read_role_arn: Option<String>,
    pub audience: Option<String>,
    pub duration_secs: Option<i32>,
    pub space: Option<String>,
}

/// One value of a stack's effective set.
#[derive(Clone)]
pub struct Effective {
    pub value: ConfigValue,
    pub source: Source,
    pub auto_attached: bool,
}

/// What the audit trail keeps of a value: never the value itself.
fn value_json(v: &ConfigValue) -> serde_json::Value {
    serde_json::json!({
        "kind": v.kind.as_str(), "name": v.name, "secret": v.secret,
        "apply_only": v.apply_only, "checksum": v.checksum,
    })
}

fn context_json(c: &Context) -> serde_json::Value {
    serde_json::json!({
        "slug": c.slug, "name": c.name, "description": c.description, "labels": c.labels,
        "space_id": c.space_id.to_string(),
    })
}

fn check_input(st: &AppState, i: &VarInput) -> ApiResult<()> {
    vars::validate_name(i.kind, &i.name).map_err(ApiError::BadRequest)?;
    let max = st.cfg.api.max_variable_bytes;
    if i.value.len() > max {
        return Err(ApiError::TooLarge(format!(
            "the value of {:?} is {} bytes; the limit is {max}",
            i.name,
            i.value.len()
        )));
    }
    if i.kind != VarKind::File && i.value.contains('\0') {
        return Err(ApiError::BadRequest(
            "a variable's value cannot contain a NUL byte".into(),
        ));
    }
    if i.apply_only && i.kind == VarKind::Terraform {
        return Err(ApiError::BadRequest(
            "a Terraform variable is read at plan time, so it cannot be apply-only; use an environment variable or a file"
                .into(),
        ));
    }
    Ok(())
}

pub(crate) fn check_labels(labels: &[String]) -> ApiResult<()> {
    for l in labels {
        if l.trim().is_empty() || l.len() > 255 {
            return Err(ApiError::BadRequest(format!("label {l:?} must be 1 to 255 characters")));
        }
    }
    Ok(())
}

fn new_value(i: VarInput) -> NewValue {
    NewValue {
        kind: i.kind,
        name: i.name,
        value: i.value,
        secret: i.secret,
        apply_only: i.apply_only,
    }
}

pub(crate) use terraplane_scheduler::policies::reachable;

pub(crate) async fn check_reachable(
    st: &AppState,
    p: &Principal,
    stack: &Stack,
    space: SpaceId,
    what: &str,
) -> ApiResult<()> {
    let spaces = st.store.scope(p.org).list_spaces().await?;
    if reachable(&spaces, stack.space_id).contains(&space) {
        return Ok(());
    }
    let name = |id| {
        spaces
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.slug.clone())
            .unwrap_or_default()
    };
    Err(ApiError::BadRequest(format!(
        "the {what} is in space {:?}, which stack {:?} (in space {:?}) cannot use: it must be the stack's space or an ancestor it inherits from",
        name(space),
        stack.slug,
        name(stack.space_id)
    )))
}

// ---- contexts ----

pub async fn list_contexts(st: &AppState, p: &Principal) -> ApiResult<Vec<Context>> {
    p.require_member()?;
    let all = st.store.scope(p.org).list_contexts().await?;
    Ok(all.into_iter().filter(|c| p.can_see(c.space_id)).collect())
}

pub async fn get_context(st: &AppState, p: &Principal, slug: &str, action: Action) -> ApiResult<Context> {
    p.require_member()?;
    let c = st.store.scope(p.org).get_context_by_slug(slug).await?;
    p.require_in(c.space_id, Action::Read, "context")?;
    p.require_in(c.space_id, action, "context")?;
    Ok(c)
}

pub async fn create_context(st: &AppState, p: &Principal, i: ContextInput) -> ApiResult<Context> {
    let space = admin_space(st, p, i.space.as_deref()).await?;
    if i.name.trim().is_empty() {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    let slug = slug_or_name(i.slug.as_deref(), &i.name)?;
    check_labels(&i.labels)?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let c = tx
        .scope(p.org)
        .create_context(
            NewContext {
                slug: slug.to_string(),
                name: i.name,
                description: i.description.unwrap_or_default(),
                labels: i.labels,
                space_id: space.id,
            },
            now,
        )
        .await
        .map_err(store_err("context_exists"))?;
    tx.scope(p.org)
        .append_audit(
            event(p, "context.create", "context", &c.slug, None, Some(context_json(&c))),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(c)
}

pub async fn delete_context(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Context> {
    get_context(st, p, slug, Action::Admin).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let c = tx.scope(p.org).delete_context(slug).await?;
    tx.scope(p.org)
        .append_audit(
            event(p, "context.delete", "context", slug, Some(context_json(&c)), None),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(c)
}

pub async fn context_values(st: &AppState, c: &Context, p: &Principal) -> ApiResult<Vec<ConfigValue>> {
    Ok(st.store.scope(p.org).list_values(&Owner::Context(c.id.clone())).await?)
}

pub async fn set_context_value(st: &AppState, p: &Principal, slug: &str, i: VarInput) -> ApiResult<ConfigValue> {
    let c = get_context(st, p, slug, Action::Admin).await?;
    check_input(st, &i)?;
    set_value(st, p, Owner::Context(c.id), "context", slug, i).await
}

pub async fn unset_context_value(st: &AppState, p: &Principal, slug: &str, name: &str) -> ApiResult<ConfigValue> {
    let c = get_context(st, p, slug, Action::Admin).await?;
    unset_value(st, p, Owner::Context(c.id), "context", slug, name).await
}

pub async fn set_stack_value(st: &AppState, p: &Principal, stack: &str, i: VarInput) -> ApiResult<ConfigValue> {
    let s = get_stack(st, p, stack, Action::Write).await?;
    check_input(st, &i)?;
    set_value(st, p, Owner::Stack(s.id), "stack", stack, i).await
}

pub async fn unset_stack_value(st: &AppState, p: &Principal, stack: &str, name: &str) -> ApiResult<ConfigValue> {
    let s = get_stack(st, p, stack, Action::Write).await?;
    unset_value(st, p, Owner::Stack(s.id), "stack", stack, name).await
}

pub async fn stack_values(st: &AppState, p: &Principal, stack: &str) -> ApiResult<Vec<ConfigValue>> {
    let s = get_stack(st, p, stack, Action::Read).await?;
    Ok(st.store.scope(p.org).list_values(&Owner::Stack(s.id)).await?)
}

async fn set_value(
    st: &AppState,
    p: &Principal,
    owner: Owner,
    kind: &str,
    target: &str,
    i: VarInput,
) -> ApiResult<ConfigValue> {
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let v = tx.scope(p.org).set_value(&owner, new_value(i), now).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                &format!("{kind}.variable.set"),
                kind,
                format!("{target}/{}", v.name),
                None,
                Some(value_json(&v)),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(v)
}

async fn unset_value(
    st: &AppState,
    p: &Principal,
    owner: Owner,
    kind: &str,
    target: &str,
    name: &str,
) -> ApiResult<ConfigValue> {
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let v = tx.scope(p.org).unset_value(&owner, name).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                &format!("{kind}.variable.unset"),
                kind,
                format!("{target}/{name}"),
                Some(value_json(&v)),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(v)
}

// ---- attachments ----

pub async fn attach_context(
    st: &AppState,
    p: &Principal,
    context: &str,
    stack: &str,
    priority: i32,
) -> ApiResult<(ContextAttachment, Context, Stack)> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let c = get_context(st, p, context, Action::Read).await?;
    check_reachable(st, p, &s, c.space_id, "context").await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let a = tx.scope(p.org).attach_context(&c.id, s.id, priority, now).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "context.attach",
                "stack",
                stack,
                None,
                Some(serde_json::json!({ "context": c.slug, "priority": priority })),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok((a, c, s))
}

pub async fn detach_context(
    st: &AppState,
    p: &Principal,
    context: &str,
    stack: &str,
) -> ApiResult<(ContextAttachment, Context, Stack)> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let c = get_context(st, p, context, Action::Read).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let a = tx.scope(p.org).detach_context(&c.id, s.id).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "context.detach",
                "stack",
                stack,
                Some(serde_json::json!({ "context": c.slug, "priority": a.priority })),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok((a, c, s))
}

/// A context's attachments, explicit and by label, to stacks the caller can see.
pub async fn context_attachments(st: &AppState, p: &Principal, c: &Context) -> ApiResult<Vec<(String, i32, bool)>> {
    let scope = st.store.scope(p.org);
    let stacks = scope.list_stacks().await?;
    let spaces = scope.list_spaces().await?;
    let explicit = scope.context_attachments(&c.id).await?;
    let mut out = Vec::new();
    for s in stacks.iter().filter(|s| p.can_see(s.space_id)) {
        if let Some(a) = explicit.iter().find(|a| a.stack_id == s.id) {
            out.push((s.slug.clone(), a.priority, false));
        } else if vars::autoattaches(&c.labels, &s.labels) && reachable(&spaces, s.space_id).contains(&c.space_id) {
            out.push((s.slug.clone(), 0, true));
        }
    }
    out.sort();
    Ok(out)
}

/// Contexts attached to a stack, explicitly or by label, as precedence wants them.
async fn attached_contexts(scope: &TenantScope<'_>, stack: &Stack) -> ApiResult<Vec<(Context, Option<i32>)>> {
    let contexts = scope.list_contexts().await?;
    let spaces = scope.list_spaces().await?;
    let reach = reachable(&spaces, stack.space_id);
    let explicit = scope.stack_attachments(stack.id).await?;
    let mut out = Vec::new();
    for c in contexts {
        if let Some(a) = explicit.iter().find(|a| a.context_id == c.id) {
            out.push((c, Some(a.priority)));
        } else if vars::autoattaches(&c.labels, &stack.labels) && reach.contains(&c.space_id) {
            out.push((c, None));
        }
    }
    Ok(out)
}

#[derive(Clone)]
struct Item(ConfigValue, Option<String>);

impl Keyed for Item {
    fn kind(&self) -> VarKind {
        self.0.kind
    }
    fn name(&self) -> &str {
        &self.0.name
    }
}

async fn effective_items(scope: &TenantScope<'_>, stack: &Stack, reveal: bool) -> ApiResult<Vec<(Item, Source)>> {
    let load = |owner: Owner| async move {
        if reveal {
            Ok::<_, ApiError>(
                scope
                    .reveal_values(&owner)
                    .await?
                    .into_iter()
                    .map(|(v, plain)| Item(v, Some(plain)))
                    .collect::<Vec<_>>(),
            )
        } else {
            Ok(scope
                .list_values(&owner)
                .await?
                .into_iter()
                .map(|v| Item(v, None))
                .collect())
        }
    };
    let own = load(Owner::Stack(stack.id)).await?;
    let mut contexts = Vec::new();
    for (c, priority) in attached_contexts(scope, stack).await? {
        contexts.push(Attached {
            values: load(Owner::Context(c.id.clone())).await?,
            context: c.slug,
            internal_id: c.id,
            priority,
        });
    }
    Ok(vars::resolve(&own, &contexts))
}

/// The stack's effective set as users may see it (secrets without values).
pub async fn stack_environment(st: &AppState, p: &Principal, stack: &str) -> ApiResult<Vec<Effective>> {
    let s = get_stack(st, p, stack, Action::Read).await?;
    let scope = st.store.scope(p.org);
    Ok(effective_items(&scope, &s, false)
        .await?
        .into_iter()
        .map(|(Item(value, _), source)| Effective {
            auto_attached: matches!(source, Source::Context { priority: None, .. }),
            value,
            source,
        })
        .collect())
}

/// What a claimed run's phase gets: the values it receives, decrypted, as
/// `(value, plaintext)`, and the plan-visible secrets it doesn't receive but may print (the
/// Terraform variables a saved plan carries into its apply). Apply-only secrets never
/// reach a plan phase, not even for masking.
pub async fn run_values(
    st: &AppState,
    stack: &Stack,
    run_type: terraplane_domain::RunType,
    phase: terraplane_domain::RunPhase,
) -> ApiResult<(Vec<(ConfigValue, String)>, Vec<String>)> {
    let scope = st.store.scope(stack.org_id);
    let mut given = Vec::new();
    let mut also_mask = Vec::new();
    for (Item(v, plain), _) in effective_items(&scope, stack, true).await? {
        let Some(plain) = plain else { continue };
        if vars::delivered(v.kind, v.apply_only, run_type, phase) {
            given.push((v, plain));
        } else if v.secret && !v.apply_only {
            also_mask.push(plain);
        }
    }
    Ok((given, also_mask))
}

/// A masker for every secret value the stack's runs can receive.
pub async fn secret_masker(st: &AppState, stack: &Stack) -> ApiResult<terraplane_domain::mask::Masker> {
    let scope = st.store.scope(stack.org_id);
    let items = effective_items(&scope, stack, true).await?;
    Ok(terraplane_domain::mask::Masker::new(
        items
            .iter()
            .filter(|(Item(v, _), _)| v.secret)
            .filter_map(|(Item(_, plain), _)| plain.as_deref()),
    ))
}

// ---- AWS integrations ----

fn check_role_arn(field: &str, arn: &str) -> ApiResult<()> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ok = parts.len() == 6
        && parts[0] == "arn"
        && parts[2] == "iam"
        && parts[4].len() == 12
        && parts[4].chars().all(|c| c.is_ascii_digit())
        && parts[5].starts_with("role/")
        && parts[5].len() > 5;
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "{field} {arn:?} is not an IAM role ARN (arn:aws:iam::123456789012:role/name)"
        )))
    }
}

fn aws_json(i: &AwsIntegration) -> serde_json::Value {
    serde_json::json!({
        "slug": i.slug, "name": i.name, "role_arn": i.role_arn, "read_role_arn": i.read_role_arn,
        "audience": i.audience, "duration_secs": i.duration_secs, "space_id": i.space_id.to_string(),
    })
}

pub async fn list_aws(st: &AppState, p: &Principal) -> ApiResult<Vec<AwsIntegration>> {
    p.require_member()?;
    let all = st.store.scope(p.org).list_aws_integrations().await?;
    Ok(all.into_iter().filter(|i| p.can_see(i.space_id)).collect())
}

async fn get_aws(st: &AppState, p: &Principal, slug: &str, action: Action) -> ApiResult<AwsIntegration> {
    p.require_member()?;
    let i = st.store.scope(p.org).get_aws_integration_by_slug(slug).await?;
    p.require_in(i.space_id, Action::Read, "AWS integration")?;
    p.require_in(i.space_id, action, "AWS integration")?;
    Ok(i)
}

/// Slugs of the stacks (the caller can see) using an integration.
pub async fn aws_stacks(st: &AppState, p: &Principal, i: &AwsIntegration) -> ApiResult<Vec<String>> {
    let scope = st.store.scope(p.org);
    let ids = scope.aws_stacks(&i.id).await?;
    let stacks = scope.list_stacks().await?;
    Ok(stacks
        .into_iter()
        .filter(|s| ids.contains(&s.id) && p.can_see(s.space_id))
        .map(|s| s.slug)
        .collect())
}

pub async fn create_aws(st: &AppState, p: &Principal, i: AwsInput) -> ApiResult<AwsIntegration> {
    let space = admin_space(st, p, i.space.as_deref()).await?;
    if i.name.trim().is_empty() {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    check_role_arn("roleArn", &i.role_arn)?;
    if let Some(r) = &i.read_role_arn {
        check_role_arn("readRoleArn", r)?;
    }
    let duration = i.duration_secs.unwrap_or(900);
    if !(900..=43200).contains(&duration) {
        return Err(ApiError::BadRequest(format!(
            "durationSeconds {duration} must be between 900 and 43200 (what STS accepts)"
        )));
    }
    if i.audience
        .as_deref()
        .is_some_and(|a| a.trim().is_empty() || a.len() > 512)
    {
        return Err(ApiError::BadRequest("audience must be 1 to 512 characters".into()));
    }
    let slug = slug_or_name(i.slug.as_deref(), &i.name)?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let created = tx
        .scope(p.org)
        .create_aws_integration(
            NewAwsIntegration {
                slug: slug.to_string(),
                name: i.name,
                space_id: space.id,
                role_arn: i.role_arn,
                read_role_arn: i.read_role_arn,
                audience: i.audience,
                duration_secs: duration,
            },
            now,
        )
        .await
        .map_err(store_err("integration_exists"))?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "aws_integration.create",
                "aws_integration",
                &created.slug,
                None,
                Some(aws_json(&created)),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(created)
}

pub async fn delete_aws(st: &AppState, p: &Principal, slug: &str) -> ApiResult<AwsIntegration> {
    get_aws(st, p, slug, Action::Admin).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let gone = tx
        .scope(p.org)
        .delete_aws_integration(slug)
        .await
        .map_err(store_err("integration_in_use"))?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "aws_integration.delete",
                "aws_integration",
                slug,
                Some(aws_json(&gone)),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(gone)
}

pub async fn attach_aws(st: &AppState, p: &Principal, slug: &str, stack: &str) -> ApiResult<AwsIntegration> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let i = get_aws(st, p, slug, Action::Read).await?;
    check_reachable(st, p, &s, i.space_id, "AWS integration").await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org).attach_aws(&i.id, s.id, now).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "aws_integration.attach",
                "stack",
                stack,
                None,
                Some(serde_json::json!({ "aws_integration": i.slug })),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(i)
}

pub async fn detach_aws(st: &AppState, p: &Principal, stack: &str) -> ApiResult<AwsIntegration> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let i = tx.scope(p.org).detach_aws(s.id).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "aws_integration.detach",
                "stack",
                stack,
                Some(serde_json::json!({ "aws_integration": i.slug })),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(i)
}
