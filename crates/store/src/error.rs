use sea_orm::{DbErr, SqlErr};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    #[error("database error: {0}")]
    Db(#[source] DbErr),
}

impl From<DbErr> for StoreError {
    fn from(e: DbErr) -> Self {
        match e.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(m)) => StoreError::Conflict(format!("already exists ({m})")),
            _ => StoreError::Db(e),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
