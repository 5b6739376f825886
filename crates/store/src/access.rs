//! Spaces, teams and role bindings, and loading a caller's [`Access`] for one request.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set,
    TransactionSession, TransactionTrait,
};
use terraplane_domain::{Access, Role, SpaceId, SpaceNode, TeamId, UserId};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::*;
use crate::tenant::TenantScope;

pub const ROOT_SPACE: &str = "root";

#[derive(Clone, Debug)]
pub struct NewSpace {
    pub slug: String,
    pub name: String,
    pub description: String,
    pub parent: SpaceId,
    pub inherit: bool,
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    pub async fn list_spaces(&self) -> Result<Vec<Space>> {
        spaces::Entity::find()
            .filter(spaces::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(spaces::Column::CreatedAt)
            .order_by_asc(spaces::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(Space::try_from)
            .collect()
    }

    pub async fn get_space(&self, id: SpaceId) -> Result<Space> {
        spaces::Entity::find_by_id(id.to_string())
            .filter(spaces::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("space"))?
            .try_into()
    }

    pub async fn get_space_by_slug(&self, slug: &str) -> Result<Space> {
        spaces::Entity::find()
            .filter(spaces::Column::OrgId.eq(self.org_s.clone()))
            .filter(spaces::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("space"))?
            .try_into()
    }

    pub async fn root_space(&self) -> Result<Space> {
        self.get_space_by_slug(ROOT_SPACE).await
    }

    pub async fn create_space(&self, s: NewSpace, now: DateTime<Utc>) -> Result<Space> {
        self.get_space(s.parent).await?;
        let slug = s.slug.clone();
        spaces::ActiveModel {
            id: Set(SpaceId::new().to_string()),
            org_id: Set(self.org_s.clone()),
            slug: Set(s.slug),
            name: Set(s.name),
            description: Set(s.description),
            parent_id: Set(Some(s.parent.to_string())),
            inherit: Set(s.inherit),
            created_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|e| crate::conflict(e, format!("a space with slug {slug:?} already exists")))?
        .try_into()
    }

    /// Deletes an empty space: refused for the root, and while it holds stacks or spaces.
    pub async fn delete_space(&self, slug: &str) -> Result<Space> {
        let space = self.get_space_by_slug(slug).await?;
        if space.parent_id.is_none() {
            return Err(StoreError::Conflict("the root space cannot be deleted".into()));
        }
        let tx = self.db.begin().await?;
        let sid = space.id.to_string();
        let stacks = stacks::Entity::find()
            .filter(stacks::Column::SpaceId.eq(sid.clone()))
            .count(&tx)
            .await?;
        if stacks > 0 {
            return Err(StoreError::Conflict(format!(
                "space {slug:?} still holds {stacks} stack(s)"
            )));
        }
        let children = spaces::Entity::find()
            .filter(spaces::Column::ParentId.eq(sid.clone()))
            .count(&tx)
            .await?;
        if children > 0 {
            return Err(StoreError::Conflict(format!(
                "space {slug:?} still holds {children} space(s)"
            )));
        }
        role_bindings::Entity::delete_many()
            .filter(role_bindings::Column::SpaceId.eq(sid.clone()))
            .exec(&tx)
            .await?;
        spaces::Entity::delete_many()
            .filter(spaces::Column::Id.eq(sid))
            .filter(spaces::Column::OrgId.eq(self.org_s.clone()))
            .exec(&tx)
            .await?;
        tx.commit().await?;
        Ok(space)
    }

    // ---- teams ----

    pub async fn create_team(&self, slug: &str, name: &str, now: DateTime<Utc>) -> Result<Team> {
        teams::ActiveModel {
            id: Set(TeamId::new().to_string()),
            org_id: Set(self.org_s.clone()),
            slug: Set(slug.to_owned()),
            name: Set(name.to_owned()),
            created_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|e| crate::conflict(e, format!("a team with slug {slug:?} already exists")))?
        .try_into()
    }

    pub async fn list_teams(&self) -> Result<Vec<Team>> {
        teams::Entity::find()
            .filter(teams::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(teams::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(Team::try_from)
            .collect()
    }

    pub async fn get_team_by_slug(&self, slug: &str) -> Result<Team> {
        teams::Entity::find()
            .filter(teams::Column::OrgId.eq(self.org_s.clone()))
            .filter(teams::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("team"))?
            .try_into()
    }

    /// Adds a member of this organization to one of its teams (idempotent).
    pub async fn add_team_member(&self, team: TeamId, user: UserId, now: DateTime<Utc>) -> Result<()> {
        self.member_role(user).await?.ok_or(StoreError::NotFound("user"))?;
        let exists = team_members::Entity::find_by_id((team.to_string(), user.to_string()))
            .one(self.db)
            .await?;
        if exists.is_some() {
            return Ok(());
        }
        team_members::ActiveModel {
            team_id: Set(team.to_string()),
            user_id: Set(user.to_string()),
            org_id: Set(self.org_s.clone()),
            created_at: Set(now),
        }
        .insert(self.db)
        .await?;
        Ok(())
    }

    /// The teams a user belongs to.
    async fn user_team_ids(&self, user: UserId) -> Result<Vec<TeamId>> {
        team_members::Entity::find()
            .filter(team_members::Column::OrgId.eq(self.org_s.clone()))
            .filter(team_members::Column::UserId.eq(user.to_string()))
            .all(self.db)
            .await?
            .into_iter()
            .map(|m| crate::records::parse_id(&m.team_id))
            .collect()
    }

    /// The slugs of the teams a user belongs to, in team order (what policies read as the
    /// session's teams).
    pub async fn user_team_slugs(&self, user: UserId) -> Result<Vec<String>> {
        let mine = self.user_team_ids(user).await?;
        Ok(self
            .list_teams()
            .await?
            .into_iter()
            .filter(|t| mine.contains(&t.id))
            .map(|t| t.slug)
            .collect())
    }

    pub async fn list_team_members(&self, team: TeamId) -> Result<Vec<UserId>> {
        team_members::Entity::find()
            .filter(team_members::Column::OrgId.eq(self.org_s.clone()))
            .filter(team_members::Column::TeamId.eq(team.to_string()))
            .all(self.db)
            .await?
            .into_iter()
            .map(|m| crate::records::parse_id(&m.user_id))
            .collect()
    }

    /// The user's organization role (`owner` or `member`), `None` when not a member.
    pub async fn member_role(&self, user: UserId) -> Result<Option<String>> {
        Ok(memberships::Entity::find_by_id((self.org_s.clone(), user.to_string()))
            .one(self.db)
            .await?
            .map(|m| m.role))
    }

    async fn owners(&self) -> Result<u64> {
        Ok(memberships::Entity::find()
            .filter(memberships::Column::OrgId.eq(self.org_s.clone()))
            .filter(memberships::Column::Role.eq("owner"))
            .count(self.db)
            .await?)
    }

    /// Makes a member an `owner` or a plain `member`; the last owner stays an owner.
    pub async fn set_member_role(&self, user: UserId, role: &str) -> Result<()> {
        let current = self.member_role(user).await?.ok_or(StoreError::NotFound("user"))?;
        if current == "owner" && role != "owner" && self.owners().await? <= 1 {
            return Err(StoreError::Conflict(
                "the last owner of an organization cannot be demoted".into(),
            ));
        }
        memberships::Entity::update_many()
            .col_expr(
                memberships::Column::Role,
                sea_orm::sea_query::Expr::value(role.to_owned()),
            )
            .filter(memberships::Column::OrgId.eq(self.org_s.clone()))
            .filter(memberships::Column::UserId.eq(user.to_string()))
            .exec(self.db)
            .await?;
        Ok(())
    }

    /// Removes a member with their team memberships and role bindings; never the last owner.
    pub async fn remove_member(&self, user: UserId) -> Result<()> {
        let current = self.member_role(user).await?.ok_or(StoreError::NotFound("user"))?;
        if current == "owner" && self.owners().await? <= 1 {
            return Err(StoreError::Conflict(
                "the last owner of an organization cannot be removed".into(),
            ));
        }
        let tx = self.db.begin().await?;
        let uid = user.to_string();
        team_members::Entity::delete_many()
            .filter(team_members::Column::OrgId.eq(self.org_s.clone()))
            .filter(team_members::Column::UserId.eq(uid.clone()))
            .exec(&tx)
            .await?;
        role_bindings::Entity::delete_many()
            .filter(role_bindings::Column::OrgId.eq(self.org_s.clone()))
            .filter(role_bindings::Column::SubjectKind.eq("user"))
            .filter(role_bindings::Column::SubjectId.eq(uid.clone()))
            .exec(&tx)
            .await?;
        memberships::Entity::delete_many()
            .filter(memberships::Column::OrgId.eq(self.org_s.clone()))
            .filter(memberships::Column::UserId.eq(uid))
            .exec(&tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    // ---- role bindings ----

    /// Grants `role` on `space` to `subject`, replacing a previous grant there.
    pub async fn grant(&self, space: SpaceId, subject: Subject, role: Role, now: DateTime<Utc>) -> Result<RoleBinding> {
        self.get_space(space).await?;
        let (kind, sid) = subject.parts();
        let tx = self.db.begin().await?;
        role_bindings::Entity::delete_many()
            .filter(role_bindings::Column::OrgId.eq(self.org_s.clone()))
            .filter(role_bindings::Column::SpaceId.eq(space.to_string()))
            .filter(role_bindings::Column::SubjectKind.eq(kind))
            .filter(role_bindings::Column::SubjectId.eq(sid.clone()))
            .exec(&tx)
            .await?;
        let m = role_bindings::ActiveModel {
            id: Set(uuid::Uuid::now_v7().to_string()),
            org_id: Set(self.org_s.clone()),
            space_id: Set(space.to_string()),
            subject_kind: Set(kind.to_owned()),
            subject_id: Set(sid),
            role: Set(role.as_str().to_owned()),
            created_at: Set(now),
        }
        .insert(&tx)
        .await?;
        tx.commit().await?;
        m.try_into()
    }

    pub async fn revoke(&self, space: SpaceId, subject: Subject) -> Result<()> {
        let (kind, sid) = subject.parts();
        let res = role_bindings::Entity::delete_many()
            .filter(role_bindings::Column::OrgId.eq(self.org_s.clone()))
            .filter(role_bindings::Column::SpaceId.eq(space.to_string()))
            .filter(role_bindings::Column::SubjectKind.eq(kind))
            .filter(role_bindings::Column::SubjectId.eq(sid))
            .exec(self.db)
            .await?;
        if res.rows_affected == 0 {
            Err(StoreError::NotFound("role binding"))
        } else {
            Ok(())
        }
    }

    pub async fn list_bindings(&self) -> Result<Vec<RoleBinding>> {
        role_bindings::Entity::find()
            .filter(role_bindings::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(role_bindings::Column::CreatedAt)
            .all(self.db)
            .await?
            .into_iter()
            .map(RoleBinding::try_from)
            .collect()
    }

    async fn space_nodes(&self) -> Result<Vec<SpaceNode>> {
        Ok(self
            .list_spaces()
            .await?
            .into_iter()
            .map(|s| SpaceNode {
                id: s.id,
                parent: s.parent_id,
                inherit: s.inherit,
            })
            .collect())
    }

    async fn grants_for(&self, subjects: &[Subject]) -> Result<Vec<(SpaceId, Role)>> {
        let mut out = Vec::new();
        for subject in subjects {
            let (kind, sid) = subject.parts();
            let rows = role_bindings::Entity::find()
                .filter(role_bindings::Column::OrgId.eq(self.org_s.clone()))
                .filter(role_bindings::Column::SubjectKind.eq(kind))
                .filter(role_bindings::Column::SubjectId.eq(sid))
                .all(self.db)
                .await?;
            for r in rows {
                let b = RoleBinding::try_from(r)?;
                out.push((b.space_id, b.role));
            }
        }
        Ok(out)
    }

    /// A member's access: ownership, grants to the user and to the user's teams. A user
    /// who is not a member has no access (`None`).
    pub async fn user_access(&self, user: UserId) -> Result<Option<Access>> {
        let Some(role) = self.member_role(user).await? else {
            return Ok(None);
        };
        let teams = self.user_team_ids(user).await?;
        let mut subjects = vec![Subject::User(user)];
        subjects.extend(teams.into_iter().map(Subject::Team));
        let grants = self.grants_for(&subjects).await?;
        Ok(Some(Access::new(role == "owner", self.space_nodes().await?, grants)))
    }

    /// An API key's access: an `owner` key is an owner; otherwise its grants. A personal
    /// key is capped by its creator's current access.
    pub async fn api_key_access(&self, key: &ApiKey) -> Result<Option<Access>> {
        let grants = self.grants_for(&[Subject::ApiKey(key.id)]).await?;
        let access =
            Access::new(key.role == "owner", self.space_nodes().await?, grants).with_org_role(Role::parse(&key.role));
        match (key.kind.as_str(), key.user_id) {
            ("personal", Some(user)) => Ok(self.user_access(user).await?.map(|creator| access.capped_by(creator))),
            ("personal", None) => Ok(None),
            _ => Ok(Some(access)),
        }
    }
}
