//! Who may do what where. Roles are granted on spaces; a space with `inherit` also grants
//! what its parent grants (Spacelift's model). Organization owners are admins everywhere.
//! A personal API key never has more rights than its creator: its access is capped by
//! the creator's. Pure data and functions; the store loads the inputs.

use std::collections::HashMap;

use crate::SpaceId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Reader,
    Writer,
    Admin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "reader" => Some(Role::Reader),
            "writer" => Some(Role::Writer),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Admin => "admin",
        }
    }
}

pub const ROLE_RULE: &str = "a role is reader, writer or admin";

/// One node of an organization's space tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceNode {
    pub id: SpaceId,
    pub parent: Option<SpaceId>,
    pub inherit: bool,
}

/// Everything needed to answer "which role does this caller have in space X".
#[derive(Clone, Debug, Default)]
pub struct Access {
    /// Organization owner: admin in every space, and manages the organization itself.
    pub owner: bool,
    /// A role in every space of the organization (organization-wide service keys).
    pub org_role: Option<Role>,
    /// Direct grants: space → the highest role granted there (to the caller, its teams or
    /// its key).
    pub grants: HashMap<SpaceId, Role>,
    pub spaces: HashMap<SpaceId, SpaceNode>,
    /// For personal API keys: the creator's access, which caps this one.
    pub cap: Option<Box<Access>>,
}

impl Access {
    pub fn new(
        owner: bool,
        spaces: impl IntoIterator<Item = SpaceNode>,
        grants: impl IntoIterator<Item = (SpaceId, Role)>,
    ) -> Self {
        let mut g: HashMap<SpaceId, Role> = HashMap::new();
        for (s, r) in grants {
            let e = g.entry(s).or_insert(r);
            *e = (*e).max(r);
        }
        Self {
            owner,
            org_role: None,
            grants: g,
            spaces: spaces.into_iter().map(|n| (n.id, n)).collect(),
            cap: None,
        }
    }

    pub fn with_org_role(mut self, role: Option<Role>) -> Self {
        self.org_role = role;
        self
    }

    pub fn capped_by(mut self, creator: Access) -> Self {
        self.cap = Some(Box::new(creator));
        self
    }

    pub fn is_owner(&self) -> bool {
        self.owner && self.cap.as_ref().is_none_or(|c| c.is_owner())
    }

    /// The caller's role in `space`, `None` when it may not even see it.
    pub fn role_in(&self, space: SpaceId) -> Option<Role> {
        let own = if self.owner {
            Some(Role::Admin)
        } else {
            self.inherited(space).max(self.org_role)
        };
        match &self.cap {
            Some(cap) => own.min(cap.role_in(space)),
            None => own,
        }
    }

    fn inherited(&self, space: SpaceId) -> Option<Role> {
        let mut best = None;
        let mut current = Some(space);
        // The tree is acyclic by construction; the bound guards against corrupt data.
        for _ in 0..=self.spaces.len() {
            let Some(id) = current else { break };
            best = best.max(self.grants.get(&id).copied());
            match self.spaces.get(&id) {
                Some(node) if node.inherit => current = node.parent,
                _ => break,
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (SpaceId, SpaceId, SpaceId, SpaceId, Vec<SpaceNode>) {
        let (root, dev, dev_app, prod) = (SpaceId::new(), SpaceId::new(), SpaceId::new(), SpaceId::new());
        let nodes = vec![
            SpaceNode {
                id: root,
                parent: None,
                inherit: false,
            },
            SpaceNode {
                id: dev,
                parent: Some(root),
                inherit: true,
            },
            SpaceNode {
                id: dev_app,
                parent: Some(dev),
                inherit: true,
            },
            SpaceNode {
                id: prod,
                parent: Some(root),
                inherit: false,
            },
        ];
        (root, dev, dev_app, prod, nodes)
    }

    #[test]
    fn inherit_walks_up_until_a_space_that_does_not_inherit() {
        let (root, dev, dev_app, prod, nodes) = tree();
        let a = Access::new(false, nodes, [(root, Role::Reader), (dev, Role::Writer)]);
        assert_eq!(a.role_in(root), Some(Role::Reader));
        assert_eq!(a.role_in(dev), Some(Role::Writer));
        assert_eq!(a.role_in(dev_app), Some(Role::Writer), "inherits from dev");
        assert_eq!(a.role_in(prod), None, "prod does not inherit root's grant");
    }

    #[test]
    fn the_highest_grant_wins_and_owners_are_admins() {
        let (root, dev, dev_app, prod, nodes) = tree();
        let a = Access::new(
            false,
            nodes.clone(),
            [(dev_app, Role::Reader), (dev, Role::Admin), (dev_app, Role::Writer)],
        );
        assert_eq!(a.role_in(dev_app), Some(Role::Admin));
        let o = Access::new(true, nodes, []);
        for s in [root, dev, dev_app, prod] {
            assert_eq!(o.role_in(s), Some(Role::Admin));
        }
    }

    #[test]
    fn personal_keys_are_capped_by_their_creator() {
        let (root, dev, _, prod, nodes) = tree();
        let creator = Access::new(false, nodes.clone(), [(dev, Role::Writer)]);
        let key = Access::new(true, nodes, []).capped_by(creator);
        assert_eq!(key.role_in(dev), Some(Role::Writer));
        assert_eq!(key.role_in(root), None);
        assert_eq!(key.role_in(prod), None);
        assert!(!key.is_owner());
    }

    #[test]
    fn an_org_wide_role_applies_in_every_space() {
        let (root, dev, _, prod, nodes) = tree();
        let a = Access::new(false, nodes, [(dev, Role::Admin)]).with_org_role(Some(Role::Reader));
        assert_eq!(a.role_in(prod), Some(Role::Reader));
        assert_eq!(a.role_in(root), Some(Role::Reader));
        assert_eq!(a.role_in(dev), Some(Role::Admin));
    }
}
