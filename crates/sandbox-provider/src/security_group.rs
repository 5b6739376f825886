//! `sandbox_security_group`: a pretend security group in `<root>/security_group/<id>.json`,
//! with `ingress` nested blocks. Everything changes in place.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, NestedBlock, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::cloud::{Cloud, Kind};
use crate::provider::Handle;
use crate::values::{
    StringList, Tags, attribute, error, error_at, known, new_id, report, schema_attributes, strings_from_file,
    strings_to_file, tags_attribute, tags_from_file, tags_to_file, validate_tags,
};

const PROTOCOLS: [&str; 4] = ["tcp", "udp", "icmp", "-1"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IngressFile {
    pub from_port: i64,
    pub to_port: i64,
    pub protocol: String,
    #[serde(default)]
    pub cidr_blocks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SecurityGroupFile {
    pub id: String,
    pub arn: String,
    pub name: String,
    #[serde(default)]
    pub ingress: Vec<IngressFile>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IngressState {
    pub from_port: Value<i64>,
    pub to_port: Value<i64>,
    pub protocol: Value<String>,
    pub cidr_blocks: StringList,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SecurityGroupState {
    pub id: Value<String>,
    pub arn: Value<String>,
    pub name: Value<String>,
    /// A list of nested blocks: never null, empty when there are none.
    pub ingress: Value<Vec<IngressState>>,
    pub tags: Tags,
}

pub(crate) fn security_group_arn(id: &str) -> String {
    format!("arn:sandbox:ec2:local:000000000000:security-group/{id}")
}

impl SecurityGroupState {
    /// The state Read reports: the file as it is. `prior` decides only null versus empty
    /// (tags, and each rule's `cidr_blocks` against the rule at the same position).
    fn from_file(file: SecurityGroupFile, prior: Option<&SecurityGroupState>) -> Self {
        let prior_rules = prior.and_then(|p| p.ingress.as_ref_option());
        let ingress = file
            .ingress
            .into_iter()
            .enumerate()
            .map(|(i, rule)| IngressState {
                from_port: Value::Value(rule.from_port),
                to_port: Value::Value(rule.to_port),
                protocol: Value::Value(rule.protocol),
                cidr_blocks: strings_from_file(
                    rule.cidr_blocks,
                    prior_rules.and_then(|rules| rules.get(i)).map(|r| &r.cidr_blocks),
                ),
            })
            .collect();
        Self {
            id: Value::Value(file.id),
            arn: Value::Value(file.arn),
            name: Value::Value(file.name),
            ingress: Value::Value(ingress),
            tags: tags_from_file(file.tags, prior.map(|p| &p.tags)),
        }
    }

    fn to_file(&self, diags: &mut Diagnostics) -> Option<SecurityGroupFile> {
        let mut ingress = Vec::new();
        for rule in self.ingress.iter().flatten() {
            ingress.push(IngressFile {
                from_port: known(diags, &rule.from_port, "from_port")?,
                to_port: known(diags, &rule.to_port, "to_port")?,
                protocol: known(diags, &rule.protocol, "protocol")?,
                cidr_blocks: strings_to_file(&rule.cidr_blocks),
            });
        }
        Some(SecurityGroupFile {
            id: known(diags, &self.id, "id")?,
            arn: known(diags, &self.arn, "arn")?,
            name: known(diags, &self.name, "name")?,
            ingress,
            tags: tags_to_file(&self.tags),
        })
    }
}

fn read_group(diags: &mut Diagnostics, cloud: &Cloud, id: &str) -> Result<Option<SecurityGroupFile>, ()> {
    match cloud.get::<SecurityGroupFile>(Kind::SecurityGroup, id) {
        Ok(file) => Ok(file),
        Err(e) => {
            report(diags, "Cannot read sandbox security group", e);
            Err(())
        }
    }
}

fn validate_rule(diags: &mut Diagnostics, index: usize, rule: &IngressState) {
    let path = |attr: &'static str| {
        AttributePath::new("ingress")
            .index(i64::try_from(index).unwrap_or(i64::MAX))
            .attribute(attr)
    };
    for (attr, port) in [("from_port", &rule.from_port), ("to_port", &rule.to_port)] {
        if let Value::Value(port) = port
            && !(-1..=65535).contains(port)
        {
            error_at(
                diags,
                "Port out of range",
                format!("{port} is not a port (0 to 65535, or -1 for all)"),
                path(attr),
            );
        }
    }
    if let (Value::Value(from), Value::Value(to)) = (&rule.from_port, &rule.to_port)
        && from > to
    {
        error_at(
            diags,
            "Invalid port range",
            format!("from_port {from} is above to_port {to}"),
            path("from_port"),
        );
    }
    if let Value::Value(protocol) = &rule.protocol
        && !PROTOCOLS.contains(&protocol.as_str())
    {
        error_at(
            diags,
            "Unsupported protocol",
            format!("{protocol:?} is not one of {}", PROTOCOLS.join(", ")),
            path("protocol"),
        );
    }
}

pub(crate) struct SecurityGroupResource {
    handle: Handle,
}

impl SecurityGroupResource {
    pub(crate) fn new(handle: Handle) -> Self {
        Self { handle }
    }
}

#[async_trait]
impl Resource for SecurityGroupResource {
    type State<'a> = SecurityGroupState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let computed = |d| attribute(AttributeType::String, AttributeConstraint::Computed, d);
        let rule = Block {
            version: 1,
            description: Description::plain("An inbound rule."),
            attributes: schema_attributes(vec![
                (
                    "from_port",
                    attribute(
                        AttributeType::Number,
                        AttributeConstraint::Required,
                        "First port (-1 for all).",
                    ),
                ),
                (
                    "to_port",
                    attribute(
                        AttributeType::Number,
                        AttributeConstraint::Required,
                        "Last port (-1 for all).",
                    ),
                ),
                (
                    "protocol",
                    attribute(
                        AttributeType::String,
                        AttributeConstraint::Required,
                        "tcp, udp, icmp or -1 (all).",
                    ),
                ),
                (
                    "cidr_blocks",
                    attribute(
                        AttributeType::List(Box::new(AttributeType::String)),
                        AttributeConstraint::Optional,
                        "Source CIDR blocks.",
                    ),
                ),
            ]),
            ..Default::default()
        };
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                description: Description::plain("A sandbox security group, kept in <root>/security_group/<id>.json."),
                attributes: schema_attributes(vec![
                    ("id", computed("Security group id, `sg-` and 17 hex digits.")),
                    ("arn", computed("The security group's ARN.")),
                    (
                        "name",
                        attribute(AttributeType::String, AttributeConstraint::Required, "Name."),
                    ),
                    ("tags", tags_attribute(AttributeConstraint::Optional)),
                ]),
                blocks: HashMap::from([("ingress".to_owned(), NestedBlock::List(rule))]),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        if config.name.as_ref_option().is_some_and(|v| v.is_empty()) {
            error_at(diags, "`name` must not be empty", "", AttributePath::new("name"));
        }
        for (i, rule) in config.ingress.iter().flatten().enumerate() {
            validate_rule(diags, i, rule);
        }
        validate_tags(diags, &config.tags);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        // On errors the prior state goes back with the diagnostics: `None` would mean "gone".
        let Some(cloud) = self.handle.cloud(diags) else {
            return Some((state, private_state));
        };
        let Some(id) = known(diags, &state.id, "id") else {
            return Some((state, private_state));
        };
        match read_group(diags, cloud, &id) {
            Ok(Some(file)) => Some((SecurityGroupState::from_file(file, Some(&state)), private_state)),
            Ok(None) => None,
            Err(()) => Some((state, private_state)),
        }
    }

    async fn plan_create<'a>(
        &self,
        _diags: &mut Diagnostics,
        proposed_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let planned = SecurityGroupState {
            id: Value::Unknown,
            arn: Value::Unknown,
            ..proposed_state
        };
        Some((planned, ValueEmpty::Null))
    }

    async fn plan_update<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        proposed_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        Some((proposed_state, prior_private_state, vec![]))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::PrivateState<'a>> {
        Some(prior_private_state)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let cloud = self.handle.cloud(diags)?;
        let id = new_id("sg-");
        let state = SecurityGroupState {
            arn: Value::Value(security_group_arn(&id)),
            id: Value::Value(id.clone()),
            ..planned_state
        };
        let file = state.to_file(diags)?;
        if let Err(e) = cloud.create(Kind::SecurityGroup, &id, &file) {
            report(diags, "Cannot create sandbox security group", e);
            return None;
        }
        Some((state, planned_private_state))
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let cloud = self.handle.cloud(diags)?;
        let file = planned_state.to_file(diags)?;
        if let Err(e) = cloud.update(Kind::SecurityGroup, &file.id, &file) {
            report(diags, "Cannot update sandbox security group", e);
            return None;
        }
        Some((planned_state, planned_private_state))
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior_state: Self::State<'a>,
        _planned_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        let cloud = self.handle.cloud(diags)?;
        let id = known(diags, &prior_state.id, "id")?;
        if let Err(e) = cloud.delete(Kind::SecurityGroup, &id) {
            report(diags, "Cannot delete sandbox security group", e);
            return None;
        }
        Some(())
    }

    async fn import<'a>(
        &self,
        diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let cloud = self.handle.cloud(diags)?;
        match read_group(diags, cloud, &id) {
            Ok(Some(file)) => Some((SecurityGroupState::from_file(file, None), ValueEmpty::Null)),
            Ok(None) => {
                error(
                    diags,
                    "Cannot import non-existent sandbox security group",
                    format!("no file for security group {id:?} under {}", cloud.root().display()),
                );
                None
            }
            Err(()) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> SecurityGroupFile {
        SecurityGroupFile {
            id: "sg-0123456789abcdef0".into(),
            arn: security_group_arn("sg-0123456789abcdef0"),
            name: "web".into(),
            ingress: vec![
                IngressFile {
                    from_port: 443,
                    to_port: 443,
                    protocol: "tcp".into(),
                    cidr_blocks: vec!["0.0.0.0/0".into()],
                },
                IngressFile {
                    from_port: -1,
                    to_port: -1,
                    protocol: "-1".into(),
                    cidr_blocks: vec![],
                },
            ],
            tags: BTreeMap::new(),
        }
    }

    #[test]
    fn read_round_trips_and_keeps_nullness_per_rule() {
        let state = SecurityGroupState::from_file(file(), None);
        assert_eq!(state.tags, Value::Null);
        let rules = state.ingress.as_ref_option().unwrap();
        assert_eq!(rules[1].cidr_blocks, Value::Null);
        assert_eq!(state.to_file(&mut Diagnostics::default()), Some(file()));

        // The configuration said `cidr_blocks = []` for the second rule.
        let mut prior = state.clone();
        if let Value::Value(rules) = &mut prior.ingress {
            rules[1].cidr_blocks = Value::Value(vec![]);
        }
        let read = SecurityGroupState::from_file(file(), Some(&prior));
        assert_eq!(read, prior);
    }

    #[test]
    fn rules_are_validated() {
        let mut diags = Diagnostics::default();
        let rule = IngressState {
            from_port: Value::Value(90),
            to_port: Value::Value(80),
            protocol: Value::Value("sctp".into()),
            cidr_blocks: Value::Null,
        };
        validate_rule(&mut diags, 0, &rule);
        assert_eq!(diags.errors.len(), 2, "{diags:?}");
        let mut diags = Diagnostics::default();
        let unknown = IngressState {
            from_port: Value::Unknown,
            to_port: Value::Value(70000),
            protocol: Value::Unknown,
            cidr_blocks: Value::Unknown,
        };
        validate_rule(&mut diags, 0, &unknown);
        assert_eq!(diags.errors.len(), 1, "{diags:?}");
    }

    #[test]
    fn file_format_is_stable() {
        let json = serde_json::to_value(file()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "sg-0123456789abcdef0",
                "arn": "arn:sandbox:ec2:local:000000000000:security-group/sg-0123456789abcdef0",
                "name": "web",
                "ingress": [
                    {"from_port": 443, "to_port": 443, "protocol": "tcp", "cidr_blocks": ["0.0.0.0/0"]},
                    {"from_port": -1, "to_port": -1, "protocol": "-1", "cidr_blocks": []},
                ],
                "tags": {},
            })
        );
    }
}
