//! A new PostgreSQL database per test, dropped (`WITH (FORCE)`) when the test ends, even
//! when it panics.

use std::time::Duration;

use sea_orm::{ConnectOptions, ConnectionTrait, Database};

use crate::reachable_or_skip;

/// The server's maintenance database, where test databases are created and dropped.
pub const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A short timeout, so an absent server skips quickly instead of after the pool's 30 s.
fn admin_options() -> ConnectOptions {
    let mut o = ConnectOptions::new(PG_ADMIN_URL);
    o.connect_timeout(Duration::from_secs(3))
        .acquire_timeout(Duration::from_secs(3))
        .sqlx_logging(false);
    o
}

/// A database of its own (`<prefix>_<uuid>`), dropped when this is dropped.
///
/// Keep it in a field declared after whatever connects to `url` (fields drop in order);
/// FORCE ends the connections still pooled anyway.
pub struct PgDatabase {
    pub url: String,
    name: String,
}

/// A new, empty database named `<prefix>_<uuid>`; `None` (after printing why) when
/// PostgreSQL is unreachable outside CI, a panic under `CI=true`.
pub async fn fresh_postgres(prefix: &str) -> Option<PgDatabase> {
    let admin = reachable_or_skip("PostgreSQL", PG_ADMIN_URL, Database::connect(admin_options()).await)?;
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    admin
        .execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    admin.close().await.unwrap();
    // From here on the value drops the database whatever happens.
    Some(PgDatabase {
        url: format!("postgres://postgres@127.0.0.1:5432/{name}"),
        name,
    })
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
        // Drop runs inside the test's runtime, which cannot be blocked on: use a fresh one
        // on another thread. FORCE ends the pooled connections still open.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                let admin = Database::connect(PG_ADMIN_URL).await?;
                admin
                    .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?;
                admin.close().await
            })
            .map_err(std::io::Error::other)
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!("warning: could not drop a test database: {done:?}");
        }
    }
}
