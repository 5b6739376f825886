//! Slugs name organizations and stacks in URLs; only valid ones can be constructed.

use std::fmt;

pub const SLUG_RULE: &str =
    "a slug is 1 to 63 characters of lowercase letters, digits and '-', starting with a letter or digit";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid slug {0:?}: {SLUG_RULE}")]
pub struct SlugError(pub String);

#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Slug(String);

impl Slug {
    pub fn parse(s: &str) -> Result<Self, SlugError> {
        let ok = !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(SlugError(s.to_owned()))
        }
    }

    /// Derives a slug from a free-form name ("My Stack!" -> "my-stack").
    pub fn from_name(name: &str) -> Result<Self, SlugError> {
        let mut out = String::new();
        for c in name.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
        }
        let trimmed: String = out.trim_end_matches('-').chars().take(63).collect();
        Self::parse(trimmed.trim_end_matches('-')).map_err(|_| SlugError(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Slug {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Slug::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_and_rejects_invalid() {
        assert!(Slug::parse("demo-1").is_ok());
        for bad in ["", "-x", "Upper", "a b", "a_b", &"x".repeat(64)] {
            assert!(Slug::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn derives_from_names() {
        assert_eq!(
            Slug::from_name("My Demo Stack!").map(|s| s.0),
            Ok("my-demo-stack".into())
        );
        assert!(Slug::from_name("!!!").is_err());
    }
}
