//! Typed identifiers. Every id is a UUID (v7, so ids sort by creation time) wrapped in a
//! newtype so a run id can never be passed where a stack id is expected.

use std::fmt;
use std::str::FromStr;

macro_rules! id_type {
    ($name:ident) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub uuid::Uuid);

        impl $name {
            pub fn new() -> Self {
                Self(uuid::Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                uuid::Uuid::parse_str(s).map(Self)
            }
        }
    };
}

id_type!(OrgId);
id_type!(UserId);
id_type!(ApiKeyId);
id_type!(StackId);
id_type!(RunId);
id_type!(StateVersionId);
id_type!(SpaceId);
id_type!(TeamId);
