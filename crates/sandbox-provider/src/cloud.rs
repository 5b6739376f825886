//! The sandbox "cloud": one pretty-printed JSON file per resource at `<root>/<kind>/<id>.json`.
//! Reading a file is the cloud's describe call, so a hand edit is a console change (drift).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The kinds of resource the sandbox keeps, each in its own folder under the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Instance,
    SecurityGroup,
    Bucket,
}

impl Kind {
    /// The folder under the root, also the file format's name in messages.
    pub(crate) fn dir(self) -> &'static str {
        match self {
            Kind::Instance => "instance",
            Kind::SecurityGroup => "security_group",
            Kind::Bucket => "bucket",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Instance => "instance",
            Kind::SecurityGroup => "security group",
            Kind::Bucket => "bucket",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CloudError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} is not a valid sandbox {} file: {source}", path.display(), kind.label())]
    Invalid {
        path: PathBuf,
        kind: Kind,
        source: serde_json::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("{} {id:?} already exists ({})", kind.label(), path.display())]
    AlreadyExists { kind: Kind, id: String, path: PathBuf },
    #[error("{} {id:?} does not exist ({})", kind.label(), path.display())]
    NotFound { kind: Kind, id: String, path: PathBuf },
    #[error(
        "invalid {} id {id:?}: ids are 1 to 255 letters, digits, '.', '_' or '-' and do not start with '.'",
        kind.label()
    )]
    InvalidId { kind: Kind, id: String },
}

/// The cloud rooted at one directory; cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cloud {
    root: PathBuf,
}

impl Cloud {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The file of one resource. Ids come from users (`terraform import`), so they are
    /// checked to stay inside the kind's folder.
    pub(crate) fn path(&self, kind: Kind, id: &str) -> Result<PathBuf, CloudError> {
        if !valid_id(id) {
            return Err(CloudError::InvalidId {
                kind,
                id: id.to_owned(),
            });
        }
        Ok(self.root.join(kind.dir()).join(format!("{id}.json")))
    }

    /// The resource as the file says, or `None` when there is no file (the resource is gone).
    pub(crate) fn get<T: DeserializeOwned>(&self, kind: Kind, id: &str) -> Result<Option<T>, CloudError> {
        let path = self.path(kind, id)?;
        read_file(kind, &path)
    }

    /// Writes a new resource; fails if one with this id exists.
    pub(crate) fn create<T: Serialize>(&self, kind: Kind, id: &str, value: &T) -> Result<PathBuf, CloudError> {
        let path = self.path(kind, id)?;
        if path.exists() {
            return Err(CloudError::AlreadyExists {
                kind,
                id: id.to_owned(),
                path,
            });
        }
        write_file(&path, value)?;
        Ok(path)
    }

    /// Rewrites an existing resource; fails if it was deleted meanwhile.
    pub(crate) fn update<T: Serialize>(&self, kind: Kind, id: &str, value: &T) -> Result<PathBuf, CloudError> {
        let path = self.path(kind, id)?;
        if !path.exists() {
            return Err(CloudError::NotFound {
                kind,
                id: id.to_owned(),
                path,
            });
        }
        write_file(&path, value)?;
        Ok(path)
    }

    /// Removes a resource; one already gone is not an error (destroy is idempotent).
    pub(crate) fn delete(&self, kind: Kind, id: &str) -> Result<(), CloudError> {
        let path = self.path(kind, id)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(CloudError::Write { path, source }),
        }
    }

    /// Every resource of a kind, sorted by id. A file that does not parse is an error:
    /// a lookup that silently skipped it could answer wrongly.
    pub(crate) fn list<T: DeserializeOwned>(&self, kind: Kind) -> Result<Vec<(String, T)>, CloudError> {
        let dir = self.root.join(kind.dir());
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(CloudError::Read { path: dir, source }),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| CloudError::Read {
                path: dir.clone(),
                source,
            })?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if valid_id(id) {
                ids.push(id.to_owned());
            }
        }
        ids.sort();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            // A file removed between the listing and the read is simply not there.
            if let Some(value) = self.get(kind, &id)? {
                out.push((id, value));
            }
        }
        Ok(out)
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 255
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn read_file<T: DeserializeOwned>(kind: Kind, path: &Path) -> Result<Option<T>, CloudError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(CloudError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| CloudError::Invalid {
            path: path.to_owned(),
            kind,
            source,
        })
}

/// Write-then-rename so a reader never sees half a file.
fn write_file<T: Serialize>(path: &Path, value: &T) -> Result<(), CloudError> {
    let write_err = |source| CloudError::Write {
        path: path.to_owned(),
        source,
    };
    let mut json = serde_json::to_vec_pretty(value).map_err(|e| write_err(io::Error::other(e)))?;
    json.push(b'\n');
    let dir = path
        .parent()
        .ok_or_else(|| write_err(io::Error::other("no parent directory")))?;
    fs::create_dir_all(dir).map_err(write_err)?;
    let file_name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    fs::write(&tmp, &json).map_err(write_err)?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        write_err(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Thing {
        name: String,
    }

    #[test]
    fn create_get_update_delete_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cloud = Cloud::new(dir.path().to_owned());
        let thing = Thing { name: "a".into() };
        let path = cloud.create(Kind::Bucket, "b1", &thing).unwrap();
        assert_eq!(path, dir.path().join("bucket/b1.json"));
        assert_eq!(cloud.get::<Thing>(Kind::Bucket, "b1").unwrap(), Some(thing));
        assert!(matches!(
            cloud.create(Kind::Bucket, "b1", &Thing { name: "b".into() }),
            Err(CloudError::AlreadyExists { .. })
        ));
        cloud.update(Kind::Bucket, "b1", &Thing { name: "b".into() }).unwrap();
        assert_eq!(cloud.get::<Thing>(Kind::Bucket, "b1").unwrap().unwrap().name, "b");
        cloud.delete(Kind::Bucket, "b1").unwrap();
        assert_eq!(cloud.get::<Thing>(Kind::Bucket, "b1").unwrap(), None);
        cloud.delete(Kind::Bucket, "b1").unwrap();
        assert!(matches!(
            cloud.update(Kind::Bucket, "b1", &Thing { name: "c".into() }),
            Err(CloudError::NotFound { .. })
        ));
    }

    #[test]
    fn invalid_json_names_the_file_and_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let cloud = Cloud::new(dir.path().to_owned());
        std::fs::create_dir_all(dir.path().join("instance")).unwrap();
        std::fs::write(dir.path().join("instance/i-1.json"), "{ not json").unwrap();
        let err = cloud.get::<Thing>(Kind::Instance, "i-1").unwrap_err().to_string();
        assert!(err.contains("instance/i-1.json"), "{err}");
        assert!(err.contains("line 1 column 3"), "{err}");
    }

    #[test]
    fn ids_cannot_leave_the_kind_folder() {
        let cloud = Cloud::new("/tmp/x".into());
        for bad in ["", "../etc/passwd", "a/b", ".hidden", "a b"] {
            assert!(
                matches!(cloud.path(Kind::Instance, bad), Err(CloudError::InvalidId { .. })),
                "{bad:?}"
            );
        }
        assert!(cloud.path(Kind::Instance, "i-0123abc").is_ok());
        assert!(cloud.path(Kind::Bucket, "my.bucket-1").is_ok());
    }

    #[test]
    fn list_is_sorted_and_ignores_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let cloud = Cloud::new(dir.path().to_owned());
        assert!(cloud.list::<Thing>(Kind::Instance).unwrap().is_empty());
        cloud.create(Kind::Instance, "b", &Thing { name: "2".into() }).unwrap();
        cloud.create(Kind::Instance, "a", &Thing { name: "1".into() }).unwrap();
        std::fs::write(dir.path().join("instance/notes.txt"), "hi").unwrap();
        let ids: Vec<_> = cloud
            .list::<Thing>(Kind::Instance)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }
}
